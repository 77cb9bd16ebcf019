"""Turn one rank's dump into compact columns.

This runs inside worker processes, so what it returns is small to send back: numpy arrays
and, for repeated strings (groups, ops, shapes, dtypes, stacks), integer codes plus the short
table of distinct values seen in this file. The parent merges those tables into shared
categories, the way a symbol table interns strings once for the whole job.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.errors import DumpError

Frame = tuple[str, str, int]

INT_FIELDS = {
    # column name: (dump key, default)
    "record_id": ("record_id", -1),
    "pg_id": ("pg_id", -1),
    "collective_seq_id": ("collective_seq_id", -1),
    "p2p_seq_id": ("p2p_seq_id", 0),
    "op_id": ("op_id", -1),
    "time_created_ns": ("time_created_ns", 0),
    "time_started_ns": ("time_discovered_started_ns", 0),
    "time_completed_ns": ("time_discovered_completed_ns", 0),
    "timeout_ms": ("timeout_ms", 0),
}
STR_FIELDS = {
    "profiling_name": "profiling_name",
    "state": "state",
    "thread_id": "thread_id",
    "thread_name": "thread_name",
}
LIST_FIELDS = {
    "input_sizes": "input_sizes",
    "output_sizes": "output_sizes",
    "input_dtypes": "input_dtypes",
    "output_dtypes": "output_dtypes",
}
CATEGORY_COLUMNS = ("pg_name", "pg_desc", *STR_FIELDS, *LIST_FIELDS)


@dataclass
class Interned:
    """Codes into a short table of distinct values (per file until merged)."""

    codes: np.ndarray
    uniques: list[Any]


@dataclass
class RankColumns:
    """One rank's entries as columns, plus the small per-file metadata."""

    rank: int
    n: int
    ints: dict[str, np.ndarray]
    duration_ms: np.ndarray
    is_p2p: np.ndarray
    retired: np.ndarray
    cats: dict[str, Interned]
    stacks: Interned  # uniques are tuples of frames
    version: str
    comm_lib_version: str
    pg_config: dict[str, Any]
    pg_status: dict[str, Any]
    missing_fields: list[str] = field(default_factory=list)


def intern(values: list[Any]) -> Interned:
    """Factorize hashable values into int32 codes and the distinct values in first-seen order."""
    table: dict[Any, int] = {}
    setdefault = table.setdefault
    codes = np.fromiter(
        (setdefault(v, len(table)) for v in values), dtype=np.int32, count=len(values)
    )
    return Interned(codes, list(table))


def _column(entries: list[dict[str, Any]], key: str, default: Any, missing: list[str]) -> list[Any]:
    try:
        return [e[key] for e in entries]
    except KeyError:
        missing.append(key)
        return [e.get(key, default) for e in entries]


def _ints(values: list[Any], default: int) -> np.ndarray:
    """int64 column; None (pickle's unset) and 0 (JSON's unset) both become `default`/0."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            try:
                out[i] = default if v is None else int(v)
            except (TypeError, ValueError, OverflowError):
                out[i] = default
        return out


def _floats(values: list[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        out = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            with contextlib.suppress(TypeError, ValueError):
                out[i] = float(v)
        return out


def _list_key(value: Any) -> str:
    return repr(value) if isinstance(value, list) else "[]"


def _dtype_key(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def _stack_key(frames: Any) -> Any:
    return repr(frames) if frames else ""


def _frames(frames: Any) -> tuple[Frame, ...]:
    if not isinstance(frames, list):
        return ()
    out = []
    for f in frames:
        if isinstance(f, dict):
            out.append(
                (str(f.get("name", "")), str(f.get("filename", "")), int(f.get("line") or 0))
            )
    return tuple(out)


def columnize(data: dict[str, Any], rank: int) -> RankColumns:
    """Columns of one decoded dump. Missing fields (older versions, JSON) get defaults."""
    entries = data.get("entries") or []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise DumpError(f"entry {i} is {type(e).__name__}, not a dict")
    missing: list[str] = []
    n = len(entries)
    ints = {}
    for col, (key, default) in INT_FIELDS.items():
        values = _column(entries, key, None, missing)
        if col == "collective_seq_id" and key in missing and n and "seq_id" in entries[0]:
            missing.remove(key)
            values = [e.get("seq_id") for e in entries]  # format 2.2 called it seq_id
        ints[col] = _ints(values, default)
    duration = _floats(
        [np.nan if v is None else v for v in _column(entries, "duration_ms", None, [])]
    )
    is_p2p = np.array(_column(entries, "is_p2p", False, missing), dtype=bool)
    retired = np.array(_column(entries, "retired", False, []), dtype=bool)
    pgs = _column(entries, "process_group", ("", ""), missing)
    cats: dict[str, Interned] = {}
    try:
        cats["pg_name"] = intern([str(pg[0]) for pg in pgs])
        cats["pg_desc"] = intern([str(pg[1]) if len(pg) > 1 else "" for pg in pgs])
    except (TypeError, IndexError, KeyError) as exc:
        raise DumpError(f"malformed process_group in an entry ({exc})") from exc
    for col, key in STR_FIELDS.items():
        values = _column(entries, key, "", missing if col != "thread_id" else [])
        cats[col] = intern([v if isinstance(v, str) else str(v) for v in values])
    for col, key in LIST_FIELDS.items():
        values = _column(entries, key, None, missing)
        keyfn = _dtype_key if col.endswith("dtypes") else _list_key
        cats[col] = intern(list(map(keyfn, values)))
    frames_col = [e.get("frames") for e in entries]
    stack_keys = intern(list(map(_stack_key, frames_col)))
    _, first_seen = np.unique(stack_keys.codes, return_index=True)
    stacks = Interned(stack_keys.codes, [_frames(frames_col[i]) for i in first_seen.tolist()])
    pg_config = data.get("pg_config") or {}
    pg_status = data.get("pg_status") or {}
    return RankColumns(
        rank=rank,
        n=n,
        ints=ints,
        duration_ms=duration,
        is_p2p=is_p2p,
        retired=retired,
        cats=cats,
        stacks=stacks,
        version=str(data.get("version", "")),
        comm_lib_version=str(data.get("comm_lib_version", "")),
        pg_config=pg_config if isinstance(pg_config, dict) else {},
        pg_status=pg_status if isinstance(pg_status, dict) else {},
        missing_fields=sorted(set(missing)),
    )
