"""Load a job's dumps: discover files, parse them in parallel, build the shared tables.

Parsing is the expensive part (Python's unpickler builds millions of small objects), so files
are parsed in worker processes that turn entries into columns before sending anything back.
Workers are used even for one file: they bound what a hostile file can cost (see workers.py).
One broken dump is skipped with its reason; the others are still analyzed.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from frtrace.dumps.discover import Discovery, DumpFile, discover
from frtrace.dumps.limits import budgets
from frtrace.dumps.read import decode_inflated, inflate, is_pickle, read_bytes
from frtrace.errors import DumpError, FrtraceError
from frtrace.tables.columns import RankColumns, columnize, columnize_fast
from frtrace.tables.repair import (
    Memberships,
    add_global_peers,
    infer_memberships,
    pg_status_frame,
)
from frtrace.tables.trace import Chunk, Skipped, Trace, compact, files_frame, merge_chunks
from frtrace.tables.workers import iter_isolated

Progress = Callable[[int, int, int], None]  # files done, files total, entries so far
ParseResult = tuple[int, str, RankColumns | None, str, bool, str]

# Below this much data, starting workers costs more than it saves.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
PARALLEL_MIN_FILES = 8


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


def tune_allocator() -> None:
    """Have glibc serve every block of 1 MiB or more by mmap, so freeing it returns it to the
    OS at once.

    By default glibc raises its mmap threshold (up to 32 MiB) each time a large block is
    freed, after which the chunk and column arrays of the merge and the analysis' temporaries
    come from a heap that keeps freed memory resident: at 8k ranks, gigabytes of peak RSS.
    """
    libc = _glibc()
    if libc is not None:
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD


def return_freed_memory() -> None:
    """Give freed memory inside glibc's heap back to the OS (malloc_trim): thousands of
    per-file blocks of a few hundred KB are freed once compacted, below the mmap threshold."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def parse_file(item: tuple[str, int]) -> ParseResult:
    """Read and columnize one file: (rank, path, columns or None, format, compressed, reason)."""
    with gc_paused():
        return _parse(item)


def _parse(item: tuple[str, int]) -> ParseResult:
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


def _lost(item: tuple[str, int], reason: str) -> ParseResult:
    path, rank = item
    return rank, path, None, "", False, reason


def default_jobs(files: list[DumpFile]) -> int:
    """Workers to use: all cores for a big job, none for a few small files."""
    if len(files) < PARALLEL_MIN_FILES:
        return 1
    total = 0
    for f in files:
        try:
            total += f.path.stat().st_size
        except OSError:
            continue
    if total < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, len(files)))


def iter_parsed(items: list[tuple[str, int]], jobs: int) -> Iterator[ParseResult]:
    """Parse files in `jobs` isolated worker processes, yielding as they finish."""
    yield from iter_isolated(items, jobs, parse_file, _lost, budgets())


