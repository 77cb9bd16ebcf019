"""Turn one rank's dump into compact columns.

This runs inside worker processes, so what it returns is small to send back: numpy arrays
and, for repeated strings (groups, ops, shapes, dtypes, stacks), integer codes plus the short
table of distinct values seen in this file. The parent merges those tables into shared
categories, the way a symbol table interns strings once for the whole job. Every field is
checked against the format on the way (see check.py): this is where untrusted data ends.
"""

from __future__ import annotations

import marshal
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.dumps.limits import Budgets, budgets
from frtrace.dumps.read import validate
from frtrace.errors import DumpError
from frtrace.tables.check import (
    FRAME_KEYS,
    INT32,
    INT64,
    SEQ_ID_ONLY,
    Checker,
    clean_pg_config,
    clean_pg_status,
    format_version,
    meta_text,
    seq_id_only,
)
from frtrace.tables.table import LABEL_BYTES

try:  # the C fast path; absent when frtrace was installed without a compiler
    from frtrace.tables import _fastdump
except ImportError:  # pragma: no cover - depends on the build
    _fastdump = None  # type: ignore[assignment]

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
# A wrong type in these skips the file; in the other integer fields it becomes unset.
REQUIRED_INTS = {"record_id", "collective_seq_id", "p2p_seq_id"}
# Counters that fit 32 bits in any real job, stored as int32 in the merged table (halving them
# matters at millions of rows): checked to fit at the edge.
INT32_FIELDS = ("pg_id", "collective_seq_id", "p2p_seq_id", "op_id")
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
    notes: list[str] = field(default_factory=list)  # values made unset or cut, for -v

    def __sizeof__(self) -> int:
        """Its columns' bytes, for Dask's weighing of a parse task's result (see Table)."""
        arrays = [*self.ints.values(), self.duration_ms, self.is_p2p, self.retired, self.coalesced]
        arrays += [self.stacks.codes, *(c.codes for c in self.cats.values())]
        uniques = len(self.stacks.uniques) + sum(len(c.uniques) for c in self.cats.values())
        return object.__sizeof__(self) + sum(a.nbytes for a in arrays) + uniques * LABEL_BYTES

    def release_columns(self) -> None:
        """Drop the arrays once merged: at 16M entries they are gigabytes."""
        empty = np.empty(0, dtype=np.int32)
        self.ints, self.cats = {}, {}
        self.duration_ms = self.is_p2p = self.retired = self.coalesced = empty
        self.stacks = Interned(empty, [])


SMALL_INTERN = 256


def intern(values: list[Any]) -> Interned:
    """Factorize hashable values into int32 codes and the distinct values in first-seen order.

    `map(dict.setdefault, ...)` runs in C: each value maps to the index of its first
    occurrence, and np.unique turns those indices into dense codes. A few values (a file's
    distinct call sites, split into fields) are coded directly: np.unique's fixed cost, a
    dozen times per file, would exceed the work.
    """
    table: dict[Any, int] = {}
    if len(values) <= SMALL_INTERN:
        dense = [table.setdefault(v, len(table)) for v in values]
        return Interned(np.array(dense, dtype=np.int32), list(table))
    first = np.fromiter(
        map(table.setdefault, values, range(len(values))), dtype=np.int64, count=len(values)
    )
    _, codes = np.unique(first, return_inverse=True)
    return Interned(codes.astype(np.int32), list(table))


def _column(entries: list[dict[str, Any]], key: str, default: Any, missing: list[str]) -> list[Any]:
    try:
        return list(map(operator.itemgetter(key), entries))
    except KeyError:
        missing.append(key)
        return [e.get(key, default) for e in entries]


def _key(value: Any) -> bytes:
    try:
        return marshal.dumps(value)  # linear even for memo-shared structures (marshal refs)
    except ValueError:  # too deep to marshal: cannot come from a real dump, keep it distinct
        return b"id:%d" % id(value)


def _frames(frames: Any, clip: Any) -> tuple[Frame, ...]:
    """Validated frames (see check.Checker.frames) as (name, filename, line) tuples."""
    if not isinstance(frames, list):
        return ()
    return tuple((clip(f["name"]), clip(f["filename"]), f["line"]) for f in frames)


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


