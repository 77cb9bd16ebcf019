"""Parse dump files into columns in worker processes; nothing here imports pandas.

A run starts its workers (`start_parsing`) before it imports the analysis and merges, so the
imports overlap the parse instead of adding to it. Results are collected by a background thread and
handed over in a bounded queue, which keeps the workers' backpressure: a slow consumer
stops them, it never buffers the whole job.
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from frtrace.dumps.limits import budgets
from frtrace.dumps.read import decode_inflated, inflate, is_pickle, read_bytes
from frtrace.errors import DumpError, FrtraceError
from frtrace.ranks import check_selection
from frtrace.tables.columns import RankColumns, columnize, columnize_fast
from frtrace.tables.workers import iter_isolated, kill_workers

if TYPE_CHECKING:
    from frtrace.dumps.discover import Discovery

ProgressCallback = Callable[[int, int, int], None]  # files done, files total, entries so far
ParseResult = tuple[int, str, RankColumns | None, str, bool, str]
Item = tuple[str, int]  # path or URL, rank


def tell(
    progress: ProgressCallback | None,
    what: str,
    done: int = 0,
    total: int = 0,
    *,
    lasting: bool = False,
) -> None:
    """Name a step after the reading to a progress hook that listens: one with a `stage`
    method, as the CLI's line (report.progress_line) has; a plain callable hears only of files.
    A `lasting` step (a wait with no end in sight) goes to the hook's `notice` if it has one,
    which the CLI prints even off a terminal: a batch job's log says what the run waits for."""
    notice = getattr(progress, "notice", None) if lasting else None
    if callable(notice):
        notice(what)
        return
    stage = getattr(progress, "stage", None)
    if callable(stage):
        stage(what, done, total)


# Below this much data, starting workers costs more than it saves.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
PARALLEL_MIN_FILES = 8
# Entries received but not yet taken by the consumer, before the collector stops reading
# (~30 MB of columns): enough for a small job to be parsed whole while the analysis imports.
QUEUED_ENTRIES = 1 << 18
POLL = 0.2  # seconds the consumer waits at a time (see Parsing)
CLOSE_WAIT = 5.0  # seconds close() waits for the collecting thread before it kills the workers
SWITCH_INTERVAL = 0.0002  # seconds a thread holds the interpreter lock while another waits


@dataclass(frozen=True)
class Skipped:
    """A file that was not used, and why (one line, for stderr and JSON). `rank`: the rank
    its name gives, when it was read and found unusable: that rank was part of the job (its
    dump is unreadable), which the world size and the waits must still count."""

    file: str
    reason: str
    rank: int | None = None


class NoUsableDumpError(FrtraceError):
    """Every candidate file was skipped; the reasons travel with the error."""

    def __init__(self, message: str, skipped: list[Skipped]) -> None:
        super().__init__(message)
        self.skipped = skipped


@contextmanager
def gc_paused() -> Iterator[None]:
    """Dumps are acyclic trees of small objects: while they are built and walked, the cyclic
    collector would only rescan millions of live containers, so pause it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


MMAP_THRESHOLD = 1 << 20


@lru_cache(maxsize=1)
def _glibc() -> Any:
    """glibc's allocator controls, or None where the C library is not glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 (both must exist)
        return libc
    except (OSError, AttributeError):
        return None


# Jobs with less dump data than this keep glibc's own mmap threshold (see tune_allocator).
TUNE_MIN_BYTES = 2 << 30


def tune_allocator(total_bytes: int | None = None) -> None:
    """Have glibc serve every block of 1 MiB or more by mmap, so freeing it returns it to the
    OS at once, for a job of `total_bytes` of dumps (None: unknown, assume big).

    By default glibc raises its mmap threshold (up to 32 MiB) each time a large block is
    freed, after which the chunk and column arrays of the merge and the analysis' temporaries
    come from a heap that keeps freed memory resident: at 8k ranks, gigabytes of peak RSS.
    Below TUNE_MIN_BYTES the default stays: such a job's peak is far from any budget, and
    fresh pages for every large block cost it page faults (at 1024 ranks, 200,000 of them,
    a quarter of a second of system time).
    """
    if total_bytes is not None and total_bytes < TUNE_MIN_BYTES:
        return
    libc = _glibc()
    if libc is not None:
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD


