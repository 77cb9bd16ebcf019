"""The Flight Recorder dumps of this node's ranks: where torch writes them, copies, and fresh
dumps asked of a running rank.

Where torch writes (torch/csrc/distributed/c10d/FlightRecorder.cpp,
`DebugInfoWriter::getWriter`): `<prefix><rank>`, the prefix read with `getCvarString` from
`TORCH_FR_DUMP_TEMP_FILE`, else `TORCH_NCCL_DEBUG_INFO_TEMP_FILE` (the first name of the list
wins; torch/csrc/distributed/c10d/Utils.hpp), else `$XDG_CACHE_HOME/torch/comm_lib_trace_rank_`
or `$HOME/.cache/torch/comm_lib_trace_rank_` (`$HOME` defaulting to /tmp): the strings of the
torch 2.13 library hold these names. frtrace's own `dump_flight_recorder` writes to
`/tmp/nccl_trace_rank_<rank>` when no prefix is set (frtrace/capture.py). The release a rank
runs is not known from outside, and the default moved between releases (2.7 and 2.8:
`$HOME/.cache/torch/nccl_trace_rank_`; 2.6 and earlier: `/tmp/nccl_trace_rank_`, also
frtrace.capture's), so every release's default is searched (`frtrace.dumps.discover.
default_prefixes`); so is it when only `TORCH_FR_DUMP_TEMP_FILE` is set, a name torch 2.7 and
earlier do not read.

Fresh dumps, two mechanisms torch offers a running process (nothing else is tried):

- The worker server: a job that runs under `torch.distributed.elastic.control_plane.
  worker_main()` with `TORCH_WORKER_SERVER_SOCKET` set serves HTTP on that Unix socket
  (torch/csrc/distributed/c10d/control_plane/WorkerServer.cpp: `GET /handler/` lists the
  handlers, `POST /handler/<name>` runs one). NCCL builds register `dump_nccl_trace_pickle`
  and `dump_nccl_trace_json` (FlightRecorderCuda.cpp: the NCCL recorder, every entry, the
  pickle with stacks); every build registers `fr_trace_json` (control_plane/Handlers.cpp:
  `dump_fr_trace_json(true, true)`, i.e. the non-NCCL recorder's entries not yet
  completed). Checked with torch 2.13 (CPU): `GET /handler/` answers
  `["dump_traceback","pyspy_dump","wait_counter_values","fr_trace_json","ping"]`.
- The NCCL debug-info pipe: with `TORCH_NCCL_DEBUG_INFO_PIPE_FILE=<stem>` and the recorder
  on, each process's heartbeat monitor makes a FIFO `<stem><global rank>.pipe` and reads it
  without blocking (ProcessGroupNCCL.hpp, `DumpPipe`); when it reads anything it dumps
  through the writer above (ProcessGroupNCCL.cpp, `HeartbeatMonitor::runLoop`, which polls
  every `TORCH_NCCL_COORD_CHECK_MILSEC`, 1000 ms by default, when `TORCH_NCCL_DUMP_ON_TIMEOUT`
  is on, its default; otherwise every heartbeat timeout, minutes). NCCL only.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import os
import socket
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from frtrace.dumps.discover import PREFIX_ENV_VARS, default_prefixes

#: What a dump's name may end with after the rank (frtrace reads all of these).
SUFFIXES = ("", ".json", ".pkl", ".pickle", ".gz", ".json.gz", ".pkl.gz", ".pickle.gz")
#: Handlers of the worker server that return a dump, best first, and the suffix of the file.
DUMP_HANDLERS = (
    ("dump_nccl_trace_pickle", ""),
    ("dump_nccl_trace_json", ".json"),
    ("fr_trace_json", ".json"),
)
FRESH_PREFIX = "fresh_trace_rank_"
#: Bytes accepted from a worker server for one dump.
FRESH_LIMIT = 2 << 30
_CHUNK = 1 << 20

Method = Literal["worker_server", "pipe"]


def absolute(path: str, cwd: Path | None) -> Path:
    """A path from a process's environment, relative ones taken from its working folder."""
    p = Path(path)
    if p.is_absolute() or cwd is None:
        return p
    return cwd / p


