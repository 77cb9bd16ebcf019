"""Ask every rank's worker server for its Flight Recorder and its stacks, all at once, and
write the answers as the files `frtrace DIR` reads.

Per rank, within one deadline (`timeout` seconds from its first request):

1. `GET /handler/`: the handler names (a JSON list of strings; anything else is refused).
2. The recorder, from the first listed of the handlers `frtrace collect --fresh-dump` asks
   (frtrace/collect/dumps.py): `dump_nccl_trace_pickle` and `dump_nccl_trace_json` (CUDA
   builds, torch/csrc/distributed/c10d/FlightRecorderCuda.cpp: the NCCL recorder, every
   entry by default), else `fr_trace_json` (every build,
   torch/csrc/distributed/c10d/control_plane/Handlers.cpp: `dump_fr_trace_json(true, true)`,
   the recorder of the other backends, gloo's, as a dump of format 2.x at its top level, so
   written unchanged). It goes to `trace_<rank>.pkl` or `trace_<rank>.json`.
3. The stacks: `pyspy_dump` with `nonblocking=1`, as torch's own page asks it
   (torch/distributed/debug/_debug_handlers.py, `PySpyHandler`), whose handler runs
   `py-spy dump --pid <its own pid>` (Handlers.cpp, `pyspyHandler`) and so fails when py-spy
   is not on the rank's PATH; else `dump_traceback` (PythonHandlers.cpp: faulthandler's
   `dump_traceback(all_threads=True)`). Written to `stacks/rank<R>.txt` after the label line
   `frtrace collect` writes, `# frtrace-collect rank=R local_rank=-1 host=H pid=P`: the host
   is the one in the rank's registered address (`socket.gethostname()` of the rank), the pid
   the one py-spy's output states (`Process <pid>:`), -1 (unknown) for faulthandler's, which
   states none; the local rank is never stated (-1). Lines of the answer that look like such
   a label are dropped, so that no rank's answer can pass for another rank's stacks.

Nothing else is asked: no profiler, no dump written on the rank's disk.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from frtrace.dumps.limits import budgets
from frtrace.live.http import FetchError, Worker, request

DUMP_HANDLERS = (
    ("dump_nccl_trace_pickle", ".pkl"),
    ("dump_nccl_trace_json", ".json"),
    ("fr_trace_json", ".json"),
)
PYSPY, TRACEBACK = "pyspy_dump", "dump_traceback"
PREFIX = "trace_"
STACKS_DIR = "stacks"
MAX_LISTING = 1 << 20  # bytes of GET /handler/
MAX_HANDLERS = 1024
MAX_STACK_BYTES = 8 << 20  # one process's stacks: py-spy's text is KBs
MAX_PARALLEL = 64
_PROCESS = re.compile(rb"^Process (\d{1,12}):", re.MULTILINE)
_LABEL = re.compile(rb"^# frtrace-collect .*(?:\n|$)", re.MULTILINE)


@dataclass
class RankFetch:
    """What asking one rank brought: the files written, and why the rest did not come."""

    rank: int
    worker: Worker
    dump: str | None = None  # file name in the folder
    dump_handler: str | None = None
    stack: str | None = None  # path relative to the folder
    stack_handler: str | None = None
    pid: int | None = None
    unreachable: str | None = None  # no answer at all
    dump_failure: str | None = None
    stack_failure: str | None = None
    pyspy_failure: str | None = None  # pyspy_dump failed, faulthandler's stacks were taken


@dataclass
class Fetched:
    """One round: every rank asked, and where the files went."""

    folder: Path
    ranks: list[RankFetch] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def answered(self) -> list[int]:
        """Ranks whose recorder was written."""
        return [r.rank for r in self.ranks if r.dump is not None]


def fetch_all(workers: dict[int, Worker], folder: Path, timeout: float) -> Fetched:
    """Ask every worker (MAX_PARALLEL at a time), each within `timeout` seconds, and write
    what came into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STACKS_DIR).mkdir(exist_ok=True)
    started = time.monotonic()
    done = Fetched(folder)
    if not workers:
        return done
    pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(workers)))
    try:
        futures = {
            rank: pool.submit(fetch_rank, rank, worker, folder, timeout)
            for rank, worker in sorted(workers.items())
        }
        # Each rank's requests end by its deadline; a name lookup cannot be cut that way,
        # so a rank still running well after every deadline is given up on.
        waves = -(-len(workers) // MAX_PARALLEL)
        wait(futures.values(), timeout=waves * timeout + 5.0)
        for rank, future in futures.items():
            if future.done():
                done.ranks.append(future.result())
            else:
                future.cancel()
                late = f"no answer within {timeout:.1f} s"
                done.ranks.append(RankFetch(rank, workers[rank], unreachable=late))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    done.seconds = time.monotonic() - started
    return done


def fetch_rank(rank: int, worker: Worker, folder: Path, timeout: float) -> RankFetch:
    """One rank's handler names, recorder and stacks (see the module docstring)."""
    deadline = time.monotonic() + timeout
    got = RankFetch(rank, worker)
    try:
        names = handler_names(worker, deadline)
    except FetchError as exc:
        if exc.unreachable:
            got.unreachable = str(exc)
        else:
            got.dump_failure = f"GET /handler/: {exc}"
        return got
    _fetch_dump(got, names, folder, deadline)
    _fetch_stack(got, names, folder, deadline)
    return got


def handler_names(worker: Worker, deadline: float) -> set[str]:
    """The names `GET /handler/` lists; FetchError unless it is a JSON list of strings."""
    body = request(worker, "GET", "/handler/", deadline, MAX_LISTING)
    try:
        names = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FetchError("not JSON (a list of handler names was expected)") from exc
    if not isinstance(names, list) or len(names) > MAX_HANDLERS:
        raise FetchError(f"a JSON {type(names).__name__}, not a list of handler names")
    if not all(isinstance(n, str) for n in names):
        raise FetchError("a list holding something other than handler names (strings)")
    return set(names)


def _fetch_dump(got: RankFetch, names: set[str], folder: Path, deadline: float) -> None:
    handler = next(((h, s) for h, s in DUMP_HANDLERS if h in names), None)
    if handler is None:
        listed = ", ".join(sorted(names)[:8]) or "none"
        got.dump_failure = f"no Flight Recorder handler (listed: {listed})"
        return
    name, suffix = handler
    file = f"{PREFIX}{got.rank}{suffix}"
    try:
        request(
            got.worker,
            "POST",
            f"/handler/{name}",
            deadline,
            budgets().max_file_bytes,
            out=folder / file,
        )
    except FetchError as exc:
        got.dump_failure = f"{name}: {exc}"
        return
    got.dump, got.dump_handler = file, name


def _fetch_stack(got: RankFetch, names: set[str], folder: Path, deadline: float) -> None:
    failures: list[str] = []
    for name, query in ((PYSPY, "?nonblocking=1"), (TRACEBACK, "")):
        if name not in names:
            continue
        try:
            body = request(got.worker, "POST", f"/handler/{name}{query}", deadline, MAX_STACK_BYTES)
        except FetchError as exc:
            failures.append(f"{name}: {exc}")
            if exc.unreachable:
                break
            continue
        pid = _PROCESS.search(body)
        if name == PYSPY and pid is None:
            failures.append(f"{name}: no `Process <pid>:` line (not py-spy's output)")
            continue
        got.pid = int(pid.group(1)) if pid is not None else None
        label = label_line(got.rank, got.worker.host, got.pid)
        path = f"{STACKS_DIR}/rank{got.rank}.txt"
        (folder / path).write_bytes(label + _LABEL.sub(b"", body))
        got.stack, got.stack_handler = path, name
        if failures:
            got.pyspy_failure = failures[0].partition(": ")[2]
        return
    if failures:  # a server that lists no stack handler has none to give: nothing failed
        got.stack_failure = "; ".join(failures)


def label_line(rank: int, host: str, pid: int | None) -> bytes:
    """`frtrace collect`'s label (frtrace.evidence.pyspy.parse_label reads it): -1 where a
    value is not known."""
    pid_text = -1 if pid is None else pid
    return f"# frtrace-collect rank={rank} local_rank=-1 host={host} pid={pid_text}\n".encode()