def intern_keyed(values: list[Any], keys: list[Any]) -> Interned:
    """intern_equal's result (same codes, same first-seen order) without a Python call per value.

    Values that share a key almost always share the value too (a call site's stack, or its
    composite row): each key's first value is found by `dict.setdefault` in C, every value is
    compared to it with `map(operator.eq, ...)` in C, and only the values that differ from
    their key's first value (rank-dependent sizes, or a crafted file) take intern_equal's path.
    """
    n = len(values)
    table: dict[Any, int] = {}
    try:
        first = np.fromiter(map(table.setdefault, keys, range(n)), dtype=np.int64, count=n)
    except TypeError:  # a key that cannot be hashed
        return intern_equal(values, keys)
    same = np.fromiter(
        map(operator.eq, values, map(values.__getitem__, first.tolist())), dtype=bool, count=n
    )
    heads = np.fromiter(table.values(), dtype=np.int64, count=len(table))  # ascending
    codes = np.searchsorted(heads, first).astype(np.int32)  # keys in first-seen order
    if same.all():
        return Interned(codes, [values[i] for i in heads.tolist()])
    odd = np.flatnonzero(~same)
    rest = intern_equal([values[i] for i in odd.tolist()], [keys[i] for i in odd.tolist()])
    codes[odd] = rest.codes + len(heads)
    reps = [values[i] for i in heads.tolist()] + rest.uniques
    # Renumber into first-seen order, as intern_equal numbers them.
    kept, at = np.unique(codes, return_index=True)
    order = kept[np.argsort(at, kind="stable")]
    renumber = np.empty(len(reps), dtype=np.int32)
    renumber[order] = np.arange(len(order), dtype=np.int32)
    return Interned(renumber[codes], [reps[i] for i in order.tolist()])


def _stack_keys(frames_col: list[Any]) -> list[Any]:
    """A cheap key per stack (depth, innermost and outermost lines), by C-level maps; a column
    with an empty, missing or malformed stack takes the per-stack path (_stack_key)."""
    try:
        inner = map(operator.itemgetter("line"), map(operator.itemgetter(0), frames_col))
        outer = map(operator.itemgetter("line"), map(operator.itemgetter(-1), frames_col))
        return list(zip(map(len, frames_col), inner, outer, strict=True))
    except (TypeError, KeyError, IndexError):
        return list(map(_stack_key, frames_col))


