"""Times: where the root cause is stuck, and which ranks arrive late at their collectives.

**Where stuck.** A hang's root cause is one of: the rank never issued the collective
(`cpu_side`: data loading, an exception, another code path; a rank caught in a cycle of
collectives issued in different orders gets no class: it is stuck inside one, and the
finding itself says why), issued it but its GPU never
started it while peers run it (`gpu_not_started`: a kernel before it never finishes), or every
member is inside it and it never completes (`inside_collective`: network, NCCL, a GPU).

**Stragglers.** A collective completes at one instant on every member, so the last member to
arrive held every other one up: by how much later than the next-latest member it arrived. With
timing on, arrival is read from GPU durations: torch records a work's start event on the NCCL
stream right before the NCCL call (ProcessGroupNCCL::collective) and `duration_ms` is the time
between its start and end events (FlightRecorder::retire_id, getDurationFromEvent), so a later
arrival is a shorter duration, each measured by its own GPU: immune to clock offsets between
hosts. Without timing, arrival is the enqueue time (`time_created_ns`, c10::getTime() when the
entry is recorded: FlightRecorder::recordWithResetEnabled), on each host's clock, compared only
within one collective. Send/recv pairs count too, for the waits they show: a batch's parts are
recorded without events (ProcessGroupNCCL::pointToPoint while coalescing), its closing entry's
duration is theirs. A rank's cost is its own lateness (`own_lateness`): what it passed on of
waits it suffered earlier is not its own. See docs/stragglers.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.analysis.context import Context
from frtrace.analysis.findings import Finding
from frtrace.analysis.ops import pg_seq_key
from frtrace.analysis.p2p import channel_ops
from frtrace.tables.facts import Lags
from frtrace.tables.table import Table, distinct, pack

STALL_BY_KIND = {
    "missing_ranks": "cpu_side",
    "state_mismatch": "gpu_not_started",
    "stuck_collective": "inside_collective",
}


def classify(ctx: Context, finding: Finding, blocked: dict[int, Any]) -> None:
    """Record where the finding's culprits are stuck (`facts["stall"]`) with the times that
    show it, where the kind of finding says (mismatches and missing dumps have no class)."""
    stall = STALL_BY_KIND.get(finding.kind)
    if stall is None:
        return
    if finding.kind == "missing_ranks" and (
        finding.reason
        not in {
            "never_issued",
            "stopped_early",
            "siblings_issued",
            "awaited_elsewhere",
            "not_launched",
            "never_posted",
        }
        or any(r in blocked for r in finding.culprit_ranks)
    ):
        return  # an extra call or an undecidable split is a desync, not a rank stuck aside
    finding.facts["stall"] = stall
    e = ctx.trace.table
    rank = finding.culprit_ranks[0] if finding.culprit_ranks else None
    if rank is None or rank not in ctx.dumped:
        return
    rows = ctx.rank_rows(rank)
    if rows.stop == rows.start:
        return
    latest = ctx.dump_time(rank)
    last = rows.stop - 1
    created = int(e["time_created_ns"][last])
    if stall == "cpu_side" and latest and created:
        # How long ago its last call was made: the time it has spent outside collectives.
        finding.facts["idle_ms"] = round((latest - created) / 1e6, 1) if ctx.timing else None
        finding.facts["last_op"] = str(e.label("profiling_name", e["profiling_name"][last]))
    b = blocked.get(rank)
    if b is not None and finding.facts.get("in_flight_ms") is None:
        age = ctx.in_flight_ms(rank, b.pos)
        finding.facts["in_flight_ms"] = None if age is None else round(age, 1)
    timeout = int(e["timeout_ms"][last])
    finding.facts.setdefault("timeout_ms", timeout or None)


ENQUEUE_FLOOR_MS = 10.0
"""From enqueue times, a collective's lateness counts only beyond this: a CPU blocked behind
earlier work, or running ahead of its GPU, enqueues a collective some ms apart from its peers
while no GPU waits (up to 6.5 ms in the synthetic jobs). GPU durations need no floor."""
STEADY_LAST = 0.75
"""...except for a host slow at every call: a rank last at this share of its collectives or
more, by a median lag of half the floor or more (healthy synthetic jobs reach a share of 0.63
with a median of 0.1 ms; ranks that inherit a straggler's delay 0.82 with 1 ms; a rank 3 ms
slower per call, 0.93 with 6 ms)."""

#: Lateness below this is rounding, not time: torch records times in ns (time_created_ns;
#: durations from CUDA events, whose resolution is about half a microsecond).
RESOLUTION_MS = 1e-6
TOP = 5  # the lags keep the groups and held-back collectives of this many costliest ranks
PERIOD_ENTRIES = 4000  # a straggler's step is looked for in its newest this many calls
PERIOD_MATCH = 0.9  # a step: the calls repeat with this period at least this often


@dataclass(frozen=True)
class Where:
    """The call at which a straggler's lateness shows most."""

    pg: str
    pg_desc: str
    op: str
    site: str | None  # its first frame outside torch, "file:line function"; None without stacks
    share: float  # of the straggler's cost, at this call
    step_index: int | None  # among its collectives in a step (0: the first); None: no step
    step_collectives: int | None  # its collectives per step


@dataclass(frozen=True)
class Straggler:
    """A rank whose late arrivals held back its collectives."""

    rank: int
    median_lag_ms: float
    p95_lag_ms: float
    last_share: float  # how often it was the last member to arrive
    collectives: int  # collectives its lag was measured on
    groups: list[str] = field(default_factory=list)  # where its cost shows most
    cost_ms: float = 0.0  # time its own lateness held the others up
    covered_ms: float = 0.0  # the span of its measured calls, on its own clock
    cost_share: float = 0.0  # cost_ms / covered_ms
    where: Where | None = None
    first_of_step_share: float | None = None  # of its cost, at its step's first collective


