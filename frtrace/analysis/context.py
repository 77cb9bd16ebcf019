"""Facts every analyzer needs about the job, computed once from the shared tables."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.analysis import facts as job_facts
from frtrace.analysis.facts import rank_slice
from frtrace.analysis.findings import Finding, Kind, Place, Reason, WaitNode
from frtrace.analysis.ops import (
    OpView,
    block_ids,
    block_states,
    build_op_view,
    raw_state_codes,
    unlaunched,
)
from frtrace.tables.facts import Facts, Lags
from frtrace.tables.table import Table, distinct
from frtrace.tables.trace import Trace


@dataclass
class Context:
    """The job as analyzers see it: op view, groups by code, and what each rank can still show."""

    trace: Trace
    facts: Facts  # of every entry, the table's or not (frtrace.analysis.facts)
    view: OpView
    states: np.ndarray  # per entry, 0/1/2, coalesced parts carrying their closer's state
    pg_names: list[str]  # entries' pg_name codes -> name
    pg_desc: dict[str, str]
    members: dict[str, list[int]]
    reliable: dict[str, bool]  # membership from pg_config rather than inferred
    dumped: set[int]
    judged_lo: dict[int, int]  # pg code -> lowest seq every member could still hold
    unknown: dict[int, set[int]]  # pg code -> members whose window shows nothing of the group
    mismatch_cap: int
    # pg code -> rank -> (last enqueued, started, completed) collective seq from pg_status,
    # for groups without p2p work (p2p work reports its p2p seq there); only when states move
    status: dict[int, dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    # rank -> its latest recorded time (ns): a running op's discovered start is the dump time
    dump_ns: dict[int, int] = field(default_factory=dict)
    timing: bool = False  # the job recorded start events (TORCH_NCCL_ENABLE_TIMING)
    job_dump_ns: int = 0  # median of the ranks' latest times
    # entry rows a rank recorded but had not launched at its dump (ops.unlaunched), and by
    # (group code, rank): (seq, entries recorded). Not issued yet: the view leaves them out.
    unlaunched_rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    unlaunched: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    # Ranks of the job without a usable dump (no file, or an unreadable one), and the codes of
    # the groups whose members were inferred from the dumps while such ranks exist: those
    # ranks may be members too (open groups; the default group's world already counts them).
    without_dump: set[int] = field(default_factory=set)
    open_groups: frozenset[int] = frozenset()

    def __sizeof__(self) -> int:
        """A partition's entries and op view (see Table.__sizeof__: Dask must not think a
        partition's Context small, or it ships it to a worker holding a task's small input)."""
        held = sys.getsizeof(self.trace.table) + sys.getsizeof(self.view) + self.states.nbytes
        return object.__sizeof__(self) + held

    def row(self, rank: int, pos: int) -> int:
        """Index into the entries table of a rank's entry at `pos` in its dump: by position,
        as the table may lack some of the rank's entries (settled ones)."""
        rows = rank_slice(self.trace.table["rank"], rank)
        at = self.trace.table["pos"][rows]
        return rows.start + int(np.searchsorted(at, at.dtype.type(pos)))

    def timeout_ms(self, rank: int, pos: int) -> int:
        """The timeout its process group gave the rank's entry at `pos` (0 when unset)."""
        return int(self.trace.table["timeout_ms"][self.row(rank, pos)])

    def dump_time(self, rank: int) -> int:
        """When the rank dumped, as far as its times tell: its latest time, or the job's median
        dump time when that is later (a rank with nothing running shows no dump time)."""
        return max(self.dump_ns.get(int(rank), 0), self.job_dump_ns)

    def in_flight_ms(self, rank: int, pos: int) -> float | None:
        """How long the rank's entry had been enqueued when it dumped, where times tell.

        A rank with nothing running at its dump shows no dump time of its own: the job's
        median dump time stands in (ranks dump within seconds of each other).
        """
        created = int(self.trace.table["time_created_ns"][self.row(rank, pos)])
        latest = self.dump_time(rank)
        if not self.timing or created <= 0 or latest <= created:
            return None
        return (latest - created) / 1e6

    def issued_per_status(self, pg: int, rank: int, seq: int) -> bool:
        """pg_status says the rank enqueued this collective (its entry may be gone: a wrapped
        buffer, or an `onlyActive` dump that leaves completed work out)."""
        got = self.status.get(int(pg), {}).get(int(rank))
        return got is not None and got[0] >= seq

    def name(self, pg: int) -> str:
        return self.pg_names[int(pg)]

    def desc(self, pg: int) -> str:
        return self.pg_desc.get(self.name(pg), "")

    def group_members(self, pg: int) -> list[int]:
        return self.members.get(self.name(pg), [])

    def finding(
        self,
        kind: Kind,
        pg: int,
        *,
        culprit_ranks: list[int],
        waiting_ranks: list[int],
        reason: Reason,
        collective_seq_id: int | None = None,
        p2p_seq_id: int | None = None,
        op: str | None = None,
        expected_ranks: list[int] | None = None,
        facts: dict[str, Any] | None = None,
        **typed: Any,
    ) -> Finding:
        """A finding about group `pg`: its name, desc and (by default) members filled in.
        Waiting ranks include culprits only when the finding cannot tell them apart."""
        return Finding(
            kind=kind,
            pg_name=self.name(pg),
            pg_desc=self.desc(pg),
            collective_seq_id=collective_seq_id,
            p2p_seq_id=p2p_seq_id,
            op=op,
            culprit_ranks=sorted(culprit_ranks),
            waiting_ranks=sorted(
                set(waiting_ranks)
                if typed.get("undecidable")
                else set(waiting_ranks) - set(culprit_ranks)
            ),
            expected_ranks=self.group_members(pg) if expected_ranks is None else expected_ranks,
            reason=reason,
            facts=facts or {},
            **typed,
        )

    def place(self, node: WaitNode) -> Place:
        """A wait node by name: what findings and chains refer to."""
        if node.kind == "c":
            return Place(self.name(node.pg), self.desc(node.pg), node.seq)
        return Place(self.name(node.pg), self.desc(node.pg), None, True, node.src, node.dst)

    def rank_rows(self, rank: int) -> slice:
        """The rank's rows in the entries table (sorted by rank): a binary search."""
        return rank_slice(self.trace.table["rank"], rank)

    def history(self, rank: int) -> Table:
        """Every entry of one rank, by position (fetched once from the workers where the
        table lacks its settled entries)."""
        cache = self.__dict__.setdefault("_history", {})
        if rank not in cache:
            cache[rank] = self.facts.history(int(rank))
        return cache[rank]

    def history_states(self, rank: int) -> np.ndarray:
        """The states of `history(rank)`, coalesced parts carrying their block's."""
        return block_states(self.history(rank), self.status)

    def rank_ops(self, rank: int) -> Table:
        """One rank's collective ops (a small table): history questions never scan the job."""
        if not self.facts.left_out:  # the view holds them: a slice of it
            return self.view.coll.take(rank_slice(self.view.coll["rank"], rank))
        cache = self.__dict__.setdefault("_rank_ops", {})
        if rank not in cache:
            # Built like the job's view, with its codes: ops compare across the two.
            mine = self.history(rank)
            states = block_states(mine, self.status)
            left = unlaunched(mine, self.status)
            cache[rank] = build_op_view(mine, states, self.view, left).coll
        return cache[rank]

    def steps(self, rank: int, sized: bool = False) -> list[tuple[int, int]]:
        """The rank's calls as (group code, call site) in recorded order; the op stands in for
        the call site when the dump has no stacks (JSON). `sized`: there, the op and its input
        sizes (see next_is_usual)."""
        cache = self.__dict__.setdefault("_sized_steps" if sized else "_steps", {})
        if rank not in cache:
            e = self.history(rank)
            site = e["stack_id"].astype(np.int64)
            op = e["op"].astype(np.int64)
            if sized:
                op = op * 1_000_003 + e["input_sizes"].astype(np.int64)
            site = np.where(site >= 0, site, -1 - op)
            cache[rank] = list(zip(e["pg_name"].tolist(), site.tolist(), strict=True))
        return cache[rank]

    def calls(self, rank: int) -> list[tuple[int, int, str]]:
        """`steps` with each call's op: one call site may issue several ops (a bucket's
        all_gather, then its broadcasts)."""
        cache = self.__dict__.setdefault("_calls", {})
        if rank not in cache:
            e = self.history(rank)
            ops = [str(e.labels["op"][code]) for code in e["op"].tolist()]
            steps = self.steps(rank)
            cache[rank] = [(pg, site, op) for (pg, site), op in zip(steps, ops, strict=True)]
        return cache[rank]

    def op_pos(self, rank: int, pg: int, seq: int) -> int | None:
        """Where in its history the rank issued collective (pg, seq), if it did."""
        mine = self.rank_ops(rank)
        pos = mine["pos"][(mine["pg"] == pg) & (mine["seq"] == seq)]
        return int(pos[0]) if len(pos) else None

    def decided_by(self, ranks: list[int]) -> str:
        """What a tie broken by these ranks' histories rested on: "stacks" (call sites from
        the frames) or "op_sequence" (JSON dumps carry no frames: the ops stand in)."""
        with_stacks = all(bool((self.history(r)["stack_id"] >= 0).any()) for r in ranks)
        return "stacks" if with_stacks else "op_sequence"

    def last_collective(self, rank: int) -> tuple[int, int, str] | None:
        """(group code, seq, op) of the last collective the rank issued, if any."""
        mine = self.rank_ops(rank)
        if not len(mine):
            return None
        i = int(np.argmax(mine["pos"]))
        return int(mine["pg"][i]), int(mine["seq"][i]), self.view.label("op", mine["op"][i])

    def has_history(self, rank: int) -> bool:
        """The rank's dump holds completed work, so its call sites show what it usually does
        (an `onlyActive` dump keeps only unfinished work and frozen coalesced parts)."""
        own = raw_state_codes(self.history(rank))
        return bool((own == 2).any()) or not self.view.states_tracked

    def next_is_usual(self, rank: int, at: tuple[int, int] | None) -> bool:
        """Its own history says the call a peer made at `at` (peer rank, position in its
        dump) comes right after the rank's last recorded call.

        Without stacks (JSON) the op and its input sizes stand in for the call site: the op
        alone repeats so much (every all_reduce alike) that any all_reduce would look like the
        usual next call where the stacks would show a call site never seen before."""
        if at is None:
            return False
        peer, pos = at
        step = self.steps(peer)[pos]
        sized = step[1] < 0
        steps = self.steps(rank, sized)
        if len(steps) < 2:
            return False
        if sized:
            step = self.steps(peer, True)[pos]
            if len(set(steps)) < 2:
                return False  # no stacks and a history of one repeated call tells nothing
        return any(a == steps[-1] and b == step for a, b in itertools.pairwise(steps))

    def expected(self, pg: int) -> set[int]:
        """Members whose dump can tell whether they issued a collective of this group."""
        return (set(self.group_members(pg)) & self.dumped) - self.unknown.get(int(pg), set())