def return_freed_memory() -> None:
    """Give freed memory inside glibc's heap back to the OS (malloc_trim): thousands of
    per-file blocks of a few hundred KB are freed once compacted, below the mmap threshold."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def parse_file(item: Item) -> ParseResult:
    """Read and columnize one file: (rank, path, columns or None, format, compressed, reason)."""
    with gc_paused():
        return _parse(item)


def _parse(item: Item) -> ParseResult:
    path, rank = item
    try:
        limits = budgets()
        blob, compressed = inflate(read_bytes(Path(path), limits), limits)
        if is_pickle(blob):  # the C parser first; it declines anything unusual
            cols = columnize_fast(blob, rank, limits)
            if cols is not None:
                return rank, path, cols, "pickle", compressed, ""
        raw = decode_inflated(blob, compressed)
        return rank, path, columnize(raw.data, rank, limits), raw.fmt, raw.compressed, ""
    except DumpError as exc:
        return rank, path, None, "", False, str(exc)
    except RecursionError:
        return rank, path, None, "", False, "nested too deeply to be a dump"
    except MemoryError:
        return rank, path, None, "", False, "needs more memory than the parse budget allows"


def lost(item: Item, reason: str) -> ParseResult:
    """The result for a file whose worker was lost (crashed, over budget, stalled)."""
    path, rank = item
    return rank, path, None, "", False, reason


def total_bytes(paths: list[str]) -> int:
    """The files' total size (those that cannot be read count nothing)."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:
            continue
    return total


def default_jobs(paths: list[str], size: int) -> int:
    """Workers to use for files of `size` bytes in all: all cores for a big job, none for a
    few small files."""
    if len(paths) < PARALLEL_MIN_FILES or size < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, len(paths)))


def wanted_items(
    items: list[Item],
    ranks: Iterable[int] | None,
    trace_dir: str,
    prefix: str,
    skipped: list[Skipped],
) -> list[Item]:
    """The items to parse (only `ranks`' when given); the error every engine gives when none
    is left, a folder's files or a store's objects alike."""
    if ranks is not None:
        wanted = set(ranks)
        if items:  # "no dump files found" would be false: name the ranks that are there
            check_selection(wanted, [rank for _path, rank in items])
        items = [item for item in items if item[1] in wanted]
    if not items:
        where = trace_dir + (f" with prefix '{prefix}'" if prefix else "")
        if skipped:
            raise NoUsableDumpError(
                f"no usable dump in {where} ({len(skipped)} file(s) skipped)", skipped
            )
        raise FrtraceError(f"no dump files found in {where}")
    return items


def select_files(found: Discovery, ranks: Iterable[int] | None = None) -> list[Item]:
    """The discovered files to parse, by rank (only `ranks`' when given); an error when none
    is left."""
    items = [(str(f.path), f.rank) for f in found.files]
    return wanted_items(items, ranks, str(found.trace_dir), found.prefix, skipped_by(found))


def skipped_by(found: Discovery) -> list[Skipped]:
    """The files discovery refused, with their reasons."""
    return [Skipped(str(path), reason) for path, reason in found.skipped]


_RESULT, _END, _ERROR = range(3)


