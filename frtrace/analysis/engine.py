"""Run every analyzer over the shared tables and rank what they found."""

from __future__ import annotations

from dataclasses import dataclass, field

from frtrace.analysis.collectives import analyze_collectives
from frtrace.analysis.context import Context, build_context
from frtrace.analysis.findings import Finding
from frtrace.analysis.p2p import analyze_p2p
from frtrace.analysis.waits import Blocked, analyze_waits, mark_secondary
from frtrace.report.fmt import rank_ranges, verb, who
from frtrace.tables.trace import Trace


@dataclass
class Analysis:
    """Findings with the root cause first, then the other causes, then their consequences."""

    ctx: Context
    findings: list[Finding]
    root_cause: Finding | None
    blocked: dict[int, Blocked]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def narrowed(self, ranks: list[int] | None, pg_names: set[str] | None) -> Analysis:
        """Only findings about the selected ranks and groups (the analysis saw everything)."""
        keep = []
        for f in self.findings:
            if pg_names is not None and f.pg_name not in pg_names:
                continue
            involved = set(f.culprit_ranks) | set(f.waiting_ranks)
            if ranks is not None and not involved & set(ranks):
                continue
            keep.append(f)
        root = keep[0] if keep else None
        return Analysis(self.ctx, keep, root, self.blocked, list(self.notes))

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


def _key(f: Finding) -> tuple:
    return (f.kind, f.pg_name, f.collective_seq_id, f.p2p_seq_id, tuple(f.culprit_ranks))


def mark_same_culprit(findings: list[Finding], roots: list[Finding], blocked: dict) -> None:
    """A rank that stopped is missing from every later collective of all its groups: those
    findings repeat the root cause and are listed as its consequences."""
    stopped = {r for f in roots if f.kind == "missing_ranks" for r in f.culprit_ranks}
    for f in findings:
        absent = f.evidence.get("not_issued_by") or []
        if f.kind != "missing_ranks" or f.secondary or not absent:
            continue
        if set(absent) <= stopped and not any(r in blocked for r in absent):
            f.mark_consequence(
                absent,
                f"{who(absent)} stopped before the root cause's collective, so "
                f"{verb(absent, 'it', 'they')} never issued this one either (a consequence)",
            )


def analyze(trace: Trace, mismatch_cap: int = 10) -> Analysis:
    """All findings about the job; the root cause is the one most waiting ranks lead to."""
    ctx = build_context(trace, mismatch_cap)
    coll = analyze_collectives(ctx)
    p2p = analyze_p2p(ctx)
    found = coll.findings + p2p.findings
    waits = analyze_waits(ctx, coll, p2p, found)
    roots: list[Finding] = []
    for _root, finding in waits.root_findings:
        if all(_key(finding) != _key(r) for r in roots):
            roots.append(finding)
    root_keys = {_key(r) for r in roots}
    root_places = {
        (r.kind, r.pg_name, r.evidence.get("hang_seq", r.collective_seq_id)) for r in roots
    }
    others = [
        f
        for f in found
        if f not in roots
        and _key(f) not in root_keys
        and (f.kind, f.pg_name, f.collective_seq_id) not in root_places
    ]
    waited_for = {r for f in roots if f.kind == "missing_dump" for r in f.culprit_ranks}
    for rank in trace.missing_dumps:
        if rank in waited_for:
            continue
        groups = [n for n, ranks in ctx.members.items() if rank in ranks]
        others.append(
            Finding(
                kind="missing_dump",
                pg_name=groups[-1] if groups else "",
                pg_desc=ctx.pg_desc.get(groups[-1], "") if groups else "",
                collective_seq_id=None,
                p2p_seq_id=None,
                op=None,
                culprit_ranks=[rank],
                waiting_ranks=[],
                expected_ranks=ctx.members.get(groups[-1], []) if groups else [],
                detail=(
                    f"rank {rank} is a member of groups {', '.join(groups)} but left no usable "
                    "dump: the analysis of those groups is partial"
                ),
                evidence={"groups": groups},
            )
        )
    mark_secondary(ctx, others, waits.blocked)
    mark_same_culprit(others, roots, waits.blocked)
    primary = [f for f in others if not f.secondary]
    secondary = [f for f in others if f.secondary]
    findings = roots + primary + secondary
    notes = list(waits.notes)
    if roots and len(roots) > 1:
        notes.append(
            f"{len(roots)} independent causes; the first holds up the most ranks "
            f"({rank_ranges(roots[0].waiting_ranks)} and those waiting on them)"
        )
    root_cause = findings[0] if findings else None
    return Analysis(ctx, findings, root_cause, waits.blocked, notes)
