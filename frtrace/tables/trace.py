"""The normalized job: shared tables every analyzer reads, built once from all ranks."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from frtrace.errors import FrtraceError
from frtrace.tables.columns import CATEGORY_COLUMNS, INT32_FIELDS, Frame, Interned, RankColumns
from frtrace.tables.facts import Facts
from frtrace.tables.parse import Skipped as Skipped  # beside the parsing, which has no pandas
from frtrace.tables.repair import DEFAULT_DESC, DEFAULT_PG, NO_WORLD, World
from frtrace.tables.table import Table, distinct

if TYPE_CHECKING:
    import pandas as pd

    from frtrace.evidence.records import Evidence

P2P_OPS = frozenset({"send", "recv"})
_P2P_NAME = re.compile(r"^(send|recv)\s+([0-9]{1,9})\s*(->|<-)\s*([0-9]{1,9})$")
_MAX_NUMEL = (1 << 62) - 1  # element counts are clamped here, so int64 sums cannot overflow


@dataclass
class Trace:
    """All ranks' dumps as shared, interned tables (numpy columns, see tables/table.py).

    table:        one row per entry (its columns: docs/python.md), strings as codes.
    group_table:  pg_name, pg_desc, ranks (sorted global ranks), size, source of membership.
    status_table: rank, pg_id, pg_name, last_enqueued/started/completed collective seq ids.
    stacks:       stack_id -> frames (name, filename, line), innermost first; each stored once.
    file_table:   path, rank, format, compressed, version, comm_lib_version, entries.

    `entries`, `groups`, `pg_status` and `files` are the same tables as pandas DataFrames,
    built on first use (the analysis never needs pandas).
    """

    trace_dir: str
    prefix: str
    table: Table
    group_table: Table
    status_table: Table
    stacks: list[tuple[Frame, ...]]
    file_table: Table
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    membership_conflicts: dict[str, list[list[int]]] = field(default_factory=dict)
    # Set when settled entries stayed on the workers (`table` holds only the rest): the facts
    # of every entry, as the Dask load assembled them (frtrace.analysis.facts).
    facts: Facts | None = None
    world: World = NO_WORLD
    # The job's logs and py-spy stacks found beside the dumps (frtrace.loading.evidence).
    evidence: Evidence | None = None

    @property
    def entry_count(self) -> int:
        """Entries in the job's dumps (settled ones left on the workers included)."""
        return self.facts.entries if self.facts is not None else len(self.table)

    def close(self) -> None:
        """Release the entries kept on a Dask cluster (and a cluster started for this job);
        its rank histories are gone after. Nothing to do for a job loaded in one process."""
        if self.facts is not None:
            self.facts.close()

    @cached_property
    def entries(self) -> pd.DataFrame:
        """Every entry as a DataFrame, strings as categoricals (for notebooks and raw output)."""
        return self.table.to_pandas()

    @cached_property
    def groups(self) -> pd.DataFrame:
        return self.group_table.to_pandas()

    @cached_property
    def pg_status(self) -> pd.DataFrame:
        return self.status_table.to_pandas()

    @cached_property
    def files(self) -> pd.DataFrame:
        return self.file_table.to_pandas()

    @property
    def ranks(self) -> list[int]:
        """Ranks that left a usable dump."""
        return sorted(int(r) for r in self.file_table["rank"])

    @property
    def backends(self) -> list[str]:
        """The backends the entries name (nccl, gloo), sorted."""
        if self.facts is not None:
            return list(self.facts.backends)
        e = self.table
        return sorted(str(e.label("backend", b)) for b in distinct(e["backend"]))

    @property
    def formats(self) -> list[tuple[str, int]]:
        """(format, number of files) by format, e.g. [("json", 2), ("pickle", 62)]."""
        return sorted(Counter(str(f) for f in self.file_table["format"]).items())

    @property
    def versions(self) -> list[str]:
        return sorted({str(v) for v in self.file_table["version"]})

    @property
    def missing_dumps(self) -> list[int]:
        """Ranks of the job (its world, members of some group) that left no usable dump."""
        have = set(self.ranks)
        members: set[int] = set(range(self.world.size))
        for ranks in self.group_table["ranks"]:
            members.update(ranks)
        return sorted(members - have)

    def with_world(self, size: int) -> Trace:
        """This job with its world size stated by the user (`--world-size`): the default
        group, where inferred, spans it. A size below the ranks seen is refused."""
        if size < self.world.size:
            raise FrtraceError(
                f"--world-size {size} is below the ranks seen (0-{self.world.size - 1})"
            )
        groups = self.group_table
        ranks = list(groups["ranks"]) if len(groups) else []
        for i, (name, desc, source) in enumerate(
            zip(groups["pg_name"], groups["pg_desc"], groups["source"], strict=True)
        ):
            if source == "inferred" and (name == DEFAULT_PG or desc == DEFAULT_DESC):
                ranks[i] = list(range(size))
        if len(groups):
            groups = Table(
                {
                    **groups.cols,
                    "ranks": np.array([*ranks, None], dtype=object)[:-1],
                    "size": np.array([len(r) for r in ranks], dtype=np.int64),
                },
                groups.labels,
            )
        return replace(self, group_table=groups, world=World(size, True, "--world-size"))

    @property
    def unreadable(self) -> list[int]:
        """Ranks whose dump file is there but could not be read (truncated, corrupt)."""
        have = set(self.ranks)
        return sorted({s.rank for s in self.skipped if s.rank is not None} - have)

    @property
    def no_file(self) -> list[int]:
        """Ranks of the job that left no dump file at all (a process that died)."""
        return sorted(set(self.missing_dumps) - set(self.unreadable))

    @property
    def whole(self) -> bool:
        """A dump states the world, every rank of it left a usable dump and no file named
        like a dump was unreadable: nothing of the job is out of sight."""
        return self.world.stated and not self.missing_dumps and not self.unreadable


