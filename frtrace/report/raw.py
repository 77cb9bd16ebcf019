"""Raw mode (`-j`): the normalized entries themselves, as JSON records or a side-by-side table."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, TextIO, cast

import numpy as np
import pandas as pd
from tabulate import tabulate

from frtrace.tables.trace import Trace

ENTRY_FIELDS = (
    "rank",
    "pg_name",
    "pg_desc",
    "record_id",
    "pg_id",
    "collective_seq_id",
    "p2p_seq_id",
    "op_id",
    "backend",
    "op",
    "profiling_name",
    "is_p2p",
    "coalesced",
    "src",
    "dst",
    "global_src",
    "global_dst",
    "input_sizes",
    "input_dtypes",
    "input_numel",
    "output_sizes",
    "output_dtypes",
    "output_numel",
    "state",
    "time_created_ns",
    "time_started_ns",
    "time_completed_ns",
    "duration_ms",
    "retired",
    "timeout_ms",
    "thread_id",
    "thread_name",
    "stack_id",
)
_UNSET_IF_ZERO = {"time_created_ns", "time_started_ns", "time_completed_ns"}
_UNSET_IF_NEGATIVE = {"src", "dst", "global_src", "global_dst", "stack_id"}


def _category_value(column: str, value: Any) -> Any:
    text = str(value)
    if column.endswith("_sizes"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    if column.endswith("_dtypes"):
        return text.split(",") if text else []
    return text


def _column_values(entries: pd.DataFrame, column: str) -> list[Any]:
    series = entries[column]
    if isinstance(series.dtype, pd.CategoricalDtype):
        table = [_category_value(column, c) for c in series.cat.categories]
        return [table[c] if c >= 0 else None for c in series.cat.codes.tolist()]
    values = series.tolist()
    if column in _UNSET_IF_ZERO:
        return [v or None for v in values]
    if column in _UNSET_IF_NEGATIVE:
        return [None if v < 0 else v for v in values]
    if column == "duration_ms":
        return [None if math.isnan(v) else v for v in values]
    return values


def entry_records(trace: Trace, entries: pd.DataFrame, with_frames: bool = False) -> Iterator[dict]:
    """One plain dict per entry, ordered by rank then record, with unset values as None."""
    entries = entries.sort_values(["rank", "pos"], kind="stable")
    columns = {c: _column_values(entries, c) for c in ENTRY_FIELDS}
    names = list(columns)
    for row in zip(*columns.values(), strict=True):
        record = dict(zip(names, row, strict=True))
        if with_frames:
            sid = record["stack_id"]
            record["frames"] = (
                [{"name": n, "filename": f, "line": ln} for n, f, ln in trace.stacks[sid]]
                if sid is not None
                else []
            )
        yield record


def write_entries_json(
    trace: Trace, entries: pd.DataFrame, out: TextIO, with_frames: bool = False
) -> None:
    """A JSON array, one object per entry, streamed so large jobs do not double memory."""
    out.write("[")
    first = True
    for record in entry_records(trace, entries, with_frames):
        out.write("\n  " if first else ",\n  ")
        out.write(json.dumps(record))
        first = False
    out.write("\n]\n" if not first else "]\n")


def _cell(row: Any) -> str:
    op = str(row.op)
    if row.is_p2p and row.op in ("send", "recv"):
        peer = row.global_dst if row.op == "send" else row.global_src
        op = f"{op} {'->' if row.op == 'send' else '<-'}{peer}"
    dtype = f" {row.input_dtypes}" if str(row.input_dtypes) else ""
    return f"{op} {row.input_sizes}{dtype} {row.state}"


def entries_table(entries: pd.DataFrame) -> str:
    """Side by side, one column per rank, one row per (group, sequence number)."""
    if entries.empty:
        return "(no entries)"
    df = entries.copy()
    df["kind"] = np.where(df["is_p2p"], "p2p", "")
    df["seq"] = np.where(df["is_p2p"], df["p2p_seq_id"], df["collective_seq_id"])
    df["nth"] = df.groupby(["rank", "pg_name", "kind", "seq"], observed=True).cumcount()
    df["cell"] = [_cell(r) for r in df.itertuples(index=False)]
    key = ["pg_name", "pg_desc", "kind", "seq", "nth"]
    order = df.groupby(key, observed=True)["time_created_ns"].min().rename("t")
    table = df.pivot_table(index=key, columns="rank", values="cell", aggfunc="first", observed=True)
    table = table.join(order).sort_values(["t", "pg_name", "seq", "nth"]).drop(columns="t")
    rows = []
    for index, cells in table.iterrows():
        pg_name, pg_desc, kind, seq, _nth = cast(tuple[Any, ...], index)
        label = f"{pg_name} ({pg_desc})"
        seq_text = f"p2p#{seq}" if kind else f"#{seq}"
        rows.append([label, seq_text, *["" if pd.isna(c) else c for c in cells]])
    headers = ["group", "seq", *[f"rank {r}" for r in table.columns]]
    return tabulate(rows, headers=headers, tablefmt="simple")
