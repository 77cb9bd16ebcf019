"""Raw mode at scale (`-j --engine dask --raw-output DIR`): the entries as Parquet files.

A JSON array of 100,000 ranks x 2,000 entries is hundreds of gigabytes of text nobody reads;
Parquet is what a notebook, DuckDB or Spark reads back. The rows and values are those of
`frtrace -j` (report/raw.py): one row per entry, ordered by rank then record, unset values as
nulls, sizes as lists of shapes, dtypes as lists of names (and `frames` with
--print-stack-trace). Files are written a slice of ranks at a time (`part-00000.parquet`, ...).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from frtrace.errors import FrtraceError
from frtrace.report.raw import entry_records
from frtrace.tables.trace import Trace

ROWS_PER_FILE = 1 << 20


def write_entries_parquet(
    trace: Trace, entries: pd.DataFrame, folder: Path, with_frames: bool = False
) -> list[Path]:
    """Write the entries under `folder` (created; it must hold no .parquet file yet)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise FrtraceError("--raw-output needs pyarrow: pip install 'frtrace[dask]'") from exc
    if folder.exists() and not folder.is_dir():
        raise FrtraceError(f"--raw-output {folder}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FrtraceError(f"cannot create {folder}: {exc.strerror or exc}") from exc
    if any(folder.glob("*.parquet")):
        raise FrtraceError(f"--raw-output {folder}: holds .parquet files already; give a new one")
    written: list[Path] = []
    batch: list[dict] = []

    def flush() -> None:
        path = folder / f"part-{len(written):05d}.parquet"
        try:
            pq.write_table(pa.Table.from_pylist(batch), path)
        except OSError as exc:
            raise FrtraceError(f"cannot write {path}: {exc.strerror or exc}") from exc
        written.append(path)
        batch.clear()

    for record in entry_records(trace, entries, with_frames):
        batch.append(record)
        if len(batch) >= ROWS_PER_FILE:
            flush()
    if batch or not written:
        flush()
    return written