@lru_cache(maxsize=4096)
def parse_profiling_name(name: str) -> tuple[str, str, int, int]:
    """`nccl:send 0->1` -> ("nccl", "send", src 0, dst 1) with group-local ranks; -1 if none."""
    backend, sep, op = name.partition(":")
    if not sep:
        backend, op = "", name
    op = op.strip()
    match = _P2P_NAME.match(op)
    if match:
        kind, a, arrow, b = match.groups()
        src, dst = (int(a), int(b)) if arrow == "->" else (int(b), int(a))
        return backend, kind, src, dst
    return backend, op, -1, -1


@lru_cache(maxsize=4096)
def numel(sizes_key: str) -> int:
    """Total elements of all tensors in a sizes key such as `[[3, 4], [5]]`."""
    try:
        shapes = _parse_list(sizes_key)
    except ValueError:
        return 0
    total = 0
    for shape in shapes:
        if isinstance(shape, list):
            count = 1
            for dim in shape:
                count = min(count * int(dim), _MAX_NUMEL)
            total = min(total + count, _MAX_NUMEL)
    return total


def _parse_list(key: str) -> list[Any]:
    try:
        value = json.loads(key)
    except json.JSONDecodeError as exc:
        raise ValueError(key) from exc
    return value if isinstance(value, list) else []


STACKS = "stacks"  # the Symbols table of stacks (tuples of frames, () among them)


class Symbols:
    """The values of each category column (and the stacks) interned for the whole job, in
    the order first seen: each file's few distinct values are looked up once, and its codes
    become the job's by one small gather."""

    def __init__(self) -> None:
        names = (*CATEGORY_COLUMNS, STACKS)
        self.tables: dict[str, dict[Any, int]] = {name: {} for name in names}
        self.values: dict[str, list[Any]] = {name: [] for name in names}  # by code

    def mapping(self, name: str, one: Interned) -> list[int]:
        """The job's codes of one file's distinct values of `name` (an empty file adds none)."""
        table = self.tables[name]
        if not len(one.codes):
            return []
        codes = [table.setdefault(u, len(table)) for u in one.uniques]
        values = self.values[name]
        if len(table) > len(values):  # new to the job: rare once the first files are in
            values.extend(itertools.islice(table, len(values), None))
        return codes

    def labels(self, name: str) -> list[Any]:
        """The values of `name` by code."""
        return list(self.values[name])


_ORDER = [
    "rank", "pos", "record_id", "pg_id", "pg_name", "pg_desc", "collective_seq_id",
    "p2p_seq_id", "op_id", "backend", "op", "profiling_name", "is_p2p", "coalesced", "src",
    "dst",
    "input_sizes", "input_dtypes", "input_numel", "output_sizes", "output_dtypes",
    "output_numel", "state", "time_created_ns", "time_started_ns", "time_completed_ns",
    "duration_ms", "retired", "timeout_ms", "thread_id", "thread_name", "stack_id",
]  # fmt: skip
_DERIVED = ("backend", "op")  # categories that are a function of the profiling name