@dataclass
class Scope:
    """What a partition of a job's ranks cannot see in its own entries: whether the job is
    gloo, the pg_status rows by group (resolved job-wide, see status_by_name), and whether any
    rank's states move. Given to build_context on a worker (frtrace.cluster.settle)."""

    gloo: bool
    status: dict[str, dict[int, tuple[int, int, int]]]
    states_tracked: bool | None = None


def build_context(
    trace: Trace,
    mismatch_cap: int = 10,
    scope: Scope | None = None,
    lags: Callable[[Context], Lags] | None = None,
) -> Context:
    """Op view plus the judged window of each group (ring buffers lose old entries).
    `scope`: the job-wide facts when `trace` holds only some of its ranks. `lags`: how the
    lag statistics of a job at hand are computed from its Context (timing.lag_stats, which
    this module cannot import: it reads the Context); a partition's are never asked for."""
    e = trace.table
    groups = trace.group_table
    pg_names = [str(c) for c in e.labels["pg_name"]]
    members = {
        str(n): [int(r) for r in rs]
        for n, rs in zip(groups["pg_name"], groups["ranks"], strict=True)
    }
    # Asked for only once the view below is built, and the lags only when stragglers are.
    facts = job_facts.of(trace, lambda: view.coll, None if lags is None else lambda: lags(ctx))
    # gloo counts a timed-out collective as completed in pg_status: only trust it elsewhere.
    gloo = scope.gloo if scope is not None else "gloo" in facts.backends
    if gloo:
        status = {}
    else:
        code = {name: i for i, name in enumerate(pg_names)}
        by_name = scope.status if scope is not None else _status_by_group(trace, members)
        status = {code[name]: ranks for name, ranks in by_name.items() if name in code}
    blocks = block_ids(e)  # sorts the job's blocks once for both
    states = block_states(e, status, blocks)
    not_launched = unlaunched(e, status, blocks)
    view = build_op_view(e, states, leave_out=not_launched)
    if facts.left_out:
        view.states_tracked = True  # entries left out of the table settled: completed ones
    if scope is not None and scope.states_tracked is not None:
        view.states_tracked = scope.states_tracked
    reliable = {
        str(n): s == "pg_config" for n, s in zip(groups["pg_name"], groups["source"], strict=True)
    }
    pg_desc = {str(n): str(d) for n, d in zip(groups["pg_name"], groups["pg_desc"], strict=True)}
    # A rank whose oldest kept entry is not its first ever recorded one has lost history.
    wrapped = {int(r): bool(v > 0) for r, v in facts.first_record.items()}
    judged_lo: dict[int, int] = {}
    lowest = facts.lowest_seq
    # per group: the highest of its wrapped members' lowest seqs
    for (pg, rank), lo in lowest.items():
        if wrapped.get(rank, False):
            judged_lo[pg] = max(judged_lo.get(pg, 0), lo)
    for pg, lo in facts.cut_lo.items():
        judged_lo[pg] = max(judged_lo.get(pg, 0), lo)
    dumped = set(int(r) for r in trace.file_table["rank"])
    unknown: dict[int, set[int]] = {}
    holders: dict[int, set[int]] = {}
    for pg, rank in lowest:
        holders.setdefault(pg, set()).add(rank)
    for pg in range(len(pg_names)):
        have = holders.get(pg, set())
        lost = {
            m
            for m in members.get(pg_names[pg], [])
            if m in dumped
            and m not in have
            and wrapped.get(m, False)
            and m not in status.get(pg, {})
        }
        if lost:
            unknown[pg] = lost
    dump_ns = dict(facts.latest_ns)
    timing = bool((states == 1).any() or facts.timed)
    without_dump = set(trace.missing_dumps)
    open_groups = frozenset(
        code
        for code, name in enumerate(pg_names)
        if without_dump
        and not reliable.get(name, True)
        and not is_default_group(name, pg_desc.get(name, ""))
    )
    ctx = Context(
        facts=facts,
        without_dump=without_dump,
        open_groups=open_groups,
        unlaunched_rows=not_launched,
        unlaunched=_by_pair(e, not_launched),
        job_dump_ns=int(np.median(list(dump_ns.values()))) if dump_ns else 0,
        dump_ns=dump_ns,
        timing=timing,
        trace=trace,
        view=view,
        states=states,
        pg_names=pg_names,
        pg_desc=pg_desc,
        members=members,
        reliable=reliable,
        dumped=dumped,
        judged_lo=judged_lo,
        unknown=unknown,
        mismatch_cap=mismatch_cap,
        status=status,
    )
    return ctx


