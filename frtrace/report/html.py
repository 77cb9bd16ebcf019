"""`--html FILE`: the hang at a glance, in one self-contained file to attach to a ticket.

Inline CSS and JavaScript, no network and no library: it opens from an e-mail attachment.
The page, its CSS and its JavaScript are files of the package (frtrace/report/page/), put
into one file at render. It renders the report view (frtrace.report.view).
The data travels as JSON in a `<script type="application/json">` tag with `<`, `>` and `&`
escaped, and the page builds its DOM with `textContent` only, because every string from a
dump (group names, ops, stack frames, file names) is untrusted.
"""

from __future__ import annotations

import html
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from frtrace.evidence.gather import in_collective
from frtrace.report.evidence import (
    culprit_rows,
    from_logs,
    inputs_summary,
    next_step,
    rank_evidence,
)
from frtrace.report.fmt import ranks_text
from frtrace.report.json_report import report_dict
from frtrace.report.skipped import SKIPPED_SHOWN
from frtrace.report.view import CULPRIT, WAITING, ReportView, Shown

# Where a rank stopped in a group, as drawn on the map (codes are indices).
STATUS = ("completed", "started", "issued", "never issued", "no dump", "not a member")
COMPLETED, STARTED, ISSUED, NEVER, NO_DUMP, NOT_MEMBER = range(len(STATUS))
TIMELINE_RANKS = 12  # ranks whose recent ops the page carries
TIMELINE_OPS = 24  # recent ops per rank
LIVE_RANKS = 64  # ranks whose py-spy stacks the page carries
MAP_ROWS = 48  # group kinds drawn as rows of the map; more are folded into one
FINDINGS_SHOWN = 300
# A rank's part in the root cause, for the map (codes are indices): the culprits are painted
# red whatever their status, the one alarming colour; every other rank, waiting ones included,
# keeps the calmer colour of its status.
ROLES = ("", CULPRIT, WAITING)


def status_table(view: ReportView) -> pd.DataFrame:
    """Per rank and group it belongs to: where the rank stopped there.

    status: 0 completed (not waiting there), 1 started (blocked there, running), 2 issued
    (blocked there, not started), 3 never issued (others wait there for a collective it never
    issued), 4 no dump. last_issued / last_completed are its highest collective seq there
    (-1: none), blocked_seq the seq it waits at there (-1: not waiting there).
    """
    analysis = view.analysis
    ctx = analysis.ctx
    code = {name: i for i, name in enumerate(ctx.pg_names)}
    issued_d = ctx.view.last_seqs()
    done_d = ctx.view.last_seqs(completed=True)
    blocked_at: dict[int, int] = {}  # pg code -> lowest collective seq some member waits at
    for stop in analysis.blocked.values():
        if stop.node[0] == "c":
            pg, seq = int(stop.node[1]), int(stop.node[2])
            blocked_at[pg] = min(blocked_at.get(pg, seq), seq)
    missing = set(analysis.ctx.trace.missing_dumps)
    rows: dict[str, list[Any]] = {
        k: [] for k in ("rank", "group", "status", "last_issued", "last_completed", "blocked_seq")
    }
    for name, members in ctx.members.items():
        pg = code.get(name, -1)
        for rank in members:
            last = issued_d.get((pg, rank), -1)
            b = analysis.blocked.get(rank)
            here = b is not None and int(b.node[1]) == pg
            if rank in missing:
                status = NO_DUMP
            elif here and b is not None:
                status = STARTED if b.state == 1 else ISSUED
            elif pg in blocked_at and last < blocked_at[pg]:
                status = NEVER
            else:
                status = COMPLETED
            rows["rank"].append(int(rank))
            rows["group"].append(name)
            rows["status"].append(status)
            rows["last_issued"].append(last)
            rows["last_completed"].append(done_d.get((pg, rank), -1))
            rows["blocked_seq"].append(
                int(b.node[2]) if here and b is not None and b.node[0] == "c" else -1
            )
    return pd.DataFrame(rows)


