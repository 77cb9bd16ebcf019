"""Named numpy columns: the tables frtrace analyzes, without pandas.

Importing pandas costs a quarter of a second, more than a two-file job's whole analysis, so
the tables the analysis reads are plain numpy columns. A categorical column holds integer
codes (int8 to int32, as few bytes as its labels allow) into a list of labels (interned
strings: groups, ops, shapes), so comparing ranks stays integer work. `to_pandas()` gives the
same table as a pandas DataFrame (categoricals for the labelled columns) for notebooks, raw
output and the Python API.

Grouping is sorting: `runs` orders rows by their keys and says where each run of equal keys
starts; per-group reductions are numpy's `reduceat` over those runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


# Integer columns spanning at most this many values are counted, not sorted, by distinct.
COUNT_SPAN = 1 << 16


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-d array: np.unique without its check for masked
    arrays, which imports numpy.ma (13 ms, in every process that calls it first). Integers of
    a narrow span (codes: a job's groups, backends) are counted in one pass instead of sorted:
    a job's millions of rows hold a few hundred distinct codes."""
    small_ints = values.dtype.kind == "i" or (values.dtype.kind == "u" and values.itemsize < 8)
    if small_ints and len(values) > 1:
        lo, hi = int(values.min()), int(values.max())
        if hi - lo < COUNT_SPAN:
            seen = np.bincount(np.subtract(values, lo, dtype=np.intp))
            return (np.flatnonzero(seen) + lo).astype(values.dtype)
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


LABEL_BYTES = 64  # about what one distinct label costs (a short str and its list slot)


class Table:
    """Columns of equal length by name; `labels[name]` decodes a categorical column's codes."""

    __slots__ = ("cols", "labels")

    def __init__(
        self, cols: dict[str, np.ndarray], labels: dict[str, list[Any]] | None = None
    ) -> None:
        self.cols = cols
        self.labels = labels if labels is not None else {}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def __setitem__(self, name: str, values: np.ndarray) -> None:
        self.cols[name] = values

    def __contains__(self, name: object) -> bool:
        return name in self.cols

    def __len__(self) -> int:
        for values in self.cols.values():
            return len(values)
        return 0

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self.cols)})"

    def __sizeof__(self) -> int:
        """Its arrays' bytes: Dask weighs a task's result by sys.getsizeof, and moves a
        result it thinks small (a partition's entries) to where a task's other inputs are."""
        labels = sum(len(v) for v in self.labels.values()) * LABEL_BYTES
        return object.__sizeof__(self) + sum(v.nbytes for v in self.cols.values()) + labels

    def take(self, rows: np.ndarray | slice) -> Table:
        """The rows a mask, an index array or a slice selects (labels are shared). A mask
        becomes row numbers first: numpy gathers by index several times faster than it
        selects by a mask, once per column."""
        if isinstance(rows, np.ndarray) and rows.dtype == bool and len(rows) == len(self):
            rows = np.flatnonzero(rows)
        return Table({k: v[rows] for k, v in self.cols.items()}, self.labels)

    def select(self, names: Sequence[str]) -> Table:
        """Only these columns (the arrays are shared, not copied)."""
        labels = {k: self.labels[k] for k in names if k in self.labels}
        return Table({k: self.cols[k] for k in names}, labels)

    def label(self, name: str, code: int) -> Any:
        return self.labels[name][int(code)]

    def code(self, name: str, value: Any) -> int:
        """The code of a label in a categorical column; -1 when no row has it."""
        try:
            return self.labels[name].index(value)
        except ValueError:
            return -1

    def decode(self, name: str) -> np.ndarray:
        """A categorical column as an object array of its labels (for small tables)."""
        values = np.empty(len(self.labels[name]), dtype=object)
        values[:] = self.labels[name]
        return values[self.cols[name]] if len(self.cols[name]) else values[:0]

    def is_label(self, name: str, predicate: Any) -> np.ndarray:
        """Mask of rows whose label satisfies `predicate` (evaluated once per label)."""
        per_label = np.array([bool(predicate(v)) for v in self.labels[name]] or [False])
        codes = self.cols[name]
        return per_label[codes] if len(codes) else np.zeros(0, dtype=bool)

    def record(self, i: int) -> dict[str, Any]:
        """Row `i` as a dict of Python values, labels decoded."""
        return {
            k: self.labels[k][int(v[i])] if k in self.labels else _python(v[i])
            for k, v in self.cols.items()
        }

    def rows(self) -> Iterator[Any]:
        """Each row as a named tuple, labels decoded (for small tables: groups, files)."""
        row = NamedTuple("Row", [(k, Any) for k in self.cols])  # type: ignore[misc]
        # Column by column: tolist() makes Python values in C (object columns may hold numpy
        # scalars, converted one by one); thousands of rows x a value each, not a call each.
        decoded = [self.decode(k) if k in self.labels else self.cols[k] for k in self.cols]
        values = [[_python(v) for v in c] if c.dtype == object else c.tolist() for c in decoded]
        return map(row._make, zip(*values, strict=True))

    def to_pandas(self) -> pd.DataFrame:
        """The same table as a DataFrame, labelled columns as categoricals (no copies)."""
        import pandas as pd

        data: dict[str, Any] = {}
        for name, values in self.cols.items():
            if name in self.labels:
                data[name] = pd.Categorical.from_codes(
                    values, categories=pd.Index(self.labels[name], dtype=object), validate=False
                )
            else:
                data[name] = values
        return pd.DataFrame(data, copy=False)

    @classmethod
    def from_records(cls, records: list[dict[str, Any]], dtypes: dict[str, Any]) -> Table:
        """A small table from dicts; `dtypes` names every column (object for strings, lists)."""
        cols: dict[str, np.ndarray] = {}
        for name, dtype in dtypes.items():
            if dtype is object:
                values = np.empty(len(records), dtype=object)
                values[:] = [r[name] for r in records]
            else:
                values = np.array([r[name] for r in records], dtype=dtype)
            cols[name] = values
        return cls(cols)


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def pack(*keys: np.ndarray) -> np.ndarray | None:
    """Integer keys as one int64 per row that sorts as the keys do (first key first), when
    their ranges fit in 62 bits; else None."""
    n = len(keys[0])
    packed = np.zeros(n, dtype=np.int64)
    scale = 1
    for k in reversed(keys):
        lo, hi = (int(k.min()), int(k.max())) if n else (0, 0)
        width = hi - lo + 1
        if scale * width >= 1 << 62:
            return None
        packed += (k.astype(np.int64) - lo) * scale
        scale *= width
    return packed