def _stack_key(frames: Any) -> Any:
    try:
        return (len(frames), frames[-1]["line"], frames[len(frames) // 2]["line"])
    except (TypeError, KeyError, IndexError):
        return [frames]  # unhashable: intern_equal falls back to exact bytes


def intern_stacks(
    frames_col: list[Any], clip: Any = None, check: Checker | None = None
) -> Interned:
    """Each distinct stack once, as tuples of (name, filename, line). The stacks are checked
    once interned (`check`), where there are few of them; a malformed one becomes ()."""
    clip = clip or (lambda text: text)
    check = check or Checker(budgets())
    interned = intern_keyed(frames_col, _stack_keys(frames_col))
    uniques = check.stacks(interned.uniques)
    return Interned(interned.codes, [_frames(r, clip) for r in uniques])


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


def _key_fields_checked(rows: list[tuple[Any, ...]], check: Checker) -> list[tuple[Any, ...]]:
    """Before interning, which hashes the group, name and state and compares lists: check those
    three over every entry, and bound the lengths of the lists (C-level passes)."""
    if not rows:
        return rows
    at = {name: i for i, name in enumerate(COMPOSITE)}
    columns: dict[str, list[Any]] = {
        name: list(map(operator.itemgetter(at[name]), rows))
        for name in ("process_group", "profiling_name", "state", *LIST_FIELDS)
    }
    for name in LIST_FIELDS:
        check.bounded(columns[name], name)
    fixed = {
        "process_group": check.process_groups(columns["process_group"]),
        "profiling_name": check.strings(columns["profiling_name"], "profiling_name", required=True),
        "state": check.strings(columns["state"], "state", required=True),
    }
    changed = {name: v for name, v in fixed.items() if v is not columns[name]}
    if not changed:
        return rows
    return [
        tuple(changed[name][i] if name in changed else row[j] for j, name in enumerate(COMPOSITE))
        for i, row in enumerate(rows)
    ]


def _uniques_checked(composite: Interned, check: Checker) -> None:
    """The other call-site fields, checked on the distinct composites only (in place)."""
    uniques = composite.uniques
    if not uniques:
        return
    columns = [list(c) for c in zip(*uniques, strict=True)]
    at = {name: i for i, name in enumerate(COMPOSITE)}
    checks: dict[str, Any] = {
        "thread_id": lambda v: check.strings(v, "thread_id", required=False),
        "thread_name": lambda v: check.strings(v, "thread_name", required=False),
        "is_p2p": lambda v: check.bools(v, "is_p2p", required=True),
        "retired": lambda v: check.bools(v, "retired", required=False),
        "timeout_ms": lambda v: check.opt_ints(v, "timeout_ms", INT64, required=False),
        "pg_id": lambda v: check.opt_ints(v, "pg_id", INT32, required=True),
        "input_sizes": lambda v: check.sizes(v, "input_sizes"),
        "output_sizes": lambda v: check.sizes(v, "output_sizes"),
        "input_dtypes": lambda v: check.dtypes(v, "input_dtypes"),
        "output_dtypes": lambda v: check.dtypes(v, "output_dtypes"),
    }
    codes = composite.codes
    check.entry_of = lambda index: int(np.flatnonzero(codes == index)[0])
    check.unit = ("distinct call site", "distinct call sites")
    changed = False
    for name, run in checks.items():
        given = columns[at[name]]
        result = run(given)
        if result is not given:
            columns[at[name]] = result
            changed = True
    check.entry_of, check.unit = (lambda index: index), ("entry", "entries")
    if changed:
        composite.uniques = list(zip(*columns, strict=True))


def intern_rows(rows: list[tuple[Any, ...]], sites: np.ndarray) -> Interned:
    """Composite rows keyed by call site, group, op and state (the rest follows from those)."""
    keys = list(zip(sites.tolist(), map(operator.itemgetter(0, 1, 2), rows), strict=True))
    return intern_keyed(rows, keys)


class _Clip:
    """Cuts strings longer than the budget max_string_chars, counting how many it cut: a
    megabyte profiling name would otherwise cost seconds in every table that shows it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.cut = 0

    def __call__(self, text: str) -> str:
        if len(text) <= self.limit:
            return text
        self.cut += 1
        return f"{text[: self.limit]}...[{len(text) - self.limit:,} more characters]"


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


def _shape(value: Any) -> str:
    """Validated shapes as JSON-compatible text: '[[3, 4], [5]]'."""
    if value is None:
        return "[]"
    if type(value) is list and all(type(s) is list for s in value):
        return repr(value)
    return repr([list(s) for s in value])


def _dtypes(value: Any) -> str:
    return "" if value is None else ",".join(value)


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


def columnize(data: dict[str, Any], rank: int, limits: Budgets | None = None) -> RankColumns:
    """Columns of one decoded dump, every field checked against the format (see check.py).

    Missing fields (older versions, JSON) get defaults; a wrong type in a needed field raises
    DumpError naming it; optional fields that are wrong become unset, with a note. A format
    before 2.0 raises DumpError naming it (see check.format_version).
    """
    limits = limits or budgets()
    version = format_version(data)
    entries = data.get("entries") or []
    if len(entries) > limits.max_entries:
        raise DumpError(
            f"{len(entries):,} entries, above the budget max_entries ({limits.max_entries:,})"
        )
    if not set(map(type, entries)) <= {dict}:
        i = next(i for i, e in enumerate(entries) if type(e) is not dict)
        raise DumpError(f"entry {i} is {type(entries[i]).__name__}, not a dict")
    check = Checker(limits)
    clip = _Clip(limits.max_string_chars)
    missing: list[str] = []
    n = len(entries)
    ints = {}
    for col, (key, default) in INT_FIELDS.items():
        values = _column(entries, key, None, missing)
        if col == "collective_seq_id" and key in missing and seq_id_only(entries):
            raise DumpError(SEQ_ID_ONLY)
        ints[col] = check.ints(
            values,
            key,
            default,
            required=col in REQUIRED_INTS,
            bounds=INT32 if col in INT32_FIELDS else INT64,
        )
    duration = check.floats(_column(entries, "duration_ms", None, []), "duration_ms")
    stacks = intern_stacks(check.frame_lists(_column(entries, "frames", None, [])), clip, check)
    rows = _key_fields_checked(_composite_rows(entries, missing), check)
    composite = intern_rows(rows, stacks.codes)
    _uniques_checked(composite, check)
    return _assemble(
        data, version, rank, n, ints, duration, stacks, composite, check, clip, missing
    )


def _assemble(
    data: dict[str, Any],
    version: str,
    rank: int,
    n: int,
    ints: dict[str, np.ndarray],
    duration: np.ndarray,
    stacks: Interned,
    composite: Interned,
    check: Checker,
    clip: _Clip,
    missing: list[str],
) -> RankColumns:
    """The columns from the checked composite: shared by columnize and columnize_fast, so the
    two paths cannot drift apart after the per-entry work."""
    limits = check.limits
    at = {name: i for i, name in enumerate(COMPOSITE)}
    pg_codes = _split(composite, at["process_group"], lambda pg: clip(pg[0]))
    cats: dict[str, Interned] = {
        "pg_name": pg_codes,
        "pg_desc": _split(composite, at["process_group"], lambda pg: clip(pg[1])),
    }
    for col in STR_FIELDS:
        cats[col] = _split(composite, at[col], clip)
    for col in LIST_FIELDS:
        if col.endswith("dtypes"):
            cats[col] = _split(composite, at[col], lambda v: clip(_dtypes(v)))
        else:
            cats[col] = _split(composite, at[col], _shape)
    for col, default in CALL_SITE_INTS.items():
        ints[col] = _scalar(composite, at[col], np.int64, default)
    is_p2p = _scalar(composite, at["is_p2p"], bool, False)
    retired = _scalar(composite, at["retired"], bool, False)
    notes = check.notes
    pg_config = clean_pg_config(data.get("pg_config"), limits, notes)
    pg_status = clean_pg_status(data.get("pg_status"), limits, notes)
    if clip.cut:
        notes.append(
            f"{clip.cut} distinct string(s) longer than {limits.max_string_chars:,} characters "
            "(the budget max_string_chars) were cut"
        )
    return RankColumns(
        rank=rank,
        n=n,
        ints=ints,
        duration_ms=duration,
        is_p2p=is_p2p,
        retired=retired,
        cats=cats,
        stacks=stacks,
        version=version,
        comm_lib_version=meta_text(data.get("comm_lib_version"), "comm_lib_version", notes),
        pg_config=pg_config,
        pg_status=pg_status,
        missing_fields=sorted(set(missing)),
        coalesced=coalesced_parts(pg_codes.codes, ints["collective_seq_id"], is_p2p),
        notes=notes,
    )


# ---- the C fast path ------------------------------------------------------------------------

# The integer fields in the order _fastdump returns them: INT_FIELDS' keys, then the `seq_id`
# of formats before 2.0 (read only to refuse such a file, as columnize does).
FAST_INTS = (*(key for key, _ in INT_FIELDS.values()), "seq_id")
# Every entry field the C module reads, in the order of its table (_fastdump.c FIELD_NAMES):
# the integers, the duration and stack, then the call-site composite; and a frame's keys.
FAST_FIELDS = (*FAST_INTS, "duration_ms", "frames", *COMPOSITE)
FAST_LAYOUT = (FAST_FIELDS, FRAME_KEYS, len(FAST_INTS))
_ABSENT = 2  # _fastdump's per-entry state of an integer field: 0 an int, 1 None, 2 absent


def built_layout() -> tuple[Any, ...] | None:
    """(FIELDS, FRAME_FIELDS, N_INTS) as the built C module declares them, to hold against
    FAST_LAYOUT; None when it was not built. A build older than these attributes gives Nones."""
    if _fastdump is None:
        return None
    return tuple(getattr(_fastdump, name, None) for name in ("FIELDS", "FRAME_FIELDS", "N_INTS"))


def fast_path_available() -> bool:
    """Whether the C extension was built and reads the fields declared here, in this order
    (else every file takes the Python path): a build left from an older _fastdump.c, not
    rebuilt after a pull, would fill the wrong columns."""
    return built_layout() == FAST_LAYOUT


def columnize_fast(
    blob: bytes | bytearray, rank: int, limits: Budgets | None = None
) -> RankColumns | None:
    """columnize(SafeUnpickler-loaded blob, rank), identical, without a Python object per entry.

    The C module parses the pickle into per-entry buffers and tables of distinct call-site
    values; this glue repeats columnize's checks on those distinct values only. None when the
    C module is missing or declines (anything unusual: an opcode, a type, a budget), or when a
    check would fail: the caller then runs the Python path, which gives its exact error.
    """
    if _fastdump is None or not fast_path_available():
        return None
    limits = limits or budgets()
    try:
        parsed = _fastdump.parse(blob, limits.max_entries, limits.max_list_len, limits.max_frames)
        if parsed is None:
            return None
        return _fast_columns(parsed, rank, limits)
    except Exception:  # DumpError, MemoryError, or a bug here: never worth losing the file
        _fastdump.release()  # the Python path needs the memory the C path keeps between files
        return None  # and is the authority: it reads the file again, errors in its own words


def _fast_columns(parsed: tuple[Any, ...], rank: int, limits: Budgets) -> RankColumns:
    (top, has_entries, n, ints_raw, states_raw, duration_raw, frames_total, stack_raw,
     stack_table, codes_raw, tables, absent) = parsed  # fmt: skip
    validate(dict(top, entries=[]) if has_entries else top)
    version = format_version(top)
    check = Checker(limits)
    clip = _Clip(limits.max_string_chars)
    missing: list[str] = []
    values = np.frombuffer(ints_raw, dtype=np.int64).reshape(len(FAST_INTS), n)
    states = np.frombuffer(states_raw, dtype=np.uint8).reshape(len(FAST_INTS), n)
    col_seq = list(INT_FIELDS).index("collective_seq_id")
    if ((states[col_seq] == _ABSENT) & (states[-1] != _ABSENT)).any():
        raise DumpError(SEQ_ID_ONLY)  # as columnize (check.seq_id_only)
    values, states = values[: len(INT_FIELDS)], states[: len(INT_FIELDS)]
    int_absent = (states == _ABSENT).any(axis=1).tolist()
    # All fields at once (few numpy calls per file): None and absent become the default,
    # and values outside a column's bounds are found as Checker.ints finds them.
    defaults = np.array([d for _, d in INT_FIELDS.values()], dtype=np.int64)[:, None]
    bounds = np.array([INT32 if c in INT32_FIELDS else INT64 for c in INT_FIELDS], dtype=np.int64)
    filled = np.where(states == 0, values, defaults)
    bad = (states == 0) & ((values < bounds[:, :1]) | (values > bounds[:, 1:]))
    bad_fields = bad.any(axis=1).tolist()
    ints: dict[str, np.ndarray] = {}
    for i, (col, (key, default)) in enumerate(INT_FIELDS.items()):
        if int_absent[i]:
            missing.append(key)
        if bad_fields[i]:  # as Checker.ints: a required field fails, another becomes unset
            if col in REQUIRED_INTS:
                raise DumpError(f"'{key}' out of range")
            check.note(key, int(bad[i].sum()), "an integer in range", "treated as unset")
            filled[i][bad[i]] = default
        ints[col] = filled[i]
    duration = np.frombuffer(duration_raw, dtype=np.float64).copy()
    infinite = np.isinf(duration)
    if infinite.any():  # as Checker.floats
        check.note("duration_ms", int(infinite.sum()), "a finite number", "treated as unset")
        duration[infinite] = np.nan
    if frames_total > check.values_left:  # as Checker.frame_lists' spend
        raise DumpError("'frames' above the value budget")
    check.values_left -= frames_total
    stack_codes = np.frombuffer(stack_raw, dtype=np.int32).copy()
    stacks = Interned(
        stack_codes,
        [() if s is None else tuple([(clip(a), clip(b), line) for a, b, line in s])
         for s in stack_table],
    )  # fmt: skip
    missing.extend(sorted({COMPOSITE[f] for f in range(len(COMPOSITE)) if absent >> f & 1}
                          - _OPTIONAL))  # fmt: skip
    codes = np.frombuffer(codes_raw, dtype=np.int32).reshape(len(COMPOSITE), n)
    composite = _intern_code_rows(np.vstack([stack_codes[None, :], codes]).T, tables)
    if _key_fields_checked(composite.uniques, check) is not composite.uniques:
        raise DumpError("call-site fields need conversion")  # never from the C path's types
    _uniques_checked(composite, check)
    return _assemble(top, version, rank, n, ints, duration, stacks, composite, check, clip, missing)


def _intern_code_rows(rows: np.ndarray, tables: list[list[Any]]) -> Interned:
    """The composite of intern_rows from per-field codes (column 0: the stack's): distinct rows
    in first-seen order, each unique built from the fields' tables of distinct values.

    Rows become one int64 key per entry (mixed radix, re-densified whenever the next column
    would overflow it), so only 1-D np.unique runs: sorting whole rows is 20x slower.
    """
    if not len(rows):
        return Interned(np.empty(0, dtype=np.int32), [])
    key = np.zeros(len(rows), dtype=np.int64)
    span = 1
    for j in range(rows.shape[1]):
        radix = int(rows[:, j].max()) + 1
        if span * radix >= 1 << 62:
            _, inverse = np.unique(key, return_inverse=True)
            key, span = inverse.reshape(-1).astype(np.int64), int(inverse.max()) + 1
        key = key * radix + rows[:, j]
        span *= radix
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty(len(order), dtype=np.int32)
    renumber[order] = np.arange(len(order), dtype=np.int32)
    heads = rows[first[order]].tolist()
    uniques = [tuple(map(operator.getitem, tables, row[1:])) for row in heads]
    return Interned(renumber[inverse.reshape(-1)], uniques)
