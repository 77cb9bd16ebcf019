"""Find the per-rank dump files of one job and the rank each file belongs to.

The rank is the trailing integer of the file name once `.json`/`.pkl`/`.gz` suffixes are
removed, so host names inside the name (`nccl_trace_rank_node03-host_27`) do not confuse it.
Only ASCII digits make a rank, and entries that are not regular files (FIFOs, devices, links,
folders) are reported as skipped by type, without being opened.

A folder copied off the nodes may mix dumps with the job's logs and py-spy outputs: when a
folder is given, regular files' first KBs are read (frtrace.dumps.text.sniff) and logs and
stacks are set apart by content, whatever their names, so that a log named like a dump is
read as a log, not reported as a broken dump. A file named like a dump is a log only by a
log's structure (launcher prefixes, timestamps, tracebacks): other text there is a broken dump
of that rank, skipped with its reason. Dumps lie in the folder or one level of sub-folders;
logs and stacks anywhere up to MAX_TEXT_DEPTH folders down.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frtrace.dumps.limits import budgets
from frtrace.dumps.read import file_kind
from frtrace.dumps.text import EMPTY, LOG, STACKS, TEXT, sniff
from frtrace.errors import FrtraceError

# Where torch writes a rank's dump, `<prefix><rank>`: torch/csrc/distributed/c10d/
# FlightRecorder.cpp, `DebugInfoWriter::getWriter` (torch 2.6 and later). The prefix is the first
# of these variables that is set (Utils.hpp, `getCvarString`; torch 2.7 and earlier read only the
# second), else a default that moved between releases (each one's library read for it):
# 2.11 and later `$XDG_CACHE_HOME/torch/comm_lib_trace_rank_`, else
# `$HOME/.cache/torch/comm_lib_trace_rank_` (2.9 and 2.10: always the latter); 2.7 and 2.8
# `$HOME/.cache/torch/nccl_trace_rank_`; 2.6 and earlier `/tmp/nccl_trace_rank_`, which is also
# where frtrace.capture writes when no prefix is set. `$HOME` defaults to /tmp.
PREFIX_ENV_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
LEGACY_PREFIX_PATH = "/tmp/nccl_trace_rank_"
_SUFFIXES = (".gz", ".json", ".pkl", ".pickle")
_TRAILING_INT = re.compile(r"([0-9]+)$")
_SEPARATORS = "_-."


@dataclass(frozen=True)
class DumpFile:
    """One file that claims to hold the dump of `rank`."""

    path: Path
    rank: int


@dataclass
class Discovery:
    """What was found: the folder, the prefix used, and one file per rank."""

    trace_dir: Path
    prefix: str
    prefix_inferred: bool
    files: list[DumpFile]
    ignored: list[Path] = field(default_factory=list)
    # named like a dump but unusable before reading: (path, reason), e.g. a FIFO or rank 2**40
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)  # the job's logs, told by content
    stacks: list[Path] = field(default_factory=list)  # py-spy outputs, told by content


def strip_suffixes(name: str) -> str:
    """`trace_3.json.gz` -> `trace_3`: compression and format suffixes are not part of the rank."""
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


def rank_from_name(name: str) -> int | None:
    """The trailing integer of a file name, or None when it has none."""
    match = _TRAILING_INT.search(strip_suffixes(name))
    if not match:
        return None
    digits = match.group(1).lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else 1 << 62  # absurd ranks stay cheap to parse


def default_prefixes(env: Mapping[str, str] | None = None) -> list[str]:
    """Every prefix torch may have written dumps to when no variable names one, newest first:
    the release that wrote them is unknown, so each release's default is a candidate. `env` is
    the writing process's environment (this one's by default)."""
    env = os.environ if env is None else env
    home = env.get("HOME") or "/tmp"
    cache = env.get("XDG_CACHE_HOME") or f"{home}/.cache"
    found = [f"{cache}/torch/comm_lib_trace_rank_", f"{home}/.cache/torch/comm_lib_trace_rank_"]
    found += [f"{home}/.cache/torch/nccl_trace_rank_", LEGACY_PREFIX_PATH]
    return list(dict.fromkeys(found))


def _holds_dumps(prefix: str) -> bool:
    """Whether `<prefix><rank>...` names any entry of the prefix's folder."""
    folder, base = os.path.split(prefix)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return False
    ranks = (strip_suffixes(n[len(base) :]) for n in names if n.startswith(base))
    return any(r.isascii() and r.isdigit() for r in ranks)


