"""The view analyzers share: one row per rank and collective, coalesced work folded into one.

Entries sharing a collective_seq_id on one rank (ending in `coalesced` / `*_coalesced`) are a
single collective, so they become one row whose signature joins the parts. Signatures are kept
as integer codes with a label table, so comparing ranks is integer work even for millions of rows.

NCCL records the parts of a coalescing block without events: they stay `scheduled` forever,
and only the block's closing entry (`nccl:coalesced`, `nccl:ALLGATHER_coalesced`, ...) carries
the block's real state. A p2p batch (`batch_isend_irecv`) is such a block too, its parts
sharing one p2p_seq_id. So every part takes its closer's state (`block_states`).

Shapes are compared only where the record makes them equal on every member: all_to_all
splits differ by rank (MoE), only a gather's or scatter's root records the list of tensors (on
NCCL a scatter's list is in its outputs, on gloo in its inputs), and one side of an uneven
all_gather / reduce_scatter part (`_broadcast_oop` / `_reduce_oop`) is rank i's own tensor on
rank i. Those columns, per backend and op (frtrace.tables.records), are masked before comparing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from frtrace.tables.records import numel_rules, pair_codes, pair_table, rank_dependent
from frtrace.tables.table import Table, group_max, runs

STATE_CODES = {"scheduled": 0, "started": 1, "completed": 2}
SIGNATURE = ("op", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes")
UNCOMPARED = "*"  # label of a masked signature value: not comparable across members


def is_closer_name(op: str) -> bool:
    """`coalesced`, `ALLGATHER_coalesced`, `allreduce_coalesced`: names of block closers
    (the fast-path `*_tensor_coalesced` ops list their tensors and are checked by sizes)."""
    return op == "coalesced" or op.endswith("_coalesced")


@dataclass
class OpView:
    """Collective ops (one row per rank, group, seq) and the labels of their signature codes."""

    coll: Table  # rank, pg, seq, pos, record_id, state, stack_id, times, numels, SIGNATURE codes
    labels: dict[str, list[str]]
    states_tracked: bool
    uncompared: dict[str, int]  # column -> the code of its masked value `*`, where used

    def label(self, column: str, code: int) -> str:
        return self.labels[column][int(code)]

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + sys.getsizeof(self.coll)

    def last_seqs(self, completed: bool = False) -> dict[tuple[int, int], int]:
        """{(group code, rank): its highest collective seq} over the ops it issued (only
        those it completed: `completed`)."""
        c = self.coll
        rows = c["state"] == 2 if completed else slice(None)
        key = c["pg"][rows].astype(np.int64) << 32 | c["rank"][rows].astype(np.int64)
        top = group_max(key, c["seq"][rows])
        return {(k >> 32, k & 0xFFFFFFFF): int(v) for k, v in top.items()}


def pg_seq_key(pg: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """(group, seq) as one int64 that sorts by group, then seq: lookups and group-bys over one
    column, not joins."""
    return pg.astype(np.int64) * (1 << 32) + (seq.astype(np.int64) & 0xFFFFFFFF)


def op_is(entries: Table, name: str) -> np.ndarray:
    """Mask of entries whose op is `name`, from the codes (no string column)."""
    code = entries.code("op", name)
    return entries["op"] == code if code >= 0 else np.zeros(len(entries), dtype=bool)


def raw_state_codes(entries: Table) -> np.ndarray:
    """Each entry's own recorded state as 0/1/2."""
    table = np.array(
        [STATE_CODES.get(str(c), 0) for c in entries.labels["state"]] or [0], dtype=np.int8
    )
    codes = entries["state"]
    return table[codes] if len(codes) else np.empty(0, np.int8)


def closer_mask(entries: Table, rows: np.ndarray | None = None) -> np.ndarray:
    """Entries (only those at `rows`, when given) that close a coalescing block: a closer's
    name and no tensors of its own. Decided once per label, then looked up by code."""
    by_name = np.array([is_closer_name(str(o)) for o in entries.labels["op"]] or [False])
    empty = np.array([str(c) in ("[]", "") for c in entries.labels["input_sizes"]] or [False])
    op, sizes = entries["op"], entries["input_sizes"]
    if rows is not None:
        op, sizes = op[rows], sizes[rows]
    return by_name[op] & empty[sizes] if len(op) else np.zeros(0, dtype=bool)


Blocks = tuple[np.ndarray, np.ndarray, np.ndarray]  # what block_ids returns


