"""Raw mode at scale (`-j --engine dask --raw-output DIR`): the entries as Parquet files.

A JSON array of 100,000 ranks x 2,000 entries is hundreds of gigabytes of text nobody reads;
Parquet is what a notebook, DuckDB or Spark reads back. The rows and values are those of
`frtrace -j` (report/raw.py): one row per entry, ordered by rank then record, unset values as
nulls, sizes as lists of shapes, dtypes as lists of names (and `frames` with
--print-stack-trace). Every file has the same schema (SCHEMA), so a folder of them reads as one
table. The Dask engine's workers write one file per partition of ranks (engine/raw.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from frtrace.errors import FrtraceError

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
    from frtrace.report.raw import ENTRY_FIELDS

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
    from frtrace.dumps.store import filesystem, is_url

    if not is_url(where):
        return open(where, "wb")  # closed by the caller's `with`
    fs, path = filesystem(where, storage_options)
    return fs.open(path, "wb")


def prepare_folder(where: str, storage_options: dict[str, Any] | None = None) -> None:
    """Create the output folder (a path or a URL); refuse one that holds Parquet files already,
    so that no stale part of an earlier run is read back with this one."""
    from frtrace.dumps.store import filesystem, is_url, local_path

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
