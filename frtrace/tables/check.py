"""Check one dump's fields against the types the format allows, before anything else uses them.

This is the edge: nothing below `frtrace/tables` sees unvalidated data. A wrong type in a field
the analysis needs skips the file, naming the field and the entry; in an optional field
(times, durations, threads, stacks) the value becomes unset and a note says so (`-v`).

Checks run with C-level `map`s (types, lengths), not per-entry Python: over whole columns for
the per-entry integers and for what is hashed when entries are interned (process group, name,
state), and over the few distinct call-site values and stacks for everything else. Lists are
sized before anything compares them, containers are only descended to the depth the format
has, and every level is sized (`sum(map(len, ...))`) before it is flattened, so a pickle whose
memo shares one list a billion times costs its budget, never its expansion, and a deeply nested
value is refused at the first level that is not what the format says. (What interning may
still spend on a crafted file, the parse worker's CPU budget bounds.)
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from functools import lru_cache
from itertools import chain
from typing import Any

import numpy as np

from frtrace.dumps.limits import Budgets
from frtrace.dumps.read import clip
from frtrace.errors import DumpError

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
MAX_DIM = 1 << 62  # a tensor dimension (and any numel) stays below this: int64 arithmetic is safe
_ASCII_INT = re.compile(r"-?[0-9]{1,19}")
_NONE = type(None)
_RANK_LIST = re.compile(r"\s*[\[(]\s*((?:[0-9]+\s*,\s*)*[0-9]+)?\s*,?\s*[\])]\s*")
_SCALARS = (str, int, float, bool)


def describe(value: Any) -> str:
    """'str 'abc'', 'list', 'int 9223372036854775808': what a bad value is, briefly."""
    if isinstance(value, _SCALARS) or value is None:
        return f"{type(value).__name__} {clip(value, 40)}"
    return type(value).__name__


class Checker:
    """Validates the columns of one file; collects notes for optional fields."""

    def __init__(self, limits: Budgets) -> None:
        self.limits = limits
        self.notes: list[str] = []
        self.values_left = limits.max_values
        # While distinct values are checked: their index -> the first entry holding it.
        self.entry_of: Callable[[int], int] = lambda index: index
        self.unit = ("entry", "entries")

    def fail(self, index: int, field: str, value: Any, expected: str) -> DumpError:
        entry = self.entry_of(index)
        return DumpError(f"entry {entry}: '{field}' is {describe(value)}, not {expected}")

    def note(self, field: str, count: int, expected: str, action: str) -> None:
        unit = self.unit[0] if count == 1 else self.unit[1]
        self.notes.append(f"'{field}' is not {expected} in {count} {unit}; {action}")

    def bounded(self, values: list[Any], field: str) -> None:
        """Before lists are compared (interning): none longer than max_list_len."""
        limit = self.limits.max_list_len
        try:
            longest = max(map(len, values), default=0)
        except TypeError:  # None or a scalar somewhere: only the lists count here
            longest = max((len(v) for v in values if type(v) in (list, tuple)), default=0)
        if longest > limit:
            raise DumpError(
                f"'{field}' holds a list longer than {limit:,} (the budget max_list_len)"
            )

    def spend(self, objects: list[Any], field: str) -> int:
        """Charge the elements of `objects` (sized, not walked) to the file's value budget."""
        total = sum(map(len, objects))
        if total > self.values_left:
            raise DumpError(
                f"'{field}' holds more than {self.values_left:,} values in all "
                "(a shared or bloated structure; above the budgets max_entries/max_list_len)"
            )
        self.values_left -= total
        return total

    # ---- integers -------------------------------------------------------------------------

    def ints(
        self,
        values: list[Any],
        field: str,
        default: int,
        *,
        required: bool,
        bounds: tuple[int, int] = INT64,
    ) -> np.ndarray:
        """int64 column; None is `default`; ASCII-digit strings (JSON) are parsed."""
        kinds = set(map(type, values))
        lo, hi = bounds
        if kinds <= {int, _NONE}:
            if _NONE in kinds:
                values = [default if v is None else v for v in values]
            try:
                arr = np.array(values, dtype=np.int64)
            except OverflowError:
                arr = None
            if arr is not None and (
                not len(arr) or (int(arr.min()) >= lo and int(arr.max()) <= hi)
            ):
                return arr
        out = np.empty(len(values), dtype=np.int64)
        bad = 0
        for i, v in enumerate(values):
            parsed = _as_int(v, default)
            if parsed is None or not lo <= parsed <= hi:
                if required:
                    raise self.fail(i, field, v, f"an integer in [{lo}, {hi}]")
                bad += 1
                parsed = default
            out[i] = parsed
        if bad:
            self.note(field, bad, "an integer in range", "treated as unset")
        return out

    def floats(self, values: list[Any], field: str) -> np.ndarray:
        """float64 column; None and anything that is not a finite number become NaN (unset)."""
        kinds = set(map(type, values))
        if kinds <= {float, int, _NONE}:
            try:
                arr = np.array(values, dtype=np.float64)
            except (OverflowError, TypeError, ValueError):
                arr = None
            if arr is not None and arr.ndim == 1:
                nonfinite = np.isinf(arr)
                if nonfinite.any():
                    self.note(field, int(nonfinite.sum()), "a finite number", "treated as unset")
                    arr[nonfinite] = np.nan
                return arr
        out = np.full(len(values), np.nan)
        bad = 0
        for i, v in enumerate(values):
            if v is None:
                continue
            try:
                number = float(v) if isinstance(v, (int, float, str)) and len(str(v)) < 40 else None
            except (ValueError, OverflowError):
                number = None
            if number is None or not math.isfinite(number):
                bad += 1
            else:
                out[i] = number
        if bad:
            self.note(field, bad, "a finite number", "treated as unset")
        return out

    # ---- scalars of the call-site composite ------------------------------------------------

    def strings(
        self, values: list[Any], field: str, *, required: bool, default: str = ""
    ) -> list[Any]:
        """Strings stay; numbers (thread ids) become their text; anything else fails or unsets."""
        kinds = set(map(type, values))
        if kinds <= {str}:
            return values
        out = list(values)
        bad = 0
        for i, v in enumerate(values):
            if type(v) is str:
                continue
            if v is None and not required:
                out[i] = default
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and _short_number(v):
                out[i] = str(v)
            elif required:
                raise self.fail(i, field, v, "a string")
            else:
                bad += 1
                out[i] = default
        if bad:
            self.note(field, bad, "a string", "treated as unset")
        return out

    def bools(self, values: list[Any], field: str, *, required: bool) -> list[Any]:
        kinds = set(map(type, values))
        if kinds <= {bool}:
            return values
        out = list(values)
        bad = 0
        for i, v in enumerate(values):
            if type(v) is bool:
                continue
            if v is None or (type(v) is int and v in (0, 1)):
                out[i] = bool(v)
            elif required:
                raise self.fail(i, field, v, "a boolean")
            else:
                bad += 1
                out[i] = False
        if bad:
            self.note(field, bad, "a boolean", "treated as false")
        return out

    def opt_ints(
        self, values: list[Any], field: str, bounds: tuple[int, int], *, required: bool
    ) -> list[Any]:
        """A call-site integer (pg_id, timeout_ms) kept as a Python value: int or None."""
        kinds = set(map(type, values))
        lo, hi = bounds
        if kinds <= {int, _NONE}:
            present = [v for v in values if v is not None]
            if not present or (min(present) >= lo and max(present) <= hi):
                return values
        out = list(values)
        bad = 0
        for i, v in enumerate(values):
            parsed = _as_int(v, None)
            if v is not None and (parsed is None or not lo <= parsed <= hi):
                if required:
                    raise self.fail(i, field, v, f"an integer in [{lo}, {hi}]")
                bad += 1
                parsed = None
            out[i] = parsed
        if bad:
            self.note(field, bad, "an integer in range", "treated as unset")
        return out

    def process_groups(self, values: list[Any]) -> list[Any]:
        """(pg_name, pg_desc): a tuple (pickle) or list (JSON) of two strings."""
        kinds = set(map(type, values))
        if not kinds <= {tuple, list}:
            i, v = _first(values, lambda v: type(v) not in (tuple, list))
            raise self.fail(i, "process_group", v, "a (name, desc) pair")
        if set(map(len, values)) != {2} and values:
            i, v = _first(values, lambda v: len(v) != 2)
            raise self.fail(i, "process_group", v, "a (name, desc) pair")
        for part in (0, 1):
            column = [v[part] for v in values]
            if not set(map(type, column)) <= {str}:
                i, v = _first(column, lambda v: type(v) is not str)
                raise self.fail(i, "process_group", v, "a pair of strings")
        if kinds == {tuple}:
            return values
        return [tuple(v) for v in values]

    # ---- lists -----------------------------------------------------------------------------

    def sizes(self, values: list[Any], field: str) -> list[Any]:
        """A list of shapes, each a list of non-negative integers; None (absent) is kept."""
        present = self._lists(values, field, "a list of shapes")
        shapes = list(chain.from_iterable(present))
        if not set(map(type, shapes)) <= {list, tuple}:
            i = _entry_of(
                values, lambda v: v is not None and not all(type(s) in (list, tuple) for s in v)
            )
            raise self.fail(i, field, values[i], "a list of shapes (lists of integers)")
        self._lengths(shapes, field)
        self.spend(shapes, field)
        dims = list(chain.from_iterable(shapes))
        if not set(map(type, dims)) <= {int}:
            i = _entry_of(
                values, lambda v: v is not None and any(type(d) is not int for s in v for d in s)
            )
            raise self.fail(
                i,
                field,
                values[i],
                "a list of shapes of integers (nested too deep or holding other values)",
            )
        if dims and (min(dims) < 0 or max(dims) >= MAX_DIM):
            i = _entry_of(
                values, lambda v: v is not None and any(not 0 <= d < MAX_DIM for s in v for d in s)
            )
            raise self.fail(i, field, values[i], "a list of shapes with dimensions in [0, 2**62)")
        return values

    def dtypes(self, values: list[Any], field: str) -> list[Any]:
        """A list of dtype names; None (absent) is kept."""
        present = self._lists(values, field, "a list of dtype names")
        names = list(chain.from_iterable(present))
        if not set(map(type, names)) <= {str}:
            i = _entry_of(values, lambda v: v is not None and any(type(n) is not str for n in v))
            raise self.fail(i, field, values[i], "a list of dtype names (strings)")
        return values

    def frame_lists(self, values: list[Any]) -> list[Any]:
        """Stacks before interning: lists (else dropped, with a note), at most max_frames long
        (longer ones keep their first, innermost, frames, with a note), within the budget."""
        limit = self.limits.max_frames
        kinds = set(map(type, values))
        if not kinds <= {list, _NONE}:
            odd = sum(type(v) not in (list, _NONE) for v in values)
            values = [v if type(v) in (list, _NONE) else None for v in values]
            self.note("frames", odd, "a list of frames", "stack dropped")
            kinds = {list, _NONE}  # the dropped stacks are None now
        present = [v for v in values if v is not None] if _NONE in kinds else values
        if present and max(map(len, present)) > limit:
            long = sum(len(v) > limit for v in present)
            values = [v[:limit] if v is not None and len(v) > limit else v for v in values]
            present = [v for v in values if v is not None]
            self.notes.append(
                f"{long} stack(s) longer than {limit} frames (the budget max_frames) were cut to "
                "their innermost frames"
            )
        self.spend(present, "frames")
        return values

    def stacks(self, stacks: list[Any]) -> list[Any]:
        """Distinct stacks: each a list of {name, filename, line}; a malformed one is dropped
        (the entries keep no stack), with a note."""
        flat = list(chain.from_iterable(s for s in stacks if s is not None))
        # torch's pickler shares each distinct frame dict: check every object once
        if _frames_ok(list(dict(zip(map(id, flat), flat, strict=True)).values())):
            return stacks
        out = [s if s is None or _frames_ok(s) else None for s in stacks]
        bad = sum(a is not b for a, b in zip(out, stacks, strict=True))
        self.unit = ("distinct stack", "distinct stacks")
        self.note("frames", bad, "a list of {name, filename, line} frames", "stack dropped")
        self.unit = ("entry", "entries")
        return out

    def _lists(self, values: list[Any], field: str, expected: str) -> list[Any]:
        kinds = set(map(type, values))
        if not kinds <= {list, tuple, _NONE}:
            i, v = _first(values, lambda v: type(v) not in (list, tuple, _NONE))
            raise self.fail(i, field, v, expected)
        present = [v for v in values if v is not None] if _NONE in kinds else values
        self._lengths(present, field)
        self.spend(present, field)
        return present

    def _lengths(self, objects: list[Any], field: str) -> None:
        limit = self.limits.max_list_len
        if objects and max(map(len, objects)) > limit:
            raise DumpError(
                f"'{field}' holds a list longer than {limit:,} (the budget max_list_len)"
            )


