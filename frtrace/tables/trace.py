"""The normalized job: shared tables every analyzer reads, built once from all ranks."""

from __future__ import annotations

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

    table:        one row per entry (see ENTRY_COLUMNS in the README), strings as codes.
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
    # The job's logs and py-spy stacks found beside the dumps (frtrace.engine.evidence).
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
    import json

    try:
        value = json.loads(key)
    except json.JSONDecodeError as exc:
        raise ValueError(key) from exc
    return value if isinstance(value, list) else []


STACKS = "stacks"  # the Symbols table of stacks (tuples of frames, () among them)


class Symbols:
    """The values of each category column (and the stacks) interned for the whole job.

    Every chunk of one job codes its values in these tables, in the order first seen, so the
    chunks' codes already agree and merging them is concatenation: no second remapping of
    millions of codes.
    """

    def __init__(self) -> None:
        self.tables: dict[str, dict[Any, int]] = {name: {} for name in (*CATEGORY_COLUMNS, STACKS)}

    def codes(self, name: str, interned: list[Interned]) -> np.ndarray:
        """Per-file codes as codes into the job's table of `name` (per file only its few
        distinct values are looked up; its codes are remapped by one small gather)."""
        table = self.tables[name]
        out = []
        for one in interned:
            if len(one.codes):
                mapping = [table.setdefault(u, len(table)) for u in one.uniques]
                out.append(np.array(mapping, dtype=np.int32)[one.codes])
        return np.concatenate(out) if out else np.empty(0, np.int32)

    def labels(self, name: str) -> list[Any]:
        """The values of `name` by code."""
        return list(self.tables[name])


@dataclass
class Chunk:
    """The columns of consecutive ranks' files, concatenated, codes into the job's Symbols.

    While files are still being parsed, those already here are compacted into chunks (ints
    narrowed, codes made the job's), so the per-file columns never all coexist with the
    merged table: at 8k ranks that was gigabytes of peak memory.
    """

    rank: np.ndarray
    pos: np.ndarray
    ints: dict[str, np.ndarray]
    duration_ms: np.ndarray
    is_p2p: np.ndarray
    retired: np.ndarray
    coalesced: np.ndarray
    cats: dict[str, np.ndarray]  # codes, stacks among them


def compact(parts: list[RankColumns], symbols: Symbols) -> Chunk:
    """One chunk of these files (in rank order); their columns are released."""
    parts = sorted(parts, key=lambda p: p.rank)
    lengths = [p.n for p in parts]
    ints = {}
    for name in list(parts[0].ints) if parts else ():
        narrow = np.int32 if name in INT32_FIELDS else None  # checked to fit when parsed
        ints[name] = np.concatenate(
            [p.ints.pop(name) for p in parts], dtype=narrow, casting="same_kind"
        )
    cats = {
        name: symbols.codes(name, [p.cats.pop(name) for p in parts]) for name in CATEGORY_COLUMNS
    }
    cats[STACKS] = symbols.codes(STACKS, [p.stacks for p in parts])
    chunk = Chunk(
        rank=np.repeat(np.array([p.rank for p in parts], dtype=np.int32), lengths),
        pos=np.concatenate([np.arange(n, dtype=np.int32) for n in lengths])
        if parts
        else np.empty(0, np.int32),
        ints=ints,
        duration_ms=_concat([p.duration_ms for p in parts], np.float64),
        is_p2p=_concat([p.is_p2p for p in parts], bool),
        retired=_concat([p.retired for p in parts], bool),
        coalesced=_concat([p.coalesced for p in parts], bool),
        cats=cats,
    )
    for part in parts:
        part.release_columns()
    return chunk


def _concat(arrays: list[np.ndarray], dtype: Any, narrow: Any = None) -> np.ndarray:
    """One array of these (the one itself, uncopied, when there is one and `narrow` does not
    ask for another type), cast to `narrow` on the way where given: one copy, not two."""
    if len(arrays) == 1:
        return arrays[0].astype(narrow or arrays[0].dtype, copy=False)
    if not arrays:
        return np.empty(0, narrow or dtype)
    return np.concatenate(arrays, dtype=narrow, casting="same_kind")


def merge_columns(parts: list[RankColumns]) -> tuple[Table, list[tuple[Frame, ...]]]:
    """One entries table for the job, ordered by rank then position in the dump."""
    symbols = Symbols()
    return merge_chunks([compact(parts, symbols)], symbols)