def block_ids(entries: Table) -> Blocks:
    """Rows in coalescing blocks, sorted by block then position, where each block starts, and
    each row's block.

    Collective blocks are the parts sharing (rank, group, collective_seq_id); p2p batches are
    the p2p entries sharing (rank, group, p2p_seq_id) with a closer among them.
    """
    is_p2p = entries["is_p2p"]
    coll_part = entries["coalesced"] & ~is_p2p
    # Native widths (int32 ranks and seqs, small codes): no int64 copies but the sort keys.
    rank = entries["rank"]
    pg = entries["pg_name"]
    seq = np.where(is_p2p, entries["p2p_seq_id"], entries["collective_seq_id"])
    member = coll_part.copy()
    p2p_rows = np.flatnonzero(is_p2p)
    if len(p2p_rows):
        # Entries arrive sorted by rank and position; a batch's parts and closer are adjacent,
        # so a p2p entry belongs to a block when a neighbour shares its (rank, group, seq).
        order, starts = runs(rank[p2p_rows], pg[p2p_rows], seq[p2p_rows])
        alone = np.zeros(len(order) + 1, dtype=bool)
        alone[starts] = True  # a run's first row: unlike the one before it
        alone[len(order)] = True
        alone = alone[:-1] & alone[1:]  # ...and unlike the one after it
        member[p2p_rows[order]] = ~alone
    rows = np.flatnonzero(member)
    if not len(rows):
        return rows, rows, rows
    pos = entries["pos"][rows]
    keys: tuple[np.ndarray, ...] = (rank[rows], pg[rows], is_p2p[rows].view(np.int8), seq[rows])
    if not _pos_ascending(keys[0], pos):  # a table not ordered by rank, then position
        keys = (*keys, pos)
    order, starts = runs(*keys)
    which = np.zeros(len(rows), dtype=np.int64)
    which[starts[1:]] = 1
    if len(keys) > 4:  # runs of equal (rank, group, kind, seq), position aside
        new = ~_same_as_previous(*(k[order] for k in keys[:4]))
        starts = np.flatnonzero(new)
        which = new.astype(np.int64)
        which[0] = 0
    return rows[order], starts, np.cumsum(which)


def _pos_ascending(rank: np.ndarray, pos: np.ndarray) -> bool:
    """Rows ordered by rank, then position, as the entries table keeps them: a stable sort
    by the other keys then leaves each block's parts in position order."""
    up, same = rank[1:] > rank[:-1], rank[1:] == rank[:-1]
    return bool((up | (same & (pos[1:] >= pos[:-1]))).all())


def _same_as_previous(*cols: np.ndarray) -> np.ndarray:
    """Rows equal to the row before them in every column (the first row never is); exact for
    any value range, unlike packing the columns into one integer."""
    same = np.ones(len(cols[0]), dtype=bool)
    same[0] = False
    for c in cols:
        same[1:] &= c[1:] == c[:-1]
    return same


def block_states(
    entries: Table,
    status: dict[int, dict[int, tuple[int, int, int]]] | None = None,
    blocks: Blocks | None = None,
) -> np.ndarray:
    """States with every part of a coalescing block given its closer's state.

    A block without its closer is complete when the rank recorded work after it (an
    `onlyActive` dump leaves completed closers out, never the frozen parts); at the end of the
    dump it is still being written and keeps its parts' lowest state, unless pg_status
    (`status`: group code -> rank -> last enqueued, started, completed) says it got further.
    `blocks`: block_ids(entries), when already at hand.
    """
    state = raw_state_codes(entries)
    rows, starts, which = block_ids(entries) if blocks is None else blocks
    if not len(rows):
        return state
    last, closed, followed = _block_ends(entries, rows, starts)
    lowest = np.minimum.reduceat(state[rows], starts)
    ranks = entries["rank"]
    block_state = np.where(closed, state[last], np.where(followed, 2, lowest))
    if status:
        seq = entries["collective_seq_id"]
        pg = entries["pg_name"]
        for b in np.flatnonzero(~closed & ~followed).tolist():
            got = status.get(int(pg[last[b]]), {}).get(int(ranks[last[b]]))
            if got is not None:
                block_state[b] = 2 if got[2] >= seq[last[b]] else block_state[b]
    state = state.copy()
    state[rows] = block_state[which]
    return state


