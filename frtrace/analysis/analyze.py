"""Run every analyzer over the shared tables and rank what they found."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar, cast

import numpy as np

from frtrace.analysis.collectives import analyze_collectives
from frtrace.analysis.consistency import check_one_job
from frtrace.analysis.context import Context, build_context, is_default_group
from frtrace.analysis.findings import MISMATCH_KINDS, STUCK_AFTER_MS, Finding, Kind, Note, Reason
from frtrace.analysis.logs import (
    ELSEWHERE,
    WAITING,
    EndingGap,
    RankState,
    ending_gap,
    log_findings,
    rank_states,
    settle_even_split,
)
from frtrace.analysis.logs import FAILED as FAILED_STATES
from frtrace.analysis.p2p import analyze_p2p
from frtrace.analysis.snapshots import SnapshotComparison, compare_snapshots
from frtrace.analysis.timing import StragglerReport, classify, lag_stats, stragglers
from frtrace.analysis.waits import Blocked, analyze_waits, mark_secondary
from frtrace.evidence.gather import tie_by_waits
from frtrace.evidence.records import Evidence
from frtrace.tables.trace import Trace

T = TypeVar("T")
CONCURRENT_ENTRIES = 1 << 22  # jobs of at most this many entries compute stragglers aside


@dataclass
class Analysis:
    """Findings with the root cause first, then the other causes, then their consequences.

    A narrowed analysis (`narrowed`) shows fewer findings but keeps the job's verdict: its
    root cause and `ok` are those of the whole job.
    """

    ctx: Context
    findings: list[Finding]
    root_cause: Finding | None
    blocked: dict[int, Blocked]
    notes: list[Note] = field(default_factory=list)
    selection: Selection | None = None
    stragglers: StragglerReport | None = None
    progress: SnapshotComparison | None = None  # set by `since`: what moved since an older snapshot
    # What the job's logs and py-spy stacks say of each rank; without dumps it decides.
    evidence: Evidence | None = None
    # The dumps cannot be matched (gloo under DETAIL: `_unnamed_groups`) and no log saw a
    # fault: the logs alone then say whether the job is seen whole.
    unmatched: bool = False

    def since(self, older: Trace) -> Analysis:
        """This analysis with what advanced since an older snapshot of the same job."""
        self.progress = compare_snapshots(older, self.ctx.trace)
        return self

    @property
    def stopped(self) -> list[int]:
        """Ranks that did not advance since the older snapshot while others did (all of them
        when nothing moved)."""
        return self.progress.stopped if self.progress is not None else []

    @property
    def ok(self) -> bool:
        """No finding anywhere in the job, and the job is seen whole (a selection never
        hides a hang)."""
        return self.root_cause is None and self.unseen is None

    @property
    def unseen(self) -> Unseen | None:
        """What of the job the dumps do not show (None: it is seen whole). A job known from
        its logs alone is seen whole only where the logs show it ended cleanly
        (frtrace.analysis.logs.ending_gap): less evidence never gives a surer answer."""
        if self.evidence is not None and not len(self.ctx.trace.file_table):
            gap = ending_gap(self.evidence)
            if gap is None or self.root_cause is not None:  # a finding says more than a gap
                return None
            ranks = sorted(self.evidence.ranks)
            size = max(len(self.evidence.workers), len(ranks), self.evidence.world_size or 0)
            return Unseen(size, self.evidence.world_size is not None, [], [], gap)
        seen = unseen(self.ctx.trace)
        if self.unmatched and (self.evidence is None or ending_gap(self.evidence)):
            world = self.ctx.trace.world
            return replace(seen or Unseen(world.size, world.stated, [], []), unmatched=True)
        return seen

    @property
    def undetermined(self) -> bool:
        """No finding, but the job is not seen whole: frtrace cannot tell it is healthy."""
        return self.root_cause is None and self.unseen is not None

    def narrowed(self, ranks: list[int] | None, pg_names: set[str] | None) -> Analysis:
        """Only findings about the selected ranks and groups (the analysis saw everything)."""
        keep = [f for f in self.findings if _selected(f, ranks, pg_names)]
        root = self.root_cause
        outside = root is not None and not _selected(root, ranks, pg_names)
        selection = Selection(ranks, sorted(pg_names) if pg_names else None, outside)
        return Analysis(
            self.ctx,
            keep,
            root,
            self.blocked,
            list(self.notes),
            selection,
            self.stragglers,
            self.progress,
            self.evidence,
            self.unmatched,
        )


@dataclass(frozen=True)
class Unseen:
    """Why the job cannot be seen whole: its world size stated by no dump (`world_stated`
    False: ranks past `world_size` - 1 would have left nothing), ranks that left no file,
    ranks whose file could not be read."""

    world_size: int
    world_stated: bool
    no_file: list[int]
    unreadable: list[int]
    logs: EndingGap | None = None  # no dump: what the logs do not show of the job's end
    unmatched: bool = False  # the dumps cannot be matched, nor the logs show the end


def unseen(trace: Trace) -> Unseen | None:
    """What the dumps do not show of the job (None when every rank of a stated world left a
    usable dump)."""
    if trace.whole:
        return None
    unreadable = trace.unreadable
    no_file = trace.no_file
    return Unseen(trace.world.size, trace.world.stated, no_file, unreadable)


@dataclass(frozen=True)
class Selection:
    """What `--selected-ranks` / `--pg-filters` kept, and whether the root cause is outside."""

    ranks: list[int] | None
    groups: list[str] | None
    root_cause_outside: bool


def _selected(f: Finding, ranks: list[int] | None, pg_names: set[str] | None) -> bool:
    if pg_names is not None and f.pg_name not in pg_names:
        return False
    involved = set(f.culprit_ranks) | set(f.waiting_ranks) | set(f.expected_ranks)
    return ranks is None or bool(involved & set(ranks))


WAIT_KINDS = frozenset(
    {Kind.MISSING_RANKS, Kind.STATE_MISMATCH, Kind.STUCK_COLLECTIVE, Kind.ORDER_CYCLE}
)


def in_flight_snapshot(ctx: Context, blocked: dict[int, Blocked]) -> Note | None:
    """A note when timing shows every blocked op in flight for less than its timeout (and
    less than `STUCK_AFTER_MS`).

    NCCL's watchdog dumps on a timeout, so a hang's dumps hold work older than `timeout_ms`;
    an on-demand dump of a healthy job holds only young work. Without timing (no start
    events, so no dump time) the two cannot be told apart and frtrace assumes a hang.
    """
    if not ctx.timing or not blocked:
        return None
    oldest = 0.0
    for rank, b in blocked.items():
        age = ctx.in_flight_ms(rank, b.pos)
        if age is None:
            continue
        timeout = ctx.timeout_ms(rank, b.pos)
        if timeout <= 0 or age >= min(timeout, STUCK_AFTER_MS):
            return None
        oldest = max(oldest, age)
    if not oldest:
        return None
    return Note(
        "snapshot",
        {"ranks": len(blocked), "oldest_ms": round(oldest, 1), "stuck_after_ms": STUCK_AFTER_MS},
    )


def _key(f: Finding) -> tuple:
    return (f.kind, f.pg_name, f.collective_seq_id, f.p2p_seq_id, tuple(f.culprit_ranks))


def mark_same_culprit(findings: list[Finding], stopped: frozenset[int], blocked: dict) -> None:
    """A rank that stopped (a root cause's culprit) is missing from every later collective of
    all its groups: those findings repeat the root cause and are listed as its consequences."""
    for f in findings:
        absent = f.not_issued_by
        if f.kind != Kind.MISSING_RANKS or f.secondary or not absent:
            continue
        if set(absent) <= stopped and not any(r in blocked for r in absent):
            f.mark_consequence(absent, Reason.STOPPED_EARLIER)


def mismatch_before(
    ctx: Context, root: Finding, found: list[Finding], blocked: dict
) -> tuple[Finding, Finding | None]:
    """The root cause when the ranks others wait for stopped right after a collective where
    they disagreed with their peers: that disagreement (it made them fail, as gloo does to
    the odd rank of a size mismatch), with the wait it left as its consequence.

    A missing rank whose last recorded collective is one where it is a mismatch's culprit
    went no further because of it; its later absence says nothing more. Returns the root
    cause, and the finding it replaced (now its consequence)."""
    if root.kind != Kind.MISSING_RANKS or root.secondary or not root.culprit_ranks:
        return root, None
    if any(r in blocked for r in root.culprit_ranks):
        return root, None
    last = {ctx.last_collective(rank) for rank in root.culprit_ranks}
    only = last.pop() if len(last) == 1 else None
    if only is None:
        return root, None
    pg, seq, _op = only
    pg_name = ctx.name(pg)
    for f in found:
        if (
            f.kind in MISMATCH_KINDS
            and (f.pg_name, f.collective_seq_id) == (pg_name, seq)
            and set(root.culprit_ranks) <= set(f.culprit_ranks)
            and not f.undecidable
        ):
            f.chain = root.chain
            f.chain_end = "mismatch"
            f.ranks_waiting_on_this = root.ranks_waiting_on_this
            f.facts["stopped_after"] = True
            root.mark_consequence(root.culprit_ranks, Reason.AFTER_MISMATCH)
            root.facts["mismatch"] = {"kind": f.kind, "pg_name": pg_name, "seq": seq}
            return f, root
    return root, None


def unreadable_behind(
    roots: list[Finding], unreadable: set[int]
) -> tuple[list[Finding], list[Finding]]:
    """(roots, demoted): ranks wait for a rank whose dump is unreadable, while another cause
    holds up ranks too. That rank was alive to write a dump, and its own wait is out of
    sight: it is most likely held up by that other cause, so its root is a consequence."""

    def unread(f: Finding) -> bool:
        return (
            f.kind == Kind.MISSING_DUMP
            and bool(f.culprit_ranks)
            and (set(f.culprit_ranks) <= unreadable)
        )

    if not unreadable or all(unread(r) for r in roots):
        return roots, []
    kept = [r for r in roots if not unread(r)]
    demoted = [r for r in roots if unread(r)]
    for f in demoted:
        f.mark_consequence(f.culprit_ranks, Reason.UNREADABLE_ELSEWHERE)
    return kept, demoted


def gone_in_mismatch(ctx: Context, roots: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(roots, demoted): ranks without a dump file that were members of a collective whose
    ranks disagreed, at the root of a chain: their end follows from it (gloo aborts the
    process that receives more than its call expects: mesh_size_dies_4rank's rank 2), so the
    places ranks wait for them are consequences, not a cause of their own."""
    no_file = set(ctx.trace.no_file)
    gone: dict[int, Finding] = {}
    for f in roots:
        if f.kind in MISMATCH_KINDS:
            for r in set(f.expected_ranks) & no_file:
                gone.setdefault(r, f)
    if not gone:
        return roots, []
    demoted = []
    for f in roots:
        if f.kind == Kind.MISSING_DUMP and f.culprit_ranks and set(f.culprit_ranks) <= set(gone):
            m = gone[f.culprit_ranks[0]]
            f.mark_consequence(f.culprit_ranks, Reason.GONE_IN_MISMATCH)
            f.facts["mismatch"] = {
                "kind": m.kind,
                "pg_name": m.pg_name,
                "pg_desc": m.pg_desc,
                "seq": m.collective_seq_id,
            }
            demoted.append(f)
    return [r for r in roots if r not in demoted], demoted


def one_stall_without_p2p(
    ctx: Context, roots: list[Finding], blocked: dict
) -> tuple[list[Finding], list[Finding]]:
    """(roots, merged): on gloo, which records no send/recv (torch's ProcessGroupGloo.cpp:
    `ProcessGroupGloo::send` / `::recv` return a SendWork / RecvWork made on the spot, never
    passing through `ProcessGroupGloo::enqueue`, where gloo's Flight Recorder entries are
    recorded; the real pipeline fixtures hold none), a stage that stalls
    stops the stages it feeds and that feed it, invisibly. Ranks idle (outside collectives, or
    gone) in different stages are then one stall whose first rank cannot be told: one cause
    naming them all, undecidable. A tie the op sequence cannot break (JSON: which side of
    each group stopped, or added a call) merges alike.

    That reading needs a pipeline between them: ranks that no recorded group links (but the
    default one), in different components of the recorded groups (the stages). Where those
    groups already join the stalled ranks (two_stalls_8rank: tp 4 x dp 2, no pipeline), the
    reading that needs no unseen traffic is kept: each stall a cause of its own. Either way
    the finding names the other reading (`facts["other_reading"]`)."""
    if "gloo" not in ctx.facts.backends:
        return roots, []

    no_file = set(ctx.trace.no_file)
    stage = _components(ctx)

    def gone(f: Finding) -> bool:
        return (
            f.kind == Kind.MISSING_DUMP
            and bool(f.culprit_ranks)
            and set(f.culprit_ranks) <= no_file
        )

    def absent(f: Finding) -> list[int]:
        return f.not_issued_by or f.culprit_ranks

    def stop(f: Finding) -> str | None:
        away = f.not_issued_by if f.undecidable else f.culprit_ranks
        idle = f.kind == Kind.MISSING_RANKS and bool(away) and not any(r in blocked for r in away)
        return f.pg_desc if (idle or gone(f)) and f.pg_desc else None

    def head(f: Finding) -> int:
        return stage.get(absent(f)[0], absent(f)[0])

    alike = [f for f in roots if stop(f)]
    seen = [f for f in roots if not stop(f) and f.culprit_ranks]
    passed = [f for f in alike if not gone(f) and seen and head(f) not in map(head, seen)]
    for f in passed:
        # Idle in a stage the cause that can be seen is not in: stopped by it, through the
        # pipeline's unrecorded sends (or stalled apart: the dumps look the same).
        f.mark_consequence(absent(f), Reason.SAME_STALL)
    alike = [f for f in alike if f not in passed]
    if len({head(f) for f in alike}) < 2:
        # One stage: no pipeline between them. Those stopped at the same point are as many
        # stalls as groups; the finding says the reading not taken.
        points = [(stop(f), f.collective_seq_id) for f in alike]
        for f, point in zip(alike, points, strict=True):
            if points.count(point) > 1:
                f.facts["other_reading"] = "one_stall"
        return [r for r in roots if r not in passed], passed
    dead = [f for f in alike if gone(f)]
    if dead:
        # A rank that left no file died; the ranks that stopped and dumped were stopped by it
        # (through the unrecorded pipeline sends).
        merged = [f for f in alike if f not in dead]
        for f in merged:
            f.mark_consequence(absent(f), Reason.SAME_STALL)
        return [r for r in roots if r not in merged + passed], merged + passed
    # Where some of them surely stopped (idle, decided), the stall explains every absence;
    # where each is a tie (JSON: who stopped, who called more), both sides are named.
    tied = all(f.undecidable for f in alike)
    stopped = sorted({r for f in alike for r in (f.culprit_ranks if tied else absent(f))})
    first, rest = alike[0], alike[1:]
    first.facts["other_reading"] = "separate_stalls"
    first.facts["groups"] = [f.pg_name for f in alike]
    first.facts["first_reason"] = first.reason
    first.facts.pop("decided_by", None)  # each group's history, not who stopped first
    if tied:  # who of each group stopped is unknown too: the issuers are named, waiting
        first.facts["tied"] = True
        first.issued_by = sorted({r for f in alike for r in f.issued_by})
        first.not_issued_by = sorted({r for f in alike for r in f.not_issued_by})
    waiting = {r for f in alike for r in f.waiting_ranks}
    first.culprit_ranks = stopped
    first.waiting_ranks = sorted(waiting if tied else waiting - set(stopped))
    first.reason, first.undecidable = Reason.UNRECORDED_P2P, True
    first.ranks_waiting_on_this = sum(f.ranks_waiting_on_this for f in alike)
    for f in rest:
        f.mark_consequence(absent(f), Reason.SAME_STALL)
    return [r for r in roots if r not in rest + passed], rest + passed


def _components(ctx: Context) -> dict[int, int]:
    """Rank -> a representative of its component of the recorded groups but the default one
    (tensor and data parallel, a mesh's dimensions): the ranks no stage boundary separates,
    which only a pipeline's sends (never recorded on gloo) would cross."""
    parent: dict[int, int] = {}

    def root(r: int) -> int:
        while parent.setdefault(r, r) != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    for code, name in enumerate(ctx.pg_names):
        members = ctx.group_members(code)
        if is_default_group(name, ctx.desc(code)) or len(members) < 2:
            continue
        for m in members[1:]:
            parent[root(m)] = root(members[0])
    return {r: root(r) for r in list(parent)}


def one_cause_per_culprit(
    roots: list[Finding], blocked: dict
) -> tuple[list[Finding], list[Finding]]:
    """(roots, repeats): ranks that wait in several places for the same rank, one that left
    no dump or stopped outside collectives, are one cause, not several. A later root whose
    culprits an earlier one of its kind already names is a repeat; a missing dump's repeat is
    marked a consequence here, a stopped rank's by `mark_same_culprit`."""
    kept: list[Finding] = []
    repeats: list[Finding] = []
    named: dict[Kind, set[int]] = {Kind.MISSING_DUMP: set(), Kind.MISSING_RANKS: set()}
    for root in roots:
        culprits = set(root.culprit_ranks)
        idle = (
            root.kind in named and not root.undecidable and not any(r in blocked for r in culprits)
        )
        if idle and culprits and culprits <= named[root.kind]:
            if root.kind == Kind.MISSING_DUMP:
                root.mark_consequence(root.culprit_ranks, Reason.NO_DUMP_ELSEWHERE)
            repeats.append(root)
            continue
        kept.append(root)
        if idle:
            named[root.kind] |= culprits
    return kept, repeats


def analyze(
    trace: Trace,
    mismatch_cap: int = 10,
    straggler_threshold: float = 5.0,
    evidence: Evidence | None = None,
) -> Analysis:
    """All findings about the job; the root cause is the one most waiting ranks lead to.

    `evidence` (default: the logs and stacks loaded with the trace) is attached to the
    analysis; when there is no dump at all, its findings are the job's (frtrace.analysis.logs).
    Stragglers: ranks whose lateness cost `straggler_threshold` % or more of the time their
    calls cover.
    """
    evidence = evidence if evidence is not None else trace.evidence
    check_one_job(trace)
    ctx = build_context(trace, mismatch_cap, lags=lag_stats)
    # The stragglers read only the context: a second core computes them meanwhile (numpy
    # lets go of the interpreter lock for its sorts and gathers over the job's columns), in
    # a job small enough for their temporaries to coexist with the findings' (at 8,192 ranks
    # of 2,000 entries each step of either peaks 0.5-0.9 GB above a 3.1 GB context, within
    # the 4 GB budget only one after the other: docs/performance.md).
    late = Background(
        lambda: stragglers(ctx, straggler_threshold / 100),
        in_thread=len(trace.table) <= CONCURRENT_ENTRIES,
    )
    coll = analyze_collectives(ctx)
    p2p = analyze_p2p(ctx)
    found = coll.findings + p2p.findings
    waits = analyze_waits(ctx, coll, p2p, found)
    snapshot = in_flight_snapshot(ctx, waits.blocked)
    if snapshot is not None:
        # Work in flight, none of it past its timeout: a dump taken on demand from a live
        # job. Only disagreements are findings; who waits for whom is just progress.
        found = [f for f in found if f.kind not in WAIT_KINDS]
        waits.root_findings = []
        waits.blocked = {}
        notes_first = [snapshot]
    else:
        notes_first = []
    roots: list[Finding] = []
    for _root, finding in waits.root_findings:
        if all(_key(finding) != _key(r) for r in roots):
            roots.append(finding)
    failed = [mismatch_before(ctx, r, found, waits.blocked) for r in roots]
    roots = [root for root, _waited in failed]
    roots, again = one_cause_per_culprit(roots, waits.blocked)
    roots, unread = unreadable_behind(roots, set(trace.unreadable))
    again += unread
    roots, alike = one_stall_without_p2p(ctx, roots, waits.blocked)
    again += alike
    roots, dead = gone_in_mismatch(ctx, roots)
    again += dead
    again += [waited for _root, waited in failed if waited is not None]
    root_keys = {_key(r) for r in roots}
    root_places = {
        (r.kind, r.pg_name, r.hang_seq if r.hang_seq is not None else r.collective_seq_id)
        for r in roots
    }
    recast = {_key(f) for f in again}  # roots recast as consequences: one finding each
    # (a tie recast names fewer culprits than its twin in `found`: its place tells them apart)
    recast_places = {(f.kind, f.pg_name, f.collective_seq_id) for f in again}
    others = [
        f
        for f in found
        if f not in roots
        and _key(f) not in root_keys
        and _key(f) not in recast
        and (f.kind, f.pg_name, f.collective_seq_id) not in root_places | recast_places
    ]
    others += again
    stopped = frozenset(
        r
        for f in roots
        if f.kind == Kind.MISSING_RANKS or f.facts.get("stopped_after")
        for r in f.culprit_ranks
    )
    mark_secondary(ctx, others, waits.blocked, stopped)
    mark_same_culprit(others, stopped, waits.blocked)
    primary = [f for f in others if not f.secondary]
    secondary = [f for f in others if f.secondary]
    findings = roots + primary + secondary
    notes = notes_first
    if roots and len(roots) > 1:
        notes.append(
            Note(
                "independent_causes",
                {"count": len(roots), "waiting": roots[0].ranks_waiting_on_this},
            )
        )
    root_cause = findings[0] if findings else None
    for f in findings:
        if not f.secondary:
            classify(ctx, f, waits.blocked)
    folded = _folded(trace, evidence)
    if evidence is None:
        unmatched = folded  # no log to decide what the dumps cannot
        if folded:
            findings, root_cause = [], None
    else:
        waiting = {r for r, b in waits.blocked.items() if not b.maybe}
        findings, root_cause = _with_logs(trace, evidence, findings, root_cause, waiting, folded)
        unmatched = root_cause is None and folded
    return Analysis(
        ctx,
        findings,
        root_cause,
        waits.blocked,
        notes,
        stragglers=late.result(),
        evidence=evidence,
        unmatched=unmatched,
    )


def _waiting_in_logs(states: dict[int, RankState], ranks: list[int]) -> bool:
    """Whether the logs show each of `ranks` waiting in a collective itself (its timeout's
    or lost peer's error)."""
    return all(r in states and states[r].state in (WAITING, ELSEWHERE) for r in ranks)


def _confirm_waits(root: Finding, states: dict[int, RankState]) -> None:
    """A missing dump that ranks only may wait for (gloo records no completion: named with
    them, undecidable) is theirs alone where the logs show each of those ranks waiting."""
    if not root.facts.get("maybe") or not root.waiting_ranks:
        return
    if _waiting_in_logs(states, root.waiting_ranks):
        root.culprit_ranks = sorted(root.facts.get("no_dump", root.culprit_ranks))
        root.undecidable = False
        root.facts["maybe"] = False
        root.facts["waits_logged"] = list(root.waiting_ranks)


def _ended_cleanly(root: Finding | None, evidence: Evidence) -> bool:
    """A missing dump that ranks only may wait for, in a job whose logs show every worker
    exited 0 (`ending_gap`): their last calls completed, and no rank held the job."""
    return (
        root is not None
        and root.kind == Kind.MISSING_DUMP
        and bool(root.facts.get("maybe"))
        and ending_gap(evidence) is None
    )


def _folded(trace: Trace, evidence: Evidence | None) -> bool:
    """Whether the dumps cannot be matched across ranks: gloo under
    TORCH_DISTRIBUTED_DEBUG=DETAIL, as the logs say or as the dumps show themselves."""
    detail = evidence is not None and evidence.debug_detail
    # the cheap group check first: the entries are scanned only where it holds
    return (
        len(trace.file_table) > 0 and _unnamed_groups(trace) and (detail or _wrapper_checks(trace))
    )


def _with_logs(
    trace: Trace,
    evidence: Evidence,
    findings: list[Finding],
    root: Finding | None,
    waiting: set[int],
    folded: bool,
) -> tuple[list[Finding], Finding | None]:
    """The findings once the logs and stacks are heard. Without a dump, or with dumps that
    show no fault, they decide. Where the dumps only say who left none (`missing_dump`), the
    ranks the logs show failing by themselves (an exception, a signal, an error exit, a live
    stack outside collectives) are the cause, when they are not those very ranks, and the
    dumpless ranks its consequence: they were torn down after it. Where the dumps cannot be
    matched (gloo under DETAIL), the logs decide. Otherwise the dumps decide and the logs add
    their evidence. `waiting`: the ranks the matched dumps show waiting in a collective;
    `folded`: the dumps cannot be matched (`_folded`)."""
    dumped = len(trace.file_table) > 0
    if dumped and not folded:  # matched, the dumps say who waits: that ties stacks left
        tie_by_waits(evidence, waiting, trace.ranks)
    if dumped and root is not None and root.kind != Kind.MISSING_DUMP and not folded:
        settle_even_split(root, evidence)  # where the logs tell the two sides apart
        return findings, root
    # a missing dump the logs may settle (the only root cause left here with dumps matched)
    settles = dumped and root is not None and not folded
    states = rank_states(evidence)[0] if settles else {}
    if settles and root is not None:
        _confirm_waits(root, states)
    found = log_findings(evidence)
    if dumped and not folded and not found and _ended_cleanly(root, evidence):
        return [], None  # the dump was lost, not the rank: the world stays unseen (exit 4)
    if not dumped:
        return found, found[0] if found else None
    if folded and not found:  # unmatched seqs are no fault; the logs saw none
        return [], None
    if not found:
        return findings, root
    if root is not None and not folded:  # missing_dump: unless the logs show a rank's own fault
        own = found[0].facts.get("culprits", {})
        failed = {int(r) for r, facts in own.items() if facts.get("state") in FAILED_STATES}
        # or show the ranks that left no dump waiting in a collective themselves (their
        # timeout's or lost peer's error): victims there, their dumps only lost
        gone = list(root.facts.get("no_dump", root.culprit_ranks))
        waited = bool(gone) and _waiting_in_logs(states, gone)
        named = bool(set(found[0].culprit_ranks) - set(gone))
        # or a live stack stuck outside collectives whose rank is untold: its own trouble
        stuck = bool(found[0].culprit_processes) and not found[0].culprit_ranks
        stuck = stuck and not found[0].undecidable
        if (
            not (waited and named)
            and not stuck
            and (not failed or failed == set(root.culprit_ranks))
        ):
            return findings, root  # the logs add no name
    for f in findings:
        f.secondary = True
    return [found[0], *findings], found[0]


def _unnamed_groups(trace: Trace) -> bool:
    """Whether every entry of the dumps is in an unnamed group: gloo's recorder under
    TORCH_DISTRIBUTED_DEBUG=DETAIL, where ProcessGroupWrapper's own checks (an all_gather of
    each call's fingerprint on a helper group) are recorded beside the job's calls with the
    same empty name, so their sequence numbers cannot be matched across ranks."""
    names = trace.group_table["pg_name"]
    return len(trace.table) > 0 and all(str(n) == "" for n in names)


# ProcessGroupWrapper::runCollectiveChecks (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp)
# runs CollectiveFingerPrint::verify, an allgather of the call's fingerprint on its helper gloo
# group, before each call: the recorder files it as `all_gather` under the stack of the call it
# checks (seen in real torch 2.13 gloo dumps: all_gather entries under all_reduce, broadcast,
# barrier). The job's own all_gathers are made by these functions of distributed_c10d.py
# (torch 2.13's, each that records an all_gather).
_GATHERS = frozenset(
    {
        "all_gather",
        "all_gather_single",
        "all_gather_into_tensor",
        "_all_gather_base",
        "all_gather_object",
        "all_gather_coalesced",
        "gather_object",
    }
)
_C10D = "distributed_c10d.py"


def _wrapper_checks(trace: Trace) -> bool:
    """Whether the dumps hold ProcessGroupWrapper's checks: an entry recorded as all_gather
    whose own stack shows another collective of distributed_c10d.py being called."""
    table = trace.table
    gather = table.code("op", "all_gather")
    if gather < 0:
        return False
    ids = np.unique(table.cols["stack_id"][table.cols["op"] == gather])
    for sid in ids.tolist():
        frames = trace.stacks[sid] if 0 <= sid < len(trace.stacks) else ()
        api = next((f[0] for f in frames if str(f[1]).endswith(_C10D)), None)
        if api is not None and api not in _GATHERS:
            return True
    return False


class Background(Generic[T]):
    """`work()` run in a thread of its own (else at once, here); `result()` waits for its
    value or raises its error."""

    def __init__(self, work: Callable[[], T], in_thread: bool = True) -> None:
        self._work = work
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="frtrace-analysis", daemon=True)
        if in_thread:
            self._thread.start()
        else:  # errors (and Ctrl-C) raised here, at once
            self._value = work()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # raised where the result is asked for
            self._error = exc

    def result(self) -> T:
        if self._thread.ident is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)
