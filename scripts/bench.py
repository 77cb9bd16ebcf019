#!/usr/bin/env python3
"""Benchmark frtrace against the pickle.load floor and torchfrtrace on synthetic NCCL dumps.

Dumps of W ranks x E entries (with stacks, ring buffers wrapped) are generated once and cached;
every contestant then runs as a subprocess on the same files with a warm page cache, and is
measured for wall time, CPU time (user + system of the process and every descendant it waited
for: comparable on a busy machine, where walls are not) and peak RSS (summed over the tree).
stdout gets a table and one JSON line; progress goes to stderr.

Example: python scripts/bench.py --ranks 256 --stack-depth 4 --fault missing_ranks --skip-reference

`--engine dask` also runs `frtrace --engine dask` on the same files (a local Dask cluster of one
worker process per core, started by frtrace itself, unless `--scheduler` names one, whose
workers are then not measured) and says whether its findings are identical to the local
engine's; both rows give the client's own peak RSS beside the whole tree's.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import multiprocessing as mp
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

# Runnable from a fresh clone without installing the package.
_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from frtrace.synth import FAULT_KINDS, Fault, Layout, simulate, spec_for_entries, write_job  # noqa: E402

PREFIX = "nccl_trace_rank_"
DUMPS = "dumps"
META = "meta.json"
SAMPLE_S = 0.02
TORCH_MODULE = "torch.distributed.flight_recorder.fr_trace"

# The floor: what any analyzer must at least do, read and unpickle every dump, one at a time,
# in the cheapest way a program can: with the cyclic GC paused (dumps hold no cycles, and the
# collector would otherwise rescan millions of young containers while they are built).
FLOOR_CODE = """\
import gc, os, pickle, sys
gc.disable()
d, prefix = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(d)):
    if name.startswith(prefix):
        with open(os.path.join(d, name), "rb") as f:
            pickle.load(f)
"""


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Layout, fault and the dump cache


def parse_layout(text: str | None, ranks: int) -> Layout:
    """`tp,dp,pp` as given, else tp=8 (or the largest power of 2 dividing), pp=2 if it fits."""
    if text:
        try:
            tp, dp, pp = (int(part) for part in text.split(","))
            layout = Layout(tp=tp, dp=dp, pp=pp)
        except ValueError as exc:
            raise ValueError(f"--layout wants tp,dp,pp like 8,4,2: {exc}") from None
        if layout.world != ranks:
            raise ValueError(f"--layout {text} makes {layout.world} ranks, not --ranks {ranks}")
        return layout
    tp = next(t for t in (8, 4, 2, 1) if ranks % t == 0)
    pp = 2 if (ranks // tp) % 2 == 0 else 1
    return Layout(tp=tp, dp=ranks // (tp * pp), pp=pp)


def pick_fault(kind: str, layout: Layout, rank: int | None, group: str | None) -> Fault:
    """A fault on a rank in the middle of the job, on the first group kind able to host it.

    p2p_mismatch needs a send, so its default rank sits in the first pipeline stage.
    """
    if group is None:
        if kind == "p2p_mismatch":
            group = "pp"
        else:
            group = next((g for g in ("tp", "dp", "pp") if layout.size_of(g) > 1), "default")
    if rank is None:
        span = layout.world // layout.pp if kind == "p2p_mismatch" else layout.world
        rank = min(span // 2 + 1, layout.world - 1)
    return Fault(kind, rank=rank, group=group)


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the generated entries look like, beyond ranks and entries."""

    stack_depth: int | None = None  # None: each call site's own stack (8 to 13 frames)
    coalesce_dp: bool = True  # data-parallel gradient buckets as coalesced blocks

    def key(self) -> str:
        depth = "" if self.stack_depth is None else f"-d{self.stack_depth}"
        return depth + ("" if self.coalesce_dp else "-nocoal")

    def text(self) -> str:
        depth = (
            "call-site stacks" if self.stack_depth is None else f"{self.stack_depth}-frame stacks"
        )
        return depth + (", coalesced dp buckets" if self.coalesce_dp else ", no coalesced blocks")


