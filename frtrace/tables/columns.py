"""Turn one rank's dump into compact columns.

This runs inside worker processes, so what it returns is small to send back: numpy arrays
and, for repeated strings (groups, ops, shapes, dtypes, stacks), integer codes plus the short
table of distinct values seen in this file. The parent merges those tables into shared
categories, the way a symbol table interns strings once for the whole job.
"""

from __future__ import annotations

import contextlib
import marshal
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
    """Factorize hashable values into int32 codes and the distinct values in first-seen order.

    `map(dict.setdefault, ...)` runs in C: each value maps to the index of its first
    occurrence, and np.unique turns those indices into dense codes.
    """
    table: dict[Any, int] = {}
    first = np.fromiter(
        map(table.setdefault, values, range(len(values))), dtype=np.int64, count=len(values)
    )
    _, codes = np.unique(first, return_inverse=True)
    return Interned(codes.astype(np.int32), list(table))


def _column(entries: list[dict[str, Any]], key: str, default: Any, missing: list[str]) -> list[Any]:
    try:
        return [e[key] for e in entries]
    except KeyError:
        missing.append(key)
        return [e.get(key, default) for e in entries]


def _ints(values: list[Any], default: int) -> np.ndarray:
    """int64 column; None (pickle's unset) becomes `default`, strings are parsed."""
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


def _key(value: Any) -> bytes:
    try:
        return marshal.dumps(value)
    except ValueError:  # not marshallable: cannot come from a real dump, keep it distinct
        return repr(value).encode()


def _keys(values: list[Any]) -> list[bytes]:
    """Cheap exact keys for nested plain data (stacks, shapes): marshal, mapped in C."""
    try:
        return list(map(marshal.dumps, values))
    except ValueError:
        return list(map(_key, values))


def _shape_text(key: bytes) -> str:
    value = marshal.loads(key)
    return repr(value) if isinstance(value, list) else "[]"


def _dtype_text(key: bytes) -> str:
    value = marshal.loads(key)
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


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


def intern_stacks(frames_col: list[Any]) -> Interned:
    """Intern stacks: a cheap key narrows the candidates and list equality (in C) confirms.

    Stacks repeat per call site; serializing every one would cost 3x more.
    """
    buckets: dict[Any, list[tuple[Any, int]]] = {}
    reps: list[Any] = []

    def code_of(frames: Any) -> int:
        try:
            key: Any = (len(frames), frames[-1]["line"], frames[len(frames) // 2]["line"])
        except (TypeError, KeyError, IndexError):
            key = _key(frames)
        bucket = buckets.setdefault(key, [])
        for rep, code in bucket:
            if rep == frames:
                return code
        bucket.append((frames, len(reps)))
        reps.append(frames)
        return len(reps) - 1

    codes = np.fromiter(map(code_of, frames_col), dtype=np.int32, count=len(frames_col))
    return Interned(codes, [_frames(r) for r in reps])


def _relabel(interned: Interned, convert: Any) -> Interned:
    """Turn keys into display values; keys that render alike merge into one code."""
    labels = [convert(u) for u in interned.uniques]
    merged = intern(labels)
    return Interned(merged.codes[interned.codes], merged.uniques)


def columnize(data: dict[str, Any], rank: int) -> RankColumns:
    """Columns of one decoded dump. Missing fields (older versions, JSON) get defaults."""
    entries = data.get("entries") or []
    if not all(isinstance(e, dict) for e in entries):
        i = next(i for i, e in enumerate(entries) if not isinstance(e, dict))
        raise DumpError(f"entry {i} is {type(entries[i]).__name__}, not a dict")
    missing: list[str] = []
    n = len(entries)
    ints = {}
    for col, (key, default) in INT_FIELDS.items():
        values = _column(entries, key, None, missing)
        if col == "collective_seq_id" and key in missing and n and "seq_id" in entries[0]:
            missing.remove(key)
            values = [e.get("seq_id") for e in entries]  # format 2.2 called it seq_id
        ints[col] = _ints(values, default)
    duration = _floats(_column(entries, "duration_ms", None, []))
    is_p2p = np.array(_column(entries, "is_p2p", False, missing), dtype=bool)
    retired = np.array(_column(entries, "retired", False, []), dtype=bool)
    cats: dict[str, Interned] = {}
    pgs = intern(_keys(_column(entries, "process_group", ("", ""), missing)))
    try:
        pg_values = [marshal.loads(k) for k in pgs.uniques]
        names = [str(pg[0]) for pg in pg_values]
        descs = [str(pg[1]) if len(pg) > 1 else "" for pg in pg_values]
    except (TypeError, IndexError, KeyError) as exc:
        raise DumpError(f"malformed process_group in an entry ({exc})") from exc
    cats["pg_name"] = _relabel(Interned(pgs.codes, names), lambda v: v)
    cats["pg_desc"] = _relabel(Interned(pgs.codes, descs), lambda v: v)
    for col, key in STR_FIELDS.items():
        values = _column(entries, key, "", missing if col != "thread_id" else [])
        cats[col] = _relabel(intern(values), lambda v: v if isinstance(v, str) else str(v))
    for col, key in LIST_FIELDS.items():
        keys = intern(_keys(_column(entries, key, None, missing)))
        cats[col] = _relabel(keys, _dtype_text if col.endswith("dtypes") else _shape_text)
    stacks = intern_stacks(_column(entries, "frames", None, []))
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
