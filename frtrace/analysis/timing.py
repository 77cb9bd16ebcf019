"""Times: where the root cause is stuck, and which ranks arrive late at their collectives.

**Where stuck.** A hang's root cause is one of: the rank never issued the collective
(`cpu_side`: data loading, an exception, another code path; a rank caught in a cycle of
collectives issued in different orders gets no class: it is stuck inside one, and the
finding itself says why), issued it but its GPU never
started it while peers run it (`gpu_not_started`: a kernel before it never finishes), or every
member is inside it and it never completes (`inside_collective`: network, NCCL, a GPU).

**Stragglers.** A collective completes at one instant on every member, so with timing on a
member's arrival lag is the longest member's duration minus its own (GPU events on each
rank's own clock: immune to clock offsets between hosts). Without timing, lags are enqueue
times (`time_created_ns`) minus the earliest member's, per collective: host clock offsets add
to those, so they are compared within each collective, never across collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.analysis.context import Context
from frtrace.analysis.findings import Finding
from frtrace.analysis.ops import pg_seq_key
from frtrace.tables.table import Table, distinct

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


@dataclass(frozen=True)
class Straggler:
    """A rank that arrives late at its collectives."""

    rank: int
    median_lag_ms: float
    p95_lag_ms: float
    last_share: float  # how often it was the last member to arrive
    collectives: int  # collectives its lag was measured on
    groups: list[str] = field(default_factory=list)  # where it shows most


@dataclass
class StragglerReport:
    """Per-rank arrival lags over every collective all members completed."""

    method: str  # "duration" (GPU events, offset-free) or "enqueue" (host clocks)
    collectives: int
    top: list[Straggler]
    threshold_ms: float


@dataclass
class Lags:
    """Arrival-lag statistics per rank over every collective all members completed, before
    any threshold: what `stragglers` selects from (a settled job carries them, computed where
    its entries are)."""

    method: str  # "duration", "enqueue", or "none" (nothing completed)
    collectives: int
    per_rank: dict[str, np.ndarray]  # rank, median, p95, last, n: one row per rank
    groups: dict[int, list[int]]  # of the slowest ranks: their groups by median lag (top 3)


@dataclass
class RankLags:
    """Some ranks' lag statistics (a partition's), and the lags by group of their slowest
    ranks: (median, group index) for every group of each."""

    per_rank: dict[str, np.ndarray]
    groups: dict[int, list[tuple[float, int]]] = field(default_factory=dict)


_EMPTY = ("rank", "median", "p95", "last", "n")


def lag_method(finished: int, timed: int) -> str:
    """Durations when more than 90% of the completed collectives have one, else enqueue
    times; "none" when nothing completed."""
    if not finished:
        return "none"
    return "duration" if timed / finished > 0.9 else "enqueue"


def lag_values(ctx: Context, method: str, group_index: dict[str, int]) -> Table:
    """Key (group index, seq), rank and arrival value of each completed collective with a
    value, sorted by key: what the lags are measured from (`group_index`: group name -> the
    index the keys use; a group without one gets the next index, of size 0)."""
    coll = ctx.view.coll
    finished = np.flatnonzero(coll["state"] == 2)
    if method == "duration":
        dur = coll["duration_ms"][finished]
        value = np.where(np.isfinite(dur), -dur, np.nan)  # later arrival = shorter wait
    else:
        value = coll["time_created_ns"][finished].astype(np.float64)
        value[value <= 0] = np.nan
    missing = len(group_index)
    index = np.array([group_index.get(n, missing) for n in ctx.pg_names] or [0], np.int64)
    key = pg_seq_key(index[coll["pg"][finished]], coll["seq"][finished])
    valid = np.flatnonzero(~np.isnan(value))
    valid = valid[np.argsort(key[valid], kind="stable")]
    return Table({"key": key[valid], "rank": coll["rank"][finished][valid], "value": value[valid]})


def lag_partials(values: Table, buckets: int) -> list[Table]:
    """Per collective these ranks' earliest and latest arrival and their count, cut into
    `buckets` by key: the map side of the shuffle that meets a collective's ranks."""
    key, value = values["key"], values["value"]
    if not len(key):
        return [Table({"key": key, "lo": value, "hi": value, "n": key})] * buckets
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    part = Table(
        {
            "key": key[starts],
            "lo": np.minimum.reduceat(value, starts),
            "hi": np.maximum.reduceat(value, starts),
            "n": np.diff(np.r_[starts, len(key)]),
        }
    )
    which = part["key"] % buckets
    return [part.take(which == b) for b in range(buckets)]