class Parsing:
    """Files being parsed by worker processes; iterate for their results as they finish.

    A background thread receives the results, so this thread is free until it asks for them
    (to import the analysis, say). Use it as a context manager: leaving stops the workers,
    whatever happened meanwhile.

    This thread never waits on anything the collecting one holds, and never waits long at a
    time: an interrupt raised at any bytecode (Ctrl-C inside an import) cannot leave the two
    deadlocked, and a signal handler runs within POLL seconds even when the kernel delivered
    the signal to the collecting thread.
    """

    def __init__(self, items: list[Item], jobs: int) -> None:
        self.items = items
        self.order = [rank for _path, rank in items]
        self._results: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        # Entries queued, as two counters with one writer each (no lock to share).
        self._sent = 0  # written by the collecting thread
        self._taken = 0  # written by the consumer
        self._stopping = threading.Event()
        self._closed = False
        self._wake_read, self._wake_write = os.pipe()
        limits = budgets()
        _import_what_workers_import()
        self._thread = threading.Thread(
            target=self._collect, args=(jobs, limits), name="frtrace-parse", daemon=True
        )
        # The collecting thread hands each worker its next file, and needs the interpreter
        # lock for it, while this one writes the files already here into the job's table:
        # a worker must not wait the default 5 ms switch interval for its next file.
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        self._thread.start()

    def _collect(self, jobs: int, limits: Any) -> None:
        try:
            results = iter_isolated(self.items, jobs, parse_file, lost, limits, self._wake_read)
            with contextlib.closing(results):
                for result in results:
                    if not self._put((_RESULT, result)):
                        return
            self._put((_END, None))
        except BaseException as exc:  # handed to the consumer, raised there
            self._put((_ERROR, exc))

    def _put(self, message: tuple[int, Any]) -> bool:
        """Queue a message once there is room (False: stopped meanwhile)."""
        while self._sent - self._taken >= QUEUED_ENTRIES:
            if self._stopping.wait(0.01):
                return False
        if self._stopping.is_set():
            return False
        self._sent += _entries(message)
        self._results.put(message)
        return True

    def __iter__(self) -> Iterator[ParseResult]:
        while True:
            try:
                message = self._results.get(timeout=POLL)
            except queue.Empty:
                continue
            self._taken += _entries(message)
            kind, value = message
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            yield value

    def close(self) -> None:
        """Stop the workers (at once, if results are still coming) and the collecting thread."""
        if self._closed:
            return
        self._closed = True
        sys.setswitchinterval(self._switch)
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        self._thread.join(CLOSE_WAIT)
        if self._thread.is_alive():
            # Stuck: a fork waits for the import lock that an import interrupted at the wrong
            # bytecode left held. Its workers go now; the thread, a daemon, may keep the pipe.
            kill_workers()
            return
        os.close(self._wake_read)
        os.close(self._wake_write)

    def __enter__(self) -> Parsing:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _entries(message: tuple[int, Any]) -> int:
    kind, value = message
    cols = value[2] if kind == _RESULT else None
    return 0 if cols is None else int(cols.n)


def start_parsing(items: list[Item], jobs: int | None = None) -> Parsing:
    """Start parsing `items` in worker processes (`jobs` of them: by default all cores for a
    big job, one for a few small files) with the allocator tuned for the merge that follows."""
    paths = [p for p, _r in items]
    size = total_bytes(paths)
    tune_allocator(size)
    return Parsing(items, job_count(jobs, default_jobs(paths, size)))


def job_count(jobs: int | None, default: int) -> int:
    """The parse processes for `--jobs` (`default` when not given), at most 4 per core."""
    cores = os.cpu_count() or 1
    return default if jobs is None else max(1, min(jobs, 4 * cores))


def _import_what_workers_import() -> None:
    """Workers are forked by the collecting thread while this one may be importing: a module
    this thread is importing stays locked in the child, so everything a worker imports is
    imported here first (the parser's own modules already are), and so is what the thread
    itself would import on first use."""
    import ctypes  # noqa: F401 (workers: PR_SET_PDEATHSIG)

    with contextlib.suppress(ImportError):  # the thread: a fork's first start imports it
        import multiprocessing.popen_fork  # noqa: F401

    with contextlib.suppress(ImportError):  # POSIX only
        import resource  # noqa: F401 (workers: their budgets)