def default_location() -> tuple[Path, str]:
    """Where PyTorch writes dumps when the user gives no folder: the prefix a variable names,
    else the first of torch's default places (they moved between releases) that holds a dump;
    none holding one is an error that names them all."""
    for var in PREFIX_ENV_VARS:
        value = os.environ.get(var)
        if value:
            break
    else:
        places = default_prefixes()
        found = next((p for p in places if _holds_dumps(p)), None)
        if found is None:
            raise FrtraceError(
                "no dump files where torch writes them by default ("
                + ", ".join(f"{p}<rank>" for p in places)
                + "): give the folder that holds them, or set TORCH_FR_DUMP_TEMP_FILE as the "
                "job had it"
            )
        value = found
    path = Path(value)
    if value.endswith(os.sep) or path.is_dir():
        return path, ""
    return path.parent, path.name


def _kind(path: Path) -> str | None:
    """None for a regular file; else what it is, without following links or opening it."""
    try:
        return file_kind(path.lstat().st_mode)
    except OSError as exc:
        return f"cannot stat ({exc.strerror or exc})"


def _candidates(trace_dir: Path, subfolders: bool = True) -> list[tuple[Path, str | None]]:
    """Entries of the folder and one level of real sub-folders (one folder per host is common),
    each with None for a regular file or what else it is."""
    found: list[tuple[Path, str | None]] = []
    try:
        children = sorted(trace_dir.iterdir())
    except OSError as exc:
        raise FrtraceError(f"cannot read {trace_dir}: {exc.strerror or exc}") from exc
    for child in children:
        if child.name.startswith("."):
            continue
        kind = _kind(child)
        if kind == "a directory":
            if not subfolders:
                continue
            try:
                grandchildren = sorted(child.iterdir())
            except OSError:
                continue
            found.extend((p, _kind(p)) for p in grandchildren if not p.name.startswith("."))
        else:
            found.append((child, kind))
    return found


def _holder_candidates(
    trace_dir: Path, found: list[tuple[Path, str | None]]
) -> list[tuple[Path, str | None]]:
    """A sub-folder that holds only folders is a holder of host folders (`dumps/<host>/
    trace_3`): its folders' files are read instead of the folders being reported, unless
    they are named like the dumps beside them (a folder where a dump should be)."""
    families = {
        _first_segment(strip_suffixes(p.name))
        for p, kind in found
        if kind is None and rank_from_name(p.name) is not None
    }
    holders = []
    for holder in _subfolders(trace_dir):
        hosts = [h for h in _subfolders(holder) if _first_segment(h.name) not in families]
        try:
            if hosts and len(hosts) == sum(1 for _ in holder.iterdir()):
                holders.append((holder, hosts))
        except OSError:
            continue
    if not holders:
        return found
    descended = {host for _holder, hosts in holders for host in hosts}
    out = [(p, k) for p, k in found if p not in descended]
    for _holder, hosts in holders:
        for host in hosts:
            out += [(p, k) for p, k in _candidates(host, subfolders=False)]
    return out


# Logs and stacks may lie deeper than dumps: torchrun's `--redirects --log-dir D` writes
# `D/<run_id>_<suffix>/attempt_<n>/<local_rank>/stdout.log` (torch/distributed/elastic/
# multiprocessing/api.py, DefaultLogsSpecs.reify), often under a folder per node.
MAX_TEXT_DEPTH = 6  # folders below the one given
MAX_TEXT_FILES = 20_000  # files looked at below the first level


def _deeper_files(trace_dir: Path) -> list[Path]:
    """Regular files two to MAX_TEXT_DEPTH folders below `trace_dir` (not following links,
    skipping hidden entries), at most MAX_TEXT_FILES of them: where logs and stacks may be."""
    out: list[Path] = []
    level = _subfolders(trace_dir)
    for _depth in range(1, MAX_TEXT_DEPTH):
        below: list[Path] = []
        for folder in level:
            for sub in _subfolders(folder):
                below.append(sub)
                try:
                    children = sorted(sub.iterdir())
                except OSError:
                    continue
                for child in children:
                    if child.name.startswith(".") or _kind(child) is not None:
                        continue
                    out.append(child)
                    if len(out) >= MAX_TEXT_FILES:
                        return out
        level = below
    return out


