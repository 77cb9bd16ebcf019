"""The JSON report: stable, versioned (`frtrace.report/1`), documented in schema.json."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

from frtrace.analysis.engine import Analysis
from frtrace.report.evidence import culprit_evidence, hosts_of
from frtrace.report.wording import finding_dict, note_text, unseen_lines

SCHEMA_ID = "frtrace.report/1"
CULPRITS_SHOWN = 16  # culprits whose evidence the report details


def report_dict(analysis: Analysis, stack_frames: int = 0) -> dict[str, Any]:
    """The report as plain data; `stack_frames` > 0 adds culprit/waiter frames to evidence."""
    trace = analysis.ctx.trace
    findings = [finding_dict(f) for f in analysis.findings]
    root = finding_dict(analysis.root_cause) if analysis.root_cause is not None else None
    if root is not None and analysis.root_cause is not None:
        culprits = analysis.root_cause.culprit_ranks
        root["hosts"] = hosts_of(analysis, culprits)
        shown = [culprit_evidence(analysis, r) for r in culprits[:CULPRITS_SHOWN]]
        root["culprit_evidence"] = [e for e in shown if e is not None]
        if analysis.findings and analysis.findings[0] is analysis.root_cause:
            findings[0] = root  # the root cause is the first finding, in full
    return {
        "schema": SCHEMA_ID,
        "ok": analysis.ok,
        "verdict": "unknown" if analysis.undetermined else ("ok" if analysis.ok else "findings"),
        "unseen": _unseen(analysis),
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
        "notes": [note_text(n) for n in analysis.notes],
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


def _unseen(analysis: Analysis) -> dict[str, Any] | None:
    missing = analysis.unseen
    if missing is None:
        return None
    return {
        "world_size": missing.world_size,
        "world_stated": missing.world_stated,
        "no_file": missing.no_file,
        "unreadable": missing.unreadable,
        "why": unseen_lines(missing),
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


def render_json(analysis: Analysis) -> str:
    return json.dumps(report_dict(analysis), indent=2) + "\n"


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the report, shipped with the package."""
    text = resources.files("frtrace.report").joinpath("schema.json").read_text()
    return json.loads(text)