def _named(env: Mapping[str, str], var: str, cwd: Path | None) -> str:
    """The prefix variable `var` names, relative ones taken from the process's folder."""
    value = env[var]
    return str(absolute(value, cwd)) + ("/" if value.endswith("/") else "")


def writer_prefix(env: Mapping[str, str], cwd: Path | None) -> str:
    """The prefix torch 2.13's DebugInfoWriter writes `<prefix><rank>` to for this environment."""
    for var in PREFIX_ENV_VARS:
        if var in env:
            return _named(env, var, cwd)
    cache = env.get("XDG_CACHE_HOME") or (env.get("HOME") or "/tmp") + "/.cache"
    return f"{cache}/torch/comm_lib_trace_rank_"


def dump_prefixes(env: Mapping[str, str], cwd: Path | None) -> list[str]:
    """Every prefix a rank with this environment may have dumped to, whichever torch it runs:
    those its variables name, and each release's default unless it names one every release
    reads (the second name: the only one up to 2.7)."""
    named = [_named(env, var, cwd) for var in PREFIX_ENV_VARS if var in env]
    if PREFIX_ENV_VARS[-1] in env:
        return list(dict.fromkeys(named))
    return list(dict.fromkeys([*named, *default_prefixes(env)]))


def files_of_rank(prefix: str, rank: int) -> list[Path]:
    """The dump files of `rank` at `prefix` that exist (any entry: the copy checks its kind)."""
    found = []
    for suffix in SUFFIXES:
        path = Path(f"{prefix}{rank}{suffix}")
        with contextlib.suppress(OSError):
            path.lstat()
            found.append(path)
    return found


def files_at(prefix: str) -> list[tuple[int, Path]]:
    """Every `<prefix><rank>[suffix]` entry in the prefix's folder, with its rank."""
    folder, base = os.path.split(prefix)
    found = []
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    for name in names:
        if not name.startswith(base):
            continue
        rest = name[len(base) :]
        for suffix in sorted(SUFFIXES, key=len, reverse=True):
            if suffix and rest.endswith(suffix):
                rest = rest[: -len(suffix)]
                break
        if rest.isascii() and rest.isdigit() and len(rest) <= 9:
            found.append((int(rest), Path(folder or ".") / name))
    return found


def copy_name(prefix: str, src: Path) -> str:
    """The copy's name: the dump's own (its rank stays its trailing number); a dump written to a
    bare folder prefix (`.../3`) is named `trace_rank_3`."""
    return src.name if os.path.basename(prefix) else f"trace_rank_{src.name}"


