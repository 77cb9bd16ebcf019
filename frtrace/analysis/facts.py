"""The job's facts beyond its table, the only thing analyzers read about every entry.

Most heuristics need a few aggregates over all of a job's entries (each rank's first and last
record, each group's lowest seq per rank, the cut points of wrapped buffers, the arrival lags)
and, now and then, one rank's whole history. A job loaded in one process has every entry in
its table; a Dask load leaves the settled ones on the workers (frtrace.cluster.spread). So the
facts have two providers, built from the same functions below:

- `Local`: a whole table at hand, each fact computed from it on first read, once;
- `Assembled`: the workers' `Partial`s (each made by `partial` from the Local facts of a
  partition of ranks), combined by `combine`: sums, unions, minima and maxima.

Analyzers read `ctx.facts` (or `of(trace)` before there is a Context) and never ask which
provider they hold. The types a Trace must name live in frtrace.tables.facts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import numpy as np

from frtrace.analysis.ops import closer_mask, raw_state_codes
from frtrace.errors import FrtraceError
from frtrace.tables.facts import Facts, Lags
from frtrace.tables.table import Table, distinct, group_max, group_min, runs
from frtrace.tables.trace import Trace

K = TypeVar("K")

# ---------------------------------------------------------------- the facts of a table


def min_by_pair(a: np.ndarray, b: np.ndarray, values: np.ndarray) -> dict[tuple[int, int], int]:
    """The smallest value per distinct (a, b) pair."""
    order, starts = runs(a, b)
    if not len(order):
        return {}
    low = np.minimum.reduceat(values[order], starts)
    first = order[starts]
    return dict(
        zip(zip(a[first].tolist(), b[first].tolist(), strict=True), low.tolist(), strict=True)
    )


def first_records(e: Table) -> dict[int, int]:
    """Rank -> its lowest record id: above 0 when its ring buffer wrapped (lost history)."""
    return group_min(e["rank"], e["record_id"])


def last_records(e: Table) -> dict[int, int]:
    """Rank -> its highest record id: grows while the rank issues work."""
    return group_max(e["rank"], e["record_id"])


def latest_times(e: Table) -> dict[int, int]:
    """Rank -> its latest created, started or completed time (ns): when it dumped, as far as
    its times tell."""
    latest = np.maximum(e["time_started_ns"], e["time_completed_ns"])
    np.maximum(latest, e["time_created_ns"], out=latest)  # one job-sized temporary, not two
    return {int(r): int(v) for r, v in group_max(e["rank"], latest).items()}


def last_created(e: Table) -> dict[int, int]:
    """Rank -> its latest positive enqueue time (ns); ranks without one are absent."""
    created = e["time_created_ns"]
    ok = created > 0
    return group_max(e["rank"][ok], created[ok]) if ok.any() else {}


def lowest_seqs(coll: Table) -> dict[tuple[int, int], int]:
    """(group code, rank) -> the lowest seq of the collective ops (OpView.coll) it issued."""
    return min_by_pair(coll["pg"], coll["rank"], coll["seq"])


def cut_points(e: Table) -> dict[int, int]:
    """Group code -> the seq after a coalescing block a wrapped ring buffer cut.

    A buffer that wrapped (its first entry is not record 0) and starts inside a coalescing
    block lost some of the block's parts: that block is no evidence, so its group is judged
    from the next collective on."""
    in_block = e["coalesced"] | closer_mask(e)
    cut = np.flatnonzero((e["pos"] == 0) & in_block & ~e["is_p2p"] & (e["record_id"] > 0))
    out: dict[int, int] = {}
    for i in cut.tolist():  # at most one row per rank
        pg = int(e["pg_name"][i])
        out[pg] = max(out.get(pg, 0), int(e["collective_seq_id"][i]) + 1)
    return out


def last_completed(e: Table) -> dict[str, int]:
    """Group name -> the highest collective seq some rank completed (by its own state)."""
    done = (raw_state_codes(e) == 2) & ~e["is_p2p"]
    top = group_max(e["pg_name"][done], e["collective_seq_id"][done])
    return {str(e.label("pg_name", k)): int(v) for k, v in top.items()}


def backends(e: Table) -> list[str]:
    """The backends the entries name (nccl, gloo), sorted."""
    return sorted(str(e.label("backend", b)) for b in distinct(e["backend"]))


def timed(e: Table) -> bool:
    """Some entry has a duration: the job recorded start events."""
    return bool(np.isfinite(e["duration_ms"]).any())


def max_timeout(e: Table) -> int:
    """The longest timeout (ms) an entry carries; 0 without entries."""
    return int(e["timeout_ms"].max()) if len(e) else 0


def rank_slice(ranks: np.ndarray, rank: int) -> slice:
    """Rows of one rank in a table sorted by rank (entries and ops both are): a binary search.

    The rank takes the column's dtype first: numpy would otherwise cast the whole column to
    compare it with a Python int (milliseconds per call on a million rows)."""
    key = ranks.dtype.type(rank)
    return slice(
        int(np.searchsorted(ranks, key, "left")), int(np.searchsorted(ranks, key, "right"))
    )


# ---------------------------------------------------------------- the providers


class Local:
    """The facts of a job whose table holds every entry (or of a partition of its ranks, on
    a worker). Each is computed from the table when first read, once: a reader that needs
    two of them (a consistency check, a comparison of snapshots) pays for those two.

    `ops`: the job's collective ops (OpView.coll), built after the backends are known, so
    asked for only when `lowest_seq` is read. `lags`: how the whole job's lag statistics
    are computed (timing.lag_stats over its Context), when stragglers are asked for; a
    partition has none of its own (its lags come from the workers' shuffle)."""

    left_out = 0

    def __init__(
        self,
        table: Table,
        ops: Callable[[], Table] | None = None,
        lags: Callable[[], Lags] | None = None,
    ) -> None:
        self.table = table
        self.ops = ops
        self.lags_of = lags

    @property
    def entries(self) -> int:
        return len(self.table)

    @cached_property
    def backends(self) -> list[str]:
        return backends(self.table)

    @cached_property
    def first_record(self) -> dict[int, int]:
        return first_records(self.table)

    @cached_property
    def last_record(self) -> dict[int, int]:
        return last_records(self.table)

    @cached_property
    def latest_ns(self) -> dict[int, int]:
        return latest_times(self.table)

    @cached_property
    def last_created_ns(self) -> dict[int, int]:
        return last_created(self.table)

    @cached_property
    def lowest_seq(self) -> dict[tuple[int, int], int]:
        if self.ops is None:
            raise FrtraceError("the lowest seqs need the job's op view (build_context)")
        return lowest_seqs(self.ops())

    @cached_property
    def cut_lo(self) -> dict[int, int]:
        return cut_points(self.table)

    @cached_property
    def timed(self) -> bool:
        return timed(self.table)

    @cached_property
    def max_timeout_ms(self) -> int:
        return max_timeout(self.table)

    @cached_property
    def last_completed(self) -> dict[str, int]:
        return last_completed(self.table)

    @cached_property
    def lags(self) -> Lags:
        if self.lags_of is None:
            raise FrtraceError(
                "no lags here: a whole job's come from build_context(trace, lags=lag_stats), "
                "a partition's from the workers' shuffle"
            )
        return self.lags_of()

    def history(self, rank: int) -> Table:
        return self.table.take(rank_slice(self.table["rank"], rank))

    def close(self) -> None:
        """Nothing is held elsewhere."""


@dataclass
class Assembled:
    """The facts of a job whose settled entries stayed on the workers: combined from their
    partitions' (`assembled`), the lags from their shuffle, a rank's history fetched from
    its partition (`fetch`) while the cluster holds it (`release` lets go)."""

    entries: int
    left_out: int
    backends: list[str]
    first_record: dict[int, int]
    last_record: dict[int, int]
    latest_ns: dict[int, int]
    last_created_ns: dict[int, int]
    lowest_seq: dict[tuple[int, int], int]
    cut_lo: dict[int, int]
    timed: bool
    max_timeout_ms: int
    last_completed: dict[str, int]
    lags: Lags
    fetch: Callable[[int], Table] = field(repr=False)
    release: Callable[[], None] | None = field(default=None, repr=False)

    def history(self, rank: int) -> Table:
        return self.fetch(int(rank))

    def close(self) -> None:
        if self.release is not None:
            self.release()


def of(
    trace: Trace,
    ops: Callable[[], Table] | None = None,
    lags: Callable[[], Lags] | None = None,
) -> Facts:
    """The job's facts: those a distributed load assembled, else computed from its table
    (`ops`, `lags`: see Local)."""
    if trace.facts is not None:
        return trace.facts
    return Local(trace.table, ops, lags)


# ---------------------------------------------------------------- assembled from partitions


@dataclass
class Partial:
    """One partition's facts, keyed by group name (each partition has its own codes)."""

    entries: int
    backends: set[str]
    first_record: dict[int, int]
    last_record: dict[int, int]
    latest_ns: dict[int, int]
    last_created_ns: dict[int, int]
    lowest_seq: dict[tuple[str, int], int]
    cut_lo: dict[str, int]
    timed: bool
    max_timeout_ms: int
    last_completed: dict[str, int]


def partial(facts: Facts, pg_names: list[str]) -> Partial:
    """A partition's share (worker side), from its Local facts (`pg_names`: its codes)."""
    return Partial(
        entries=facts.entries,
        backends=set(facts.backends),
        first_record=facts.first_record,
        last_record=facts.last_record,
        latest_ns=facts.latest_ns,
        last_created_ns=facts.last_created_ns,
        lowest_seq={(pg_names[g], r): v for (g, r), v in facts.lowest_seq.items()},
        cut_lo={pg_names[g]: v for g, v in facts.cut_lo.items()},
        timed=facts.timed,
        max_timeout_ms=facts.max_timeout_ms,
        last_completed=facts.last_completed,
    )


def combine(parts: list[Partial]) -> Partial:
    """The job's facts from its partitions' (in rank order): sums, unions, minima, maxima.
    Partitions hold disjoint ranks, but the result does not depend on it."""
    out = Partial(0, set(), {}, {}, {}, {}, {}, {}, False, 0, {})
    for p in parts:
        out.entries += p.entries
        out.backends |= p.backends
        _into(out.first_record, p.first_record, min)
        _into(out.last_record, p.last_record, max)
        _into(out.latest_ns, p.latest_ns, max)
        _into(out.last_created_ns, p.last_created_ns, max)
        _into(out.lowest_seq, p.lowest_seq, min)
        _into(out.cut_lo, p.cut_lo, max)
        out.timed = out.timed or p.timed
        out.max_timeout_ms = max(out.max_timeout_ms, p.max_timeout_ms)
        _into(out.last_completed, p.last_completed, max)
    return out


def _into(into: dict[K, int], more: dict[K, int], pick: Callable[[int, int], int]) -> None:
    for k, v in more.items():
        into[k] = pick(into[k], v) if k in into else v


def assembled(
    job: Partial,
    left_out: int,
    code: dict[str, int],
    lags: Lags,
    fetch: Callable[[int], Table],
) -> Assembled:
    """The facts of a job from its combined partitions (`code`: group name -> the code of
    the client's table), `left_out` of its entries staying on the workers."""
    return Assembled(
        entries=job.entries,
        left_out=left_out,
        backends=sorted(job.backends),
        first_record=job.first_record,
        last_record=job.last_record,
        latest_ns=job.latest_ns,
        last_created_ns=job.last_created_ns,
        lowest_seq={(code[g], r): v for (g, r), v in job.lowest_seq.items()},
        cut_lo={code[g]: v for g, v in job.cut_lo.items()},
        timed=job.timed,
        max_timeout_ms=job.max_timeout_ms,
        last_completed=job.last_completed,
        lags=lags,
        fetch=fetch,
    )
