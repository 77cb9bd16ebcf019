"""One `frtrace collect` run: find the ranks, take their stacks, copy their dumps, ask for
fresh ones, and say what was done (typed facts; frtrace/report/collect_report.py words them
and writes collect.json)."""

from __future__ import annotations

import os
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from frtrace.collect.dumps import (
    FreshResult,
    copy_file,
    copy_name,
    dump_prefixes,
    files_at,
    files_of_rank,
    fresh_dump,
)
from frtrace.collect.procs import Found, TrainingProcess, find_training_processes
from frtrace.collect.pyspy import Stack, dump_stacks, find_pyspy, label

STACKS_NAME = "pyspy_{host}.txt"
MANIFEST_NAME = "collect.json"


@dataclass(frozen=True)
class Options:
    """What the command line asked for."""

    out: Path
    native: bool = False
    subprocesses: bool = False
    fresh: bool = False
    timeout: float = 60.0
    fresh_timeout: float = 15.0
    under: int | None = None
    rank_var: str = "RANK"
    prefixes: tuple[str, ...] = ()
    pyspy: str | None = None
    proc: Path = Path("/proc")


@dataclass(frozen=True)
class Copied:
    """One dump copied into OUT (or not: `failure`)."""

    rank: int
    source: str
    name: str | None
    size: int = 0
    mtime: float | None = None
    failure: str | None = None
    #: written before the rank's process started: left by an earlier run
    stale: bool = False


@dataclass
class Collected:
    """Everything one run did, for the report and the manifest."""

    host: str
    started: float
    out: Path
    found: Found
    pyspy: str | None = None
    stacks: list[tuple[TrainingProcess, Stack]] = field(default_factory=list)
    stacks_file: str | None = None
    dumps: list[Copied] = field(default_factory=list)
    fresh: list[tuple[TrainingProcess, FreshResult]] = field(default_factory=list)
    #: prefixes searched for dumps (every dump at them copied) when no rank runs here
    searched: list[str] = field(default_factory=list)

    @property
    def denied(self) -> list[Stack]:
        return [s for _p, s in self.stacks if s.failure == "denied"]


def short_host() -> str:
    """This node's short host name, as `hostname -s` prints it, safe in a file name."""
    name = socket.gethostname().split(".")[0] or "localhost"
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def expand_out(out: str, host: str) -> Path:
    """OUT with `%h` replaced by the short host name (`%%` is a percent sign), so one line
    given to pdsh or srun names a folder per node."""
    return Path(re.sub(r"%[%h]", lambda m: host if m.group(0) == "%h" else "%", out))


def collect(options: Options, host: str | None = None) -> Collected:
    """Run the collection into `options.out` (created if needed)."""
    host = host or short_host()
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    found = find_training_processes(
        options.proc, under=options.under, rank_var=options.rank_var, exclude=[os.getpid()]
    )
    done = Collected(host=host, started=time.time(), out=out, found=found)
    if found.processes:
        done.pyspy = find_pyspy(options.pyspy)
        if done.pyspy is not None:
            stacks = dump_stacks(
                done.pyspy,
                [p.pid for p in found.processes],
                native=options.native,
                subprocesses=options.subprocesses,
                timeout=options.timeout,
            )
            done.stacks = list(zip(found.processes, stacks, strict=True))
            done.stacks_file = _write_stacks(done, out / STACKS_NAME.format(host=host))
    done.dumps = _copy_dumps(done, options)
    if options.fresh and found.processes:
        with ThreadPoolExecutor(max_workers=min(8, len(found.processes))) as pool:
            wait = options.fresh_timeout
            results = pool.map(
                lambda p: fresh_dump(p.env, p.cwd(options.proc), p.rank, out, wait),
                found.processes,
            )
            done.fresh = list(zip(found.processes, results, strict=True))
    return done


def _write_stacks(done: Collected, path: Path) -> str | None:
    """All stacks of this node in one file, each after its label line; None if none."""
    blocks = [
        f"{label(p.rank, p.local_rank, done.host, p.pid)}\n{s.text.rstrip()}\n"
        for p, s in done.stacks
        if s.text is not None
    ]
    if not blocks:
        return None
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_text("\n".join(blocks), encoding="utf-8", errors="replace")
    os.replace(tmp, path)
    return path.name


def _copy_dumps(done: Collected, options: Options) -> list[Copied]:
    """The dumps of the ranks running here; every dump at the prefixes given with --prefix,
    and, when no rank runs here (it died after dumping), every dump at the default places."""
    wanted: list[tuple[int, str, Path, float | None]] = []
    for proc in done.found.processes:
        for prefix in dump_prefixes(proc.env, proc.cwd(options.proc)):
            wanted += [
                (proc.rank, prefix, path, proc.started) for path in files_of_rank(prefix, proc.rank)
            ]
    searched = list(options.prefixes)
    if not done.found.processes and not searched:
        searched = dump_prefixes(dict(os.environ), Path.cwd())
    done.searched = searched
    for prefix in searched:
        wanted += [(rank, prefix, path, None) for rank, path in files_at(prefix)]
    copies: list[Copied] = []
    names: dict[str, str] = {}
    seen: set[str] = set()
    for rank, prefix, path, started in wanted:
        source = os.path.abspath(path)
        if source in seen:
            continue
        seen.add(source)
        name = copy_name(prefix, path)
        if name in names:
            copies.append(Copied(rank, source, None, failure=f"same name as {names[name]}"))
            continue
        try:
            size = copy_file(path, done.out / name)
            mtime = os.stat(done.out / name).st_mtime
        except OSError as exc:
            copies.append(Copied(rank, source, None, failure=exc.strerror or str(exc)))
            continue
        names[name] = source
        # a second of slack: start times are in clock ticks, mtimes may be coarse
        stale = started is not None and mtime < started - 1.0
        copies.append(Copied(rank, source, name, size, mtime, stale=stale))
    return copies
