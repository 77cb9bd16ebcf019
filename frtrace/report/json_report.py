"""The JSON report: stable, versioned (`frtrace.report/1`), documented in schema.json.

It renders the report view (frtrace.report.view), as the text and HTML reports do.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

from frtrace.analysis.analyze import Analysis
from frtrace.report.evidence import culprit_evidence, process_evidence
from frtrace.report.view import ReportView, Shown
from frtrace.report.wording import where

SCHEMA_ID = "frtrace.report/1"
CULPRITS_SHOWN = 16  # culprits whose evidence the report details


def report_dict(view: ReportView) -> dict[str, Any]:
    """The report as plain data."""
    analysis = view.analysis
    trace = analysis.ctx.trace
    findings = [finding_dict(s) for s in view.findings]
    root = finding_dict(view.root) if view.root is not None else None
    if root is not None and view.root is not None:
        root["hosts"] = view.hosts
        shown = [culprit_evidence(analysis, r) for r in view.culprits[:CULPRITS_SHOWN]]
        refs = view.root.finding.culprit_processes[:CULPRITS_SHOWN]
        evidence = [e for e in shown if e is not None]
        root["culprit_evidence"] = evidence + [process_evidence(analysis, p) for p in refs]
        if view.findings and view.findings[0] is view.root:
            findings[0] = root  # the root cause is the first finding, in full
    return {
        "schema": SCHEMA_ID,
        "ok": view.verdict.ok,
        "verdict": view.verdict.name,
        "unseen": _unseen(view),
        "root_cause": root,
        "findings": findings,
        "inputs": {
            "trace_dir": trace.trace_dir,
            "files": len(trace.file_table),
            "ranks": trace.ranks,
            "missing_dumps": trace.missing_dumps,
            "skipped": [{"file": s.file, "reason": s.reason} for s in trace.skipped],
            "versions": trace.versions,
            "hosts": _hosts(analysis),
            "logs": _read_files(analysis, "log"),
            "stacks": _read_files(analysis, "stacks"),
        },
        "groups": [
            {
                "name": str(g.pg_name),
                "desc": str(g.pg_desc),
                "ranks": [int(r) for r in g.ranks],
                "membership": str(g.source),
            }
            for g in trace.group_table.rows()
        ],
        "notes": view.notes,
        "stragglers": _stragglers(analysis),
        "progress": _progress(analysis),
        "selection": None
        if analysis.selection is None
        else {
            "ranks": analysis.selection.ranks,
            "groups": analysis.selection.groups,
            "root_cause_outside": analysis.selection.root_cause_outside,
        },
    }


def finding_dict(shown: Shown) -> dict[str, object]:
    """A finding in the JSON report's shape (`frtrace.report/1`)."""
    f = shown.finding
    evidence: dict[str, object] = dict(f.facts)
    evidence.update(reason=f.reason, undecidable=f.undecidable, secondary=f.secondary)
    if f.issued_by or f.not_issued_by:
        evidence.update(issued_by=f.issued_by, not_issued_by=f.not_issued_by)
    if f.hang_seq is not None:
        evidence["hang_seq"] = f.hang_seq
    if f.last_seq is not None:
        evidence["seq_range"] = [f.collective_seq_id, f.last_seq]
    if f.blocked_in:
        evidence["blocked_in"] = {str(r): where(p) for r, p in sorted(f.blocked_in.items())}
    if f.chain:
        evidence["chain"] = shown.chain
        evidence["ranks_waiting_on_this"] = f.ranks_waiting_on_this
    if f.cycle:
        evidence["cycle"] = [where(p) for p in f.cycle]
    return {
        "kind": f.kind,
        "pg_name": f.pg_name,
        "pg_desc": f.pg_desc,
        "collective_seq_id": f.collective_seq_id,
        "p2p_seq_id": f.p2p_seq_id,
        "op": f.op,
        "culprit_ranks": [int(r) for r in f.culprit_ranks],
        "culprit_processes": [{"host": p.host, "pid": p.pid} for p in f.culprit_processes],
        "waiting_ranks": [int(r) for r in f.waiting_ranks],
        "expected_ranks": [int(r) for r in f.expected_ranks],
        "secondary": f.secondary,
        "detail": shown.detail,
        "evidence": evidence,
    }


def _unseen(view: ReportView) -> dict[str, Any] | None:
    missing = view.unseen
    if missing is None:
        return None
    return {
        "world_size": missing.world_size,
        "world_stated": missing.world_stated,
        "no_file": missing.no_file,
        "unreadable": missing.unreadable,
        "why": view.unseen_lines,
    }


def _hosts(analysis: Analysis) -> dict[str, str]:
    """Every rank's host, where a dump's name or folder, a log or a py-spy file tells it."""
    ev = analysis.evidence
    if ev is None:
        return {}
    return {str(r): e.host for r, e in sorted(ev.ranks.items()) if e.host}


def _read_files(analysis: Analysis, kind: str) -> list[dict[str, Any]]:
    """The logs or py-spy files read, with their node and how much of each was read."""
    ev = analysis.evidence
    if ev is None:
        return []
    return [
        {
            "file": f.path,
            "host": f.host,
            "lines": f.lines,
            "truncated": f.truncated,
            "binary_lines": f.binary_lines,
            "cut_lines": f.cut_lines,
        }
        for f in ev.files
        if f.kind == kind
    ]


def _stragglers(analysis: Analysis) -> dict[str, Any] | None:
    late = analysis.stragglers
    if late is None:
        return None
    return {
        "method": late.method,
        "collectives": late.collectives,
        "threshold_ms": late.threshold_ms,
        "threshold_share": late.threshold_share,
        "top": [
            {
                "rank": s.rank,
                "median_lag_ms": s.median_lag_ms,
                "p95_lag_ms": s.p95_lag_ms,
                "last_share": s.last_share,
                "collectives": s.collectives,
                "groups": s.groups,
                "cost_ms": s.cost_ms,
                "covered_ms": s.covered_ms,
                "cost_share": s.cost_share,
                "where": None if s.where is None else dataclasses.asdict(s.where),
                "first_of_step_share": s.first_of_step_share,
            }
            for s in late.top
        ],
    }


def _progress(analysis: Analysis) -> dict[str, Any] | None:
    moved = analysis.progress
    if moved is None:
        return None
    return {
        "since": moved.since,
        "advanced": moved.advanced,
        "stopped": moved.stopped,
        "all_stuck": moved.all_stuck,
        "restarted": moved.restarted,
        "only_before": moved.only_before,
        "only_after": moved.only_after,
        "groups": [
            {"name": g.pg_name, "desc": g.pg_desc, "last_completed": [g.before, g.after]}
            for g in moved.groups
        ],
    }


def render_json(view: ReportView) -> str:
    """The JSON report as text; `json.loads` it for a dict."""
    return json.dumps(report_dict(view), indent=2) + "\n"


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the report, shipped with the package."""
    text = resources.files("frtrace.report").joinpath("schema.json").read_text()
    return json.loads(text)
