"""Facts every analyzer needs about the job, computed once from the shared tables."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from frtrace.analysis.findings import Finding
from frtrace.analysis.ops import OpView, build_op_view
from frtrace.tables.trace import Trace


@dataclass
class Context:
    """The job as analyzers see it: op view, groups by code, and what each rank can still show."""

    trace: Trace
    view: OpView
    pg_names: list[str]  # entries' pg_name codes -> name
    pg_desc: dict[str, str]
    members: dict[str, list[int]]
    reliable: dict[str, bool]  # membership from pg_config rather than inferred
    dumped: set[int]
    judged_lo: dict[int, int]  # pg code -> lowest seq every member could still hold
    unknown: dict[int, set[int]]  # pg code -> members whose window shows nothing of the group
    mismatch_cap: int

    def name(self, pg: int) -> str:
        return self.pg_names[int(pg)]

    def desc(self, pg: int) -> str:
        return self.pg_desc.get(self.name(pg), "")

    def group_members(self, pg: int) -> list[int]:
        return self.members.get(self.name(pg), [])

    def finding(
        self,
        kind: str,
        pg: int,
        *,
        culprit_ranks: list[int],
        waiting_ranks: list[int],
        detail: str,
        collective_seq_id: int | None = None,
        p2p_seq_id: int | None = None,
        op: str | None = None,
        expected_ranks: list[int] | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> Finding:
        """A finding about group `pg`: its name, desc and (by default) members filled in."""
        return Finding(
            kind=kind,
            pg_name=self.name(pg),
            pg_desc=self.desc(pg),
            collective_seq_id=collective_seq_id,
            p2p_seq_id=p2p_seq_id,
            op=op,
            culprit_ranks=culprit_ranks,
            waiting_ranks=waiting_ranks,
            expected_ranks=self.group_members(pg) if expected_ranks is None else expected_ranks,
            detail=detail,
            evidence=evidence or {},
        )

    def rank_ops(self, rank: int) -> pd.DataFrame:
        """One rank's collective ops (a small frame): history questions never scan the job."""
        return self.view.coll.iloc[_rank_slice(self.view.coll["rank"].to_numpy(), rank)]

    def sites(self, rank: int) -> list[int]:
        """The rank's call sites (stack ids) in the order it recorded them, all groups."""
        cache = self.__dict__.setdefault("_sites", {})
        if rank not in cache:
            e = self.trace.entries
            rows = _rank_slice(e["rank"].to_numpy(), rank)
            cache[rank] = e["stack_id"].to_numpy()[rows].tolist()
        return cache[rank]

    def next_is_usual(self, rank: int, site: int) -> bool:
        """Its own history says `site` comes right after the rank's last recorded call."""
        sites = self.sites(rank)
        if site < 0 or len(sites) < 2 or sites[-1] < 0:
            return False
        return any(a == sites[-1] and b == site for a, b in itertools.pairwise(sites))

    def expected(self, pg: int) -> set[int]:
        """Members whose dump can tell whether they issued a collective of this group."""
        return (set(self.group_members(pg)) & self.dumped) - self.unknown.get(int(pg), set())


def _rank_slice(ranks: np.ndarray, rank: int) -> slice:
    """Rows of one rank in a table sorted by rank (entries and ops both are): a binary search."""
    return slice(
        int(np.searchsorted(ranks, rank, "left")), int(np.searchsorted(ranks, rank, "right"))
    )


def build_context(trace: Trace, mismatch_cap: int = 10) -> Context:
    """Op view plus the judged window of each group (ring buffers lose old entries)."""
    view = build_op_view(trace.entries)
    pg_names = [str(c) for c in trace.entries["pg_name"].cat.categories]
    members = {
        str(n): [int(r) for r in rs]
        for n, rs in zip(trace.groups["pg_name"], trace.groups["ranks"], strict=True)
    }
    reliable = {
        str(n): s == "pg_config"
        for n, s in zip(trace.groups["pg_name"], trace.groups["source"], strict=True)
    }
    pg_desc = {
        str(n): str(d)
        for n, d in zip(trace.groups["pg_name"], trace.groups["pg_desc"], strict=True)
    }
    # A rank whose oldest kept entry is not its first ever recorded one has lost history.
    first_record = trace.entries.groupby("rank")["record_id"].min()
    wrapped = {int(r): bool(v > 0) for r, v in first_record.items()}
    coll = view.coll
    lo_hi = coll.groupby(["pg", "rank"], sort=False)["seq"].min()
    judged_lo: dict[int, int] = {}
    for (pg, rank), lo in lo_hi.items():
        if wrapped.get(int(rank), False):
            judged_lo[int(pg)] = max(judged_lo.get(int(pg), 0), int(lo))
    dumped = set(int(r) for r in trace.files["rank"])
    unknown: dict[int, set[int]] = {}
    held = coll[["pg", "rank"]].drop_duplicates()
    holders = held.groupby("pg")["rank"].agg(lambda r: set(int(x) for x in r))
    for pg in range(len(pg_names)):
        have = holders.get(pg, set())
        lost = {
            m
            for m in members.get(pg_names[pg], [])
            if m in dumped and m not in have and wrapped.get(m, False)
        }
        if lost:
            unknown[pg] = lost
    return Context(
        trace=trace,
        view=view,
        pg_names=pg_names,
        pg_desc=pg_desc,
        members=members,
        reliable=reliable,
        dumped=dumped,
        judged_lo=judged_lo,
        unknown=unknown,
        mismatch_cap=mismatch_cap,
    )


def judged(coll: pd.DataFrame, ctx: Context) -> np.ndarray:
    """Mask of ops inside their group's judged window."""
    lo = np.zeros(len(ctx.pg_names) or 1, dtype=np.int64)
    for pg, value in ctx.judged_lo.items():
        lo[pg] = value
    return coll["seq"].to_numpy() >= lo[coll["pg"].to_numpy()]
