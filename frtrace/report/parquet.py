"""Raw mode at scale (`-j --engine dask --raw-output DIR`): the entries as Parquet files.

A JSON array of 100,000 ranks x 2,000 entries is hundreds of gigabytes of text nobody reads;
Parquet is what a notebook, DuckDB or Spark reads back. The rows and values are those of
`frtrace -j` (report/raw.py): one row per entry, ordered by rank then record, unset values as
nulls, sizes as lists of shapes, dtypes as lists of names (and `frames` with
--print-stack-trace). Every file has the same schema (SCHEMA), so a folder of them reads as one
table. The Dask engine's workers write one file per partition of ranks (`write_raw`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, cast

from frtrace.cluster.assemble import assemble, fresh, gather_summaries, job_table
from frtrace.cluster.dask import homes, release, share, submit_partitions, task_error
from frtrace.dumps.store import filesystem, is_url, local_path, protocol, resolved_options
from frtrace.errors import FrtraceError
from frtrace.report.raw import ENTRY_FIELDS, entry_records
from frtrace.tables.columns import Frame
from frtrace.tables.parse import ParseResult, ProgressCallback, Skipped, tell
from frtrace.tables.select import matching_groups
from frtrace.tables.table import Table
from frtrace.tables.trace import Trace

ROWS_PER_WRITE = 65_536  # records built at a time: bounds the Python objects alive
_INTS = (
    "rank", "record_id", "pg_id", "collective_seq_id", "p2p_seq_id", "op_id", "src", "dst",
    "global_src", "global_dst", "input_numel", "output_numel", "time_created_ns",
    "time_started_ns", "time_completed_ns", "timeout_ms", "stack_id",
)  # fmt: skip
_STRINGS = (
    "pg_name", "pg_desc", "backend", "op", "profiling_name", "state", "thread_id", "thread_name",
)  # fmt: skip
_BOOLS = ("is_p2p", "coalesced", "retired")


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise FrtraceError("--raw-output needs pyarrow: pip install 'frtrace[dask]'") from exc
    return pa, pq


def schema(with_frames: bool = False) -> Any:
    """The Arrow schema of the entries, in the field order of `frtrace -j`."""
    pa, _pq = _pyarrow()
    types: dict[str, Any] = {name: pa.int64() for name in _INTS}
    types.update({name: pa.string() for name in _STRINGS})
    types.update({name: pa.bool_() for name in _BOOLS})
    types["duration_ms"] = pa.float64()
    for side in ("input", "output"):
        types[f"{side}_sizes"] = pa.list_(pa.list_(pa.int64()))
        types[f"{side}_dtypes"] = pa.list_(pa.string())
    fields = [pa.field(name, types[name]) for name in ENTRY_FIELDS]
    if with_frames:
        frame = pa.struct(
            [pa.field("name", pa.string()), pa.field("filename", pa.string()),
             pa.field("line", pa.int64())]
        )  # fmt: skip
        fields.append(pa.field("frames", pa.list_(frame)))
    return pa.schema(fields)


def _chunks(records: Iterable[dict], size: int) -> Iterator[list[dict]]:
    it = iter(records)
    while chunk := list(islice(it, size)):
        yield chunk


def write_records(
    records: Iterable[dict],
    where: str,
    with_frames: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """Write records (frtrace.report.raw.entry_records) to one Parquet file at a path or an
    fsspec URL, a chunk at a time; returns the rows written."""
    pa, pq = _pyarrow()
    table_schema = schema(with_frames)
    rows = 0
    try:
        with _open(where, storage_options) as out, pq.ParquetWriter(out, table_schema) as writer:
            for chunk in _chunks(records, ROWS_PER_WRITE):
                writer.write_table(pa.Table.from_pylist(chunk, schema=table_schema))
                rows += len(chunk)
    except OSError as exc:
        raise FrtraceError(f"cannot write {where}: {exc.strerror or exc}") from exc
    return rows


def _open(where: str, storage_options: dict[str, Any] | None) -> Any:

    if not is_url(where):
        return open(where, "wb")  # closed by the caller's `with`
    fs, path = filesystem(where, storage_options)
    return fs.open(path, "wb")


def prepare_folder(where: str, storage_options: dict[str, Any] | None = None) -> None:
    """Create the output folder (a path or a URL); refuse one that holds Parquet files already,
    so that no stale part of an earlier run is read back with this one."""

    local = local_path(where) if is_url(where) else Path(where)
    if local is not None:
        if local.exists() and not local.is_dir():
            raise FrtraceError(f"--raw-output {where}: not a folder")
        try:
            local.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FrtraceError(f"cannot create {where}: {exc.strerror or exc}") from exc
        stale = any(local.glob("*.parquet"))
    else:
        fs, path = filesystem(where, storage_options)
        try:
            fs.makedirs(path, exist_ok=True)
            stale = bool(fs.glob(path.rstrip("/") + "/*.parquet"))
        except Exception as exc:  # the store's own errors: one line
            raise FrtraceError(f"cannot use {where}: {type(exc).__name__}: {exc}") from exc
    if stale:
        raise FrtraceError(f"--raw-output {where}: holds .parquet files already; give a new one")


# ------------------------------------------------- written by a Dask cluster's workers
# `-j --engine dask --raw-output DIR`: each worker writes its partition's entries; the client
# only infers the memberships every partition needs (frtrace.cluster.assemble.assemble).


@dataclass
class RawResult:
    """What raw mode reports on stderr once the workers have written the files."""

    entries: int
    files: list[str]
    skipped: list[Skipped]
    warnings: list[str]
    notes: list[str]
    groups: Table


@dataclass
class _StackHolder:
    """Stands in for a Trace in entry_records, which reads only `stacks[stack_id]`."""

    stacks: dict[int, tuple[Frame, ...]]


def write_raw(
    client: Any,
    items: list[tuple[str, int]],
    remote: bool,
    storage_options: dict[str, Any],
    trace_dir: str,
    skipped: list[Skipped],
    pg_filters: list[str],
    with_frames: bool,
    out: str,
    progress: ProgressCallback | None = None,
) -> RawResult:
    """Parse on the workers, infer memberships on the client, write Parquet on the workers."""

    # The dumps' options fit the output only in the same kind of store (an endpoint, say).
    same_store = protocol(out) == protocol(trace_dir)
    out_options = resolved_options(out, storage_options if same_store else None)
    prepare_folder(out, out_options)
    parts, parsed, given = submit_partitions(client, items, remote, storage_options, progress)
    shared: list[Any] = []
    try:
        summaries = gather_summaries(client, parsed, given, len(items), progress)
        job = assemble(trace_dir, summaries, skipped)
        groups, stack_ids, warnings, notes = job.groups, job.stack_ids, job.warnings, job.notes
        names = matching_groups(groups, pg_filters)
        base = out.rstrip("/")
        paths = [f"{base}/part-{k:05d}.parquet" for k in range(len(parts))]
        shared = [share(client, x) for x in (groups, stack_ids, names)]
        writes = [
            client.submit(
                write_partition, p, *shared, with_frames, path, out_options, pure=False, **home
            )
            for p, path, home in zip(parsed, paths, homes(client, parsed), strict=True)
        ]
        total = _written(client, writes, progress)
    except FrtraceError:
        raise
    except Exception as exc:  # a worker lost repeatedly, a store refusing a write
        raise FrtraceError(f"the Dask raw-mode tasks failed: {task_error(exc)}") from exc
    finally:
        release(parsed + shared)
    return RawResult(total, paths, skipped, warnings, notes, groups)


def _written(client: Any, writes: list[Any], progress: ProgressCallback | None) -> int:
    """Entries the workers wrote, the progress line counting the partitions as they finish."""
    from distributed import as_completed

    total, step = 0, "writing Parquet on the workers"
    tell(progress, step, 0, len(writes))
    for done, write in enumerate(as_completed(writes, loop=client.loop), start=1):
        total += int(write.result())
        tell(progress, step, done, len(writes))
    return total


def write_partition(
    results: list[ParseResult],
    groups: Table,
    stack_ids: dict[tuple[Frame, ...], int],
    names: set[str] | None,
    with_frames: bool,
    where: str,
    storage_options: dict[str, Any],
) -> int:
    """Stage 2: this partition's entries, as `frtrace -j` gives them, into one Parquet file."""
    import pandas as pd

    parts = [fresh(cols) for _r, _p, cols, *_rest in results if cols is not None]
    if parts:
        table, stacks = job_table(parts, groups, stack_ids)
        if names is not None:
            table = table.take(table.is_label("pg_name", names.__contains__))
        entries = table.to_pandas()
    else:
        entries, stacks = pd.DataFrame(), []
    frames = {stack_ids[s]: s for s in stacks}
    holder = cast(Trace, _StackHolder(frames))
    records = entry_records(holder, entries, with_frames) if len(entries) else iter(())
    return write_records(records, where, with_frames, storage_options)
