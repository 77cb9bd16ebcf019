"""Settling: the collectives that can name no culprit, left where they were parsed.

A group's collectives from seq L to W are settled when every member of the group left a dump,
no other rank recorded work in it, and each member holds exactly one op per seq in that range,
all completed, with the same signatures (op, sizes, dtypes, as the analysis compares them;
equal sizes make equal numel, so the size check of all_gather / reduce_scatter has nothing
to blame there either). L is the highest of the members' lowest seqs (every member still
holds the range), W one below the lowest of their highest completed seqs (each member's newest
completed and newest issued op stay). Whether a range is settled is decided from per-(group,
rank) aggregates: counts and an order-free digest of (seq, signature); no entry has to meet
another rank's to decide it, so a partition of ranks can compute its share anywhere.

P2P work settles by channel (settled_p2p). The settled entries (whole coalescing blocks among
them) leave the table; the facts the analysis reads from them travel as `Settled`
(frtrace.tables.settled). `settle` here does it for a whole job in one process: the reference
the distributed plan must equal, and what the tests compare with the analysis of the whole job.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from frtrace.analysis.collectives import _signature_ids
from frtrace.analysis.context import Context, _min_by_pair, build_context, cut_blocks
from frtrace.analysis.ops import block_ids, closer_mask, op_is
from frtrace.analysis.p2p import RECV, SEND, channel_ops
from frtrace.analysis.progress import last_completed
from frtrace.analysis.timing import lag_stats
from frtrace.tables.settled import Settled
from frtrace.tables.table import Table, group_max, group_min, runs, split
from frtrace.tables.trace import Trace

_MIX = np.uint64(0x9E3779B97F4A7C15)


def settled_ranges(ctx: Context, lowest: dict[tuple[int, int], int]) -> dict[int, tuple[int, int]]:
    """Group code -> (L, W): its settled collective seqs, for the groups that have some.
    `lowest`: each (group, rank)'s lowest collective seq (Settled.lowest_seq)."""
    coll = ctx.view.coll
    if not len(coll) or not ctx.view.states_tracked:
        return {}
    pg, rank, seq, state = coll["pg"], coll["rank"], coll["seq"], coll["state"]
    done = state == 2
    highest_done = _min_by_pair(pg[done], rank[done], -seq[done].astype(np.int64))
    candidates: dict[int, tuple[int, int]] = {}
    holders: dict[int, set[int]] = {}
    for g, r in lowest:
        holders.setdefault(g, set()).add(r)
    for g, have in holders.items():
        members = ctx.group_members(g)
        if not members or set(members) != have or not have <= ctx.dumped:
            continue
        if any((g, m) not in highest_done for m in members):
            continue
        lo = max(lowest[(g, m)] for m in members)
        hi = min(-highest_done[(g, m)] for m in members) - 1
        if hi >= lo:
            candidates[g] = (lo, hi)
    if not candidates:
        return {}
    rows = np.flatnonzero(_inside(ctx, candidates, pg, seq))
    digest = _digest(seq[rows], _signature_ids(ctx, coll.take(rows)))
    order, starts = runs(pg[rows], rank[rows])
    if not len(order):
        return {}
    first = rows[order[starts]]
    per = Table(
        {
            "pg": pg[first].astype(np.int64),
            "n": np.diff(np.r_[starts, len(order)]),
            "done": np.add.reduceat(done[rows][order].astype(np.int64), starts),
            "digest": np.add.reduceat(digest[order], starts),
        }
    )
    out = {}
    for (g,), mine in split(per, "pg"):
        lo, hi = candidates[g]
        want = hi - lo + 1
        if (
            len(mine) == len(ctx.group_members(g))
            and (mine["n"] == want).all()
            and (mine["done"] == want).all()
            and (mine["digest"] == mine["digest"][0]).all()
        ):
            out[g] = (lo, hi)
    return out