def combine_lags(parts: list[Table], sizes: np.ndarray) -> Table:
    """One bucket's collectives over all ranks, only those every member completed (the
    reduce side): key, earliest and latest arrival. `sizes`: members by group index."""
    key = np.concatenate([p["key"] for p in parts])
    if not len(key):
        return Table({"key": key, "lo": np.empty(0), "hi": np.empty(0)})
    lo = np.concatenate([p["lo"] for p in parts])
    hi = np.concatenate([p["hi"] for p in parts])
    n = np.concatenate([p["n"] for p in parts])
    order = np.argsort(key, kind="stable")
    key, lo, hi, n = key[order], lo[order], hi[order], n[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    key = key[starts]
    whole = np.add.reduceat(n, starts) >= np.maximum(sizes[key >> 32], 2)
    return Table(
        {
            "key": key[whole],
            "lo": np.minimum.reduceat(lo, starts)[whole],
            "hi": np.maximum.reduceat(hi, starts)[whole],
        }
    )


def rank_lags(values: Table, method: str, combined: list[Table], top: int) -> RankLags:
    """These ranks' lags against every member's earliest arrival, per collective (the
    `combined` buckets). A collective completes at one instant on every member, so the
    latest arrival is the longest wait's owner: `last` marks it."""
    key = np.concatenate([c["key"] for c in combined]) if combined else np.empty(0, np.int64)
    empty = {k: np.empty(0) for k in _EMPTY}
    if not len(key) or not len(values):
        return RankLags(empty)
    order = np.argsort(key)
    key = key[order]
    lo = np.concatenate([c["lo"] for c in combined])[order]
    hi = np.concatenate([c["hi"] for c in combined])[order]
    at = np.minimum(np.searchsorted(key, values["key"]), len(key) - 1)
    whole = key[at] == values["key"]
    at, rank, value = at[whole], values["rank"][whole], values["value"][whole]
    if not len(at):
        return RankLags(empty)
    scale = 1.0 if method == "duration" else 1e-6
    lag = (value - lo[at]) * scale
    worst = (hi[at] - lo[at]) * scale  # (x - lo) * scale grows with x: the latest's lag
    last = (lag == worst) & (worst > 0)
    per_rank = _per_rank(rank, lag, last)
    # A straggler is the last to arrive most of the time; ranks that merely inherit its delay
    # through other groups are not.
    slow = np.flatnonzero(per_rank["last"] >= 0.5)
    slow = slow[np.argsort(-per_rank["median"][slow], kind="stable")]
    groups = {}
    pg = key[at] >> 32
    for i in slow[:top].tolist():
        mine = rank == per_rank["rank"][i]
        of, lags = pg[mine], lag[mine]
        groups[int(per_rank["rank"][i])] = [
            (float(np.median(lags[of == g])), int(g)) for g in distinct(of).tolist()
        ]
    return RankLags(per_rank, groups)


def join_lags(
    method: str, collectives: int, parts: list[RankLags], code: dict[int, int], top: int
) -> Lags:
    """The job's lag statistics from its ranks' (parts in rank order; `code`: group index ->
    pg code), with the groups of the `top` slowest ranks by median lag, ties in code order."""
    empty = {k: np.empty(0) for k in _EMPTY}
    if method == "none":
        return Lags("none", 0, empty, {})
    have = [p for p in parts if len(p.per_rank["rank"])]
    if not collectives or not have:
        return Lags(method, 0, empty, {})
    per_rank = {k: np.concatenate([p.per_rank[k] for p in have]) for k in _EMPTY}
    slow = np.flatnonzero(per_rank["last"] >= 0.5)
    slow = slow[np.argsort(-per_rank["median"][slow], kind="stable")]
    candidates: dict[int, list[tuple[float, int]]] = {}
    for p in have:
        candidates.update(p.groups)
    groups = {}
    for i in slow[:top].tolist():
        rank = int(per_rank["rank"][i])
        by_pg = sorted(((m, code[g]) for m, g in candidates[rank]), key=lambda m_g: m_g[1])
        by_pg.sort(key=lambda m_g: -m_g[0])  # stable: ties stay in group order
        groups[rank] = [g for _m, g in by_pg[:3]]
    return Lags(method, collectives, per_rank, groups)


def lag_stats(ctx: Context, top: int = 5) -> Lags:
    """Per-rank lags, and the groups of the `top` slowest ranks among those that arrive last
    most of the time (whatever the threshold, the stragglers it selects are among them): the
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
    return join_lags(method, len(combined), parts, {c: c for c in codes.values()}, top)


def stragglers(ctx: Context, threshold_ms: float = 5.0, top: int = 5) -> StragglerReport:
    """Ranks whose median arrival lag is at least `threshold_ms`, slowest first."""
    settled = ctx.trace.settled
    lags = settled.lags if settled is not None else lag_stats(ctx, top)
    per_rank = lags.per_rank
    slow = np.flatnonzero((per_rank["median"] >= threshold_ms) & (per_rank["last"] >= 0.5))
    slow = slow[np.argsort(-per_rank["median"][slow], kind="stable")]
    out = []
    for i in slow[:top].tolist():
        rank_ = int(per_rank["rank"][i])
        out.append(
            Straggler(
                rank=rank_,
                median_lag_ms=round(float(per_rank["median"][i]), 2),
                p95_lag_ms=round(float(per_rank["p95"][i]), 2),
                last_share=round(float(per_rank["last"][i]), 3),
                collectives=int(per_rank["n"][i]),
                groups=[ctx.name(g) for g in lags.groups.get(rank_, [])],
            )
        )
    return StragglerReport(lags.method, lags.collectives, out, threshold_ms)


def _per_rank(rank: np.ndarray, lag: np.ndarray, last: np.ndarray) -> dict[str, np.ndarray]:
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