def is_default_group(name: str, desc: str) -> bool:
    """The default group: its inferred members are the whole world already."""
    return name == "0" or desc == "default_pg"


def _by_pair(e: Table, rows: np.ndarray) -> dict[tuple[int, int], tuple[int, int]]:
    """(group code, rank) -> (seq, entries recorded) of the unlaunched ops at `rows`."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for pg, rank, seq in zip(
        e["pg_name"][rows].tolist(),
        e["rank"][rows].tolist(),
        e["collective_seq_id"][rows].tolist(),
        strict=True,
    ):
        out[pg, rank] = (seq, out.get((pg, rank), (seq, 0))[1] + 1)
    return out


def _status_by_group(
    trace: Trace, members: dict[str, list[int]]
) -> dict[str, dict[int, tuple[int, int, int]]]:
    """status_by_name for a whole job at hand."""
    e = trace.table
    names = e.labels["pg_name"]
    p2p_groups = {str(names[c]) for c in distinct(e["pg_name"][e["is_p2p"]]).tolist()}
    return status_by_name(trace.status_table, members, p2p_groups)


def status_by_name(
    st: Table, members: dict[str, list[int]], p2p_groups: set[str]
) -> dict[str, dict[int, tuple[int, int, int]]]:
    """pg_status rows by group name, for groups whose entries hold no p2p work
    (`p2p_groups`: the groups with p2p entries anywhere in the job).

    pg_status is keyed by the process-local pg_id. Where a rank's own entries do not name the
    group of a pg_id, the names other ranks give that pg_id narrow it down: the one whose
    members include the rank (SPMD jobs create their groups in the same order everywhere).
    """
    if not len(st):
        return {}
    by_id: dict[int, set[str]] = {}
    for pg_id, name in zip(st["pg_id"], st["pg_name"], strict=True):
        if name:
            by_id.setdefault(int(pg_id), set()).add(str(name))
    out: dict[str, dict[int, tuple[int, int, int]]] = {}
    for row in st.rows():
        rank, name = int(row.rank), str(row.pg_name)
        if not name:
            fits = [n for n in by_id.get(int(row.pg_id), ()) if rank in members.get(n, ())]
            name = fits[0] if len(fits) == 1 else ""
        if not name or name in p2p_groups:
            continue
        out.setdefault(name, {})[rank] = (
            int(row.last_enqueued),
            int(row.last_started),
            int(row.last_completed),
        )
    return out


def judged(coll: Table, ctx: Context) -> np.ndarray:
    """Mask of ops (or of (pg, seq) keys) inside their group's judged window."""
    lo = np.zeros(len(ctx.pg_names) or 1, dtype=np.int64)
    for pg, value in ctx.judged_lo.items():
        lo[pg] = value
    return coll["seq"] >= lo[coll["pg"]]
