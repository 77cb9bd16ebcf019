"""Turn one rank's dump into compact columns.

This runs inside worker processes, so what it returns is small to send back: numpy arrays
and, for repeated strings (groups, ops, shapes, dtypes, stacks), integer codes plus the short
table of distinct values seen in this file. The parent merges those tables into shared
categories, the way a symbol table interns strings once for the whole job.
"""

from __future__ import annotations

import contextlib
import marshal
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.errors import DumpError

Frame = tuple[str, str, int]

INT_FIELDS = {
    # per-entry counters and times. column name: (dump key, default)
    "record_id": ("record_id", -1),
    "collective_seq_id": ("collective_seq_id", -1),
    "p2p_seq_id": ("p2p_seq_id", 0),
    "op_id": ("op_id", -1),
    "time_created_ns": ("time_created_ns", 0),
    "time_started_ns": ("time_discovered_started_ns", 0),
    "time_completed_ns": ("time_discovered_completed_ns", 0),
}
# Integers that follow from the call site, read from the composite. column name: default
CALL_SITE_INTS = {"pg_id": -1, "timeout_ms": 0}
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
    coalesced: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))

    def release_columns(self) -> None:
        """Drop the arrays once merged: at 16M entries they are gigabytes."""
        empty = np.empty(0, dtype=np.int32)
        self.ints, self.cats = {}, {}
        self.duration_ms = self.is_p2p = self.retired = self.coalesced = empty
        self.stacks = Interned(empty, [])


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
        pass
    try:  # unset times are None in pickles: common, so keep this path fast
        return np.array([default if v is None else v for v in values], dtype=np.int64)
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


def intern_equal(values: list[Any], keys: Iterable[Any]) -> Interned:
    """Intern values that may be unhashable (lists of dicts, shapes) without serializing them.

    A cheap hashable key per value narrows the candidates and `==` (in C) confirms; a key that
    cannot be hashed falls back to the value's marshal bytes. Used for stacks and call-site
    fields, which repeat per call site: 3x cheaper than serializing every value.
    """
    buckets: dict[Any, list[tuple[Any, int]]] = {}
    reps: list[Any] = []

    def code_of(value: Any, key: Any) -> int:
        try:
            bucket = buckets.setdefault(key, [])
        except TypeError:
            bucket = buckets.setdefault(_key(value), [])
        for rep, code in bucket:
            if rep == value:
                return code
        bucket.append((value, len(reps)))
        reps.append(value)
        return len(reps) - 1

    codes = np.fromiter(map(code_of, values, keys), dtype=np.int32, count=len(values))
    return Interned(codes, reps)


def _stack_key(frames: Any) -> Any:
    try:
        return (len(frames), frames[-1]["line"], frames[len(frames) // 2]["line"])
    except (TypeError, KeyError, IndexError):
        return [frames]  # unhashable: intern_equal falls back to exact bytes


def intern_stacks(frames_col: list[Any]) -> Interned:
    """Each distinct stack once, as tuples of (name, filename, line)."""
    interned = intern_equal(frames_col, map(_stack_key, frames_col))
    return Interned(interned.codes, [_frames(r) for r in interned.uniques])


# Fields that are (nearly) a function of the call site: interned together as one composite.
COMPOSITE = (
    "process_group", "profiling_name", "state", "input_sizes", "output_sizes", "input_dtypes",
    "output_dtypes", "thread_id", "thread_name", "is_p2p", "retired", "timeout_ms", "pg_id",
)  # fmt: skip
_DEFAULTS: dict[str, Any] = {
    "process_group": ("", ""), "profiling_name": "", "state": "", "input_sizes": None,
    "output_sizes": None, "input_dtypes": None, "output_dtypes": None, "thread_id": "",
    "thread_name": "", "is_p2p": False, "retired": False, "timeout_ms": None, "pg_id": None,
}  # fmt: skip
_OPTIONAL = {"thread_id", "thread_name", "retired"}  # absent in old versions: not worth a note


def _composite_rows(entries: list[dict[str, Any]], missing: list[str]) -> list[tuple[Any, ...]]:
    try:
        return list(map(operator.itemgetter(*COMPOSITE), entries))
    except KeyError:
        absent = {k for k in COMPOSITE if any(k not in e for e in entries)}
        missing.extend(sorted(absent - _OPTIONAL))
        return [tuple(e.get(k, _DEFAULTS[k]) for k in COMPOSITE) for e in entries]


def intern_rows(rows: list[tuple[Any, ...]], sites: np.ndarray) -> Interned:
    """Composite rows keyed by call site, group, op and state (the rest follows from those)."""
    keys = zip(sites.tolist(), map(operator.itemgetter(0, 1, 2), rows), strict=True)
    return intern_equal(rows, keys)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _split(composite: Interned, index: int, convert: Any) -> Interned:
    """One column of the composite: its own codes, via the (few) distinct composites."""
    labels = intern([convert(row[index]) for row in composite.uniques])
    return Interned(labels.codes[composite.codes], labels.uniques)


def _scalar(composite: Interned, index: int, dtype: Any, default: Any) -> np.ndarray:
    values = []
    for row in composite.uniques:
        try:
            values.append(default if row[index] is None else dtype(row[index]))
        except (TypeError, ValueError):
            values.append(default)
    table = np.array(values or [default], dtype=dtype)
    return table[composite.codes]


def _pg_part(part: int) -> Any:
    def get(pg: Any) -> str:
        try:
            return str(pg[part]) if len(pg) > part else ""
        except TypeError as exc:
            raise DumpError(f"malformed process_group in an entry ({pg!r})") from exc

    return get


def _shape(value: Any) -> str:
    return repr(value) if isinstance(value, list) else "[]"


def _dtypes(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def coalesced_parts(pg: np.ndarray, seq: np.ndarray, is_p2p: np.ndarray) -> np.ndarray:
    """Collective entries sharing their (group, seq) with another: parts of one coalesced op.

    Done per rank in the workers, where it is a small numpy pass, not a hash of millions.
    """
    out = np.zeros(len(pg), dtype=bool)
    idx = np.flatnonzero(~is_p2p)
    if len(idx):
        key = pg[idx].astype(np.int64) * (1 << 32) + (seq[idx] & 0xFFFFFFFF)
        _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        out[idx] = counts[inverse] > 1
    return out


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
    stacks = intern_stacks(_column(entries, "frames", None, []))
    composite = intern_rows(_composite_rows(entries, missing), stacks.codes)
    at = {name: i for i, name in enumerate(COMPOSITE)}
    pg_codes = _split(composite, at["process_group"], _pg_part(0))
    cats: dict[str, Interned] = {
        "pg_name": pg_codes,
        "pg_desc": _split(composite, at["process_group"], _pg_part(1)),
    }
    for col in STR_FIELDS:
        cats[col] = _split(composite, at[col], _text)
    for col in LIST_FIELDS:
        cats[col] = _split(composite, at[col], _dtypes if col.endswith("dtypes") else _shape)
    for col, default in CALL_SITE_INTS.items():
        ints[col] = _scalar(composite, at[col], np.int64, default)
    is_p2p = _scalar(composite, at["is_p2p"], bool, False)
    retired = _scalar(composite, at["retired"], bool, False)
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
        coalesced=coalesced_parts(pg_codes.codes, ints["collective_seq_id"], is_p2p),
    )