@dataclass
class StragglerReport:
    """The ranks whose lateness cost at least `threshold_share` of the time they cover."""

    method: str  # "duration" (GPU events, offset-free) or "enqueue" (host clocks)
    collectives: int
    top: list[Straggler]
    threshold_ms: float  # from enqueue times, a collective's lateness counts beyond this
    threshold_share: float = 0.05


@dataclass
class RankLags:
    """Some ranks' lateness statistics (a partition's), and of their costliest ranks the cost
    by group (cost, group index) and the collectives they held back."""

    per_rank: dict[str, np.ndarray]
    groups: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    details: dict[int, Table] = field(default_factory=dict)


_EMPTY = ("rank", "median", "p95", "last", "n", "cost", "span")
_MIX = np.uint64(0x9E3779B97F4A7C15)


def lag_method(finished: int, timed: int) -> str:
    """Durations when more than 90% of the completed collectives have one, else enqueue
    times; "none" when nothing completed."""
    if not finished:
        return "none"
    return "duration" if timed / finished > 0.9 else "enqueue"


def lag_values(ctx: Context, method: str, group_index: dict[str, int]) -> Table:
    """Key, rank, arrival value, position, group index (-1: a p2p op) and enqueue time of
    every completed collective and completed send/recv with a value, the collectives as the
    op view orders them (by rank, then call), then the sends and recvs: what lateness is
    measured from (`group_index`: group name -> the index the keys use; a
    group without one gets the next index, of size 0). A collective's key is (group, seq); a
    send/recv's is negative, a hash of its group, channel and slot (p2p.channel_ops), so the
    two ends of a pair meet on it."""
    coll = ctx.view.coll
    missing = len(group_index)
    index = np.array([group_index.get(n, missing) for n in ctx.pg_names] or [0], np.int32)
    # The sends and recvs first: their channel table is freed before the collectives' columns
    # are built beside it.
    pairs = _pair_values(ctx, method, index)
    if pairs is not None:
        valid = np.flatnonzero(~np.isnan(pairs["value"]))
        pairs = {k: v[valid] for k, v in pairs.items()}
        del valid
    finished = np.flatnonzero(coll["state"] == 2)
    if method == "duration":
        dur = coll["duration_ms"][finished]
        value = np.where(np.isfinite(dur), -dur, np.nan)  # later arrival = shorter wait
        del dur
    else:
        value = _enqueued(coll["time_created_ns"][finished])
    # Only measured ones go on, each column built for them alone and every temporary the
    # size of the completed ones freed as soon as read (at 16 M entries one is 130 MB: this
    # is the lateness' peak); the two parts are then joined a column at a time.
    kept = np.flatnonzero(~np.isnan(value))
    value = value[kept]
    code = coll["pg"][finished]
    # The rank's groups are numbered over every completed collective, measured or not.
    local, sup = _holders(ctx, coll["rank"][finished], code)
    local, sup, code = local[kept], sup[kept], code[kept]
    rows = finished[kept]
    del finished, kept
    rank, pos = coll["rank"][rows], coll["pos"][rows]
    pg = index[code]
    del code
    first: dict[str, np.ndarray] = {
        "key": pg_seq_key(pg, coll["seq"][rows]),
        "rank": rank,
        "value": value,
        "pos": pos,
        "pg": pg,
        "created": coll["time_created_ns"][rows].astype(np.int64),
        "local": local,
        "sup": sup,
    }
    del rows, value, local, sup, pg
    if method != "duration":  # only enqueue times need the pause before each call
        first["pause"] = _pause_before(ctx, rank, pos)
    del rank, pos
    parts = [first] if pairs is None else [first, pairs]
    del pairs
    cols = {}
    for name in list(first):
        cols[name] = np.concatenate([p.pop(name) for p in parts])
    return Table(cols)