def _block_ends(
    entries: Table, rows: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per block of `block_ids`: its last row, whether that row is a closer, and whether the
    rank recorded anything after it."""
    last = rows[np.r_[starts[1:], len(rows)] - 1]
    ranks = entries["rank"]  # sorted: each rank's rows end where the next rank's begin
    ends = np.r_[np.flatnonzero(ranks[1:] != ranks[:-1]) + 1, len(ranks)]
    followed = ends[np.searchsorted(ends, last, side="right")] - 1 > last
    return last, closer_mask(entries, last), followed


def unlaunched(
    entries: Table,
    status: dict[int, dict[int, tuple[int, int, int]]] | None = None,
    blocks: Blocks | None = None,
) -> np.ndarray:
    """Rows of collectives a rank had recorded but not launched when it dumped.

    ProcessGroupNCCL records an op before it enqueues it, and a coalescing block's parts long
    before its end: NCCL launches the block at `endCoalescing` (after `groupStart` at its
    start), where the closing entry is recorded and pg_status counts the block as enqueued.
    So the entries at the end of a rank's dump that pg_status (`status`: group code -> rank ->
    last enqueued, started, completed) has not counted, or parts with no closer and nothing
    after them, were never launched: no peer can be waiting for that rank inside them. The
    rank stopped while issuing them (or an on-demand dump caught it there). pg_status also
    tells an `onlyActive` dump's completed block, whose closer that dump leaves out, from an
    open one: it was enqueued. `blocks`: block_ids(entries), when already at hand.
    """
    found = [_open_blocks(entries, status, blocks)]
    if status:
        found.append(_uncounted_tails(entries, status))
    rows = np.concatenate(found)
    return np.unique(rows) if len(found) > 1 and len(rows) else rows


def _enqueued(status: dict[int, dict[int, tuple[int, int, int]]], pg: int, rank: int) -> int:
    got = status.get(pg, {}).get(rank)
    return -1 if got is None else got[0]


def _open_blocks(
    entries: Table,
    status: dict[int, dict[int, tuple[int, int, int]]] | None,
    blocks: Blocks | None,
) -> np.ndarray:
    """Parts of collective blocks with no closer and nothing after them on their rank, that
    pg_status (where known) does not count as enqueued."""
    rows, starts, _which = block_ids(entries) if blocks is None else blocks
    if not len(rows):
        return rows.astype(np.int64)
    last, closed, followed = _block_ends(entries, rows, starts)
    is_open = ~closed & ~followed & ~entries["is_p2p"][last]
    if status:
        pg, ranks, seq = (entries[c] for c in ("pg_name", "rank", "collective_seq_id"))
        for b in np.flatnonzero(is_open).tolist():
            rank = int(ranks[last[b]])
            if rank in status.get(int(pg[last[b]]), {}):
                is_open[b] = _enqueued(status, int(pg[last[b]]), rank) < seq[last[b]]
    counts = np.diff(np.r_[starts, len(rows)])
    return rows[np.repeat(is_open, counts)].astype(np.int64)


def _uncounted_tails(
    entries: Table, status: dict[int, dict[int, tuple[int, int, int]]]
) -> np.ndarray:
    """Each rank's newest collective (its trailing entries of one group and seq), where
    pg_status counts fewer enqueued collectives in that group: one lookup per rank."""
    ranks = entries["rank"]
    if not len(ranks):
        return np.empty(0, np.int64)
    ends = np.r_[np.flatnonzero(ranks[1:] != ranks[:-1]), len(ranks) - 1]
    pg, seq, is_p2p = entries["pg_name"], entries["collective_seq_id"], entries["is_p2p"]
    out: list[int] = []
    for end in ends[~is_p2p[ends]].tolist():
        rank, group, last = int(ranks[end]), int(pg[end]), int(seq[end])
        if rank not in status.get(group, {}) or _enqueued(status, group, rank) >= last:
            continue
        i = end
        while i >= 0 and ranks[i] == rank and pg[i] == group and seq[i] == last and not is_p2p[i]:
            out.append(i)
            i -= 1
    return np.array(sorted(out), dtype=np.int64)


def build_op_view(
    entries: Table,
    state: np.ndarray,
    base: OpView | None = None,
    leave_out: np.ndarray | None = None,
) -> OpView:
    """Fold coalesced entries and encode each op's signature as integer codes.

    Each coalesced group collapses onto its first part's row, so rows stay ordered by rank and
    position without a re-sort; everything here is numpy over whole columns. `state` is
    `block_states(entries)`. With `base` (the job's view), codes are that view's, so ops of a
    rank's history fetched later compare with the job's. `leave_out`: rows that are no op
    (yet): `unlaunched`.
    """
    states_tracked = bool((state > 0).any())
    mask = ~entries["is_p2p"]
    if leave_out is not None and len(leave_out):
        mask = mask.copy()
        mask[leave_out] = False
    # Row numbers, not the mask: numpy gathers by index several times faster than it
    # selects by a boolean mask, and this selects from a dozen of the job's columns.
    rows = np.flatnonzero(mask)
    pairs = pair_codes(entries)[rows]  # (backend, op) of each row: what its record holds
    cols: dict[str, np.ndarray] = {
        "rank": entries["rank"][rows],
        "pg": entries["pg_name"][rows],
        "seq": entries["collective_seq_id"][rows],
        "pos": entries["pos"][rows],
        "record_id": entries["record_id"][rows],
        "state": state[rows],
        "stack_id": entries["stack_id"][rows],
        "time_created_ns": entries["time_created_ns"][rows],
        "duration_ms": entries["duration_ms"][rows].astype(np.float64),
        "input_numel": entries["input_numel"][rows],
        "output_numel": entries["output_numel"][rows],
        # GATHER_NUMEL / SCATTER_NUMEL / 0: how numel follows the group size
        "numel_rule": numel_rules(entries, pairs),
    }
    labels: dict[str, list[str]] = {}
    for col in SIGNATURE:
        cols[col] = entries[col][rows].astype(np.int32)
        labels[col] = list(base.labels[col]) if base else [str(c) for c in entries.labels[col]]
    uncompared = dict(base.uncompared) if base else {}
    varies = {col: pair_table(entries, _differs_by_rank(col))[pairs] for col in SIGNATURE[1:]}
    _mask_rank_dependent(cols, labels, uncompared, varies)
    cols["parts"] = np.ones(len(cols["rank"]), dtype=np.int32)
    dup = entries["coalesced"][rows]
    del rows, pairs, varies  # the fold is this step's peak: 230 MB less of it at 16 M entries
    if dup.any():
        cols = _fold(cols, dup, labels)
    return OpView(Table(cols, labels), labels, states_tracked, uncompared)


def _differs_by_rank(column: str) -> Callable[[str, str], bool]:
    return lambda backend, op: column in rank_dependent(backend, op)


def _mask_rank_dependent(
    cols: dict[str, np.ndarray],
    labels: dict[str, list[str]],
    uncompared: dict[str, int],
    rows_of: dict[str, np.ndarray],
) -> None:
    """Replace the columns a (backend, op) lets differ by rank (`rows_of`: column -> rows)
    with one shared `*` code (the one in `uncompared` where there is one, else a new one,
    recorded there)."""
    for col, rows in rows_of.items():
        if rows.any():
            if col not in uncompared:
                uncompared[col] = len(labels[col])
                labels[col] = [*labels[col], UNCOMPARED]
            cols[col][rows] = uncompared[col]


def _fold(
    cols: dict[str, np.ndarray], dup: np.ndarray, labels: dict[str, list[str]]
) -> dict[str, np.ndarray]:
    """Collapse each coalesced group (same rank, group, seq) onto its first part."""
    rows = np.flatnonzero(dup)
    rank, pg, seq, pos = (cols[c][rows] for c in ("rank", "pg", "seq", "pos"))
    rows = rows[np.lexsort((pos, seq, pg, rank))]
    rank, pg, seq = cols["rank"][rows], cols["pg"][rows], cols["seq"][rows]
    new = np.r_[True, (rank[1:] != rank[:-1]) | (pg[1:] != pg[:-1]) | (seq[1:] != seq[:-1])]
    starts = np.flatnonzero(new)
    nth = np.arange(len(rows)) - starts[np.cumsum(new) - 1]
    first = rows[starts]  # lowest position: its pos, record, time and stack stand for the group
    cols["state"][first] = np.minimum.reduceat(cols["state"][rows], starts)
    # Parts have no events: the closer's duration is the block's.
    cols["duration_ms"][first] = np.fmax.reduceat(cols["duration_ms"][rows], starts)
    for col in ("input_numel", "output_numel"):
        cols[col][first] = np.add.reduceat(cols[col][rows], starts)
    counts = np.diff(np.r_[starts, len(rows)])
    cols["parts"][first] = counts
    # A group's signature is the sequence of its parts' codes: hash it with numpy (unsigned
    # arithmetic wraps), then build a joined label once per distinct sequence.
    weight = np.power(np.uint64(1_000_003), nth.astype(np.uint64))
    for col in SIGNATURE:
        codes = cols[col][rows]
        digest = np.add.reduceat((codes.astype(np.uint64) + np.uint64(1)) * weight, starts)
        names = labels[col]
        table = {name: i for i, name in enumerate(names)}
        distinct, first_group, which = np.unique(digest, return_index=True, return_inverse=True)
        code_of = np.empty(len(distinct), dtype=np.int32)
        for k, g in enumerate(first_group.tolist()):
            parts = codes[starts[g] : starts[g] + counts[g]]
            code_of[k] = table.setdefault(_join(names, parts), len(table))
        cols[col][first] = code_of[which]
        labels[col] = list(table)
    keep = ~dup
    keep[first] = True
    kept = np.flatnonzero(keep)  # gathering by index is faster than by mask
    # Column by column, each unfolded column dropped once folded: the view never exists twice.
    return {name: cols.pop(name)[kept] for name in list(cols)}


def _join(names: list[str], codes: np.ndarray) -> str:
    return " + ".join(names[int(c)] or "-" for c in codes)