def cache_key(
    ranks: int, entries: int, layout: Layout, fault: Fault | None, seed: int, shape: Shape = Shape()
) -> str:
    where = "healthy" if fault is None else f"{fault.kind}-r{fault.rank}-{fault.group}"
    # g2: dumps follow NCCL's recording rules (frozen coalesced parts, batched p2p, ...)
    layout_key = f"tp{layout.tp}dp{layout.dp}pp{layout.pp}"
    return f"g2-r{ranks}-e{entries}-{layout_key}-{where}-s{seed}{shape.key()}"


def _generate_child(
    folder: Path, layout: Layout, entries: int, fault: Fault | None, seed: int, shape: Shape
) -> None:
    """Simulate and write in a forked child, so the bench itself never holds the job's memory."""
    try:
        t0 = time.perf_counter()
        spec = spec_for_entries(
            layout,
            entries,
            fault=fault,
            seed=seed,
            batch_p2p=True,
            stack_depth=shape.stack_depth,
            coalesce_dp=shape.coalesce_dp,
        )
        job = simulate(spec)
        t_sim = time.perf_counter() - t0
        log(f"simulated {layout.world} ranks in {t_sim:.1f} s; writing")
        workers = max(1, min(os.cpu_count() or 1, 8))
        paths = write_job(job, folder / DUMPS, prefix=PREFIX, fmt="pickle", workers=workers)
        meta = {
            "expected": job.expected,
            "hung": job.hung,
            "spec": dataclasses.asdict(spec),
            "files": len(paths),
            "simulate_s": round(t_sim, 3),
            "generate_s": round(time.perf_counter() - t0, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (folder / META).write_text(json.dumps(meta, indent=1) + "\n")
    except Exception as exc:  # reported by the parent from error.txt
        (folder / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        if not isinstance(exc, ValueError):  # a bad fault choice needs no traceback
            traceback.print_exc()
        os._exit(3)


def cached_meta(folder: Path) -> dict[str, Any] | None:
    """meta.json of a complete cache entry (written last, file count checked), else None."""
    try:
        meta: dict[str, Any] = json.loads((folder / META).read_text())
        count = sum(1 for p in (folder / DUMPS).iterdir() if p.name.startswith(PREFIX))
    except (OSError, ValueError):
        return None
    return meta if count == meta.get("files") else None


def ensure_dumps(
    folder: Path, layout: Layout, entries: int, fault: Fault | None, seed: int, shape: Shape
) -> tuple[dict[str, Any], float | None]:
    """(meta, seconds spent generating now or None on a cache hit)."""
    meta = cached_meta(folder)
    if meta is not None:
        log(f"reusing {folder} (generated {meta.get('created')} in {meta.get('generate_s')} s)")
        return meta, None
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    log(f"generating {layout.world} ranks x {entries} entries into {folder}")
    t0 = time.perf_counter()
    try:
        proc = mp.get_context("fork").Process(
            target=_generate_child, args=(partial, layout, entries, fault, seed, shape)
        )
        proc.start()
        proc.join()
        if proc.exitcode != 0:
            err = partial / "error.txt"
            why = err.read_text().strip() if err.exists() else f"exit {proc.exitcode}"
            raise RuntimeError(f"generating the dumps failed: {why}")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    spent = time.perf_counter() - t0
    meta = cached_meta(folder)
    if meta is None:
        raise RuntimeError(f"{folder} is incomplete right after generating it")
    log(f"generated in {spent:.1f} s")
    return meta, spent


def loadavg() -> float | None:
    """1-minute load average: other work on the machine skews every wall time here."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def warm_page_cache(directory: Path) -> tuple[int, int]:
    """Read every file once so no contestant pays (or is spared) disk reads; (files, bytes)."""
    files = total = 0
    for path in sorted(directory.iterdir()):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                total += len(chunk)
        files += 1
    return files, total


# ---------------------------------------------------------------------------------------------
# Measuring a subprocess tree


def _children(pid: int) -> list[int]:
    """Direct children of `pid` via /proc/<pid>/task/*/children (threads fork too)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0  # gone, or a zombie (no VmRSS line)


def tree_rss_kb(root: int) -> int:
    """Sum of VmRSS over `root` and all its descendants, right now."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_kb(pid)
        todo.extend(_children(pid))
    return total


class RssSampler(threading.Thread):
    """Samples a process tree's summed RSS every SAMPLE_S and keeps the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.root_peak_kb = 0  # the measured process alone (the client, for the Dask engine)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while True:
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.pid))
            self.root_peak_kb = max(self.root_peak_kb, _rss_kb(self.pid))
            if self._stop_event.wait(SAMPLE_S):
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclasses.dataclass
class Run:
    """One measured subprocess run. `exit` is None when it was killed at the time limit."""

    wall_s: float
    cpu_s: float  # user + system of the process and the descendants it waited for
    peak_rss_mb: float
    exit: int | None
    stdout: Path
    stderr: Path
    client_peak_rss_mb: float = 0.0  # the measured process alone, without its workers

    @property
    def timed_out(self) -> bool:
        return self.exit is None

    def last_line(self) -> str:
        """Last non-empty line of stderr (else stdout): where a crash explains itself."""
        for path in (self.stderr, self.stdout):
            lines = [ln.strip() for ln in _tail(path).splitlines() if ln.strip()]
            if lines:
                return lines[-1]
        return ""


def _tail(path: Path, size: int = 8192) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group our child leads (_OWN_GROUP), if anyone is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# Each contestant leads its own process group (killed whole at the time limit), in the
# bench's session where Python allows (3.11+): on Linux a session is a scheduling group
# (autogroup), so a bench given a higher priority (/proc/self/autogroup) lends it to them.
_OWN_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)


def measure(cmd: Sequence[str], work: Path, name: str, *, timeout: float | None = None) -> Run:
    """Run `cmd`, timing it and sampling the RSS of its whole process tree.

    Peak RSS is the sampled peak of the tree's sum, raised to the child's own ru_maxrss from
    wait4 (exact for a single process, so short spikes between samples are not lost). CPU time
    comes from wait4 too: it includes every descendant the child waited for (its workers).
    """
    stdout, stderr = work / f"{name}.out", work / f"{name}.err"
    env = dict(
        os.environ,
        NO_COLOR="1",
        PYTHONPATH=os.pathsep.join([str(_REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            **_OWN_GROUP,
            # `python -m frtrace` imports from the working folder before PYTHONPATH: run in
            # this checkout, or another checkout's frtrace (where the bench was started) is
            # what gets measured.
            cwd=_REPO,
        )
        sampler = RssSampler(proc.pid)
        sampler.start()
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            _kill_group(proc.pid)

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer is not None:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            kill()
            proc.wait()
            sampler.stop()
            raise
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if timer is not None:
            timer.cancel()
        sampler.stop()
    if killed.is_set():
        _kill_group(proc.pid)  # workers may outlive the killed leader; they share its group
    peak_kb = max(sampler.peak_kb, usage.ru_maxrss)
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=peak_kb / 1024,
        exit=None if killed.is_set() else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        client_peak_rss_mb=sampler.root_peak_kb / 1024,
    )


# ---------------------------------------------------------------------------------------------
# Contestants


def run_frtrace(
    dumps: Path, work: Path, name: str, extra: list[str], repeat: int
) -> tuple[Run, dict[str, Any] | None, list[float]]:
    """Best-wall run of frtrace (peak RSS: the max over all runs), its JSON report, every wall."""
    runs: list[Run] = []
    report: dict[str, Any] | None = None
    out = work / f"{name}.json"
    for i in range(repeat):
        out.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "frtrace",
            str(dumps),
            "--prefix",
            PREFIX,
            "--format",
            "json",
            "-o",
            str(out),
            *extra,
        ]
        run = measure(cmd, work, f"{name}-{i}")
        (work / f"{name}-{i}.out").unlink(missing_ok=True)  # the report again, possibly large
        log(
            f"{name} run {i + 1}/{repeat}: {run.wall_s:.2f} s, {run.cpu_s:.2f} CPU s, "
            f"{run.peak_rss_mb:.0f} MB, "
            f"exit {run.exit}"
        )
        runs.append(run)
        if i == 0 and out.exists():
            report = json.loads(out.read_text())
    best = min(runs, key=lambda r: r.wall_s)
    best.peak_rss_mb = max(r.peak_rss_mb for r in runs)
    best.client_peak_rss_mb = max(r.client_peak_rss_mb for r in runs)
    best.cpu_s = min(r.cpu_s for r in runs)
    return best, report, [round(r.wall_s, 3) for r in runs]


def run_floor(dumps: Path, work: Path, repeat: int) -> tuple[Run, list[float]]:
    runs = [
        measure([sys.executable, "-c", FLOOR_CODE, str(dumps), PREFIX], work, f"floor-{i}")
        for i in range(repeat)
    ]
    for run in runs:
        if run.exit != 0:
            raise RuntimeError(f"the pickle.load floor failed: {run.last_line()}")
    best = min(runs, key=lambda r: r.wall_s)
    best.peak_rss_mb = max(r.peak_rss_mb for r in runs)
    best.cpu_s = min(r.cpu_s for r in runs)
    log(f"floor: {best.wall_s:.2f} s, {best.cpu_s:.2f} CPU s, {best.peak_rss_mb:.0f} MB")
    return best, [round(r.wall_s, 3) for r in runs]


def torchfrtrace_command() -> list[str] | None:
    """How to start PyTorch's analyzer here (checked with --help), or None without torch."""
    if importlib.util.find_spec("torch") is None:
        return None
    candidates = [
        [sys.executable, "-m", TORCH_MODULE],
        [str(Path(sys.executable).parent / "torchfrtrace")],
    ]
    for cmd in candidates:
        try:
            done = subprocess.run(
                [*cmd, "--help"], capture_output=True, timeout=120, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return cmd
    return None


def run_torchfrtrace(
    cmd: list[str], dumps: Path, work: Path, fault: Fault | None, timeout: float
) -> dict[str, Any]:
    args = [*cmd, str(dumps), "--prefix", PREFIX]
    if fault is not None and fault.kind == "missing_dump":
        args.append("--allow-incomplete-ranks")  # it refuses a partial job otherwise
    log(f"torchfrtrace (limit {timeout:g} s): {shlex.join(args)}")
    run = measure(args, work, "torchfrtrace", timeout=timeout)
    if run.timed_out:
        status = "timeout"
    elif run.exit == 0:
        status = "ok"
    else:
        status = f"crashed (exit {run.exit}: {run.last_line()[:200]})"
    log(f"torchfrtrace: {status}, {run.wall_s:.2f} s, {run.peak_rss_mb:.0f} MB")
    return {
        "wall_s": round(run.wall_s, 3),
        "cpu_s": round(run.cpu_s, 3),
        "peak_rss_mb": round(run.peak_rss_mb, 1),
        "exit": run.exit,
        "status": status,
        "timeout_s": timeout,
        "last_line": run.last_line()[:300],
    }


# ---------------------------------------------------------------------------------------------
# Judging and reporting

RC_KEYS = ("kind", "culprit_ranks", "pg_name", "collective_seq_id", "p2p_seq_id")


def judge(report: dict[str, Any] | None, expected: dict[str, Any] | None) -> dict[str, Any]:
    """What frtrace concluded and whether it names the injected culprit."""
    rc = (report or {}).get("root_cause")
    root = None if rc is None else {k: rc.get(k) for k in RC_KEYS}
    culprit_found = matches = None
    if expected is not None:
        culprit_found = root is not None and set(expected["culprit_ranks"]) <= set(
            root["culprit_ranks"]
        )
        matches = root is not None and all(root[k] == expected.get(k) for k in RC_KEYS)
    return {
        "ok": None if report is None else report.get("ok"),
        "findings": None if report is None else len(report.get("findings", [])),
        "root_cause": root,
        "culprit_found": culprit_found,
        "root_cause_matches_expected": matches,
    }


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """JSON paths where two parsed reports differ (lists of equal length element-wise)."""
    out: list[str] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            out += diff_paths(a.get(key), b.get(key), f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += diff_paths(x, y, f"{path}[{i}]")
    elif a != b:
        out.append(path or ".")
    return out


def _without_evidence(report: dict[str, Any]) -> list[Any]:
    findings = [report.get("root_cause"), *report.get("findings", [])]
    return [
        None if f is None else {k: v for k, v in f.items() if k != "evidence"} for f in findings
    ]


def compare_reports(
    parallel: dict[str, Any] | None, serial: dict[str, Any] | None
) -> tuple[bool, bool]:
    """(ok, root_cause and findings identical; identical once `evidence` is left out).

    Differences are logged by JSON path, since "differ" alone does not say whether the
    conclusion or only an illustrative detail changed.
    """
    if parallel is None or serial is None:
        return False, False
    keys = ("ok", "root_cause", "findings")
    identical = all(parallel.get(k) == serial.get(k) for k in keys)
    paths = diff_paths(parallel, serial)
    if paths:
        more = f" (+{len(paths) - 8} more)" if len(paths) > 8 else ""
        log(f"serial and parallel reports differ at: {', '.join(paths[:8])}{more}")
    same = parallel.get("ok") == serial.get("ok") and _without_evidence(
        parallel
    ) == _without_evidence(serial)
    return identical, same


def summary(verdict: dict[str, Any], expected: dict[str, Any] | None, run: Run) -> str:
    if verdict["ok"] is None:
        return f"no report: {run.last_line()[:80]}"
    root = verdict["root_cause"]
    if root is None:
        text = "healthy (no finding)"
    else:
        seq = (
            root["collective_seq_id"] if root["p2p_seq_id"] is None else f"p2p {root['p2p_seq_id']}"
        )
        ranks = ",".join(map(str, root["culprit_ranks"]))
        text = (
            f"{verdict['findings']} finding(s); root {root['kind']} pg {root['pg_name']} "
            f"#{seq} culprit {ranks}"
        )
    if expected is None:
        return text + (" (correct)" if root is None else " (WRONG: job is healthy)")
    if verdict["root_cause_matches_expected"]:
        return text + " (= expected)"
    return text + (" (culprit right, details differ)" if verdict["culprit_found"] else " (WRONG)")


def _mb(value: float) -> str:
    return f"{value:,.0f}"


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--entries", type=int, default=2000, help="entries per rank")
    parser.add_argument("--layout", metavar="TP,DP,PP", help="default: tp=8, pp=2 if it fits")
    parser.add_argument(
        "--fault", choices=("none", *FAULT_KINDS), default="none", help="fault to inject"
    )
    parser.add_argument("--fault-rank", type=int, help="default: a rank mid-job")
    parser.add_argument("--fault-group", choices=("tp", "dp", "pp", "default"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stack-depth",
        type=int,
        metavar="FRAMES",
        help="cut or pad every stack to this many frames (default: each call site's own, 8-13)",
    )
    parser.add_argument(
        "--no-coalesce", action="store_true", help="no coalesced blocks (dp buckets one by one)"
    )
    parser.add_argument("--cache-dir", type=Path, default=_REPO / ".bench-cache")
    parser.add_argument(
        "--no-cache", action="store_true", help="generate afresh and delete the dumps afterwards"
    )
    parser.add_argument("--frtrace-args", default="", help="extra frtrace arguments (one string)")
    parser.add_argument(
        "--compare-serial",
        action="store_true",
        help="also run frtrace --jobs 1 and check its findings equal the parallel run's",
    )
    parser.add_argument("--repeat", type=int, default=1, help="best wall of N runs")
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchfrtrace")
    parser.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="dask: also run frtrace --engine dask and compare its findings with the local run",
    )
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", help="with --engine dask: an existing Dask scheduler"
    )
    parser.add_argument("--reference-timeout", type=float, default=600.0, help="seconds")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ranks < 1 or args.entries < 1 or args.repeat < 1:
        parser.error("--ranks, --entries and --repeat must be >= 1")
    if args.stack_depth is not None and args.stack_depth < 1:
        parser.error("--stack-depth must be >= 1")
    shape = Shape(stack_depth=args.stack_depth, coalesce_dp=not args.no_coalesce)
    try:
        layout = parse_layout(args.layout, args.ranks)
        fault = None
        if args.fault != "none":
            fault = pick_fault(args.fault, layout, args.fault_rank, args.fault_group)
        spec_for_entries(  # validate early
            layout,
            args.entries,
            fault=fault,
            seed=args.seed,
            stack_depth=shape.stack_depth,
            coalesce_dp=shape.coalesce_dp,
        )
    except ValueError as exc:
        parser.error(str(exc))
    extra = shlex.split(args.frtrace_args)

    cache_dir: Path = args.cache_dir
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = cache_key(args.ranks, args.entries, layout, fault, args.seed, shape)
    scratch = Path(tempfile.mkdtemp(prefix="bench-", dir=cache_dir))
    folder = scratch / key if args.no_cache else cache_dir / key
    try:
        meta, generate_s = ensure_dumps(folder, layout, args.entries, fault, args.seed, shape)
        dumps = folder / DUMPS
        expected = meta["expected"]
        files, size = warm_page_cache(dumps)
        log(f"page cache warmed: {files} files, {size / 2**20:.0f} MB")
        load_before = loadavg()
        if load_before is not None and load_before > (os.cpu_count() or 1) / 2:
            log(f"warning: load average {load_before} before timing; walls will be inflated")

        floor, floor_walls = run_floor(dumps, scratch, args.repeat)
        fr, report, fr_walls = run_frtrace(dumps, scratch, "frtrace", extra, args.repeat)
        verdict = judge(report, expected)

        dask_run: Run | None = None
        dask_walls: list[float] = []
        dask_identical: bool | None = None
        dask_same_conclusion: bool | None = None
        if args.engine == "dask":
            where = ["--scheduler", args.scheduler] if args.scheduler else []
            dask_run, dask_report, dask_walls = run_frtrace(
                dumps, scratch, "frtrace-dask", [*extra, "--engine", "dask", *where], args.repeat
            )
            dask_identical, dask_same_conclusion = compare_reports(report, dask_report)

        serial_identical: bool | None = None
        same_conclusion: bool | None = None
        serial: Run | None = None
        if args.compare_serial:
            serial, serial_report, _ = run_frtrace(
                dumps, scratch, "frtrace-serial", [*extra, "--jobs", "1"], 1
            )
            serial_identical, same_conclusion = compare_reports(report, serial_report)

        reference: dict[str, Any] | None = None
        if not args.skip_reference:
            cmd = torchfrtrace_command()
            if cmd is None:
                log("torch (or a working torchfrtrace) not found; skipping the reference")
            else:
                reference = run_torchfrtrace(cmd, dumps, scratch, fault, args.reference_timeout)
    except RuntimeError as exc:  # generation or the floor failed: nothing to compare against
        log(str(exc))
        return 2
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    load_after = loadavg()
    fault_text = "none (healthy)"
    if fault is not None:
        fault_text = f"{fault.kind} on rank {fault.rank} ({fault.group})"
    print(
        f"{args.ranks} ranks x {args.entries} entries, layout tp={layout.tp} dp={layout.dp} "
        f"pp={layout.pp}, {shape.text()}, fault {fault_text}; {files} files, "
        f"{size / 2**20:,.0f} MB pickle"
    )
    print(
        f"page cache warm for all (every file read once before timing); {os.cpu_count()} cores, "
        f"load avg {load_before} before / {load_after} after; best wall of {args.repeat}"
    )
    total_entries = files * args.entries  # every ring buffer has wrapped

    def cpu(run: Run) -> list[str]:
        return [f"{run.cpu_s:.2f}", f"{run.cpu_s / (total_entries / 1e6):.2f}"]

    rows: list[list[Any]] = [
        [
            "frtrace",
            f"{fr.wall_s:.2f}",
            *cpu(fr),
            _mb(fr.peak_rss_mb),
            fr.exit,
            summary(verdict, expected, fr),
        ],
    ]

    def compared(
        label: str, run: Run, identical: bool | None, close: bool | None, to: str
    ) -> list[Any]:
        """A row for a second run of frtrace whose findings are compared with the first's."""
        same = f"findings identical to {to}"
        if not identical:
            same = "findings DIFFER" + (" (only in evidence)" if close else "")
        return [label, f"{run.wall_s:.2f}", *cpu(run), _mb(run.peak_rss_mb), run.exit, same]

    if serial is not None:
        rows.append(
            compared("frtrace --jobs 1", serial, serial_identical, same_conclusion, "parallel")
        )
    if dask_run is not None:
        row = compared(
            "frtrace --engine dask", dask_run, dask_identical, dask_same_conclusion, "local"
        )
        row[-1] += f"; client alone {_mb(dask_run.client_peak_rss_mb)} MB"
        rows.append(row)
    rows.append(
        [
            "floor (pickle.load)",
            f"{floor.wall_s:.2f}",
            *cpu(floor),
            _mb(floor.peak_rss_mb),
            floor.exit,
            "1 process, GC paused, loads each file and drops it",
        ]
    )
    if reference is not None:
        wall = reference["wall_s"]
        timeout = reference["timeout_s"]
        wall_text = f">{timeout:g}" if reference["status"] == "timeout" else f"{wall:.2f}"
        result = reference["status"]
        if result == "ok" and reference["last_line"]:
            # It exits 0 whatever it finds (or gives up on), so show how it ended.
            said = reference["last_line"]
            result += f"; ends: {said[:70]}{'...' if len(said) > 70 else ''}"
        rows.append(
            [
                "torchfrtrace",
                wall_text,
                f"{reference['cpu_s']:.2f}",
                "",
                _mb(reference["peak_rss_mb"]),
                reference["exit"],
                result,
            ]
        )
    wall_ratio = _ratio(fr.wall_s, floor.wall_s)
    rss_ratio = _ratio(fr.peak_rss_mb, floor.peak_rss_mb)
    cpu_ratio = _ratio(fr.cpu_s, floor.cpu_s)
    rows.append(["frtrace / floor", f"{wall_ratio}x", f"{cpu_ratio}x", "", f"{rss_ratio}x", "", ""])
    speedup = None
    if reference is not None and reference["status"] == "ok":
        speedup = _ratio(reference["wall_s"], fr.wall_s)
        rows.append(
            [
                "torchfrtrace / frtrace",
                f"{speedup}x",
                "",
                "",
                f"{_ratio(reference['peak_rss_mb'], fr.peak_rss_mb)}x",
                "",
                "",
            ]
        )
    print(
        tabulate(
            rows,
            headers=["", "wall s", "CPU s", "CPU s/M entries", "peak RSS MB", "exit", "result"],
            disable_numparse=True,
        )
    )
    line = {
        "ranks": args.ranks,
        "entries": args.entries,
        "layout": {"tp": layout.tp, "dp": layout.dp, "pp": layout.pp},
        "fault": None if fault is None else fault.kind,
        "fault_rank": None if fault is None else fault.rank,
        "fault_group": None if fault is None else fault.group,
        "stack_depth": shape.stack_depth,
        "coalesce_dp": shape.coalesce_dp,
        "total_entries": total_entries,
        "expected": expected,
        "files": files,
        "bytes": size,
        "cores": os.cpu_count(),
        "page_cache": "warm",
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "repeat": args.repeat,
        "generate_s": None if generate_s is None else round(generate_s, 3),
        "cached": generate_s is None,
        "frtrace": {
            "wall_s": round(fr.wall_s, 3),
            "walls_s": fr_walls,
            "cpu_s": round(fr.cpu_s, 3),
            "cpu_s_per_m_entries": round(fr.cpu_s / (total_entries / 1e6), 3),
            "peak_rss_mb": round(fr.peak_rss_mb, 1),
            "client_peak_rss_mb": round(fr.client_peak_rss_mb, 1),
            "exit": fr.exit,
            "args": extra,
            **verdict,
        },
        "floor": {
            "wall_s": round(floor.wall_s, 3),
            "walls_s": floor_walls,
            "cpu_s": round(floor.cpu_s, 3),
            "cpu_s_per_m_entries": round(floor.cpu_s / (total_entries / 1e6), 3),
            "peak_rss_mb": round(floor.peak_rss_mb, 1),
            "exit": floor.exit,
        },
        "torchfrtrace": reference,
        "ratio_to_floor": wall_ratio,
        "cpu_ratio_to_floor": cpu_ratio,
        "rss_ratio_to_floor": rss_ratio,
        "torchfrtrace_over_frtrace": speedup,
        "dask": None
        if dask_run is None
        else {
            "wall_s": round(dask_run.wall_s, 3),
            "walls_s": dask_walls,
            "cpu_s": round(dask_run.cpu_s, 3),
            "peak_rss_mb": round(dask_run.peak_rss_mb, 1),
            "client_peak_rss_mb": round(dask_run.client_peak_rss_mb, 1),
            "exit": dask_run.exit,
            "scheduler": args.scheduler,
            "identical_to_local": dask_identical,
            "identical_except_evidence": dask_same_conclusion,
        },
        "serial_identical": serial_identical,
        "serial_identical_except_evidence": same_conclusion,
        "serial": None
        if serial is None
        else {
            "wall_s": round(serial.wall_s, 3),
            "cpu_s": round(serial.cpu_s, 3),
            "peak_rss_mb": round(serial.peak_rss_mb, 1),
            "exit": serial.exit,
        },
    }
    print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