def _short_number(value: int | float) -> bool:
    return not isinstance(value, int) or value.bit_length() <= 64


def _as_int(value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if type(value) in (int, bool):
        return int(value)
    if type(value) is str and _ASCII_INT.fullmatch(value):
        return int(value)
    return None


def _first(values: list[Any], bad: Callable[[Any], bool]) -> tuple[int, Any]:
    for i, v in enumerate(values):
        if bad(v):
            return i, v
    return 0, None


def _entry_of(values: list[Any], bad: Callable[[Any], bool]) -> int:
    return _first(values, bad)[0]


# A stack frame's keys, in the order columns stores them (torch/csrc/distributed/c10d/
# FlightRecorderDetail.hpp, FlightRecorder::getCollectiveTrace: name_key, filename_key, line_key).
FRAME_KEYS = ("name", "filename", "line")
_NAME, _FILENAME, _LINE = map(operator.itemgetter, FRAME_KEYS)


def _frames_ok(frames: list[Any]) -> bool:
    """Every frame a dict with str name and filename and an int line (C-level checks)."""
    if not frames:
        return True
    if not set(map(type, frames)) <= {dict}:
        return False
    try:
        names = list(map(_NAME, frames))
        files = list(map(_FILENAME, frames))
        lines = list(map(_LINE, frames))
    except KeyError:
        return False
    if not set(map(type, names)) <= {str} or not set(map(type, files)) <= {str}:
        return False
    if not set(map(type, lines)) <= {int}:
        return False
    return min(lines) >= INT32[0] and max(lines) <= INT32[1]


def pack_rank_list(value: Any, max_rank: int) -> bytes | None:
    """pg_config ranks, '[0, 1, 2]' (a string, as torch writes it) or a list of ints, as
    sorted int32 bytes (see unpack_ranks); None when they cannot be read (membership is then
    inferred). A rank above max_rank fails the file: a member list is expanded later.

    Every rank's dump repeats the world group's member list, so a job of W ranks holds W
    lists of W ranks: as Python ints that is W^2 objects to parse, ship and vote on (67M at
    8k ranks). Packed, each distinct string is parsed once per worker and a list travels
    and is compared as one bytes object.
    """
    if isinstance(value, str):
        return _pack_rank_text(value, max_rank)
    if isinstance(value, (list, tuple)):
        if len(value) > max_rank + 1 or not set(map(type, value)) <= {int}:
            return None
        return _packed(list(value), max_rank)
    return None


@lru_cache(maxsize=256)
def _pack_rank_text(text: str, max_rank: int) -> bytes | None:
    match = _RANK_LIST.fullmatch(text)
    if match is None:
        return None
    digits = re.findall(r"[0-9]+", match.group(1) or "")
    return _packed([int(r) if len(r) < 16 else 1 << 60 for r in digits], max_rank)


def _packed(ranks: list[int], max_rank: int) -> bytes:
    max_rank = min(max_rank, INT32[1])
    if ranks and (min(ranks) < 0 or max(ranks) > max_rank):
        raise DumpError(
            f"pg_config lists rank {max(ranks) if max(ranks) > max_rank else min(ranks)}, "
            f"outside 0..{max_rank:,} (the budget max_rank)"
        )
    return np.array(sorted(set(ranks)), dtype=RANK_DTYPE).tobytes()


RANK_DTYPE = np.dtype("<i4")  # max_rank is at most 2^31 - 1


@lru_cache(maxsize=1024)
def unpack_ranks(packed: bytes) -> tuple[int, ...]:
    """The sorted member ranks of a packed list (pack_rank_list)."""
    return tuple(np.frombuffer(packed, dtype=RANK_DTYPE).tolist())


def meta_text(value: Any, field: str, notes: list[str], limit: int = 64) -> str:
    """A per-file string (comm_lib_version): text or a number, clipped."""
    if value is None:
        return ""
    if isinstance(value, (str, float)) or (type(value) is int and _short_number(value)):
        text = str(value)
        return text if len(text) <= limit else text[:limit] + "..."
    notes.append(f"'{field}' is {describe(value)}, not a string; ignored")
    return ""


# Before format 2.0 an entry had one `seq_id`: ProcessGroupNCCL bumped one `seq_` per group in
# both collective() and pointToPoint(), and NCCLTraceBuffer::record (TraceUtils.h, format 1.x)
# recorded it. Format 2.0 split it into collective_seq_id and p2p_seq_id (torch PR #125727),
# because a rank that sent or received more in a group than its peers gives the group's next
# collective a different seq_id from theirs: such dumps cannot be matched across ranks.
_BEFORE_2_0 = (
    "before format 2.0 one seq_id counted collectives and point-to-point ops together, "
    "so sequence numbers need not match across ranks"
)
SEQ_ID_ONLY = f"entries have 'seq_id', not 'collective_seq_id': not supported ({_BEFORE_2_0})"
_VERSION_NUMBER = re.compile(r"\s*([0-9]{1,9})\.([0-9]{1,9})")


def format_version(data: dict[str, Any], limit: int = 64) -> str:
    """The dump's format `version` ("" when absent), clipped; a DumpError when it is not a
    string (every version of torch's writer wrote one, "1.0" to "2.10") or names a format before
    2.0, which frtrace cannot read right (see _BEFORE_2_0)."""
    if "version" not in data:
        return ""
    value = data["version"]
    if type(value) is not str:
        raise DumpError(f"'version' is {describe(value)}, not a string")
    text = value if len(value) <= limit else value[:limit] + "..."
    number = _VERSION_NUMBER.match(value)
    if number is not None and int(number.group(1)) < 2:
        raise DumpError(f"format version {clip(text, limit)} is not supported: {_BEFORE_2_0}")
    return text


def seq_id_only(entries: list[dict[str, Any]]) -> bool:
    """Whether an entry has the `seq_id` of formats before 2.0 and no collective_seq_id."""
    return any("seq_id" in e and "collective_seq_id" not in e for e in entries)


_STATUS_FIELDS = (
    "last_enqueued_collective",
    "last_started_collective",
    "last_completed_collective",
)


def _check_groups(value: dict[Any, Any], field: str, limits: Budgets) -> None:
    if len(value) > limits.max_groups:
        raise DumpError(
            f"{field} has {len(value):,} groups, above the budget max_groups "
            f"({limits.max_groups:,})"
        )


def clean_pg_config(value: Any, limits: Budgets, notes: list[str]) -> dict[str, dict[str, Any]]:
    """pg_config with string names and descs and rank lists parsed (None where unreadable)."""
    if not isinstance(value, dict):
        return {}
    _check_groups(value, "pg_config", limits)
    out: dict[str, dict[str, Any]] = {}
    odd = unreadable = 0
    for key, cfg in value.items():
        if type(key) not in (str, int) or not isinstance(cfg, dict):
            odd += 1
            continue
        name, desc = cfg.get("name"), cfg.get("desc")
        if not isinstance(name, (str, _NONE)) or not isinstance(desc, (str, _NONE)):
            odd += 1
            continue
        ranks = pack_rank_list(cfg.get("ranks"), limits.max_rank)
        if ranks is None and cfg.get("ranks") is not None:
            unreadable += 1
        key_text = clip(key, limits.max_string_chars) if type(key) is str else str(key)
        out[key_text] = {
            "name": clip(name or "", limits.max_string_chars),
            "desc": clip(desc or "", limits.max_string_chars),
            "ranks": ranks,  # packed int32 bytes (unpack_ranks), or None
        }
    if odd:
        notes.append(f"pg_config: {odd} group(s) not shaped like {{name, desc, ranks}}; ignored")
    if unreadable:
        notes.append(f"pg_config: ranks of {unreadable} group(s) unreadable; membership inferred")
    return out


def clean_pg_status(value: Any, limits: Budgets, notes: list[str]) -> dict[str, dict[str, int]]:
    """pg_status keyed by pg_id (ASCII digits), each last_* value an int64 (-1 when unset)."""
    if not isinstance(value, dict):
        return {}
    _check_groups(value, "pg_status", limits)
    out: dict[str, dict[str, int]] = {}
    odd = 0
    for key, status in value.items():
        pg_id = _as_int(key, None) if type(key) in (int, str) else None
        if pg_id is None or not INT32[0] <= pg_id <= INT32[1] or not isinstance(status, dict):
            odd += 1
            continue
        row = {}
        for field in _STATUS_FIELDS:
            raw = status.get(field)
            number = _as_int(raw, -1)
            if number is None or not INT64[0] <= number <= INT64[1]:
                odd += 1
                number = -1
            row[field] = number
        out[str(pg_id)] = row
    if odd:
        notes.append(f"pg_status: {odd} key(s) or value(s) not integers in range; treated as unset")
    return out