def _subfolders(folder: Path) -> list[Path]:
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return []
    return [c for c in children if not c.name.startswith(".") and _kind(c) == "a directory"]


def _first_segment(name: str) -> str:
    for i, ch in enumerate(name):
        if ch in _SEPARATORS:
            return name[:i]
    return name


def _trim_prefix(common: str) -> str:
    """Cut a common prefix back to a separator, and before any segment holding a digit."""
    end = len(common)
    while end > 0 and common[end - 1] not in _SEPARATORS:
        end -= 1
    common = common[:end]
    start = 0
    for i, ch in enumerate(common):
        if ch in _SEPARATORS:
            if any(c in "0123456789" for c in common[start:i]):
                return common[:start]
            start = i + 1
    return common


def infer_prefix(names: list[str]) -> tuple[str, int]:
    """Pick the largest family of rank-numbered names and their common prefix.

    Returns the prefix and how many rank-numbered names belong to other families.
    """
    numbered = [n for n in names if rank_from_name(n) is not None]
    if not numbered:
        return "", 0
    families: dict[str, list[str]] = {}
    for name in numbered:
        families.setdefault(_first_segment(strip_suffixes(name)), []).append(name)
    family = max(families.values(), key=len)
    common = os.path.commonprefix(  # noqa: RUF071 - character prefix is wanted
        [_TRAILING_INT.sub("", strip_suffixes(n)) for n in family]
    )
    return _trim_prefix(common), len(numbered) - len(family)


def claim_rank(
    by_rank: dict[int, Any], rank: int, path: Any, max_rank: int, skipped: list[tuple[Any, str]]
) -> bool:
    """Record that `path` holds `rank`: False (and a skip) for a rank above the budget; two
    files claiming one rank are an error naming both (a folder or a store listing alike)."""
    if rank > max_rank:
        skipped.append(
            (path, f"rank {rank} in the name is above the budget max_rank ({max_rank:,})")
        )
        return False
    if rank in by_rank:
        first, folder = by_rank[rank], posixpath.dirname(str(by_rank[rank]))
        advice = (
            "move one away or narrow the selection with --prefix"
            if folder == posixpath.dirname(str(path))
            # subfolders of one folder are searched: two jobs' dumps, say
            else f"two jobs' dumps? give the folder of one, e.g. {folder}"
        )
        raise FrtraceError(f"two files claim rank {rank}: {first} and {path} ({advice})")
    by_rank[rank] = path
    return True


def discover(trace_dir: str | Path | None, prefix: str | None) -> Discovery:
    """Find one dump file per rank; two files claiming one rank is an error naming both."""
    env_prefix: str | None = None
    if trace_dir is None:
        directory, env_prefix = default_location()
    else:
        directory = Path(trace_dir)
    if not directory.exists():
        raise FrtraceError(f"{directory}: no such folder")
    if not directory.is_dir():
        raise FrtraceError(f"{directory}: not a folder (give the folder that holds the dumps)")
    if prefix is None and env_prefix:
        prefix = env_prefix
    # The default location is usually /tmp, shared with everything else: search it flat,
    # and for dumps only.
    candidates = _candidates(directory, subfolders=trace_dir is not None)
    if trace_dir is not None:
        candidates = _holder_candidates(directory, candidates)
    logs: list[Path] = []
    stacks: list[Path] = []
    if trace_dir is not None:  # files without a rank in their name: logs, stacks, others
        candidates = split_by_content(candidates, logs, stacks, numbered=False)
        deeper: list[tuple[Path, str | None]] = [(p, None) for p in _deeper_files(directory)]
        split_by_content(deeper, logs, stacks, numbered=False)
        split_by_content(deeper, logs, stacks, numbered=True)
    inferred = prefix is None
    if prefix is None:
        prefix, others = infer_prefix([p.name for p, kind in candidates if kind is None])
        if others and trace_dir is not None:  # several families: logs may be one of them
            candidates = split_by_content(candidates, logs, stacks, numbered=True)
            prefix, _others = infer_prefix([p.name for p, kind in candidates if kind is None])
    files: list[DumpFile] = []
    ignored: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    by_rank: dict[int, Path] = {}
    max_rank = budgets().max_rank
    for path, kind in candidates:
        rank = rank_from_name(path.name)
        if not path.name.startswith(prefix) or rank is None:
            ignored.append(path)
            continue
        if kind is not None:
            reason = kind if kind.startswith("cannot") else f"{kind}, not a regular file"
            skipped.append((path, reason))
            continue
        if rank in by_rank and trace_dir is not None:  # one of the two may be a log
            left = split_by_content([(by_rank[rank], None), (path, None)], logs, stacks, True)
            if len(left) < 2:
                if by_rank[rank] not in {p for p, _k in left}:
                    files = [f for f in files if f.path != by_rank[rank]]
                    del by_rank[rank]
                if path not in {p for p, _k in left}:
                    continue
        if claim_rank(by_rank, rank, path, max_rank, skipped):
            files.append(DumpFile(path, rank))
    files.sort(key=lambda f: f.rank)
    return Discovery(directory, prefix, inferred, files, ignored, skipped, logs, stacks)


