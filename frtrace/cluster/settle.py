"""Settling: the collectives that can name no culprit, left where they were parsed.

A group's collectives from seq L to W are settled when every member of the group that left a
dump holds some of them, no other rank recorded work in it, and each of those members holds
exactly one op per seq in that range, all completed, with the same signatures (op, sizes,
dtypes, as the analysis compares them; equal sizes make equal numel, so the size check of
all_gather / reduce_scatter has nothing to blame there either). L is the highest of their
lowest seqs (every one still holds the range), or the seq after a coalescing block a wrapped
buffer cut (the analysis judges the group from there too); W one below the lowest of their
highest completed seqs (each one's newest completed and newest issued op stay). A member
without a dump does not stop the rest from settling: a collective its peers completed, it
joined, and its absence is told by the newest ops, which stay. A range whose members disagree
somewhere is asked again in pieces (`refine`), so an old mismatch keeps the piece around it.
P2P work settles by channel (`digests`, `prune`).

Everything is decided from aggregates per (group, rank) and per channel end, keyed by group
name and global rank: counts and order-free digests of (seq, signature), signatures hashed
from their label strings. So each partition of ranks computes its share where its entries are
(`tally`, `digests`, `prune`, `lag_partials`, `rank_lags`: worker side, over a partition's
Context), and the client combines the small answers (`plan`, `decide`, `refine`,
`join_lags`). The tally carries the partition's facts (frtrace.analysis.facts.Partial): the
client assembles the job's from them, what its analysis reads of the entries that settled.
The Dask engine runs the partitions on its workers (frtrace.cluster.spread); `settle` runs
the same steps on a whole job in one process: the reference the tests compare with the
analysis of the whole job, and so the check of every step.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from frtrace.analysis import facts as job_facts
from frtrace.analysis import timing
from frtrace.analysis.context import Context, build_context
from frtrace.analysis.facts import Partial, min_by_pair
from frtrace.analysis.ops import (
    SIGNATURE,
    block_ids,
    closer_mask,
    op_is,
)
from frtrace.analysis.p2p import RECV, SEND, channel_ops
from frtrace.tables.table import Table, runs
from frtrace.tables.trace import Trace

_MIX = np.uint64(0x9E3779B97F4A7C15)
SPLIT = 16  # a range that did not settle is asked again in this many pieces...
FINEST = 16  # ...of at least this many seqs...
REFINE = 2  # ...for at most this many more rounds,
ANSWERS = 1_000_000  # ...each with at most this many (piece, member) answers: pieces grow

Pair = tuple[str, int]  # group name, global rank
End = tuple[str, int, int, int]  # group name, src, dst, side (RECV / SEND)
Channel = tuple[str, int, int]  # group name, src, dst
Span = tuple[int, int]  # first and last seq of a range


@dataclass
class Tally:
    """Round 1, per partition: its facts (the lowest seq per (group, rank) among them),
    the highest completed seqs, channel-end counts."""

    facts: Partial
    highest_done: dict[Pair, int]  # highest completed collective seq
    ends: dict[End, tuple[int, int]]  # completed, pending sends or recvs
    tracked: bool  # some state moves
    finished: int  # completed collectives...
    timed_finished: int  # ...of which with a duration


@dataclass
class Ask:
    """Round 2's question to every partition, from all tallies."""

    tracked: bool
    candidates: dict[str, list[Span]]  # group -> ranges worth digesting, ordered
    voters: dict[str, int]  # group -> how many members answer for its range (those that dumped)
    paired: dict[Channel, tuple[int, int]]  # channel -> pairs of completed, of pending ops
    method: str  # lag method: "duration", "enqueue", "none"


@dataclass
class Digests:
    """Round 2's answer: per (group, first seq of a candidate range, rank) ops, completed,
    digest; per channel end the digest of its paired slots."""

    ranges: dict[tuple[str, int, int], tuple[int, int, int]]
    ends: dict[End, int]