def _map_data(view: ReportView, table: pd.DataFrame) -> dict[str, Any]:
    """The status table pivoted for drawing: one row per group kind (desc), one cell per rank,
    with each rank's part in the root cause."""
    ctx = view.analysis.ctx
    ranks = sorted(set(ctx.trace.ranks) | set(ctx.trace.missing_dumps))
    index = {r: i for i, r in enumerate(ranks)}
    kinds: dict[str, list[str]] = {}
    for name in ctx.members:
        kinds.setdefault(ctx.pg_desc.get(name, "") or name, []).append(name)
    order = sorted(kinds, key=lambda k: (-max(len(ctx.members[n]) for n in kinds[k]), k))
    if len(order) > MAP_ROWS:
        rest = [n for k in order[MAP_ROWS - 1 :] for n in kinds[k]]
        order = [*order[: MAP_ROWS - 1], "(other groups)"]
        kinds["(other groups)"] = rest
    groups = list(ctx.members)
    gindex = {n: i for i, n in enumerate(groups)}
    rows = []
    by_group = {n: t for n, t in table.groupby("group", sort=False)}
    for kind in order:
        status = np.full(len(ranks), NOT_MEMBER, dtype=np.int64)
        group = np.full(len(ranks), -1, dtype=np.int64)
        issued = np.full(len(ranks), -1, dtype=np.int64)
        done = np.full(len(ranks), -1, dtype=np.int64)
        at_seq = np.full(len(ranks), -1, dtype=np.int64)
        for name in kinds[kind]:
            t = by_group.get(name)
            if t is None:
                continue
            at = np.array([index[int(r)] for r in t["rank"]], dtype=np.int64)
            new = t["status"].to_numpy()
            # A rank in several groups of one kind shows the one that explains most.
            worse = (status[at] == NOT_MEMBER) | (
                (new != COMPLETED) & ((status[at] == COMPLETED) | (new < status[at]))
            )
            pick = at[worse]
            status[pick] = new[worse]
            group[pick] = gindex[name]
            issued[pick] = t["last_issued"].to_numpy()[worse]
            done[pick] = t["last_completed"].to_numpy()[worse]
            at_seq[pick] = t["blocked_seq"].to_numpy()[worse]
        rows.append(
            {
                "kind": kind,
                "groups": len(kinds[kind]),
                "status": status.tolist(),
                "group": group.tolist(),
                "issued": issued.tolist(),
                "done": done.tolist(),
                "at": at_seq.tolist(),
            }
        )
    return {
        "ranks": ranks,
        "roles": [ROLES.index(view.role_of(r)) for r in ranks],
        "groups": [[n, ctx.pg_desc.get(n, "")] for n in groups],
        "statuses": list(STATUS),
        "rows": rows,
        "states_tracked": bool(ctx.view.states_tracked),
    }


def _timeline_ranks(view: ReportView) -> list[int]:
    """Culprits first, then ranks waiting on them, then one rank per other waiting place."""
    analysis = view.analysis
    picked: list[int] = []
    f = view.root.finding if view.root is not None else None
    if f is not None:
        picked += f.culprit_ranks[:4]
        picked += [r for r in f.waiting_ranks if r not in picked][:3]
        picked += [r for r in f.expected_ranks if r not in picked][:2]
    for w in view.waits:
        picked.append(min(w.ranks))
    if not picked:
        picked = list(analysis.ctx.trace.ranks[:4])
    have = set(analysis.ctx.trace.ranks)
    out: list[int] = []
    for r in picked:
        if r in have and r not in out:
            out.append(int(r))
    return out[:TIMELINE_RANKS]


def _timelines(view: ReportView) -> dict[str, Any]:
    """Recent ops of a few ranks with their times, in ms from the earliest time shown."""
    ctx = view.analysis.ctx
    per_rank = []
    for rank in _timeline_ranks(view):
        mine, states = ctx.history(rank), ctx.history_states(rank)
        last = slice(max(0, len(mine) - TIMELINE_OPS), len(mine))
        per_rank.append((rank, mine.take(last).to_pandas(), states[last]))
    times = [
        t
        for _r, m, _s in per_rank
        for c in ("time_created_ns", "time_started_ns", "time_completed_ns")
        for t in m[c].tolist()
        if t > 0
    ]
    base = min(times) if times else 0

    def ms(value: int) -> float | None:
        return round((int(value) - base) / 1e6, 3) if value > 0 else None

    out = []
    names = ("scheduled", "started", "completed")
    for rank, mine, states in per_rank:
        ops = []
        # A coalesced part shows its block's state (its own stays `scheduled` forever).
        for row, state in zip(mine.itertuples(index=False), states.tolist(), strict=True):
            p2p = bool(row.is_p2p)
            ops.append(
                {
                    "group": str(row.pg_name),
                    "desc": str(row.pg_desc),
                    "seq": int(row.p2p_seq_id if p2p else row.collective_seq_id),
                    "p2p": p2p,
                    "op": str(row.op),
                    "state": names[int(state)],
                    "created": ms(row.time_created_ns),
                    "started": ms(row.time_started_ns),
                    "completed": ms(row.time_completed_ns),
                }
            )
        out.append({"rank": rank, "ops": ops})
    return {"base_ns": str(base), "ranks": out}


def _stacks(view: ReportView) -> list[dict[str, Any]]:
    if view.root is None:
        return []
    f = view.root.finding
    wanted = [(r, "culprit") for r in view.culprits[:2]]
    wanted += [(r, "waiting") for r in view.waiting[:1]]
    out = []
    for rank, role in wanted:
        info = view.stack_of(rank, f)
        if info is not None:
            info["frames"] = [list(fr) for fr in info["frames"]]
        out.append({"rank": rank, "role": role, "info": info})
    return out