def copy_file(src: Path, dest: Path) -> int:
    """Copy a regular file without following a link or blocking on a FIFO; keeps its mtime
    (when the rank wrote it). Returns the bytes copied; OSError says why not."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(src, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        tmp = dest.with_name(f".{dest.name}.part")
        copied = 0
        with open(tmp, "wb") as out:
            while chunk := os.read(fd, _CHUNK):
                out.write(chunk)
                copied += len(chunk)
        os.utime(tmp, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.replace(tmp, dest)
        return copied
    finally:
        os.close(fd)


@dataclass(frozen=True)
class FreshResult:
    """What asking one rank for a fresh dump did."""

    method: Method | None
    file: str | None = None  # the name written in OUT
    failure: str | None = None  # why no dump was written (None when one was)
    handler: str | None = None


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _http(path: str, method: str, url: str, timeout: float, limit: int) -> bytes:
    """One request to a worker server; the body, at most `limit` bytes; OSError on failure."""
    conn = _UnixConnection(path, timeout)
    try:
        conn.request(method, url)
        resp = conn.getresponse()
        chunks, size = [], 0
        while chunk := resp.read(_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise OSError(errno.EFBIG, f"answer larger than {limit:,} bytes")
        body = b"".join(chunks)
        if resp.status != 200:
            text = body[:200].decode("utf-8", "replace").strip()
            raise OSError(errno.EIO, f"HTTP {resp.status} for {url}: {text}")
        return body
    except http.client.HTTPException as exc:
        raise OSError(errno.EIO, f"not an HTTP answer ({type(exc).__name__})") from exc
    finally:
        conn.close()


def fresh_from_worker_server(
    socket_path: Path, rank: int, out: Path, timeout: float
) -> FreshResult:
    """Ask a rank's worker server for its recorder's entries; write them into `out`."""
    try:
        if not stat.S_ISSOCK(os.stat(socket_path).st_mode):
            return FreshResult("worker_server", failure=f"{socket_path} is not a socket")
        listing = _http(str(socket_path), "GET", "/handler/", timeout, 1 << 20)
        names = json.loads(listing)
        if not isinstance(names, list):
            return FreshResult("worker_server", failure="GET /handler/ did not list handlers")
        for handler, suffix in DUMP_HANDLERS:
            if handler in names:
                body = _http(str(socket_path), "POST", f"/handler/{handler}", timeout, FRESH_LIMIT)
                name = f"{FRESH_PREFIX}{rank}{suffix}"
                _write(out / name, body)
                return FreshResult("worker_server", file=name, handler=handler)
        listed = ", ".join(str(n)[:40] for n in names[:10])
        return FreshResult("worker_server", failure=f"no Flight Recorder handler ({listed})")
    except (OSError, ValueError) as exc:
        return FreshResult("worker_server", failure=_reason(exc))


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def fresh_through_pipe(
    pipe: Path, dump: Path, rank: int, out: Path, timeout: float, poll: float = 0.1
) -> FreshResult:
    """Write to a rank's debug-info pipe, wait for torch to rewrite its dump, copy it."""
    try:
        if not stat.S_ISFIFO(os.lstat(pipe).st_mode):
            return FreshResult("pipe", failure=f"{pipe} is not a FIFO")
        before = _signature(dump)
        flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(pipe, flags | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return FreshResult(
                    "pipe",
                    failure=f"nobody reads {pipe} (the rank's heartbeat monitor is not running)",
                )
            raise
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                return FreshResult("pipe", failure=f"{pipe} is not a FIFO")
            os.write(fd, b"1")
        finally:
            os.close(fd)
        deadline = time.monotonic() + timeout
        last = before
        while time.monotonic() < deadline:
            time.sleep(poll)
            now = _signature(dump)
            # written anew (another inode, size or time) and no longer growing
            if now is not None and now != before and now == last and now[1] > 0:
                name = f"{FRESH_PREFIX}{rank}"
                copy_file(dump, out / name)
                return FreshResult("pipe", file=name)
            last = now
        return FreshResult(
            "pipe",
            failure=f"no new dump at {dump} within {timeout:g} s (torch reads the pipe every "
            "TORCH_NCCL_COORD_CHECK_MILSEC with TORCH_NCCL_DUMP_ON_TIMEOUT=1, else only every "
            "heartbeat timeout)",
        )
    except OSError as exc:
        return FreshResult("pipe", failure=_reason(exc))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    return str(exc)[:200] or type(exc).__name__


def fresh_dump(
    env: Mapping[str, str], cwd: Path | None, rank: int, out: Path, timeout: float
) -> FreshResult:
    """A fresh dump of one running rank through whichever mechanism its job enabled: the
    worker server first (it answers with the dump and changes nothing on the node), else the
    NCCL pipe; None as method when the job enabled neither."""
    server = env.get("TORCH_WORKER_SERVER_SOCKET")
    result = None
    if server:
        result = fresh_from_worker_server(absolute(server, cwd), rank, out, timeout)
        if result.failure is None:
            return result
    stem = env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
    if stem:
        pipe = absolute(f"{stem}{rank}.pipe", cwd)
        dump = Path(f"{writer_prefix(env, cwd)}{rank}")
        return fresh_through_pipe(pipe, dump, rank, out, timeout)
    return result or FreshResult(None, failure="unavailable")