def load_discovered(
    found: Discovery,
    *,
    ranks: Iterable[int] | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> Trace:
    """Build the Trace from discovered files; `ranks` limits which files are read at all."""
    files = found.files
    if ranks is not None:
        wanted = set(ranks)
        files = [f for f in files if f.rank in wanted]
    skipped = [Skipped(str(path), reason) for path, reason in found.skipped]
    if not files:
        where = f"{found.trace_dir}" + (f" with prefix '{found.prefix}'" if found.prefix else "")
        if skipped:
            raise NoUsableDumpError(
                f"no usable dump in {where} ({len(skipped)} file(s) skipped)", skipped
            )
        raise FrtraceError(f"no dump files found in {where}")
    tune_allocator()
    n_jobs = default_jobs(files) if jobs is None else max(1, min(jobs, 4 * (os.cpu_count() or 1)))
    items = [(str(f.path), f.rank) for f in files]
    parsed = iter_parsed(items, n_jobs)
    return assemble_trace(
        str(found.trace_dir),
        found.prefix,
        parsed,
        len(items),
        skipped,
        progress,
        order=[rank for _path, rank in items],
    )


# Compact parsed files into a chunk every this many entries (~120 MB of columns).
CHUNK_ENTRIES = 1 << 20


class _Merger:
    """Collects parse results and compacts them, in rank order, into chunks as they come.

    Workers take files in rank order, so results arrive nearly in order; a result that
    overtakes another waits until the ones before it are here (or skipped).
    """

    def __init__(self, order: list[int] | None) -> None:
        self.order = order
        self.next = 0
        self.waiting: dict[int, RankColumns | None] = {}
        self.batch: list[RankColumns] = []
        self.batch_entries = 0
        self.chunks: list[Chunk] = []

    def add(self, rank: int, cols: RankColumns | None) -> None:
        if self.order is None:
            if cols is not None:
                self.batch.append(cols)
            return
        self.waiting[rank] = cols
        while self.next < len(self.order) and self.order[self.next] in self.waiting:
            ready = self.waiting.pop(self.order[self.next])
            self.next += 1
            if ready is not None:
                self.batch.append(ready)
                self.batch_entries += ready.n
        if self.batch_entries >= CHUNK_ENTRIES:
            self._flush()

    def _flush(self) -> None:
        if self.batch:
            self.chunks.append(compact(self.batch))
            self.batch, self.batch_entries = [], 0
            return_freed_memory()

    def finish(self) -> list[Chunk]:
        """Every chunk, in rank order (results that never came in order go last, sorted)."""
        late = sorted(
            ((r, c) for r, c in self.waiting.items() if c is not None), key=lambda rc: rc[0]
        )
        if late and self.batch:
            self._flush()
        self.batch.extend(c for _r, c in late)
        self.waiting = {}
        self._flush()
        return self.chunks


def assemble_trace(
    trace_dir: str,
    prefix: str,
    results: Iterable[ParseResult],
    total: int,
    skipped: list[Skipped],
    progress: Progress | None = None,
    order: list[int] | None = None,
) -> Trace:
    """The Trace from parse results, whichever engine parsed them (the local pool, Dask
    workers): merge, memberships, notes. `skipped` holds the files refused before parsing.

    `order`: the ranks of the files in the order they were handed out (ascending); results
    are then compacted as they arrive (see trace.Chunk) instead of all at the end.
    """
    parts: list[RankColumns] = []
    merger = _Merger(order)
    file_rows = []
    entries_seen = 0
    for done, (rank, path, cols, fmt, compressed, reason) in enumerate(results, start=1):
        merger.add(rank, cols)
        if cols is None:
            skipped.append(Skipped(path, reason))
        else:
            parts.append(cols)
            entries_seen += cols.n
            file_rows.append(
                {
                    "path": path,
                    "rank": rank,
                    "format": fmt,
                    "compressed": compressed,
                    "version": cols.version,
                    "comm_lib_version": cols.comm_lib_version,
                    "entries": cols.n,
                }
            )
        if progress is not None:
            progress(done, total, entries_seen)
    if not parts:
        raise NoUsableDumpError(
            f"no usable dump in {trace_dir} ({len(skipped)} file(s) skipped)", skipped
        )
    entries, stacks = merge_chunks(merger.finish())  # parts keep only their small metadata
    return_freed_memory()
    members = infer_memberships(entries, parts, [p.rank for p in parts])
    add_global_peers(entries, members.groups)
    status = pg_status_frame(parts, entries)
    files_df = files_frame(file_rows)
    warnings, notes = trace_messages(parts, files_df, members)
    return Trace(
        trace_dir=trace_dir,
        prefix=prefix,
        entries=entries,
        groups=members.groups,
        pg_status=status,
        stacks=stacks,
        files=files_df,
        skipped=skipped,
        notes=notes,
        warnings=warnings,
        membership_conflicts=members.conflicts,
    )


def trace_messages(
    parts: list[RankColumns], files_df: pd.DataFrame, members: Memberships
) -> tuple[list[str], list[str]]:
    """Warnings (memberships, mixed versions) and notes (-v) about the job, from per-file
    metadata only: the engines that never hold every entry say the same."""
    warnings = list(members.warnings)
    versions = sorted({p.version for p in parts})
    if len(versions) > 1:
        by_version = files_df.groupby("version")["rank"].apply(lambda r: sorted(r)[:8])
        detail = "; ".join(f"{v}: ranks {list(r)}" for v, r in by_version.items())
        warnings.append(f"dumps mix format versions ({detail})")
    notes = list(members.notes)
    for part in parts:
        notes.extend(f"rank {part.rank}: {note}" for note in part.notes)
    missing = sorted({f for p in parts for f in p.missing_fields})
    if missing:
        notes.append(f"fields absent from some dumps, given defaults: {', '.join(missing)}")
    return warnings, notes


def load_trace(
    trace_dir: str | Path | None = None,
    prefix: str | None = None,
    *,
    ranks: Iterable[int] | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> Trace:
    """Discover and load one job's dumps (see `discover` for how files are found)."""
    return load_discovered(discover(trace_dir, prefix), ranks=ranks, jobs=jobs, progress=progress)