class EntriesBuilder:
    """The job's entries table, written file by file (in rank order) as files arrive.

    Each file's rows go straight into the job's columns, its codes made the job's and its
    derived columns (backend, op, peers, element counts, stack ids) looked up per distinct
    value, and its own columns are released: while the workers parse the other files, not
    after them, and without a second copy of any entry. The columns are allocated for the
    rows `expected` (grown if more come: pages never written are never resident); a
    category's codes take the narrowest type its labels allow, widened as labels come.
    """

    def __init__(self, expected: int = 0) -> None:
        self.symbols = Symbols()
        self.rows = 0
        self.capacity = max(0, expected)
        self.cols: dict[str, np.ndarray] = {}
        self.holds: dict[str, int] = {}
        self.derived: dict[str, dict[str, int]] = {name: {} for name in _DERIVED}
        # Per profiling-name code: backend and op codes, group-local src and dst, p2p name.
        self.by_name: dict[str, list[Any]] = {k: [] for k in (*_DERIVED, "src", "dst", "p2p")}
        self.numel: dict[str, list[int]] = {"input_sizes": [], "output_sizes": []}
        self.stack_ids: list[int] = []  # per stack code: its id (-1: the empty stack)
        self.stacks: list[tuple[Frame, ...]] = []

    def add(self, part: RankColumns) -> None:
        """Append one file's rows (after those of lower ranks) and release its columns."""
        if not self.cols:
            self._allocate(part)
        n, at = part.n, self.rows
        if at + n > self.capacity:
            self._grow(max(at + n, 2 * self.capacity))
        rows = slice(at, at + n)
        cols = self.cols
        cols["rank"][rows] = part.rank
        cols["pos"][rows] = np.arange(n, dtype=np.int32)
        for name, values in part.ints.items():
            cols[name][rows] = values
        cols["duration_ms"][rows] = part.duration_ms
        cols["retired"][rows] = part.retired
        cols["coalesced"][rows] = part.coalesced
        job = {name: self._codes(name, part.cats[name], rows) for name in CATEGORY_COLUMNS}
        self._stacks(part.stacks, rows)
        self._from_names(part, job["profiling_name"], rows)
        for name in self.numel:
            self._numel(name, part.cats[name], job[name], rows)
        self.rows = at + n
        part.release_columns()

    def finish(self) -> tuple[Table, list[tuple[Frame, ...]]]:
        """The table (rows in rank order, then position) and the distinct stacks."""
        n = self.rows
        cols = {name: values[:n] for name, values in self.cols.items()}
        labels = {name: self.symbols.labels(name) for name in CATEGORY_COLUMNS}
        labels.update({name: list(self.derived[name]) for name in _DERIVED})
        rank = cols["rank"]
        if n and not (rank[1:] >= rank[:-1]).all():  # files added out of rank order: never
            order = np.argsort(rank, kind="stable")  # from the loaders; keep the invariant
            cols = {name: values[order] for name, values in cols.items()}
        return Table({name: cols[name] for name in _ORDER}, labels), self.stacks

    def _allocate(self, first: RankColumns) -> None:
        cap = self.capacity
        dtypes: dict[str, Any] = {
            "rank": np.int32,
            "pos": np.int32,
            "duration_ms": np.float64,
            "retired": bool,
            "coalesced": bool,
            "is_p2p": bool,
            "src": np.int32,
            "dst": np.int32,
            "input_numel": np.int64,
            "output_numel": np.int64,
            "stack_id": np.int32,
        }
        for name, values in first.ints.items():
            dtypes[name] = np.int32 if name in INT32_FIELDS else values.dtype
        for name in (*CATEGORY_COLUMNS, *_DERIVED):
            dtypes[name] = code_dtype(0)
            self.holds[name] = np.iinfo(dtypes[name]).max  # labels its codes' type holds
        self.cols = {name: np.empty(cap, dtype) for name, dtype in dtypes.items()}

    def _grow(self, capacity: int) -> None:
        for name, values in self.cols.items():
            wider = np.empty(capacity, values.dtype)
            wider[: self.rows] = values[: self.rows]
            self.cols[name] = wider
        self.capacity = capacity

    def _widen(self, name: str, labels: int) -> None:
        """Codes of `name` in a type that holds `labels` labels (code_dtype's)."""
        if labels > self.holds[name]:
            dtype = code_dtype(labels)
            self.cols[name] = self.cols[name].astype(dtype)
            self.holds[name] = np.iinfo(dtype).max

    def _codes(self, name: str, one: Interned, rows: slice) -> list[int]:
        """Write one file's codes of `name` as the job's; returns its values' job codes."""
        mapping = self.symbols.mapping(name, one)
        self._widen(name, len(self.symbols.tables[name]))
        if mapping:
            codes = np.array(mapping, dtype=self.cols[name].dtype)
            codes.take(one.codes, out=self.cols[name][rows])
        return mapping

    def _stacks(self, one: Interned, rows: slice) -> None:
        """Stack ids: each distinct stack stored once, numbered as first seen; () is -1."""
        mapping = self.symbols.mapping(STACKS, one)
        values = self.symbols.values[STACKS]
        for frames in values[len(self.stack_ids) :]:  # stacks new to the job
            self.stack_ids.append(len(self.stacks) if frames != () else -1)
            if frames != ():
                self.stacks.append(frames)
        if len(one.codes):
            ids = np.array([self.stack_ids[c] for c in mapping], dtype=np.int32)
            ids.take(one.codes, out=self.cols["stack_id"][rows])

    def _from_names(self, part: RankColumns, job: list[int], rows: slice) -> None:
        """Backend, op, group-local p2p peers and p2p-ness, from the profiling names (`job`:
        the job's codes of the file's distinct names)."""
        one = part.cats["profiling_name"]
        by_name = self.by_name
        for name in self.symbols.values["profiling_name"][len(by_name["op"]) :]:
            backend, op, src, dst = parse_profiling_name(str(name))
            for column, value in zip(_DERIVED, (backend, op), strict=True):
                by_name[column].append(
                    self.derived[column].setdefault(value, len(self.derived[column]))
                )
            by_name["src"].append(src)
            by_name["dst"].append(dst)
            by_name["p2p"].append(op in P2P_OPS)
        if not job:
            return
        local = np.array(job, dtype=np.int64)
        for column in _DERIVED:
            self._widen(column, len(self.derived[column]))
            table = np.array(by_name[column], dtype=self.cols[column].dtype)[local]
            table.take(one.codes, out=self.cols[column][rows])
        for column in ("src", "dst"):
            table = np.array(by_name[column], dtype=np.int32)[local]
            table.take(one.codes, out=self.cols[column][rows])
        p2p = np.array(by_name["p2p"], dtype=bool)[local]
        np.logical_or(part.is_p2p, p2p[one.codes], out=self.cols["is_p2p"][rows])

    def _numel(self, name: str, one: Interned, job: list[int], rows: slice) -> None:
        """Total elements of each entry's tensors, per distinct sizes value (`job`: the job's
        codes of the file's distinct values)."""
        per_code = self.numel[name]
        for key in self.symbols.values[name][len(per_code) :]:
            per_code.append(numel(str(key)))
        if job:
            table = np.array([per_code[c] for c in job], dtype=np.int64)
            table.take(one.codes, out=self.cols[f"{name[: -len('_sizes')]}_numel"][rows])


def merge_columns(parts: list[RankColumns]) -> tuple[Table, list[tuple[Frame, ...]]]:
    """One entries table for the job, ordered by rank then position in the dump."""
    builder = EntriesBuilder(sum(p.n for p in parts))
    for part in sorted(parts, key=lambda p: p.rank):
        builder.add(part)
    return builder.finish()


def code_dtype(labels: int) -> type[np.signedinteger[Any]]:
    """The narrowest integer type for codes into this many labels (as pandas keeps them)."""
    if labels <= np.iinfo(np.int8).max:
        return np.int8
    return np.int16 if labels <= np.iinfo(np.int16).max else np.int32


FILE_COLUMNS: dict[str, Any] = {
    "path": object,
    "rank": np.int64,
    "format": object,
    "compressed": bool,
    "version": object,
    "comm_lib_version": object,
    "entries": np.int64,
}


def file_table(rows: list[dict[str, Any]]) -> Table:
    """One row per usable dump, by rank."""
    return Table.from_records(sorted(rows, key=lambda r: r["rank"]), FILE_COLUMNS)
