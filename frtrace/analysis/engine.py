"""Run every analyzer over the shared tables and rank what they found."""

from __future__ import annotations

from dataclasses import dataclass, field

from frtrace.analysis.collectives import analyze_collectives
from frtrace.analysis.consistency import check_one_job
from frtrace.analysis.context import Context, build_context
from frtrace.analysis.findings import STUCK_AFTER_MS, Finding, Note
from frtrace.analysis.p2p import analyze_p2p
from frtrace.analysis.progress import Progress, compare
from frtrace.analysis.timing import StragglerReport, classify, stragglers
from frtrace.analysis.waits import Blocked, analyze_waits, mark_secondary
from frtrace.tables.trace import Trace


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
    progress: Progress | None = None  # set by `since`: what moved since an older snapshot

    def since(self, older: Trace) -> Analysis:
        """This analysis with what advanced since an older snapshot of the same job."""
        self.progress = compare(older, self.ctx.trace)
        return self

    @property
    def stopped(self) -> list[int]:
        """Ranks that did not advance since the older snapshot while others did (all of them
        when nothing moved)."""
        return self.progress.stopped if self.progress is not None else []

    @property
    def ok(self) -> bool:
        """No finding anywhere in the job (a selection never hides a hang)."""
        return self.root_cause is None

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
        )

    # --- reports (frtrace.api); imported lazily so the analysis never needs them ---

    def to_json(self) -> str:
        """The JSON report (schema frtrace.report/1) as text; `json.loads` it for a dict."""
        from frtrace.report.json_report import render_json

        return render_json(self)

    def to_text(self, *, width: int | None = None, verbose: bool = False) -> str:
        """The text report the command prints (`width`: the terminal's, else 80)."""
        from frtrace.report.text import render_text

        return render_text(self, width=width, verbose=verbose)

    def to_html(self) -> str:
        """The self-contained HTML page that `--html FILE` writes."""
        from frtrace.report.html import render_html

        return render_html(self)


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


WAIT_KINDS = frozenset({"missing_ranks", "state_mismatch", "stuck_collective", "order_cycle"})


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
        if f.kind != "missing_ranks" or f.secondary or not absent:
            continue
        if set(absent) <= stopped and not any(r in blocked for r in absent):
            f.mark_consequence(absent, "stopped_earlier")


def one_cause_per_culprit(
    roots: list[Finding], blocked: dict
) -> tuple[list[Finding], list[Finding]]:
    """(roots, repeats): ranks that wait in several places for the same rank, one that left
    no dump or stopped outside collectives, are one cause, not several. A later root whose
    culprits an earlier one of its kind already names is a repeat; a missing dump's repeat is
    marked a consequence here, a stopped rank's by `mark_same_culprit`."""
    kept: list[Finding] = []
    repeats: list[Finding] = []
    named: dict[str, set[int]] = {"missing_dump": set(), "missing_ranks": set()}
    for root in roots:
        culprits = set(root.culprit_ranks)
        idle = (
            root.kind in named and not root.undecidable and not any(r in blocked for r in culprits)
        )
        if idle and culprits and culprits <= named[root.kind]:
            if root.kind == "missing_dump":
                root.mark_consequence(root.culprit_ranks, "no_dump_elsewhere")
            repeats.append(root)
            continue
        kept.append(root)
        if idle:
            named[root.kind] |= culprits
    return kept, repeats


def _absent_members(ctx: Context, absent: set[int]) -> list[Finding]:
    """Members without a dump nobody is seen waiting for: one finding per group, so the
    report grows with the groups, not with members x members."""
    if not absent:
        return []
    groups_of: dict[int, list[str]] = {}
    for name, ranks in ctx.members.items():
        for r in ranks:
            if r in absent:
                groups_of.setdefault(r, []).append(name)
    by_group: dict[str, list[int]] = {}
    for rank in sorted(absent):
        names = groups_of.get(rank, [])
        by_group.setdefault(names[-1] if names else "", []).append(rank)
    findings = []
    for name, ranks in by_group.items():
        groups = sorted({g for r in ranks for g in groups_of.get(r, [])})
        findings.append(
            Finding(
                kind="missing_dump",
                pg_name=name,
                pg_desc=ctx.pg_desc.get(name, ""),
                collective_seq_id=None,
                p2p_seq_id=None,
                op=None,
                culprit_ranks=ranks,
                waiting_ranks=[],
                expected_ranks=ctx.members.get(name, []),
                reason="partial_groups",
                facts={"groups": groups[:20], "groups_total": len(groups)},
            )
        )
    return findings


def analyze(trace: Trace, mismatch_cap: int = 10, straggler_threshold: float = 5.0) -> Analysis:
    """All findings about the job; the root cause is the one most waiting ranks lead to.
    Stragglers: ranks whose lateness cost `straggler_threshold` % or more of the time their
    calls cover."""
    check_one_job(trace)
    ctx = build_context(trace, mismatch_cap)
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
    roots, again = one_cause_per_culprit(roots, waits.blocked)
    root_keys = {_key(r) for r in roots}
    root_places = {
        (r.kind, r.pg_name, r.hang_seq if r.hang_seq is not None else r.collective_seq_id)
        for r in roots
    }
    others = [
        f
        for f in found
        if f not in roots
        and _key(f) not in root_keys
        and (f.kind, f.pg_name, f.collective_seq_id) not in root_places
    ]
    waited_for = {r for f in roots if f.kind == "missing_dump" for r in f.culprit_ranks}
    others += _absent_members(ctx, set(trace.missing_dumps) - waited_for)
    others += again
    stopped = frozenset(r for f in roots if f.kind == "missing_ranks" for r in f.culprit_ranks)
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
    late = stragglers(ctx, straggler_threshold / 100)
    return Analysis(ctx, findings, root_cause, waits.blocked, notes, stragglers=late)