@dataclass
class Verdict:
    """What settled: collective ranges by group, channels whose older pairs leave."""

    ranges: dict[str, list[Span]]
    channels: set[Channel]
    paired: dict[Channel, tuple[int, int]]


# ---------------------------------------------------------------- worker side


def _names(ctx: Context, codes: np.ndarray) -> list[str]:
    return [ctx.pg_names[c] for c in codes.tolist()]


def _by_pair(ctx: Context, values: dict[tuple[int, int], int]) -> dict[Pair, int]:
    return {(ctx.pg_names[g], r): v for (g, r), v in values.items()}


def tally(ctx: Context) -> Tally:
    """Round 1 over a partition's Context (built with the job's Scope)."""
    coll = ctx.view.coll
    pg, rank, seq = coll["pg"], coll["rank"], coll["seq"]
    done = coll["state"] == 2
    highest = min_by_pair(pg[done], rank[done], -seq[done].astype(np.int64))
    ends: dict[End, tuple[int, int]] = {}
    ops = channel_ops(ctx)
    if len(ops):
        finished = (ops["state"] == 2).astype(np.int64)
        order, starts = runs(ops["pg"], ops["src"], ops["dst"], ops["side"])
        first = order[starts]
        c = np.add.reduceat(finished[order], starts)
        n = np.diff(np.r_[starts, len(order)])
        keys = zip(
            _names(ctx, ops["pg"][first]),
            ops["src"][first].tolist(),
            ops["dst"][first].tolist(),
            ops["side"][first].tolist(),
            strict=True,
        )
        ends = {k: (int(a), int(b - a)) for k, a, b in zip(keys, c, n, strict=True)}
    return Tally(
        facts=job_facts.partial(ctx.facts, ctx.pg_names),
        highest_done={k: -v for k, v in _by_pair(ctx, highest).items()},
        ends=ends,
        tracked=bool((ctx.states > 0).any()),
        finished=int(done.sum()),
        timed_finished=int(np.isfinite(coll["duration_ms"][done]).sum()),
    )