def merge_chunks(chunks: list[Chunk], symbols: Symbols) -> tuple[Table, list[tuple[Frame, ...]]]:
    """One entries table from chunks of consecutive ranks (given in rank order) that were
    compacted with `symbols`.

    Each column is concatenated and then dropped from the chunks, so at most one column
    exists twice at a time.
    """
    total = sum(len(c.rank) for c in chunks)
    labels: dict[str, list[Any]] = {}
    cols: dict[str, Any] = {
        "rank": _concat([c.rank for c in chunks], np.int32),
        "pos": _concat([c.pos for c in chunks], np.int32),
    }
    for c in chunks:
        c.rank = c.pos = np.empty(0, np.int32)
    for name in list(chunks[0].ints) if chunks else ():
        cols[name] = _concat([c.ints.pop(name) for c in chunks], np.int64)
    for name in CATEGORY_COLUMNS:
        labels[name] = symbols.labels(name)
        narrow = code_dtype(len(labels[name]))
        cols[name] = _concat([c.cats.pop(name) for c in chunks], np.int32, narrow)
    cols["duration_ms"] = _concat([c.duration_ms for c in chunks], np.float64)
    cols["retired"] = _concat([c.retired for c in chunks], bool)
    cols["coalesced"] = _concat([c.coalesced for c in chunks], bool)
    is_p2p = _concat([c.is_p2p for c in chunks], bool)

    # Stacks: the same call site appears in many files; each distinct stack is stored once
    # and the empty stack is -1.
    codes = _concat([c.cats.pop(STACKS) for c in chunks], np.int32)
    values = symbols.labels(STACKS)
    stacks = [v for v in values if v != ()]
    ids = np.full(len(values) or 1, -1, dtype=np.int32)
    nonempty = [i for i, v in enumerate(values) if v != ()]
    ids[nonempty] = np.arange(len(nonempty), dtype=np.int32)
    cols["stack_id"] = ids[codes] if total else np.empty(0, np.int32)
    for c in chunks:
        c.duration_ms = c.retired = c.coalesced = c.is_p2p = np.empty(0, bool)

    # Derive backend, op and group-local p2p peers once per distinct profiling name.
    parsed = [parse_profiling_name(str(n)) for n in labels["profiling_name"]]
    codes = cols["profiling_name"]
    cols["backend"], labels["backend"] = _derived_category(codes, [p[0] for p in parsed])
    cols["op"], labels["op"] = _derived_category(codes, [p[1] for p in parsed])
    src = np.array([p[2] for p in parsed] or [0], dtype=np.int32)
    dst = np.array([p[3] for p in parsed] or [0], dtype=np.int32)
    cols["src"] = src[codes] if total else np.empty(0, np.int32)
    cols["dst"] = dst[codes] if total else np.empty(0, np.int32)
    p2p_name = np.array([p[1] in P2P_OPS for p in parsed] or [False])
    cols["is_p2p"] = is_p2p | (p2p_name[codes] if total else np.empty(0, bool))
    for side in ("input", "output"):
        key = f"{side}_sizes"
        per_cat = np.array([numel(str(k)) for k in labels[key]] or [0], dtype=np.int64)
        cols[f"{side}_numel"] = per_cat[cols[key]] if total else np.empty(0, np.int64)
    order = [
        "rank", "pos", "record_id", "pg_id", "pg_name", "pg_desc", "collective_seq_id",
        "p2p_seq_id", "op_id", "backend", "op", "profiling_name", "is_p2p", "coalesced", "src",
        "dst",
        "input_sizes", "input_dtypes", "input_numel", "output_sizes", "output_dtypes",
        "output_numel", "state", "time_created_ns", "time_started_ns", "time_completed_ns",
        "duration_ms", "retired", "timeout_ms", "thread_id", "thread_name", "stack_id",
    ]  # fmt: skip
    for name in INT32_FIELDS:
        cols[name] = np.asarray(cols[name]).astype(np.int32, copy=False)
    for name, values in labels.items():  # a dozen code columns: 1-2 bytes a row, not 4
        cols[name] = cols[name].astype(code_dtype(len(values)), copy=False)
    rank = cols["rank"]
    if total and not (rank[1:] >= rank[:-1]).all():  # chunks out of rank order: never from
        order_rows = np.argsort(rank, kind="stable")  # the loaders, but keep the invariant
        cols = {name: values[order_rows] for name, values in cols.items()}
    return Table({name: cols[name] for name in order}, labels), stacks


def code_dtype(labels: int) -> type[np.signedinteger[Any]]:
    """The narrowest integer type for codes into this many labels (as pandas keeps them)."""
    if labels <= np.iinfo(np.int8).max:
        return np.int8
    return np.int16 if labels <= np.iinfo(np.int16).max else np.int32


def _derived_category(codes: np.ndarray, values: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes and labels of a category whose value is a function of another one's value."""
    uniques: dict[str, int] = {}
    mapping = np.array([uniques.setdefault(v, len(uniques)) for v in values] or [0], np.int32)
    new_codes = mapping[codes] if len(codes) else codes.astype(np.int32)
    return new_codes, list(uniques)


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
