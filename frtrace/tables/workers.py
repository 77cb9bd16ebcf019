"""Parse files in child processes, so that one hostile file costs one line, not the run.

Each worker parses one file at a time under an address-space limit (the budget
max_parse_memory above what it had when the file started) and a CPU-time limit (parse_seconds
plus parse_seconds_per_mib of the file), with core dumps off. The parent knows which file each
worker holds: a worker that crashes (a pickle whose nested tuple key overflows the C stack),
runs out of its budgets (a memo-shared tuple used as a dict key takes exponential time to hash)
or stalls is replaced, and only its file is skipped, with the reason. Workers ignore
SIGINT (the parent decides), die with the parent (PR_SET_PDEATHSIG on Linux), and are stopped
when the parent stops, whatever the reason (SIGTERM, SIGINT, an error).
"""

from __future__ import annotations

import contextlib
import io
import mmap
import multiprocessing
import os
import pickle
import shutil
import signal
import tempfile
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from typing import Any

from frtrace.dumps.limits import Budgets, set_budgets

Item = tuple[str, int]  # path, rank
STALL_FACTOR = 10.0  # wall seconds allowed per CPU second of a file's parse budget
Parse = Callable[[Item], Any]
Failed = Callable[[Item, str], Any]  # builds the result for a file whose worker was lost

# What abort() cleans up: this process's live workers and spool folders.
_LIVE_WORKERS: set[int] = set()
_SCRATCH: set[str] = set()


def kill_workers() -> None:
    """SIGKILL this process's parse workers, without waiting for them."""
    for pid in list(_LIVE_WORKERS):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def abort() -> None:
    """Kill this process's parse workers and remove its spool folders, for a process about to
    end at once (os._exit on SIGTERM or Ctrl-C) rather than unwind: nothing may wait here."""
    kill_workers()
    for path in list(_SCRATCH):
        for _attempt in range(5):  # a thread or a dying worker may still write into it
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                break


@contextlib.contextmanager
def scratch_dir() -> Iterator[str]:
    """A private temporary folder, removed on the way out and by abort(). Its name is filed
    before the folder is made, so that abort() always knows of it: a stop signal's handler
    runs in the main thread at any bytecode, whichever thread the kernel gave the signal to
    (a store's I/O thread, say), so blocking it in this thread alone would not keep it out
    between the making and the filing."""
    while True:
        path = os.path.join(tempfile.gettempdir(), f"frtrace-{os.urandom(6).hex()}")
        _SCRATCH.add(path)
        try:
            os.mkdir(path, 0o700)  # as tempfile.mkdtemp makes it: private to this user
            break
        except FileExistsError:
            _SCRATCH.discard(path)
    try:
        yield path
    finally:
        _SCRATCH.discard(path)
        shutil.rmtree(path, ignore_errors=True)


def _pool_context() -> Any:
    # fork shares the already-imported modules with the workers, so they start in milliseconds.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _address_space() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def limit_memory(extra: int) -> None:
    """Let this process grow by at most `extra` bytes of address space (never raise a limit
    set from outside above its hard value)."""
    now = _address_space()
    if now is not None:
        _set_soft_limit("RLIMIT_AS", now + extra)


def limit_cpu(seconds: int) -> None:
    """Stop this process (SIGXCPU) once it has used `seconds` more CPU time."""
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _set_soft_limit("RLIMIT_CPU", int(usage.ru_utime + usage.ru_stime) + 1 + seconds)