def _label_hashes(labels: list[str]) -> np.ndarray:
    """A 64-bit hash of each label's text: the same in every partition, whatever its codes."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(str(v).encode(), digest_size=8).digest()) for v in labels]
        or [0],
        dtype=np.uint64,
    )


def _signatures(ctx: Context, coll: Table) -> np.ndarray:
    """One 64-bit number per op's (op, sizes, dtypes), from the labels' text."""
    sig = np.zeros(len(coll), dtype=np.uint64)
    for col in SIGNATURE:
        sig = _mix(sig * _MIX + _label_hashes(ctx.view.labels[col])[coll[col]])
    return sig


def _mix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(31))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(32)
    return x


def _digest(seq: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """One well-mixed 64-bit number per (seq, signature): sums of them compare ranges."""
    with np.errstate(over="ignore"):
        return _mix(seq.astype(np.uint64) * _MIX + sig.astype(np.uint64))


_SEQS = np.int64(1 << 40)  # seqs stay below this: (group, seq) as one sortable number


def _which(
    ctx: Context, ranges: dict[str, list[Span]], pg: np.ndarray, seq: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each (group code, seq): the index of the range it falls in (-1: none), and each
    range's first seq. A binary search over the ranges ordered by (group, first seq)."""
    code = {name: i for i, name in enumerate(ctx.pg_names)}
    spans = sorted((code[g], lo, hi) for g, rs in ranges.items() if g in code for lo, hi in rs)
    if not spans or not len(pg):
        return np.full(len(pg), -1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    g, lo, hi = (np.array(c, dtype=np.int64) for c in zip(*spans, strict=True))
    at = np.searchsorted(g * _SEQS + lo, pg.astype(np.int64) * _SEQS + seq, side="right") - 1
    i = np.maximum(at, 0)
    ok = (at >= 0) & (g[i] == pg) & (seq >= lo[i]) & (seq <= hi[i])
    return np.where(ok, i, -1), lo


def _inside(
    ctx: Context, ranges: dict[str, list[Span]], pg: np.ndarray, seq: np.ndarray
) -> np.ndarray:
    """Mask of the (group code, seq) pairs inside one of their group's ranges."""
    return _which(ctx, ranges, pg, seq)[0] >= 0


def _slots(ctx: Context, paired: dict[Channel, tuple[int, int]]) -> tuple[Table, np.ndarray]:
    """The partition's channel ops, and which of them sit in a paired slot of their channel."""
    ops = channel_ops(ctx)
    if not len(ops):
        return ops, np.zeros(0, dtype=bool)
    done = ops["slot_kind"] == 0
    bounds = np.array([paired.get(k, (0, 0)) for k in _channels(ctx, ops)], np.int64)
    bounds = bounds.reshape(-1, 2)
    return ops, ops["slot"] < np.where(done, bounds[:, 0], bounds[:, 1])


def digests(ctx: Context, ask: Ask) -> Digests:
    """Round 2 over a partition: digests of the candidate ranges and of paired channel slots."""
    ctx.view.states_tracked = ask.tracked  # slots number completed ops apart only then
    coll = ctx.view.coll
    pg, rank, seq = coll["pg"], coll["rank"], coll["seq"]
    ranges: dict[tuple[str, int, int], tuple[int, int, int]] = {}
    which, first_seq = _which(ctx, ask.candidates, pg, seq)
    rows = np.flatnonzero(which >= 0)
    if len(rows):
        digest = _digest(seq[rows], _signatures(ctx, coll.take(rows)))
        done = (coll["state"][rows] == 2).astype(np.int64)
        order, starts = runs(which[rows], rank[rows])
        first = rows[order[starts]]
        n = np.diff(np.r_[starts, len(order)])
        d = np.add.reduceat(done[order], starts)
        sums = np.add.reduceat(digest[order], starts)
        keys = zip(
            _names(ctx, pg[first]),
            first_seq[which[first]].tolist(),
            rank[first].tolist(),
            strict=True,
        )
        ranges = {k: (int(a), int(b), int(c)) for k, a, b, c in zip(keys, n, d, sums, strict=True)}
    ends: dict[End, int] = {}
    if ask.paired and ask.tracked:
        ops, paired = _slots(ctx, ask.paired)
        if paired.any():
            done = ops["slot_kind"] == 0
            # What pairing compares (sizes, dtypes) at each slot, completed and pending apart.
            sig = (
                _label_hashes(ctx.trace.table.labels["input_sizes"])[ops["input_sizes"]]
                * np.uint64(3)
                + _label_hashes(ctx.trace.table.labels["input_dtypes"])[ops["input_dtypes"]]
            )
            digest = _digest(ops["slot"] + (~done).astype(np.int64) * (1 << 40), sig)
            rows = np.flatnonzero(paired)
            side = ops["side"][rows]
            for s in (RECV, SEND):
                mine = rows[side == s]
                if not len(mine):
                    continue
                order, starts = runs(ops["pg"][mine], ops["src"][mine], ops["dst"][mine])
                first = mine[order[starts]]
                sums = np.add.reduceat(digest[mine][order], starts)
                for (g, src, dst), v in zip(_channels(ctx, ops.take(first)), sums, strict=True):
                    ends[(g, int(src), int(dst), s)] = int(v)
    return Digests(ranges, ends)


def prune(ctx: Context, verdict: Verdict) -> np.ndarray:
    """Mask of the partition's entries that leave: collectives in a settled range (a
    coalescing block goes whole: its parts and closer share its seq), completed p2p pairs of a
    settled channel but its newest (slot 0), and the batch closers whose every part left."""
    e = ctx.trace.table
    left = ~e["is_p2p"] & _inside(ctx, verdict.ranges, e["pg_name"], e["collective_seq_id"])
    if verdict.channels:
        ops, _paired = _slots(ctx, verdict.paired)
        if len(ops):
            keys = list(_channels(ctx, ops))
            settled = np.array([k in verdict.channels for k in keys], dtype=bool)
            completed = np.array([verdict.paired.get(k, (0, 0))[0] for k in keys], np.int64)
            leave = settled & (ops["slot_kind"] == 0) & (ops["slot"] >= 1)
            leave &= ops["slot"] < completed
            rows = np.flatnonzero(e["is_p2p"] & (op_is(e, "send") | op_is(e, "recv")))
            left[rows[leave]] = True
    left[_closers_left_alone(e, left)] = True
    return left


def _channels(ctx: Context, ops: Table) -> Iterable[Channel]:
    return zip(_names(ctx, ops["pg"]), ops["src"].tolist(), ops["dst"].tolist(), strict=True)


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


def lag_partials(
    ctx: Context, method: str, group_index: dict[str, int], buckets: int
) -> list[Table]:
    """Worker: the partition's side of the lag shuffle (timing.lag_partials)."""
    return timing.lag_partials(timing.lag_values(ctx, method, group_index), buckets)


def rank_lags(
    ctx: Context, method: str, group_index: dict[str, int], combined: list[Table]
) -> timing.RankLags:
    """Worker: the partition's ranks' lags once every bucket is combined."""
    values = timing.lag_values(ctx, method, group_index)
    return timing.rank_lags(values, method, combined, timing.TOP)


# ---------------------------------------------------------------- client side


def merge_tallies(tallies: list[Tally]) -> Tally:
    """The job's tally from its partitions' (ranks apart, in rank order): one pass over
    each partition's aggregates."""
    out = Tally(job_facts.combine([t.facts for t in tallies]), {}, {}, False, 0, 0)
    for t in tallies:
        out.highest_done.update(t.highest_done)
        out.ends.update(t.ends)
        out.tracked = out.tracked or t.tracked
        out.finished += t.finished
        out.timed_finished += t.timed_finished
    return out


def plan(job: Tally, members: dict[str, list[int]], dumped: set[int]) -> Ask:
    """Round 2's question: candidate ranges of the groups every member dumped and holds, and
    how many ops pair on each channel."""
    method = timing.lag_method(job.finished, job.timed_finished)
    if not job.tracked:
        return Ask(False, {}, {}, {}, method)
    lowest = job.facts.lowest_seq
    holders: dict[str, set[int]] = {}
    for g, r in lowest:
        holders.setdefault(g, set()).add(r)
    candidates: dict[str, list[Span]] = {}
    voters: dict[str, int] = {}
    for g, have in holders.items():
        if have != set(members.get(g, [])) & dumped:  # a member dumped none, or an outsider
            continue
        if any((g, m) not in job.highest_done for m in have):
            continue
        # A block a wrapped buffer cut holds fewer parts on some members: judged from after it.
        lo = max(max(lowest[(g, m)] for m in have), job.facts.cut_lo.get(g, 0))
        hi = min(job.highest_done[(g, m)] for m in have) - 1
        if hi >= lo:
            candidates[g], voters[g] = [(lo, hi)], len(have)
    paired: dict[Channel, tuple[int, int]] = {}
    for g, src, dst, _side in job.ends:
        if (g, src, dst) in paired:
            continue
        send = job.ends.get((g, src, dst, SEND), (0, 0))
        recv = job.ends.get((g, src, dst, RECV), (0, 0))
        paired[(g, src, dst)] = (min(send[0], recv[0]), min(send[1], recv[1]))
    return Ask(True, candidates, voters, paired, method)


def decide(ask: Ask, answers: list[Digests]) -> Verdict:
    """The ranges every member that dumped digested alike, and the channels whose ends agree."""
    per_range: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for a in answers:
        for (g, lo, _r), v in a.ranges.items():
            per_range.setdefault((g, lo), []).append(v)
    ranges: dict[str, list[Span]] = {}
    for g, spans in ask.candidates.items():
        for lo, hi in spans:
            got, want = per_range.get((g, lo), []), hi - lo + 1
            if (
                len(got) == ask.voters[g]
                and all(n == want and d == want for n, d, _s in got)
                and len({s for _n, _d, s in got}) == 1
            ):
                ranges.setdefault(g, []).append((lo, hi))
    ends: dict[End, int] = {}
    for a in answers:
        ends.update(a.ends)
    uses: dict[tuple[int, int], int] = {}
    for _g, src, dst in ask.paired:
        uses[(src, dst)] = uses.get((src, dst), 0) + 1
    channels = {
        c
        for c in ask.paired
        if uses[c[1:]] == 1 and ends.get((*c, SEND), 0) == ends.get((*c, RECV), 0)
    }
    return Verdict(ranges, channels, ask.paired)


def refine(ask: Ask, got: Verdict) -> Ask | None:
    """The next round's question: each of `ask`'s ranges that did not settle (`got`), cut into
    SPLIT pieces, so an old mismatch (or a shape not foreseen) keeps the piece around it, not
    its group's whole history. None when no range is left worth cutting."""
    settled = {(g, lo) for g, spans in got.ranges.items() for lo, _hi in spans}
    failed = [
        (g, lo, hi)
        for g, spans in ask.candidates.items()
        for lo, hi in spans
        if (g, lo) not in settled and hi - lo + 1 >= 2 * FINEST
    ]
    steps = [max(FINEST, -(-(hi - lo + 1) // SPLIT)) for _g, lo, hi in failed]
    answers = sum(
        ask.voters[g] * -(-(hi - lo + 1) // step)
        for (g, lo, hi), step in zip(failed, steps, strict=True)
    )
    widen = -(-answers // ANSWERS)  # where everything disagrees: fewer, longer pieces
    pieces: dict[str, list[Span]] = {}
    for (g, lo, hi), step in zip(failed, steps, strict=True):
        step *= widen
        if step <= hi - lo:
            pieces.setdefault(g, []).extend(
                (a, min(a + step - 1, hi)) for a in range(lo, hi + 1, step)
            )
    return Ask(ask.tracked, pieces, ask.voters, {}, ask.method) if pieces else None


def settle_rounds(ask: Ask, answer: Callable[[Ask], list[Digests]]) -> Verdict:
    """Round 2 (`answer` asks every partition for its digests) and up to REFINE rounds over
    the pieces of the ranges that did not settle; the channels are decided in round 2."""
    verdict = got = decide(ask, answer(ask))
    for _ in range(REFINE):
        more = refine(ask, got)
        if more is None:
            break
        ask, got = more, decide(more, answer(more))
        for g, spans in got.ranges.items():
            verdict.ranges[g] = sorted(verdict.ranges.get(g, []) + spans)
    return verdict


def members_of(groups: Table) -> dict[str, list[int]]:
    return {
        str(n): [int(r) for r in rs]
        for n, rs in zip(groups["pg_name"], groups["ranks"], strict=True)
    }


def group_sizes(groups: Table) -> tuple[dict[str, int], np.ndarray]:
    """Group name -> index in the group table, and member counts by that index."""
    index = {str(n): i for i, n in enumerate(groups["pg_name"])}
    return index, np.array([*(len(r) for r in groups["ranks"]), 0], dtype=np.int64)


def settle(trace: Trace) -> Trace:
    """The job without its settled entries, carrying what the analysis needs of them: the
    distributed plan's steps run on the whole job as one partition."""
    ctx = build_context(trace, lags=timing.lag_stats)
    members, dumped = members_of(trace.group_table), ctx.dumped
    job = tally(ctx)
    ask = plan(job, members, dumped)
    verdict = settle_rounds(ask, lambda question: [digests(ctx, question)])
    left_out = prune(ctx, verdict)
    code = {name: i for i, name in enumerate(ctx.pg_names)}
    e = trace.table

    def history(rank: int) -> Table:  # here the whole job is at hand: a slice of it
        return e.take(ctx.rank_rows(rank))

    facts = job_facts.assembled(job.facts, int(left_out.sum()), code, ctx.facts.lags, history)
    return dataclasses.replace(trace, table=e.take(~left_out), facts=facts)