def _live(view: ReportView) -> dict[str, Any]:
    """Every rank's py-spy stack (culprits first, at most LIVE_RANKS), by rank."""
    ev = view.analysis.evidence
    if ev is None:
        return {}
    first = set(view.culprits)
    order = sorted(ev.ranks, key=lambda r: (r not in first, r))
    out: dict[str, Any] = {}
    for rank in order:
        rev = ev.ranks[rank]
        if rev.stack is None or rev.stack.main is None or len(out) >= LIVE_RANKS:
            continue
        op = in_collective(rev.stack)
        out[str(rank)] = {
            "host": rev.host,
            "pid": rev.stack.pid,
            "where": "outside collectives" if op is None else f"inside {op or 'a collective'}",
            "frames": [f.text() for f in rev.stack.main.python_frames],
            "file": rev.stack.where.file,
        }
    return out


def _stall(view: ReportView) -> list[str]:
    """Where the culprit is stuck and what to look at: the logs' concrete next step first."""
    stall = list(view.stall or ())
    if stall and view.culprits:
        rev = rank_evidence(view.analysis, view.culprits[0])
        step = next_step(rev) if rev is not None and from_logs(rev) else ""
        if step:
            stall[1] = step
    return stall


def _evidence_rows(view: ReportView) -> list[dict[str, Any]]:
    """What the logs and stacks show of the root cause's culprits (the text report's rows)."""
    if view.root is None:
        return []
    out = []
    for rank in view.culprits[:2]:
        rows = culprit_rows(view.analysis, rank, None)
        if rows:
            out.append({"rank": rank, "rows": [list(r) for r in rows]})
    return out


def _finding_row(s: Shown) -> dict[str, Any]:
    f = s.finding
    return {
        "role": s.role,
        "kind": f.kind,
        "group": f.pg_name,
        "desc": f.pg_desc,
        "seq": s.seq,
        "p2p": s.p2p,
        "op": f.op,
        "culprits": ranks_text(f.culprit_ranks),
        "waiting": ranks_text(f.waiting_ranks),
        "detail": s.detail,
    }


def page_data(view: ReportView, exit_status: int | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain data (the JSON report plus the map and timelines)."""
    analysis = view.analysis
    # Findings alike (same role, kind, group kind, seq and op), one per group, as one row.
    rows = []
    for row in view.folded:
        f = row.first.finding
        rows.append(
            {
                "role": row.role,
                "kind": f.kind,
                "group": f.pg_name,
                "desc": f.pg_desc,
                "seq": row.first.seq,
                "p2p": row.first.p2p,
                "more_groups": row.count - 1,
                "op": f.op,
                "culprits": ranks_text(row.culprits),
                "waiting": ranks_text(row.waiting),
                "detail": row.first.detail,
            }
        )
    waits = [
        {
            "kind": w.kind,
            "seq": w.seq,
            "what": w.what,
            "count": len(w.ranks),
            "groups": len(w.groups),
            "ranks": ranks_text(w.ranks, 80),
        }
        for w in view.waits
    ]
    root = view.root
    return {
        "verdict": view.verdict.line(exit_status),
        "ok": view.verdict.ok,
        "report": report_dict(view),
        "chain": root.merged_chain if root is not None else [],
        "root_detail": root.detail if root is not None else "",
        "root_stall": _stall(view),
        "stragglers": view.stragglers,
        "progress": view.progress,
        "findings": [_finding_row(s) for s in view.findings[:FINDINGS_SHOWN]],
        "folded": rows,
        "findings_total": len(view.findings),
        "waits": waits,
        "no_dump_from": ranks_text(analysis.ctx.trace.missing_dumps, 80),
        "map": _map_data(view, status_table(view)),
        "timelines": _timelines(view),
        "stacks": _stacks(view),
        "live": _live(view),
        "evidence": _evidence_rows(view),
        "read": inputs_summary(analysis),
    }


def _embed(data: dict[str, Any]) -> str:
    """JSON safe inside a script tag: no `</script>`, no `<!--`, whatever the dumps hold."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def _page_file(name: str) -> str:
    """One file of the page (frtrace/report/page/), shipped as package data."""
    return resources.files("frtrace.report").joinpath("page").joinpath(name).read_text("utf-8")


_SLOT = re.compile(r"\{\{(TITLE|CSS|JS|DATA)\}\}")


def render_html(view: ReportView, exit_status: int | None = None) -> str:
    """The whole page as one string: the page file with its CSS, script and data inlined.

    The slots are filled in one pass, so a dump string that reads `{{CSS}}` in the title or
    the data stays as it is."""
    data = page_data(view, exit_status)
    parts = {
        "TITLE": html.escape(f"frtrace: {data['verdict']}"),
        "CSS": _page_file("report.css"),
        "JS": _page_file("report.js").replace("{{SKIPPED_SHOWN}}", str(SKIPPED_SHOWN)),
        "DATA": _embed(data),
    }
    return _SLOT.sub(lambda m: parts[m.group(1)], _page_file("report.html"))


def write_html(view: ReportView, path: str | Path, exit_status: int | None = None) -> Path:
    """Write the page to `path`; returns it."""
    out = Path(path)
    out.write_text(render_html(view, exit_status), encoding="utf-8")
    return out