def _set_soft_limit(name: str, want: int) -> None:
    """Set a resource's soft limit to `want`, capped by its hard limit (POSIX only)."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to set
        return
    which = getattr(resource, name)
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (want, hard))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    # The parent may have died (killed, or ended by a signal) before the line above: nothing
    # would signal this process then, and its copy of the parent's pipe end keeps it waiting.
    if os.getppid() != parent:
        os._exit(0)


def _worker(
    conn: Connection, others: list[Connection], parse: Parse, limits: Budgets, parent: int
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _die_with_parent(parent)
    for other in others:  # the parent's ends of other workers' pipes: not ours to hold
        other.close()
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    set_budgets(limits)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        limit_memory(limits.max_parse_memory)
        limit_cpu(limits.parse_cpu_seconds(_size(message[0])))
        send_result(conn, parse(message))


# Results of at least this many bytes of arrays travel in shared memory (Linux' memfd).
SHARED_MIN_BYTES = 1 << 14


def send_result(conn: Connection, result: Any) -> None:
    """Send a result whose numpy arrays travel out of band: a small pickled head, then the
    arrays' bytes (no pickled copy of them).

    Where the OS has memfd (Linux), the bytes go into an anonymous shared-memory file whose
    descriptor is passed over the socket: the worker never waits for the parent to read a
    quarter of a megabyte through a socket buffer, and goes on to its next file at once; the
    parent maps the bytes instead of copying them. Elsewhere they are written to the pipe.
    """
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw().cast("B") for b in buffers]
    sizes = [r.nbytes for r in raws]
    if hasattr(os, "memfd_create") and sum(sizes) >= max(1, SHARED_MIN_BYTES):
        fd = os.memfd_create("frtrace-result", os.MFD_CLOEXEC)
        try:
            _write_all(fd, raws)
            conn.send((head, sizes, True))
            reduction.send_handle(conn, fd, os.getppid())
        finally:
            os.close(fd)
        return
    conn.send((head, sizes, False))
    _write_all(conn.fileno(), raws)


def _write_all(fd: int, raws: list[memoryview]) -> None:
    for raw in raws:
        view = raw
        while len(view):
            view = view[os.write(fd, view) :]


def recv_result(conn: Connection) -> Any:
    """The other end of send_result: the arrays become views of one block of bytes, mapped
    from the shared-memory file (privately: writable, copied only where written) or read
    from the pipe (one copy instead of three)."""
    head, sizes, shared = conn.recv()
    total = sum(sizes)
    if shared:
        view = memoryview(_mapped(reduction.recv_handle(conn), total))
    else:
        view = memoryview(bytearray(total))
        with io.FileIO(conn.fileno(), closefd=False) as pipe:
            got = 0
            while got < total:
                n = pipe.readinto(view[got:])
                if not n:
                    raise EOFError("worker closed its pipe mid-result")
                got += n
    parts = []
    at = 0
    for size in sizes:
        parts.append(view[at : at + size])
        at += size
    return pickle.loads(head, buffers=parts)


def _mapped(fd: int, size: int) -> mmap.mmap:
    try:
        if os.fstat(fd).st_size < size:
            raise EOFError("worker's result is shorter than announced")
        return mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


@dataclass
class _Worker:
    process: Any
    conn: Connection
    item: Item | None = None
    started: float = 0.0
    allowed: float = 0.0  # wall seconds before the parent gives up on it


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if name == "SIGXCPU":
            return (
                "parsing stopped: over its CPU-time budget (parse_seconds, parse_seconds_per_mib)"
            )
        hint = " (out of the parse memory budget?)" if name in ("SIGABRT", "SIGKILL") else ""
        return f"the parser crashed on this file (killed by {name}){hint}"
    return f"the parser exited on this file (status {code})"


def iter_isolated(
    items: list[Item],
    jobs: int,
    parse: Parse,
    failed: Failed,
    limits: Budgets,
    stop: int | None = None,
) -> Generator[Any, None, None]:
    """parse(item) for every item in up to `jobs` worker processes, yielding as they finish;
    an item whose worker dies or overruns its time yields failed(item, reason) instead.

    `stop`: a file descriptor that, once readable, ends the iteration (and the workers) even
    while it waits for a result: how another thread stops it.
    """
    ctx = _pool_context()
    todo: deque[Item] = deque(items)
    workers: list[_Worker] = []

    def start() -> _Worker:
        parent_end, child_end = ctx.Pipe()
        others = [w.conn for w in workers]
        process = ctx.Process(
            target=_worker, args=(child_end, others, parse, limits, os.getpid()), daemon=True
        )
        process.start()
        _LIVE_WORKERS.add(process.pid)
        child_end.close()
        worker = _Worker(process, parent_end)
        workers.append(worker)
        return worker

    def assign(worker: _Worker) -> bool:
        """Hand the worker the next file, if any; False if its pipe is broken."""
        if todo:
            worker.item = todo.popleft()
            worker.started = time.monotonic()
            # Wall time: the CPU budget stops a busy parse; this only catches one that blocks.
            # Generous, since on an overloaded machine (load 7 on 2 cores, 8k files) a parse
            # waits for a core for many times its CPU time, and a skipped dump is a wrong verdict.
            worker.allowed = STALL_FACTOR * limits.parse_cpu_seconds(_size(worker.item[0])) + 60.0
            try:
                worker.conn.send(worker.item)
            except OSError:
                return False
        else:
            worker.item = None
        return True

    def retire(worker: _Worker) -> None:
        workers.remove(worker)
        worker.conn.close()
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join()
        _LIVE_WORKERS.discard(worker.process.pid)

    try:
        for _ in range(max(1, min(jobs, len(items)))):
            assign(start())
        while any(w.item is not None for w in workers):
            busy = [w for w in workers if w.item is not None]
            deadline = min(w.started + w.allowed for w in busy)
            timeout = max(0.0, deadline - time.monotonic())
            waited: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in busy]
            ready = set(wait(waited if stop is None else [*waited, stop], timeout))
            if stop is not None and stop in ready:
                return
            for worker in busy:
                item = worker.item
                assert item is not None
                if worker.conn in ready:
                    # The next file goes out before this result is read: the worker finds it
                    # waiting when its send is done, instead of waiting for this process.
                    sent = assign(worker)
                    try:
                        if not sent:
                            raise EOFError
                        result = recv_result(worker.conn)
                    except (EOFError, OSError, RuntimeError, pickle.UnpicklingError, ValueError):
                        if worker.item is not None:  # handed out but never started
                            todo.appendleft(worker.item)
                        worker.process.join(5)
                        retire(worker)
                        yield failed(item, _describe_exit(worker.process.exitcode))
                        if todo:
                            assign(start())
                        continue
                    yield result
                elif worker.process.sentinel in ready:
                    worker.process.join()
                    retire(worker)
                    yield failed(item, _describe_exit(worker.process.exitcode))
                    if todo:
                        assign(start())
                elif time.monotonic() - worker.started > worker.allowed:
                    retire(worker)
                    yield failed(
                        item,
                        f"parsing stalled for {worker.allowed:g} s "
                        f"({STALL_FACTOR:g}x its CPU budget + 60 s); stopped",
                    )
                    if todo:
                        assign(start())
    finally:
        for worker in list(workers):
            if worker.item is not None:  # stopped early: its file's result is not wanted
                worker.process.kill()
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
            worker.conn.close()
        for worker in workers:
            worker.process.join(0.5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            _LIVE_WORKERS.discard(worker.process.pid)