def _digest(seq: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """One well-mixed 64-bit number per (seq, signature): sums of them compare ranges."""
    with np.errstate(over="ignore"):
        x = seq.astype(np.uint64) * _MIX + sig.astype(np.uint64)
        x ^= x >> np.uint64(31)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(32)
    return x


def _inside(
    ctx: Context, ranges: dict[int, tuple[int, int]], pg: np.ndarray, seq: np.ndarray
) -> np.ndarray:
    """Mask of the (group code, seq) pairs inside their group's range (none for the others)."""
    low = np.full(len(ctx.pg_names) or 1, 1, dtype=np.int64)
    high = np.zeros(len(ctx.pg_names) or 1, dtype=np.int64)
    for g, (lo, hi) in ranges.items():
        low[g], high[g] = lo, hi
    return (seq >= low[pg]) & (seq <= high[pg])


def settled_rows(ctx: Context, ranges: dict[int, tuple[int, int]]) -> np.ndarray:
    """Mask of the entries a settled job leaves out: collectives in a settled range of their
    group (a coalescing block goes whole: its parts and closer share its seq)."""
    e = ctx.trace.table
    return ~e["is_p2p"] & _inside(ctx, ranges, e["pg_name"], e["collective_seq_id"])


def settled_p2p(ctx: Context) -> np.ndarray:
    """Entry rows of p2p ops in settled stretches of their channels.

    Sends and recvs pair by slot on each channel (frtrace.analysis.p2p). A channel settles when
    every pair its two ends hold agrees on sizes and dtypes (an order-free digest per end
    compares them) and its (src, dst) is used by one group only; then the completed pairs but
    the newest one (slot 0) leave on both ends, so the slots of the older ones shift alike on
    both ends and still pair, and each end's newest op stays.
    """
    e = ctx.trace.table
    ops = channel_ops(ctx)
    if not len(ops) or not ctx.view.states_tracked:
        return np.empty(0, np.int64)
    rows = np.flatnonzero(e["is_p2p"] & (op_is(e, "send") | op_is(e, "recv")))
    pg, src, dst, side = ops["pg"], ops["src"], ops["dst"], ops["side"]
    done = ops["slot_kind"] == 0
    slot = ops["slot"]
    order, starts = runs(pg, src, dst)
    step = np.zeros(len(order), dtype=np.int64)
    step[starts] = 1
    channel = np.empty(len(ops), dtype=np.int64)
    channel[order] = np.cumsum(step) - 1
    n = len(starts)

    def per_channel(mask: np.ndarray) -> np.ndarray:
        return np.bincount(channel[mask], minlength=n)

    paired_c = np.minimum(per_channel(done & (side == SEND)), per_channel(done & (side == RECV)))
    paired_p = np.minimum(per_channel(~done & (side == SEND)), per_channel(~done & (side == RECV)))
    paired = slot < np.where(done, paired_c[channel], paired_p[channel])
    # What pairing compares (sizes, dtypes) at each slot, completed and pending apart.
    sig = ops["input_sizes"].astype(np.int64) * (1 << 24) + ops["input_dtypes"].astype(np.int64)
    digest = _digest(slot + (~done).astype(np.int64) * (1 << 40), sig)
    per_end = np.zeros((n, 2), dtype=np.uint64)
    np.add.at(per_end, (channel[paired], side[paired].astype(np.int64)), digest[paired])
    first = order[starts]
    ends = src[first].astype(np.int64) * (1 << 32) + dst[first].astype(np.int64)
    _, which, uses = np.unique(ends, return_inverse=True, return_counts=True)
    settled = (per_end[:, 0] == per_end[:, 1]) & (uses[which] == 1)
    leave = settled[channel] & done & (slot >= 1) & (slot < paired_c[channel])
    return rows[leave]


def _closers_left_alone(e: Table, left_out: np.ndarray) -> np.ndarray:
    """Rows of p2p batch closers (`nccl:coalesced`) whose every send and recv settled: the
    closer only lends its state to its parts, so it goes with the last of them."""
    rows, starts, which = block_ids(e)
    if not len(rows):
        return rows
    closer = closer_mask(e)[rows]
    part = ~closer
    parts = np.add.reduceat(part.astype(np.int64), starts)
    gone = np.add.reduceat((part & left_out[rows]).astype(np.int64), starts)
    whole = (parts > 0) & (gone == parts)
    return rows[e["is_p2p"][rows] & closer & whole[which]]


def settle(trace: Trace) -> Trace:
    """The job without its settled entries, carrying what the analysis needs of them."""
    ctx = build_context(trace)
    coll = ctx.view.coll
    lowest = _min_by_pair(coll["pg"], coll["rank"], coll["seq"])
    left_out = settled_rows(ctx, settled_ranges(ctx, lowest))
    left_out[settled_p2p(ctx)] = True
    left_out[_closers_left_alone(trace.table, left_out)] = True
    e = trace.table
    created = e["time_created_ns"]
    ok = created > 0

    def history(rank: int) -> Table:  # here the whole job is at hand: a slice of it
        return e.take(ctx.rank_rows(rank))

    facts = Settled(
        entries=len(e),
        left_out=int(left_out.sum()),
        backends=trace.backends,
        first_record=group_min(e["rank"], e["record_id"]),
        last_record=group_max(e["rank"], e["record_id"]),
        latest_ns=dict(ctx.dump_ns),
        last_created_ns=group_max(e["rank"][ok], created[ok]) if ok.any() else {},
        lowest_seq=lowest,
        cut_lo=cut_blocks(e),
        timed=bool(np.isfinite(e["duration_ms"]).any()),
        max_timeout_ms=int(e["timeout_ms"].max()) if len(e) else 0,
        last_completed=last_completed(trace),
        lags=lag_stats(ctx),
        history=history,
    )
    return dataclasses.replace(trace, table=e.take(~left_out), settled=facts)