def _holders(ctx: Context, rank: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per collective (rows grouped by rank), its group as a small index among the rank's
    groups, and a bit per such index whose group holds every member of this one (itself
    included): the meetings after which the rank owes this group nothing older. Subsets are
    decided once per pair of groups that share a rank, from the groups' members."""
    if not len(rank):
        return np.zeros(0, np.int16), np.zeros(0, np.int64)
    codes = int(code.max()) + 1
    packed, row = np.unique(rank.astype(np.int64) * codes + code, return_inverse=True)
    row = row.reshape(-1)
    owner, group = packed // codes, packed % codes
    new = np.r_[True, owner[1:] != owner[:-1]]
    starts = np.flatnonzero(new)
    slot = np.arange(len(packed)) - starts[np.cumsum(new) - 1]
    width = int(slot.max()) + 1
    groups = np.full((len(starts), width), -1, np.int64)
    groups[np.cumsum(new) - 1, slot] = group
    members: dict[int, set[int]] = {}

    def holds(big: int, small: int) -> bool:
        for g in (big, small):
            if g not in members:
                members[g] = set(ctx.group_members(g))
        return bool(members[small]) and members[small] <= members[big]

    sup = np.zeros(len(packed), np.int64)
    mine = groups[np.cumsum(new) - 1]  # each pair's rank's groups
    for other in range(min(width, 63)):
        big = mine[:, other]
        combos, which = np.unique(np.stack([big, group], axis=1), axis=0, return_inverse=True)
        held = np.array([b >= 0 and (b == g or holds(b, g)) for b, g in combos.tolist()], bool)
        sup |= np.where(held[which.reshape(-1)], np.int64(1) << other, 0)
    return np.minimum(slot, np.iinfo(np.int16).max)[row].astype(np.int16), sup[row]


def _pause_before(ctx: Context, rank: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Per op, the ms since its rank enqueued the call before it (any op; inf for its first),
    on its own clock. From enqueue times, a rank can only have held the others up by time its
    own host spent before the call: a CPU that queued a collective late right after another
    it was late for is late once, and one that waited for a peer's late collective enqueues
    the calls after it late with no pause of its own."""
    e = ctx.trace.table
    ranks, created = e["rank"].astype(np.int64), e["time_created_ns"].astype(np.int64)
    pause = np.full(len(ranks), np.inf)
    if len(ranks) > 1:
        same = ranks[1:] == ranks[:-1]
        pause[1:][same] = (created[1:][same] - created[:-1][same]) / 1e6
    where = pg_seq_key(ranks, e["pos"])  # entries are sorted by rank, then position
    at = np.minimum(np.searchsorted(where, pg_seq_key(rank, pos)), max(len(where) - 1, 0))
    return (pause[at] if len(where) else np.full(len(rank), np.inf)).astype(np.float32)


def _enqueued(created: np.ndarray) -> np.ndarray:
    value = created.astype(np.float64)
    value[value <= 0] = np.nan
    return value


def _pair_values(ctx: Context, method: str, index: np.ndarray) -> dict[str, np.ndarray] | None:
    """`lag_values`' columns for the completed sends and recvs. With GPU timing a batch's
    parts carry no events: its closing entry's duration is theirs."""
    ops = channel_ops(ctx)
    if not len(ops):
        return None
    ops = ops.take((ops["state"] == 2) & (ops["slot_kind"] == 0))
    if not len(ops):
        return None
    e = ctx.trace.table
    rows = ops["row"]
    if method == "duration":
        value = -_batch_durations(e)[rows]
    else:
        value = _enqueued(e["time_created_ns"][rows])
    pg = index[ops["pg"]]
    cols = {
        "key": _pair_key(pg, ops["src"], ops["dst"], ops["slot"]),
        "rank": ops["rank"],
        "value": value,
        "pos": ops["pos"],
        "pg": np.full(len(ops), -1, np.int32),
        "created": e["time_created_ns"][rows].astype(np.int64),
        "local": np.full(len(ops), -1, np.int16),
        "sup": np.zeros(len(ops), np.int64),
    }
    if method != "duration":
        cols["pause"] = np.full(len(ops), np.inf, np.float32)
    return cols


def _batch_durations(e: Table) -> np.ndarray:
    """Durations of the entries, a p2p batch's parts given their block's (its closing entry's:
    the parts have no events). A batch's entries are adjacent in its rank's calls and share
    its group and p2p seq (ops.block_ids); only p2p rows are looked at."""
    dur = e["duration_ms"].astype(np.float64)
    rows = np.flatnonzero(e["is_p2p"])
    if len(rows) < 2:
        return dur
    rank, pg, seq = e["rank"][rows], e["pg_name"][rows], e["p2p_seq_id"][rows]
    new = np.r_[True, (rank[1:] != rank[:-1]) | (pg[1:] != pg[:-1]) | (seq[1:] != seq[:-1])]
    new[1:] |= rows[1:] != rows[:-1] + 1  # not adjacent: another block
    starts = np.flatnonzero(new)
    dur[rows] = np.fmax.reduceat(dur[rows], starts)[np.cumsum(new) - 1]
    return dur


def _pair_key(*parts: np.ndarray) -> np.ndarray:
    """A negative int64 per (group index, src, dst, slot): a 62-bit hash. Two pairs that
    collide make a key of four ends, which is never whole (a pair has exactly two), so a
    collision loses both pairs, it never joins them."""
    h = np.zeros(len(parts[0]), np.uint64)
    for part in parts:
        h = (h ^ part.astype(np.int64).view(np.uint64)) * _MIX
        h ^= h >> np.uint64(29)
    return -1 - (h >> np.uint64(2)).astype(np.int64)


def lag_partials(values: Table, buckets: int) -> list[Table]:
    """Per collective or pair these ranks' earliest, latest and second-latest arrival and
    their count, cut into `buckets` by key: the map side of the shuffle that meets a
    collective's ranks."""
    key, value = values["key"], values["value"]
    if not len(key):
        empty = Table({"key": key, "lo": value, "hi": value, "hi2": value, "n": key})
        return [empty] * buckets
    if _zeros_of_both_signs(value):  # -0.0 == 0.0: which one a key's ends are, its order says
        order = np.lexsort((value, key))
        key, value = key[order], value[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        ends = np.r_[starts[1:], len(key)] - 1
        lo, hi, n = value[starts], value[ends], ends - starts + 1
        hi2 = np.where(n > 1, value[np.maximum(ends - 1, 0)], -np.inf)
    else:  # one sort by key; a key's extremes by reduceat, its values left in any order
        # (job-sized temporaries freed as soon as read: at 16 M rows each is 130 MB)
        order = np.argsort(key, kind="stable")
        key, value = key[order], value[order]
        del order
        new = np.r_[True, key[1:] != key[:-1]]
        starts = np.flatnonzero(new)
        n = np.diff(np.r_[starts, len(key)])
        lo = np.minimum.reduceat(value, starts)
        hi = np.maximum.reduceat(value, starts)
        top = value == np.repeat(hi, n)
        del new
        tops = np.add.reduceat(top, starts, dtype=np.int64)
        np.copyto(value, -np.inf, where=top)  # value is this function's sorted copy
        del top
        below = np.maximum.reduceat(value, starts)
        hi2 = np.where(n > 1, np.where(tops > 1, hi, below), -np.inf)
    part = Table({"key": key[starts], "lo": lo, "hi": hi, "hi2": hi2, "n": n})
    if buckets == 1:
        return [part]
    which = part["key"] % buckets
    return [part.take(which == b) for b in range(buckets)]


def _zeros_of_both_signs(value: np.ndarray) -> bool:
    zero = value == 0
    negative = zero & np.signbit(value)
    return bool(negative.any()) and bool((zero & ~negative).any())


def combine_lags(parts: list[Table], sizes: np.ndarray) -> Table:
    """One bucket's collectives and pairs over all ranks, only those every member completed
    (the reduce side): key, earliest, latest and second-latest arrival. `sizes`: members by
    group index; a pair has exactly two ends."""
    key = np.concatenate([p["key"] for p in parts])
    if not len(key):
        return Table({"key": key, "lo": np.empty(0), "hi": np.empty(0), "hi2": np.empty(0)})
    lo = np.concatenate([p["lo"] for p in parts])
    n = np.concatenate([p["n"] for p in parts])
    # The two latest of a key are the two highest of its parts' latest and second-latest.
    top = np.concatenate([np.concatenate([p["hi"] for p in parts]), *[p["hi2"] for p in parts]])
    top_key = np.r_[key, key]
    order = np.lexsort((top, top_key))
    top = top[order]
    ends = np.r_[np.flatnonzero(top_key[order][1:] != top_key[order][:-1]), len(top) - 1]
    order = np.argsort(key, kind="stable")
    key, lo, n = key[order], lo[order], n[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    key = key[starts]
    count = np.add.reduceat(n, starts)
    pair = key < 0
    group = np.where(pair, len(sizes) - 1, key >> 32)  # the last size is a sentinel's
    whole = np.where(pair, count == 2, count >= np.maximum(sizes[group], 2))
    return Table(
        {
            "key": key[whole],
            "lo": np.minimum.reduceat(lo, starts)[whole],
            "hi": top[ends][whole],
            "hi2": top[ends - 1][whole],
        }
    )


def collectives_in(combined: Table) -> int:
    """How many collectives (not p2p pairs) a combined bucket holds."""
    return int(np.count_nonzero(combined["key"] >= 0))


def last_meeting(
    rank: np.ndarray, local: np.ndarray, sup: np.ndarray, usable: np.ndarray
) -> np.ndarray:
    """Per event (rows grouped by rank, each rank's in call order), the row of the rank's
    latest earlier `usable` event in a group that holds every member of the event's group
    (itself included; -1: none in the window). `local`: the event's group as a small index
    within its rank; `sup`: bit l set when the rank's group l holds the event's group. There
    the rank last left together with all of them: what it owes them starts after it."""
    n = len(rank)
    ref = np.full(n, -1, np.int64)
    if not n:
        return ref
    row = np.arange(n)
    first = np.r_[True, rank[1:] != rank[:-1]]
    start = row[first][np.cumsum(first) - 1]
    for slot in range(min(int(local.max(initial=-1)) + 1, 63)):
        seen = np.maximum.accumulate(np.where(usable & (local == slot), row, -1))
        before = np.r_[-1, seen[:-1]]
        before[before < start] = -1  # another rank's
        holds = ((sup >> slot) & 1).astype(bool)
        ref = np.where(holds & (before > ref), before, ref)
    return ref


def _before_a_gap(rank: np.ndarray, local: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """Per event (rows grouped by rank, each rank's in call order), whether it comes at or
    before the rank's last unmeasured one that precedes a measured one of the same group
    (`local`; all its sends and receives, -1, one stream): an op some member no longer holds,
    its ring buffer having wrapped later. Waits there are unknown, so nothing up to it can be
    a meeting. A group never measured (a member left no dump) or ops measured by no one yet
    (the newest) do not cut. One pass per group of a rank, no sort."""
    n = len(rank)
    if not n:
        return np.zeros(0, bool)
    row = np.arange(n)
    first = np.r_[True, rank[1:] != rank[:-1]]
    starts = np.flatnonzero(first)
    seg = np.cumsum(first) - 1
    cut = np.full(len(starts), -1)
    for slot in range(-1, int(local.max(initial=-1)) + 1):
        mine = local == slot
        last = np.maximum.reduceat(np.where(mine & whole, row, -1), starts)[seg]
        old = mine & ~whole & (row < last)
        cut = np.maximum(cut, np.maximum.reduceat(np.where(old, row, -1), starts))
    return row <= cut[seg]


def own_lateness(ref: np.ndarray, excess: np.ndarray, wait: np.ndarray) -> np.ndarray:
    """Per event (rows grouped by rank, each rank's in call order), the part of the rank's
    lateness there (`excess`: how much later than the next-latest member it arrived, where it
    was last) that is its own.

    The group's members last left together with the rank at its meeting `ref` (last_meeting):
    they wait only for what it fell behind since. Of that, what it already held other groups
    back by since then was counted there (a rank that starts its step late is late at the
    first collective of every group it then meets: once), and what it waited for others since
    then is theirs, passed on (a rank that waited for a late peer arrives late where it meets
    ranks that did not). Before its first such meeting in its window nothing is counted: what
    it carried in is unknown (a ring buffer that wrapped; at the job's start, ranks that
    started apart)."""
    if not len(ref):
        return np.zeros(0)
    ahead = np.cumsum(excess)  # lateness shown through each event
    waited = np.cumsum(wait)
    met = ref >= 0
    at = np.where(met, ref, 0)
    own = excess - (ahead - excess - ahead[at]) - (waited - wait - waited[at])
    # Differences of running sums leave rounding (1e-13 ms) where nothing is owed: below the
    # clocks' resolution it is none, or every rank would have a cost and a rank among them.
    return np.where(met & (own >= RESOLUTION_MS), own, 0.0)


#: rank_lags takes the ranks' values this many rows at a time (whole ranks): its temporaries
#: are ~120 bytes a row, 2 GB at 16 M entries if taken at once, 30 MB a piece.
LAG_CHUNK_ROWS = 1 << 18


def rank_lags(
    values: Table, method: str, combined: list[Table], top: int, chunk: int | None = None
) -> RankLags:
    """These ranks' lateness against every member's arrivals, per collective and pair (the
    `combined` buckets). A collective completes at one instant on every member, so the
    latest arrival is the shortest wait's owner, and every other member waited for it: how
    much later than the next-latest member it arrived is the time it alone held the others
    up. The statistics of the lag behind the earliest member (median, p95, how often last)
    stay as they were; the cost is the rank's own lateness (`own_lateness`), in all.

    A rank's lateness reads only its own values and the combined ones, so the ranks are taken
    `chunk` rows (LAG_CHUNK_ROWS) at a time, whole ranks in rank order, and the pieces
    `joined` as join_lags joins partitions: the same result, a fraction of the memory."""
    empty = {k: np.empty(0) for k in _EMPTY}
    key = np.concatenate([c["key"] for c in combined]) if combined else np.empty(0, np.int64)
    if not len(key) or not len(values):
        return RankLags(empty)
    order = np.argsort(key)
    met = Table({"key": key[order]})
    for k in ("lo", "hi", "hi2"):
        met.cols[k] = np.concatenate([c[k] for c in combined])[order]
    del key, order
    pieces = rank_chunks(values, chunk or LAG_CHUNK_ROWS)
    return joined([_rank_lags(piece, method, met, top) for piece in pieces], top)


def joined(parts: list[RankLags], top: int) -> RankLags:
    """Some ranks' statistics from those of pieces of them (in rank order), with the groups
    and held-back collectives of the `top` costliest: each piece kept its own `top`, among
    which are the whole's."""
    have = [p for p in parts if len(p.per_rank["rank"])]
    if len(have) < 2:
        return have[0] if have else RankLags({k: np.empty(0) for k in _EMPTY})
    per_rank = {k: np.concatenate([p.per_rank[k] for p in have]) for k in _EMPTY}
    costliest = set(per_rank["rank"][_costliest(per_rank, top)].tolist())
    groups = {r: g for p in have for r, g in p.groups.items() if r in costliest}
    details = {r: d for p in have for r, d in p.details.items() if r in costliest}
    return RankLags(per_rank, groups, details)


def rank_chunks(values: Table, rows: int) -> Iterator[Table]:
    """`values` cut into pieces of whole ranks, in rank order, of about `rows` rows each (a
    rank with more is a piece alone). Its rows come as a few runs each sorted by rank (the
    collectives, then the sends and recvs: lag_values), so a piece is a range of each run."""
    rank = values["rank"]
    if len(rank) <= rows:
        yield values
        return
    bounds = np.r_[0, np.flatnonzero(rank[1:] < rank[:-1]) + 1, len(rank)]
    if len(bounds) > 8:  # not a few sorted runs: sort once
        values = values.take(np.argsort(rank, kind="stable"))
        rank, bounds = values["rank"], np.array([0, len(rank)])
    per_rank = np.bincount(rank)
    ends = np.cumsum(per_rank)
    cuts = np.searchsorted(ends, np.arange(rows, int(ends[-1]), rows), side="left") + 1
    edges = np.unique(np.r_[0, cuts, len(per_rank)])
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        spans = []
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            start, stop = np.searchsorted(rank[a:b], [lo, hi]).tolist()
            spans.append(np.arange(a + start, a + stop))
        yield values.take(np.concatenate(spans))  # one piece at a time


def _rank_lags(values: Table, method: str, met: Table, top: int) -> RankLags:
    """rank_lags over some whole ranks' values; `met`: the combined collectives and pairs
    sorted by key. The groups and details are kept for the ranks' `top` costliest."""
    empty = {k: np.empty(0) for k in _EMPTY}
    key, lo, hi, hi2 = met["key"], met["lo"], met["hi"], met["hi2"]
    at = np.minimum(np.searchsorted(key, values["key"]), len(key) - 1)
    whole = key[at] == values["key"]
    if not whole.any():
        return RankLags(empty)
    lo, hi, hi2 = lo[at], hi[at], hi2[at]
    value, coll = values["value"], values["key"] >= 0
    scale = 1.0 if method == "duration" else 1e-6
    # Stats of the lag behind the earliest member, over the collectives every member completed.
    measured = whole & coll
    rows = np.flatnonzero(measured)  # gathering by index is faster than by mask
    lag = (value[rows] - lo[rows]) * scale
    worst = (hi[rows] - lo[rows]) * scale  # grows with value: the latest's lag
    per_rank = lag_summary_per_rank(values["rank"][rows], lag, (lag == worst) & (worst > 0))
    if not len(per_rank["rank"]):
        return RankLags(empty)
    del lag, worst
    # Each rank's own lateness, in call order.
    wait = np.where(whole, (hi - value) * scale, 0.0)
    excess = np.where(measured & (value == hi) & (hi > hi2), (hi - hi2) * scale, 0.0)
    if method != "duration":
        # A host slow at every call is last at nearly every collective: its lateness counts
        # whole; anyone else's only beyond the floor.
        ranks = per_rank["rank"]
        at = np.minimum(np.searchsorted(ranks, values["rank"]), len(ranks) - 1)
        steady = (per_rank["last"] >= STEADY_LAST) & (per_rank["median"] >= ENQUEUE_FLOOR_MS / 2)
        steady = (ranks[at] == values["rank"]) & steady[at]
        floor = np.where(steady, 0.0, ENQUEUE_FLOOR_MS)
        excess = np.maximum(np.minimum(excess, values["pause"]) - floor, 0.0)
    packed = pack(values["rank"], values["pos"])  # one stable sort, of rows nearly in order
    if packed is None:
        order = np.lexsort((values["pos"], values["rank"]))
    else:
        order = np.argsort(packed, kind="stable")
    mine = values.select(["rank", "pos", "pg", "created", "local", "sup"]).take(order)
    rank, pgs = mine["rank"], mine["pg"]
    usable = measured[order] & ~_before_a_gap(rank, mine["local"], whole[order])
    ref = last_meeting(rank, mine["local"], mine["sup"], usable)
    own = own_lateness(ref, excess[order], wait[order])
    kept = measured[order] | (whole[order] & ~coll[order])
    created = np.where(kept, mine["created"], -1)
    starts = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
    latest = np.maximum.reduceat(created, starts)
    earliest = np.minimum.reduceat(np.where(kept, created, np.iinfo(np.int64).max), starts)
    at = np.searchsorted(rank[starts], per_rank["rank"])
    per_rank["span"] = (latest[at] - earliest[at]) / 1e6
    # The cost: its own lateness, in all; and by group, where it shows.
    hit = np.flatnonzero(own > 0)
    by = hit[np.lexsort((pgs[hit], rank[hit]))]
    who, pg = rank[by], pgs[by]
    cost = np.zeros(len(per_rank["rank"]))
    sums = np.zeros(0)
    if len(by):
        cuts = np.flatnonzero(np.r_[True, (who[1:] != who[:-1]) | (pg[1:] != pg[:-1])])
        sums = np.add.reduceat(own[by], cuts)
        who, pg = who[cuts], pg[cuts]
        first = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
        cost[np.searchsorted(per_rank["rank"], who[first])] = np.add.reduceat(sums, first)
    per_rank["cost"] = cost
    groups: dict[int, list[tuple[float, int]]] = {}
    details: dict[int, Table] = {}
    for i in _costliest(per_rank, top).tolist():
        r = int(per_rank["rank"][i])
        groups[r] = [(float(s), int(g)) for s, g in zip(sums[who == r], pg[who == r], strict=True)]
        events = hit[rank[hit] == r]
        details[r] = Table({"pos": mine["pos"][events], "own": own[events], "pg": pgs[events]})
    return RankLags(per_rank, groups, details)


def _share(per_rank: dict[str, np.ndarray]) -> np.ndarray:
    span = per_rank["span"]
    return np.divide(per_rank["cost"], span, out=np.zeros(len(span)), where=span > 0)


def _costliest(per_rank: dict[str, np.ndarray], top: int) -> np.ndarray:
    """Rows of the `top` ranks with the largest cost share, ties by rank."""
    share = _share(per_rank)
    rows = np.flatnonzero(per_rank["cost"] > 0)
    rows = rows[np.lexsort((per_rank["rank"][rows], -share[rows]))]
    return rows[:top]


def join_lags(
    method: str, collectives: int, parts: list[RankLags], code: dict[int, int], top: int
) -> Lags:
    """The job's lateness statistics from its ranks' (parts in rank order; `code`: group
    index -> pg code), with the groups and held-back collectives of the `top` costliest."""
    empty = {k: np.empty(0) for k in _EMPTY}
    if method == "none":
        return Lags("none", 0, empty, {})
    whole = joined(parts, top)
    per_rank, groups, details = whole.per_rank, whole.groups, whole.details
    if not collectives or not len(per_rank["rank"]):
        return Lags(method, 0, empty, {})
    named: dict[int, list[int]] = {}
    held: dict[int, Table] = {}
    to_code = np.array([code.get(g, -1) for g in range(max(code, default=-1) + 2)], np.int64)
    for i in _costliest(per_rank, top).tolist():
        rank = int(per_rank["rank"][i])
        by_pg = sorted(((s, code[g]) for s, g in groups[rank] if g in code), key=lambda x: x[1])
        by_pg.sort(key=lambda s_g: -s_g[0])  # stable: ties stay in group order
        named[rank] = [g for _s, g in by_pg[:3]]
        d = details[rank]
        pg = to_code[np.minimum(d["pg"], len(to_code) - 1)]
        held[rank] = Table({"pos": d["pos"], "own": d["own"], "pg": pg})
    return Lags(method, collectives, per_rank, named, held)


def lag_stats(ctx: Context, top: int = TOP) -> Lags:
    """Per-rank lateness, and the groups and held-back collectives of the `top` costliest
    ranks (whatever the threshold, the stragglers it selects are among them): the
    distributed steps above run over the whole job, its pg codes as group indexes."""
    coll = ctx.view.coll
    finished = coll["state"] == 2
    method = lag_method(int(finished.sum()), int(np.isfinite(coll["duration_ms"][finished]).sum()))
    if method == "none":
        return join_lags(method, 0, [], {}, top)
    codes = {name: code for code, name in enumerate(ctx.pg_names)}
    sizes = np.array([*(len(ctx.group_members(pg)) for pg in codes.values()), 0], np.int64)
    values = lag_values(ctx, method, codes)
    combined = combine_lags(lag_partials(values, 1), sizes)
    parts = [rank_lags(values, method, [combined], top)]
    return join_lags(method, collectives_in(combined), parts, {c: c for c in codes.values()}, top)


def stragglers(ctx: Context, threshold_share: float = 0.05) -> StragglerReport:
    """Ranks whose lateness cost at least `threshold_share` of the time their calls cover,
    costliest first (at most TOP), with where it shows. From enqueue times, lateness the
    rank shared with a group it runs in step with is not its own (`beyond_peers`)."""
    lags = ctx.facts.lags
    per_rank = lags.per_rank
    out = []
    for i in _costliest(per_rank, TOP).tolist():
        rank_ = int(per_rank["rank"][i])
        held = lags.details.get(rank_)
        cost, groups = float(per_rank["cost"][i]), lags.groups.get(rank_, [])
        steady = (per_rank["last"][i] >= STEADY_LAST) & (
            per_rank["median"][i] >= ENQUEUE_FLOOR_MS / 2
        )
        if lags.method == "enqueue" and held is not None and len(held) and not steady:
            own = beyond_peers(ctx, rank_, held)
            if (own < held["own"]).any():
                held = Table({**held.cols, "own": own}).take(own >= RESOLUTION_MS)
                cost, groups = float(held["own"].sum()), _costly_groups(held)
        span = float(per_rank["span"][i])
        cost_share = cost / span if span > 0 else 0.0
        if cost_share < threshold_share or cost < RESOLUTION_MS:
            continue
        where, first = _where(ctx, rank_, held)
        out.append(
            Straggler(
                rank=rank_,
                median_lag_ms=round(float(per_rank["median"][i]), 2),
                p95_lag_ms=round(float(per_rank["p95"][i]), 2),
                last_share=round(float(per_rank["last"][i]), 3),
                collectives=int(per_rank["n"][i]),
                groups=[ctx.name(g) for g in groups],
                cost_ms=round(cost, 2),
                covered_ms=round(span, 2),
                cost_share=round(cost_share, 3),
                where=where,
                first_of_step_share=first,
            )
        )
    out.sort(key=lambda s: (-s.cost_share, s.rank))
    return StragglerReport(lags.method, lags.collectives, out, ENQUEUE_FLOOR_MS, threshold_share)


def _costly_groups(held: Table) -> list[int]:
    """The (at most 3) group codes where these late calls cost most, as join_lags names them."""
    pg = held["pg"]
    keep = pg >= 0
    if not keep.any():
        return []
    codes, which = np.unique(pg[keep], return_inverse=True)
    sums = np.bincount(which.reshape(-1), weights=held["own"][keep], minlength=len(codes))
    order = sorted(range(len(codes)), key=lambda k: (-sums[k], int(codes[k])))
    return [int(codes[k]) for k in order[:3]]


def beyond_peers(ctx: Context, rank: int, held: Table) -> np.ndarray:
    """Per late call of `rank` (`held`: its positions, own lateness, group codes), the part of
    its own lateness that is not shared with a group it runs collectives in step with: at
    most how much longer it paused before the call than a peer of that group paused before
    its own call of the same kind and seq, less ENQUEUE_FLOOR_MS (the skew enqueue times
    show anyway). That group shares no other member with the late call's group (its
    tensor-parallel peers, where it was late in data parallel).

    Enqueue times show when a CPU asked, not when its GPU got there. A pipeline replica whose
    stages run behind another's (its bubbles, its schedule) has every rank of its tp group
    enqueue the step's data-parallel collectives late together, though no GPU waited for them
    (healthy synthetic pipelines listed tp pairs at 15% of their time); how much each CPU ran
    ahead differs, so one peer's pause is enough to show the group's. A rank late on its own
    (its data loading, its host) paused longer than any of those peers. GPU durations need
    none of this."""
    own = held["own"].astype(np.float64).copy()
    mine = ctx.rank_ops(rank)
    if not len(mine) or not len(own):
        return own
    pos, pg = held["pos"], held["pg"]
    at = np.minimum(np.searchsorted(mine["pos"], pos), len(mine) - 1)
    found = (mine["pos"][at] == pos) & (pg >= 0)
    seq = mine["seq"][at]
    pause = _pauses(ctx, rank, pos)
    groups = {int(g): set(ctx.group_members(int(g))) for g in distinct(mine["pg"]).tolist()}
    shared = np.full(len(own), -np.inf)  # the longest pause an in-step peer took along
    for late in distinct(pg[found]).tolist():
        where = set(ctx.group_members(late))
        events = found & (pg == late)
        for h, members in groups.items():
            if h == late or len(members) < 2 or members & where != {rank}:
                continue
            for peer in sorted(members - {rank}):
                along = _paused_at(ctx, peer, ctx.desc(late), seq)
                shared = np.where(events, np.maximum(shared, along), shared)
    lead = np.maximum(pause - shared - ENQUEUE_FLOOR_MS, 0.0)
    return np.where(np.isfinite(shared), np.minimum(own, lead), own)


def _pauses(ctx: Context, rank: int, pos: np.ndarray) -> np.ndarray:
    """Per position of the rank's dump, the ms since its call before (inf: none, or gone)."""
    history = ctx.history(rank)
    have, created = history["pos"], history["time_created_ns"].astype(np.int64)
    out = np.full(len(pos), np.inf)
    if len(have) < 2:
        return out
    at = np.minimum(np.searchsorted(have, pos), len(have) - 1)
    ok = (have[at] == pos) & (at > 0)
    out[ok] = (created[at[ok]] - created[at[ok] - 1]) / 1e6
    return out


def _paused_at(ctx: Context, rank: int, desc: str, seq: np.ndarray) -> np.ndarray:
    """Per seq, the ms the rank paused before its collective of that seq in its group of kind
    `desc` (-inf where it has none there: then it did not pause along)."""
    ops = ctx.rank_ops(rank)
    kind = np.array([ctx.desc(g) == desc for g in range(len(ctx.pg_names))] or [False], bool)
    rows = ops.take(kind[ops["pg"]]) if len(ops) else ops
    out = np.full(len(seq), -np.inf)
    if not len(rows):
        return out
    order = np.argsort(rows["seq"], kind="stable")
    seqs, where = rows["seq"][order], rows["pos"][order]
    at = np.minimum(np.searchsorted(seqs, seq), len(seqs) - 1)
    ok = seqs[at] == seq
    out[ok] = _pauses(ctx, rank, where[at[ok]])
    return out


def _where(ctx: Context, rank: int, held: Table | None) -> tuple[Where | None, float | None]:
    """The call where the rank's cost shows most, and the share of its cost at its step's
    first collective. A step is the period with which the rank's calls (group and call site;
    the op without stacks) repeat; it starts after the longest usual pause in its calls (data
    loading, the optimizer: what its host does between steps). Without a step (fewer than two
    in its history, or calls that do not repeat), the call is a call site."""
    if held is None or not len(held):
        return None, None
    history = ctx.history(rank)
    history = history.take(slice(max(0, len(history) - PERIOD_ENTRIES), None))
    pos = history["pos"]
    if not len(pos):
        return None, None
    at = np.minimum(np.searchsorted(pos, held["pos"]), len(pos) - 1)
    inside = pos[at] == held["pos"]
    at, own, pg = at[inside], held["own"][inside], held["pg"][inside]
    if not len(at) or own.sum() <= 0:
        return None, None
    site = history["stack_id"].astype(np.int64)
    site = np.where(site >= 0, site, -1 - history["op"].astype(np.int64))
    call = _call_codes(history["pg_name"].astype(np.int64), site)
    step = _period(call)
    first: float | None = None
    steps = np.zeros(0, np.int64)
    if step is None:
        by = call[at]
    else:
        place = _step_places(history["time_created_ns"], step)
        ops = ctx.rank_ops(rank)["pos"]
        kept = np.minimum(np.searchsorted(pos, ops), len(pos) - 1)
        kept = kept[pos[kept] == ops]
        steps = distinct(place[kept])  # the places of its collectives in a step, in order
        by = place[at]
        if len(steps):
            first = round(float(own[by == steps[0]].sum() / own.sum()), 3)
    keys, which = np.unique(by, return_inverse=True)
    which = which.reshape(-1)
    sums = np.bincount(which, weights=own, minlength=len(keys))
    best = int(np.argmax(sums))
    pick = int(np.flatnonzero(which == best)[0])
    row = int(at[pick])
    placed = step is not None and len(steps) > 0
    where = Where(
        pg=ctx.name(int(pg[pick])),
        pg_desc=ctx.desc(int(pg[pick])),
        op=str(history.label("op", int(history["op"][row]))),
        site=_site(ctx, int(history["stack_id"][row])),
        share=round(float(sums[best] / own.sum()), 3),
        step_index=int(np.searchsorted(steps, keys[best])) if placed else None,
        step_collectives=len(steps) if placed else None,
    )
    return where, first


def _call_codes(pg: np.ndarray, site: np.ndarray) -> np.ndarray:
    """One small int per distinct (group, call site) pair."""
    if not len(pg):
        return pg
    pairs = np.stack([pg, site], axis=1)
    return np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1)


def _period(call: np.ndarray) -> int | None:
    """The smallest period >= 2 with which the calls repeat (PERIOD_MATCH of them), seen at
    least twice; None when they do not repeat, or repeat every call (no step to tell)."""
    n = len(call)
    for p in range(1, n // 2 + 1):
        if np.count_nonzero(call[:-p] == call[p:]) >= PERIOD_MATCH * (n - p):
            return p if p > 1 else None
    return None


def _step_places(created: np.ndarray, period: int) -> np.ndarray:
    """Each call's place in its step (0: the step's first call): the step starts at the call
    after the longest pause (median over the steps seen) since the call before it."""
    n = len(created)
    pause = np.r_[np.nan, np.diff(created.astype(np.float64))]
    cycles = n // period
    start = n - cycles * period
    usual = np.nanmedian(pause[start:].reshape(cycles, period), axis=0)
    origin = (start + int(np.nanargmax(usual))) % period
    return (np.arange(n) - origin) % period


def _site(ctx: Context, stack_id: int) -> str | None:
    """A call's first frame outside torch, as "file:line function"; None without stacks."""
    stacks = ctx.trace.stacks
    if not 0 <= stack_id < len(stacks) or not stacks[stack_id]:
        return None
    frames = stacks[stack_id]
    own = [f for f in frames if "/torch/" not in str(f[1]).replace("\\", "/")]
    name, filename, line = (own or frames)[0]
    return f"{filename}:{line} {name}"


def lag_summary_per_rank(
    rank: np.ndarray, lag: np.ndarray, last: np.ndarray
) -> dict[str, np.ndarray]:
    """Median, 95th percentile (linear, as np.percentile and pandas' quantile), share of
    arrivals last, and count of each rank's lags: one sort of the lags by rank, then index
    arithmetic per rank. pandas' group-by median and quantile did the same with several
    copies of the job-sized columns, the analysis' peak memory at thousands of ranks."""
    order = np.lexsort((lag, rank))
    sorted_lag = lag[order]
    sorted_rank = rank[order]
    del order
    starts = np.flatnonzero(np.r_[True, sorted_rank[1:] != sorted_rank[:-1]])
    n = np.diff(np.r_[starts, len(sorted_rank)])
    ranks = sorted_rank[starts]
    del sorted_rank
    half = starts + (n - 1) // 2
    median = np.where(
        n % 2 == 1,
        sorted_lag[half],
        (sorted_lag[half] + sorted_lag[np.minimum(half + 1, starts + n - 1)]) / 2,
    )
    at = 0.95 * (n - 1)
    below = np.floor(at).astype(np.int64)
    frac = at % 1
    lo = sorted_lag[starts + below]
    hi = sorted_lag[starts + np.minimum(below + 1, n - 1)]
    p95 = lo + (hi - lo) * frac
    share = np.bincount(np.searchsorted(ranks, rank), weights=last, minlength=len(ranks)) / n
    return {"rank": ranks, "median": median, "last": share, "n": n, "p95": p95}