def split_by_content(
    candidates: list[tuple[Path, str | None]],
    logs: list[Path],
    stacks: list[Path],
    numbered: bool,
) -> list[tuple[Path, str | None]]:
    """The candidates that may be dumps; logs and py-spy outputs among the regular files
    whose names carry a rank (`numbered`) or not are added to `logs` and `stacks`, told apart
    by their first KBs whatever their names. Rank-numbered files are read only when needed
    (the parse says which failed): a folder of dumps costs no extra read. A file whose name
    claims a rank is a log only by a log's structure; other text there is a broken dump."""
    keep: list[tuple[Path, str | None]] = []
    for path, kind in candidates:
        look = kind is None and (rank_from_name(path.name) is not None) == numbered
        what = sniff(path) if look else None
        if what == LOG or (what in (TEXT, EMPTY) and not numbered):  # `rank3.log`, empty
            logs.append(path)
        elif what == STACKS:
            stacks.append(path)
        else:
            keep.append((path, kind))
    return keep


def reclaim_text(found: Discovery, skipped: list[Any]) -> list[Any]:
    """Files the parse skipped that are logs or py-spy outputs by their content (named like
    dumps) are moved to `found.logs` / `found.stacks`; returns the skipped files left (text
    without a log's structure stays a broken dump of the rank its name claims)."""
    left = []
    for item in skipped:
        path = Path(item.file)
        what = sniff(path) if not path.is_symlink() and path.is_file() else None
        if what == LOG:
            found.logs.append(path)
        elif what == STACKS:
            found.stacks.append(path)
        else:
            left.append(item)
    return left


def discover_many(paths: list[Path], prefix: str | None) -> Discovery:
    """Several folders and files given at once (dumps, logs, py-spy outputs, as copied off
    the nodes): folders are searched as `discover` does, files are told apart by content;
    a dump file's rank is the trailing number of its name."""
    if not paths:
        raise FrtraceError("no folder or file given")
    files: list[DumpFile] = []
    logs: list[Path] = []
    stacks: list[Path] = []
    ignored: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    by_rank: dict[int, Path] = {}
    max_rank = budgets().max_rank
    prefixes: list[str] = []
    for path in paths:
        if not os.path.lexists(path):
            raise FrtraceError(f"{path}: no such file or folder")
        if path.is_dir():
            found = discover(path, prefix)
            prefixes.append(found.prefix)
            ignored += found.ignored
            skipped += found.skipped
            logs += found.logs
            stacks += found.stacks
            for f in found.files:
                if claim_rank(by_rank, f.rank, f.path, max_rank, skipped):
                    files.append(f)
            continue
        kind = _kind(path)
        what = sniff(path) if kind is None else None
        if what == LOG or (what == TEXT and rank_from_name(path.name) is None):
            logs.append(path)
        elif what == STACKS:
            stacks.append(path)
        elif kind is not None:
            skipped.append(
                (path, kind if kind.startswith("cannot") else f"{kind}, not a regular file")
            )
        else:
            rank = rank_from_name(path.name)
            if rank is None:
                raise FrtraceError(f"{path}: the file name does not end in a rank number")
            if claim_rank(by_rank, rank, path, max_rank, skipped):
                files.append(DumpFile(path, rank))
    files.sort(key=lambda f: f.rank)
    parents = [str(p if p.is_dir() else p.parent) for p in paths]
    common = Path(os.path.commonpath([os.path.abspath(p) for p in parents]))
    shared = prefixes[0] if prefixes and len(set(prefixes)) == 1 else ""
    return Discovery(common, shared, False, files, ignored, skipped, logs, stacks)
