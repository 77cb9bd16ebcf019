"""Load a job's dumps: discover files, parse them in parallel, build the shared tables.

Parsing is the expensive part (Python's unpickler builds millions of small objects), so files
are parsed in worker processes that turn entries into columns before sending anything back
(frtrace/tables/parse.py; the workers start before the rest is imported). The tables are numpy
columns (frtrace/tables/table.py): no pandas.
Workers are used even for one file: they bound what a hostile file can cost (see workers.py).
One broken dump is skipped with its reason; the others are still analyzed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from frtrace.dumps.discover import Discovery, discover
from frtrace.ranks import rank_ranges
from frtrace.tables.columns import Frame, RankColumns
from frtrace.tables.parse import (
    NoUsableDumpError,
    ParseResult,
    Parsing,
    ProgressCallback,
    Skipped,
    return_freed_memory,
    select_files,
    skipped_by,
    start_parsing,
    tell,
)
from frtrace.tables.repair import (
    FileGroups,
    GroupsSeen,
    Memberships,
    add_global_peers,
    file_groups,
    infer_memberships,
    pg_status_table,
)
from frtrace.tables.table import Table
from frtrace.tables.trace import EntriesBuilder, Trace, file_table


def load_discovered(
    found: Discovery,
    *,
    ranks: Iterable[int] | None = None,
    jobs: int | None = None,
    progress: ProgressCallback | None = None,
) -> Trace:
    """Build the Trace from discovered files; `ranks` limits which files are read at all."""
    with start_parsing(select_files(found, ranks), jobs) as parsing:
        return assemble_parsed(found, parsing, progress)


def assemble_parsed(found: Discovery, parsing: Parsing, progress: ProgressCallback | None) -> Trace:
    """The Trace of a folder's files that `parsing` is parsing (see start_parsing)."""
    return assemble_trace(
        str(found.trace_dir),
        found.prefix,
        parsing,
        len(parsing.items),
        skipped_by(found),
        progress,
        order=parsing.order,
    )


class _Merger:
    """Writes parse results into the job's table (trace.EntriesBuilder) in rank order, as
    they come: while the workers parse the other files, not after them.

    Workers take files in rank order, so results arrive nearly in order; a result that
    overtakes another waits until the ones before it are here (or skipped). Without an
    order, the results are written when all are here.
    """

    def __init__(self, order: list[int] | None, files: int) -> None:
        self.order = order
        self.files = files
        self.builder: EntriesBuilder | None = None
        self.next = 0
        self.waiting: dict[int, RankColumns | None] = {}

    def add(self, rank: int, cols: RankColumns | None) -> None:
        if self.order is None:
            if cols is not None:
                self.waiting[len(self.waiting)] = cols
            return
        self.waiting[rank] = cols
        while self.next < len(self.order) and self.order[self.next] in self.waiting:
            ready = self.waiting.pop(self.order[self.next])
            self.next += 1
            if ready is not None:
                self._write(ready)

    def _write(self, cols: RankColumns) -> None:
        if self.builder is None:  # the first file sizes the job: wrapped ring buffers are alike
            self.builder = EntriesBuilder(cols.n * self.files)
        self.builder.add(cols)

    def finish(self) -> tuple[Table, list[tuple[Frame, ...]]]:
        """The job's table and stacks (results that never came in order go last, by rank)."""
        late = sorted((c for c in self.waiting.values() if c is not None), key=lambda c: c.rank)
        if self.builder is None:
            self.builder = EntriesBuilder(sum(c.n for c in late))
        for cols in late:
            self.builder.add(cols)
        self.waiting = {}
        return self.builder.finish()


def assemble_trace(
    trace_dir: str,
    prefix: str,
    results: Iterable[ParseResult],
    total: int,
    skipped: list[Skipped],
    progress: ProgressCallback | None = None,
    order: list[int] | None = None,
) -> Trace:
    """The Trace from parse results, whichever engine parsed them (the local pool, Dask
    workers): merge, memberships, notes. `skipped` holds the files refused before parsing.

    `order`: the ranks of the files in the order they were handed out (ascending); results
    are then written into the job's table as they arrive instead of all at the end.
    """
    parts: list[RankColumns] = []
    merger = _Merger(order, total)
    file_rows = []
    groups: list[FileGroups] = []
    entries_seen = 0
    for done, (rank, path, cols, fmt, compressed, reason) in enumerate(results, start=1):
        if cols is not None:  # read before the merger writes and releases its columns
            groups.append(file_groups(cols))
        merger.add(rank, cols)
        if cols is None:
            skipped.append(Skipped(path, reason, rank))
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
    tell(progress, f"merging {entries_seen:,} entries")
    # From here on, `parts` keep only their small metadata.
    entries, stacks = merger.finish()
    return_freed_memory()
    recorded = GroupsSeen()
    names: dict[tuple[int, int], str] = {}
    for one in sorted(groups, key=lambda g: g.rank):
        recorded.add(one.rank, one.groups)
        for pg_id, name in one.status_names.items():
            names.setdefault((one.rank, pg_id), name)
    ranks = [p.rank for p in parts]
    members = infer_memberships(entries, parts, ranks, unreadable_ranks(skipped), recorded)
    add_global_peers(entries, members.groups)
    status = pg_status_table(parts, names)
    files = file_table(file_rows)
    warnings, notes = trace_messages(parts, files, members)
    return Trace(
        trace_dir=trace_dir,
        prefix=prefix,
        table=entries,
        group_table=members.groups,
        status_table=status,
        stacks=stacks,
        file_table=files,
        skipped=skipped,
        notes=notes,
        warnings=warnings,
        membership_conflicts=members.conflicts,
        world=members.world,
    )


def unreadable_ranks(skipped: list[Skipped]) -> list[int]:
    """Ranks whose dump file was found but could not be read."""
    return sorted({s.rank for s in skipped if s.rank is not None})


def trace_messages(
    parts: list[RankColumns], files: Table, members: Memberships
) -> tuple[list[str], list[str]]:
    """Warnings (memberships, mixed versions) and notes (-v) about the job, from per-file
    metadata only: the engines that never hold every entry say the same."""
    warnings = list(members.warnings)
    versions = sorted({p.version for p in parts})
    if len(versions) > 1:
        by_version: dict[str, list[int]] = {}
        for version, rank in zip(files["version"], files["rank"], strict=True):
            by_version.setdefault(str(version), []).append(int(rank))
        detail = "; ".join(f"{v}: ranks {rank_ranges(by_version[v])}" for v in sorted(by_version))
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
    progress: ProgressCallback | None = None,
) -> Trace:
    """Discover and load one job's dumps (see `discover` for how files are found)."""
    return load_discovered(discover(trace_dir, prefix), ranks=ranks, jobs=jobs, progress=progress)