def runs(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ordered by `keys` (first key first, stable) and where each run of equal keys
    starts in that order: a group-by without hashing (one sort of one int64 per row when the
    keys pack into one)."""
    if not len(keys) or not len(keys[0]):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    packed = pack(*keys) if len(keys) > 1 else keys[0]
    if packed is not None:
        order = np.argsort(packed, kind="stable")
        ordered = packed[order]
        new = np.r_[True, ordered[1:] != ordered[:-1]]
        return order, np.flatnonzero(new)
    order = np.lexsort(keys[::-1])
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for k in keys:
        sorted_k = k[order]
        new[1:] |= sorted_k[1:] != sorted_k[:-1]
    return order, np.flatnonzero(new)


def first_rows(*keys: np.ndarray) -> np.ndarray:
    """Index of the first row (lowest index) of each distinct key combination, in key order."""
    order, starts = runs(*keys)
    return order[starts]


def group_max(key: np.ndarray, values: np.ndarray) -> dict[int, Any]:
    """The largest value per distinct key, as {key: value}."""
    return _per_key(np.maximum, key, values)


def group_min(key: np.ndarray, values: np.ndarray) -> dict[int, Any]:
    """The smallest value per distinct key, as {key: value}."""
    return _per_key(np.minimum, key, values)


def _per_key(reduce: np.ufunc, key: np.ndarray, values: np.ndarray) -> dict[int, Any]:
    if not len(key):
        return {}
    if bool((key[1:] >= key[:-1]).all()):  # sorted already (ranks in the entries table): no sort
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        out = reduce.reduceat(values, starts)
        return dict(zip(key[starts].tolist(), out.tolist(), strict=True))
    order, starts = runs(key)
    out = reduce.reduceat(values[order], starts)
    return dict(zip(key[order[starts]].tolist(), out.tolist(), strict=True))


def cumcount(key: np.ndarray, reverse: bool = False) -> np.ndarray:
    """Each row's number among the rows with its key, in row order (from the end: `reverse`)."""
    n = len(key)
    if not n:
        return np.empty(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    if reverse:
        order = order[::-1]
        # reversed stable order keeps equal keys in descending row order, keys descending
    sorted_key = key[order]
    new = np.r_[True, sorted_key[1:] != sorted_key[:-1]]
    starts = np.flatnonzero(new)
    nth = np.arange(n) - starts[np.cumsum(new) - 1]
    out = np.empty(n, dtype=np.int64)
    out[order] = nth
    return out


def split(table: Table, *names: str) -> Iterator[tuple[tuple[int, ...], Table]]:
    """The table's rows per distinct value of `names`, by value; rows keep their order."""
    order, starts = runs(*(table[n] for n in names))
    ends = np.r_[starts[1:], len(order)]
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        rows = order[a:b]
        yield tuple(int(table[n][rows[0]]) for n in names), table.take(rows)


def head_per(key: np.ndarray, k: int) -> np.ndarray:
    """Mask of the first `k` rows of each key, in row order (a group-by head)."""
    return cumcount(key) < k


def most_common(values: np.ndarray) -> int:
    """The most frequent value; the smallest among equally frequent ones."""
    seen, counts = np.unique(values, return_counts=True)
    return int(seen[np.argmax(counts)])
