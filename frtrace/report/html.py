"""`--html FILE`: the hang at a glance, in one self-contained file to attach to a ticket.

Inline CSS and JavaScript, no network and no library: it opens from an e-mail attachment.
The data travels as JSON in a `<script type="application/json">` tag with `<`, `>` and `&`
escaped, and the page builds its DOM with `textContent` only, because every string from a
dump (group names, ops, stack frames, file names) is untrusted.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from frtrace.analysis.engine import Analysis
from frtrace.evidence.gather import in_collective
from frtrace.report.evidence import (
    culprit_rows,
    from_logs,
    inputs_summary,
    next_step,
    rank_evidence,
)
from frtrace.report.json_report import report_dict
from frtrace.report.skipped import SKIPPED_SHOWN
from frtrace.report.text import (
    _chain,
    _detail,
    _fold_key,
    _role,
    _waits,
    merged_chain,
    ranks_text,
    stack_of,
    verdict,
)
from frtrace.report.wording import progress_lines, stall_lines, straggler_lines

# Where a rank stopped in a group, as drawn on the map (codes are indices).
STATUS = ("completed", "started", "issued", "never issued", "no dump", "not a member")
COMPLETED, STARTED, ISSUED, NEVER, NO_DUMP, NOT_MEMBER = range(len(STATUS))
TIMELINE_RANKS = 12  # ranks whose recent ops the page carries
TIMELINE_OPS = 24  # recent ops per rank
LIVE_RANKS = 64  # ranks whose py-spy stacks the page carries
MAP_ROWS = 48  # group kinds drawn as rows of the map; more are folded into one
FINDINGS_SHOWN = 300


def status_table(analysis: Analysis) -> pd.DataFrame:
    """Per rank and group it belongs to: where the rank stopped there.

    status: 0 completed (not waiting there), 1 started (blocked there, running), 2 issued
    (blocked there, not started), 3 never issued (others wait there for a collective it never
    issued), 4 no dump. last_issued / last_completed are its highest collective seq there
    (-1: none), blocked_seq the seq it waits at there (-1: not waiting there).
    """
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


def _map_data(analysis: Analysis, table: pd.DataFrame) -> dict[str, Any]:
    """The status table pivoted for drawing: one row per group kind (desc), one cell per rank."""
    ctx = analysis.ctx
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
        "groups": [[n, ctx.pg_desc.get(n, "")] for n in groups],
        "statuses": list(STATUS),
        "rows": rows,
        "states_tracked": bool(ctx.view.states_tracked),
    }


def _timeline_ranks(analysis: Analysis) -> list[int]:
    """Culprits first, then ranks waiting on them, then one rank per other waiting place."""
    picked: list[int] = []
    f = analysis.root_cause
    if f is not None:
        picked += f.culprit_ranks[:4]
        picked += [r for r in f.waiting_ranks if r not in picked][:3]
        picked += [r for r in f.expected_ranks if r not in picked][:2]
    for _key, item in _waits(analysis):
        picked.append(min(item["ranks"]))
    if not picked:
        picked = list(analysis.ctx.trace.ranks[:4])
    have = set(analysis.ctx.trace.ranks)
    out: list[int] = []
    for r in picked:
        if r in have and r not in out:
            out.append(int(r))
    return out[:TIMELINE_RANKS]


def _timelines(analysis: Analysis) -> dict[str, Any]:
    """Recent ops of a few ranks with their times, in ms from the earliest time shown."""
    ctx = analysis.ctx
    per_rank = []
    for rank in _timeline_ranks(analysis):
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


def _stacks(analysis: Analysis) -> list[dict[str, Any]]:
    f = analysis.root_cause
    if f is None:
        return []
    wanted = [(r, "culprit") for r in f.culprit_ranks[:2]]
    wanted += [(r, "waiting") for r in f.waiting_ranks if r not in f.culprit_ranks][:1]
    out = []
    for rank, role in wanted:
        info = stack_of(analysis, rank, f)
        if info is not None:
            info["frames"] = [list(fr) for fr in info["frames"]]
        out.append({"rank": rank, "role": role, "info": info})
    return out


def _live(analysis: Analysis) -> dict[str, Any]:
    """Every rank's py-spy stack (culprits first, at most LIVE_RANKS), by rank."""
    ev = analysis.evidence
    if ev is None:
        return {}
    root = analysis.root_cause
    first = set(root.culprit_ranks) if root is not None else set()
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


def _stall(analysis: Analysis) -> list[str]:
    """Where the culprit is stuck and what to look at: the logs' concrete next step first."""
    root = analysis.root_cause
    stall = list(stall_lines(root) or ()) if root is not None else []
    if stall and root is not None and root.culprit_ranks:
        rev = rank_evidence(analysis, root.culprit_ranks[0])
        step = next_step(rev) if rev is not None and from_logs(rev) else ""
        if step:
            stall[1] = step
    return stall


def _evidence_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """What the logs and stacks show of the root cause's culprits (the text report's rows)."""
    f = analysis.root_cause
    if f is None:
        return []
    out = []
    for rank in f.culprit_ranks[:2]:
        rows = culprit_rows(analysis, rank, None)
        if rows:
            out.append({"rank": rank, "rows": [list(r) for r in rows]})
    return out


def page_data(analysis: Analysis, exit_status: int | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain data (the JSON report plus the map and timelines)."""
    report = report_dict(analysis)
    findings = []
    for f in analysis.findings[:FINDINGS_SHOWN]:
        findings.append(
            {
                "role": _role(analysis, f),
                "kind": f.kind,
                "group": f.pg_name,
                "desc": f.pg_desc,
                "seq": f.collective_seq_id if f.collective_seq_id is not None else f.p2p_seq_id,
                "p2p": f.collective_seq_id is None and f.p2p_seq_id is not None,
                "op": f.op,
                "culprits": ranks_text(f.culprit_ranks),
                "waiting": ranks_text(f.waiting_ranks),
                "detail": _detail(f),
            }
        )
    # Findings alike (same role, kind, group kind, seq and op), one per group, as one row.
    folded: dict[tuple, list[Any]] = {}
    for f in analysis.findings:
        folded.setdefault(_fold_key(f, _role(analysis, f)), []).append(f)
    rows = []
    for (role, _kind, _g, _s, _op), items in folded.items():
        f = items[0]
        rows.append(
            {
                "role": role,
                "kind": f.kind,
                "group": f.pg_name,
                "desc": f.pg_desc,
                "seq": f.collective_seq_id if f.collective_seq_id is not None else f.p2p_seq_id,
                "p2p": f.collective_seq_id is None and f.p2p_seq_id is not None,
                "more_groups": len(items) - 1,
                "op": f.op,
                "culprits": ranks_text(sorted({r for x in items for r in x.culprit_ranks})),
                "waiting": ranks_text(sorted({r for x in items for r in x.waiting_ranks})),
                "detail": _detail(f),
            }
        )
    root = analysis.root_cause
    waits = [
        {
            "kind": kind,
            "seq": seq,
            "what": what,
            "count": len(item["ranks"]),
            "groups": len(item["groups"]),
            "ranks": ranks_text(item["ranks"], 80),
        }
        for (kind, seq, what), item in _waits(analysis)
    ]
    return {
        "verdict": verdict(analysis, exit_status),
        "ok": analysis.ok,
        "report": report,
        "chain": merged_chain(_chain(root)) if root is not None else [],
        "root_detail": _detail(root) if root is not None else "",
        "root_stall": _stall(analysis),
        "stragglers": straggler_lines(analysis.stragglers),
        "progress": progress_lines(analysis.progress),
        "findings": findings,
        "folded": rows,
        "findings_total": len(analysis.findings),
        "waits": waits,
        "no_dump_from": ranks_text(analysis.ctx.trace.missing_dumps, 80),
        "map": _map_data(analysis, status_table(analysis)),
        "timelines": _timelines(analysis),
        "stacks": _stacks(analysis),
        "live": _live(analysis),
        "evidence": _evidence_rows(analysis),
        "read": inputs_summary(analysis),
    }


def _embed(data: dict[str, Any]) -> str:
    """JSON safe inside a script tag: no `</script>`, no `<!--`, whatever the dumps hold."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(analysis: Analysis, exit_status: int | None = None) -> str:
    """The whole page as one string."""
    data = page_data(analysis, exit_status)
    title = html.escape(f"frtrace: {data['verdict']}")
    return (
        _PAGE.replace("{{TITLE}}", title)
        .replace("{{CSS}}", _CSS)
        .replace("{{JS}}", _JS.replace("{{SKIPPED_SHOWN}}", str(SKIPPED_SHOWN)))
        .replace("{{DATA}}", _embed(data))
    )


def write_html(analysis: Analysis, path: str | Path, exit_status: int | None = None) -> Path:
    """Write the page to `path`; returns it."""
    out = Path(path)
    out.write_text(render_html(analysis, exit_status), encoding="utf-8")
    return out


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{{TITLE}}</title>
<style>{{CSS}}</style>
</head>
<body>
<header id="verdict"></header>
<main>
<section id="root"><h2>Root cause</h2><div id="root-body"></div>
<h3>Who waits for whom</h3><div id="chain"></div></section>
<section id="map-section"><h2>Where each rank stopped, per group</h2>
<p class="hint">One row per kind of group, one cell per rank (ranks left to right, wrapping).
Hover a cell for details; click it to see that rank's recent ops if the page carries them.</p>
<div id="legend"></div><div id="map-wrap"><canvas id="map"></canvas></div>
<div id="tip" role="tooltip" hidden></div></section>
<section id="waits-section"><h2>Where ranks wait</h2><div id="waits"></div></section>
<section id="findings-section"><h2>Findings</h2><div id="findings"></div></section>
<section id="timeline-section"><h2>Recent ops per rank</h2><div id="rank-picker"></div>
<div id="timeline"></div></section>
<section id="timing-section"><h2>Stragglers and progress</h2><div id="timing"></div></section>
<section id="stacks-section"><h2>Stacks</h2><div id="stacks"></div></section>
<section id="inputs-section"><h2>Inputs</h2><div id="inputs"></div></section>
</main>
<script type="application/json" id="frtrace-data">{{DATA}}</script>
<script>{{JS}}</script>
</body>
</html>
"""

_CSS = """
:root { --bg:#fff; --fg:#1d2330; --muted:#667; --line:#d8dce4; --red:#c62828; --green:#2e7d32;
  --c0:#a5d6a7; --c1:#ffb74d; --c2:#ef6c00; --c3:#d32f2f; --c4:#6d4c41; --c5:#eceff1; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--fg); background:#f4f6f9; }
header { padding:14px 24px; color:#fff; font-weight:600; font-size:17px; background:var(--red); }
header.ok { background:var(--green); }
header.unknown { background:#8d6e00; }
header small { display:block; font-weight:400; font-size:13px; opacity:.9; }
main { max-width:1280px; margin:0 auto; padding:8px 16px 40px; }
section { background:var(--bg); border:1px solid var(--line); border-radius:8px;
  margin:14px 0; padding:12px 18px; }
h2 { font-size:16px; margin:4px 0 10px; } h3 { font-size:14px; margin:14px 0 6px; }
.hint { color:var(--muted); margin:0 0 8px; font-size:12.5px; }
dl.kv { display:grid; grid-template-columns:max-content 1fr; gap:2px 14px; margin:6px 0; }
dl.kv dt { color:var(--muted); } dl.kv dd { margin:0; font-family:ui-monospace,Menlo,monospace;
  overflow-wrap:anywhere; }
.rootline { color:var(--red); font-weight:600; font-size:15px; }
.detail { margin:8px 0; max-width:100ch; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { color:var(--muted); font-weight:600; }
td.mono, .mono { font-family:ui-monospace,Menlo,monospace; overflow-wrap:break-word; }
details > summary { cursor:pointer; margin:8px 0; color:var(--muted); }
.role-ROOT { color:var(--red); font-weight:700; } .role-cause { color:#ad1457; }
.role-consequence { color:var(--muted); }
#legend span { display:inline-flex; align-items:center; margin-right:16px; font-size:13px; }
#legend i { width:14px; height:14px; border-radius:3px; margin-right:6px; display:inline-block;
  border:1px solid rgba(0,0,0,.15); }
#map-wrap { overflow-x:auto; } canvas#map { display:block; cursor:crosshair; }
#tip { position:fixed; z-index:10; max-width:420px; background:#1d2330; color:#fff;
  padding:7px 10px; border-radius:6px; font-size:12.5px; pointer-events:none;
  white-space:pre-line; box-shadow:0 2px 8px rgba(0,0,0,.25); }
#rank-picker button { margin:0 6px 6px 0; padding:3px 9px; border:1px solid var(--line);
  background:#fff; border-radius:12px; cursor:pointer; font-size:12.5px; }
#rank-picker button.on { background:#1d2330; color:#fff; }
svg text { font:12px ui-monospace,Menlo,monospace; fill:var(--fg); }
.beside { display:flex; flex-wrap:wrap; gap:12px; align-items:flex-start; }
.stack { margin:8px 0 14px; } .stack pre { margin:4px 0; padding:8px; background:#f7f8fa;
  border:1px solid var(--line); border-radius:6px; overflow-x:auto; font-size:12.5px; }
.muted { color:var(--muted); }
"""

_JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("frtrace-data").textContent);
const COLORS = ["#a5d6a7", "#ffb74d", "#ef6c00", "#d32f2f", "#6d4c41", "#eceff1"];
const SVGNS = "http://www.w3.org/2000/svg";
const SKIPPED_SHOWN = {{SKIPPED_SHOWN}};  // files named per reason, as on stderr

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const kid of kids) {
    if (kid === null || kid === undefined) continue;
    node.appendChild(typeof kid === "object" ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
function sv(tag, attrs, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function place(desc, name, seq, p2p) {
  const label = desc || ("pg " + name);
  const s = (seq === null || seq === undefined || seq < 0) ? "" : (p2p ? " p2p#" : "#") + seq;
  return label + s + (desc ? " (pg " + name + ")" : "");
}
function wrapWords(text, width) {
  const lines = []; let line = "";
  for (const word of String(text).split(/\s+/)) {
    if (!word) continue;
    if (line && line.length + 1 + word.length > width) { lines.push(line); line = word; }
    else line = line ? line + " " + word : word;
  }
  if (line) lines.push(line);
  return lines.length ? lines : [""];
}
function table(headers, rows) {
  const t = el("table");
  t.appendChild(el("tr", {}, ...headers.map(h => el("th", {}, h))));
  for (const row of rows) {
    t.appendChild(el("tr", {}, ...row.map(c => (c instanceof Node) ? el("td", {}, c)
      : el("td", { class: "mono" }, c === null || c === undefined ? "-" : c))));
  }
  return t;
}

function renderVerdict() {
  const h = document.getElementById("verdict");
  h.className = D.ok ? "ok" : (D.report.verdict === "unknown" ? "unknown" : "");
  const inp = D.report.inputs;
  h.appendChild(document.createTextNode(D.verdict));
  const lost = inp.missing_dumps.length;
  h.appendChild(el("small", {}, inp.files + " dump(s) from " + inp.trace_dir +
    (lost ? ", " + lost + " rank" + (lost > 1 ? "s" : "") + " without a dump" : "") +
    (inp.skipped.length ? ", " + inp.skipped.length + " file(s) skipped" : "")));
}

function renderRoot() {
  const body = document.getElementById("root-body");
  const r = D.report.root_cause;
  if (!r) {
    body.appendChild(el("p", {}, "No desync, mismatch or missing rank found."));
    const unseen = D.report.unseen;
    if (unseen) {
      body.appendChild(el("h3", {}, "Cannot tell: the dumps do not show the whole job"));
      const list = el("ul", { id: "unseen" });
      unseen.why.forEach(w => list.appendChild(el("li", {}, w)));
      body.appendChild(list);
    }
    document.getElementById("chain").appendChild(el("p", { class: "muted" }, "No rank waits."));
    return;
  }
  const seq = r.collective_seq_id !== null ? r.collective_seq_id : r.p2p_seq_id;
  body.appendChild(el("div", { class: "rootline" }, "ROOT CAUSE: " + r.kind + " in " +
    place(r.pg_desc, r.pg_name, seq, r.collective_seq_id === null) + (r.op ? ", " + r.op : "")));
  const f = D.findings[0];
  const kv = el("dl", { class: "kv" });
  for (const [k, v] of [["culprit ranks", f.culprits], ["waiting ranks", f.waiting],
    ["group", r.pg_name + " (" + (r.pg_desc || "-") + ")"], ["seq id", seq === null ? "-" : seq]]) {
    kv.appendChild(el("dt", {}, k)); kv.appendChild(el("dd", {}, v));
  }
  if (D.root_stall.length) {
    kv.appendChild(el("dt", {}, "stuck")); kv.appendChild(el("dd", {}, D.root_stall[0]));
    kv.appendChild(el("dt", {}, "look at")); kv.appendChild(el("dd", {}, D.root_stall[1]));
  }
  body.appendChild(kv);
  body.appendChild(el("p", { class: "detail" }, D.root_detail));
  renderChain(D.chain);
}

function renderChain(hops) {
  const box = document.getElementById("chain");
  if (!hops.length) { box.appendChild(el("p", { class: "muted" }, "No chain.")); return; }
  const W = 760, padX = 12, lineH = 16, gap = 26;
  const svg = sv("svg", { width: W + 40, role: "img", "aria-label": "wait-for chain" });
  const defs = sv("defs");
  const marker = sv("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "8", markerHeight: "8", orient: "auto-start-reverse" });
  marker.appendChild(sv("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#667" }));
  defs.appendChild(marker); svg.appendChild(defs);
  let y = 4;
  hops.forEach((hop, i) => {
    const last = i === hops.length - 1;
    const lines = wrapWords(hop, 96);
    const h = lines.length * lineH + 12;
    const g = sv("g", { class: "hop" });
    g.appendChild(sv("rect", { x: 20, y: y, width: W, height: h, rx: 8,
      fill: last ? "#ffebee" : "#f5f7fb", stroke: last ? "#c62828" : "#9aa5b8",
      "stroke-width": last ? 2 : 1 }));
    lines.forEach((line, k) => g.appendChild(sv("text", { x: 20 + padX,
      y: y + 8 + lineH * (k + 0.8) }, (k === 0 ? (i + 1) + ". " : "   ") + line)));
    svg.appendChild(g);
    y += h;
    if (!last) {
      svg.appendChild(sv("line", { x1: 60, y1: y + 2, x2: 60, y2: y + gap - 3, stroke: "#667",
        "stroke-width": 1.5, "marker-end": "url(#arrow)" }));
      svg.appendChild(sv("text", { x: 70, y: y + gap / 2 + 4, fill: "#667" }, "waits for"));
      y += gap;
    }
  });
  svg.setAttribute("height", y + 4);
  box.appendChild(svg);
}

let layout = null;
function renderMap() {
  const M = D.map, n = M.ranks.length;
  const legend = document.getElementById("legend");
  const counts = M.statuses.map(() => 0);
  for (const row of M.rows) for (const s of row.status) counts[s]++;
  M.statuses.forEach((name, i) => {
    if (i === 5 && !counts[5]) return;
    legend.appendChild(el("span", {}, el("i", { style: "background:" + COLORS[i] }),
      name + " (" + counts[i] + ")"));
  });
  if (!M.states_tracked) legend.appendChild(el("span", { class: "muted" },
    "(this backend does not record started/completed: 'completed' means not waiting there)"));
  const canvas = document.getElementById("map");
  const root = D.report.root_cause, at = new Map(M.ranks.map((r, i) => [r, i]));
  const culprits = root ? root.culprit_ranks.filter(r => at.has(r)).map(r => at.get(r)) : [];
  if (culprits.length) legend.appendChild(el("span", {}, el("i", { style:
    "background:#fff;border:2px solid #000" }), "root cause culprit"));
  const labelW = 150, maxW = Math.max(480, Math.min(1200,
    document.getElementById("map-wrap").clientWidth || 1200) - labelW - 8);
  // Small jobs get big cells; large ones wrap at a power of two so a rank's column is stable.
  let cell, perLine;
  if (n <= 128) { cell = Math.max(6, Math.min(28, Math.floor(maxW / n))); perLine = Math.min(n,
    Math.floor(maxW / cell)); }
  else { cell = n <= 2048 ? 8 : 4; perLine = 1 << Math.floor(Math.log2(maxW / cell)); }
  const lines = Math.ceil(n / perLine), bandH = lines * cell, gap = 10;
  const width = labelW + perLine * cell, height = M.rows.length * (bandH + gap);
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = height * dpr;
  canvas.style.width = width + "px"; canvas.style.height = height + "px";
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, width, height);
  ctx.font = "12px system-ui, sans-serif"; ctx.textBaseline = "middle";
  M.rows.forEach((row, k) => {
    const top = k * (bandH + gap);
    ctx.fillStyle = "#1d2330";
    const label = row.kind.length > 20 ? row.kind.slice(0, 19) + "…" : row.kind;
    ctx.fillText(label, 4, top + Math.min(bandH, 24) / 2);
    if (bandH >= 28) {
      ctx.fillStyle = "#667";
      ctx.fillText(row.groups + " group" + (row.groups > 1 ? "s" : ""), 4, top + 24);
    }
    // The first rank of some lines, right-aligned before them, to find a rank by eye.
    if (lines > 1) {
      const every = Math.ceil(14 / cell);
      ctx.fillStyle = "#8a93a3"; ctx.font = "10px system-ui, sans-serif"; ctx.textAlign = "right";
      for (let l = every; l < lines; l += every)
        ctx.fillText(String(M.ranks[l * perLine]), labelW - 4, top + l * cell + cell / 2);
      ctx.textAlign = "left"; ctx.font = "12px system-ui, sans-serif";
    }
    const inner = cell >= 6 ? 1 : 0;
    for (let i = 0; i < n; i++) {
      ctx.fillStyle = COLORS[row.status[i]];
      const x = labelW + (i % perLine) * cell, y = top + Math.floor(i / perLine) * cell;
      ctx.fillRect(x, y, cell - inner, cell - inner);
      if (cell >= 20 && row.status[i] !== 5) {
        ctx.fillStyle = "#1d2330"; ctx.font = "10px system-ui, sans-serif";
        ctx.fillText(String(M.ranks[i]).slice(-3), x + 2, y + cell / 2);
        ctx.font = "12px system-ui, sans-serif";
      }
    }
    // The root cause's culprits are outlined wherever they appear.
    ctx.strokeStyle = "#000"; ctx.lineWidth = 2;
    for (const i of culprits) {
      if (row.status[i] === 5) continue;
      const x = labelW + (i % perLine) * cell, y = top + Math.floor(i / perLine) * cell;
      ctx.strokeRect(x - 1, y - 1, cell + 1, cell + 1);
    }
  });
  layout = { labelW, perLine, cell, bandH, gap, n };
  window.frtraceMap = layout;  // for tests and the curious: where each cell is drawn
  const tip = document.getElementById("tip");
  canvas.addEventListener("mousemove", ev => {
    const hit = hitTest(canvas, ev);
    if (!hit) { tip.hidden = true; return; }
    tip.textContent = describe(hit.row, hit.i);
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 430) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("click", ev => {
    const hit = hitTest(canvas, ev);
    if (hit) showTimeline(M.ranks[hit.i]);
  });
}
function hitTest(canvas, ev) {
  const r = canvas.getBoundingClientRect(), L = layout;
  const x = ev.clientX - r.left - L.labelW, y = ev.clientY - r.top;
  if (x < 0) return null;
  const k = Math.floor(y / (L.bandH + L.gap)), yy = y - k * (L.bandH + L.gap);
  if (k < 0 || k >= D.map.rows.length || yy >= L.bandH) return null;
  const i = Math.floor(yy / L.cell) * L.perLine + Math.floor(x / L.cell);
  if (Math.floor(x / L.cell) >= L.perLine || i >= L.n) return null;
  return { row: D.map.rows[k], i };
}
function describe(row, i) {
  const M = D.map, rank = M.ranks[i], s = row.status[i];
  if (s === 5) return "rank " + rank + "\nnot a member of any " + row.kind + " group";
  const g = M.groups[row.group[i]] || ["?", ""];
  const lines = ["rank " + rank + " in " + place(g[1], g[0], null, false),
    "status: " + M.statuses[s],
    "last issued: " + (row.issued[i] < 0 ? "-" : "#" + row.issued[i]) +
      (M.states_tracked ? ", last completed: " + (row.done[i] < 0 ? "-" : "#" + row.done[i]) : "")];
  const w = waitsOf(rank);
  if (w) lines.push("waits in " + w);
  return lines.join("\n");
}
const rankWait = {};
function waitsOf(rank) { return rankWait[rank]; }

function renderWaits() {
  const box = document.getElementById("waits");
  if (!D.waits.length) {
    box.appendChild(el("p", { class: "muted" }, "No rank is waiting."));
    return;
  }
  box.appendChild(table(["ranks", "where", "op, state", "which ranks"], D.waits.map(w => [
    String(w.count), w.kind + (w.seq >= 0 ? "#" + w.seq : "") +
      (w.groups > 1 ? " (" + w.groups + " groups)" : ""), w.what, w.ranks])));
}

function renderFindings() {
  const box = document.getElementById("findings");
  if (!D.findings.length) { box.appendChild(el("p", { class: "muted" }, "None.")); return; }
  const heads = ["role", "kind", "where", "op", "culprits", "waiting", "detail"];
  const row = f => [el("span", { class: "role-" + f.role.split(" ")[0] }, f.role), f.kind,
    place(f.desc, f.group, f.seq, f.p2p) + (f.more_groups ? " and " + f.more_groups +
    " more group(s) like it" : ""), f.op, f.culprits, f.waiting, el("span", {}, f.detail)];
  const causes = D.folded.filter(f => f.role !== "consequence");
  const rest = D.folded.filter(f => f.role === "consequence");
  box.appendChild(el("p", { class: "hint" }, "Findings alike in several groups are one row " +
    "(the detail is the first group's); every finding is listed below."));
  box.appendChild(table(heads, causes.concat(rest).map(row)));
  const every = el("details", {}, el("summary", {}, "every finding (" + D.findings_total + ")"));
  every.appendChild(table(heads, D.findings.map(row)));
  box.appendChild(every);
  if (D.findings_total > D.findings.length) box.appendChild(el("p", { class: "muted" },
    (D.findings_total - D.findings.length) + " more findings in the JSON report (-o FILE)."));
}

let current = null;
function renderTimelinePicker() {
  const picker = document.getElementById("rank-picker");
  const T = D.timelines.ranks.slice();
  for (const r of Object.keys(D.live))
    if (!T.some(t => String(t.rank) === r)) T.push({ rank: Number(r), ops: [] });
  if (!T.length) { picker.appendChild(el("p", { class: "muted" }, "No ops recorded.")); return; }
  picker.appendChild(el("span", { class: "muted" }, "rank: "));
  for (const t of T) {
    const b = el("button", { type: "button", "data-rank": String(t.rank) }, String(t.rank));
    b.addEventListener("click", () => showTimeline(t.rank));
    picker.appendChild(b);
  }
  showTimeline(T[0].rank);
}
function showLive(rank, box) {
  const live = D.live[String(rank)];
  if (!live) return;
  const div = el("div", { class: "stack live" });
  div.appendChild(el("div", {}, el("b", {}, "live stack of rank " + rank), " (py-spy, pid " +
    live.pid + (live.host ? " on " + live.host : "") + "): " + live.where +
    ", innermost first"));
  div.appendChild(el("pre", {}, live.frames.join("\n") || "(no Python frame)"));
  box.appendChild(div);
}
function showTimeline(rank) {
  const t = D.timelines.ranks.find(x => x.rank === rank);
  const box = document.getElementById("timeline");
  for (const b of document.querySelectorAll("#rank-picker button"))
    b.classList.toggle("on", b.getAttribute("data-rank") === String(rank));
  box.textContent = "";
  if (!t) {
    if (!D.live[String(rank)]) box.appendChild(el("p", { class: "muted" }, "The page carries " +
      "the recent ops of the ranks listed above only; rank " + rank + " is not one of them."));
    else box.appendChild(el("p", { class: "muted" }, "No dump from rank " + rank + "."));
    showLive(rank, box);
    return;
  }
  current = rank;
  const ops = t.ops, rowH = 20, labelW = 330, W = 560;
  let lo = Infinity, hi = -Infinity;
  for (const o of ops) for (const v of [o.created, o.started, o.completed])
    if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const timed = lo !== Infinity;
  if (timed && hi === lo) hi = lo + 1;
  const x = v => labelW + (v - lo) / (hi - lo) * W;
  const svg = sv("svg", { width: labelW + W + 130, height: (ops.length + 1) * rowH + 10,
    role: "img", "aria-label": "recent ops of rank " + rank });
  svg.appendChild(sv("text", { x: 0, y: 14, fill: "#667" }, "rank " + rank + ", last " +
    ops.length + " ops, oldest first" + (timed ? "; ms from the first time shown" :
    "; no times recorded")));
  ops.forEach((o, k) => {
    const y = (k + 1) * rowH + 6;
    const done = o.state === "completed";
    svg.appendChild(sv("text", { x: 0, y: y + 12 }, (place(o.desc, o.group, o.seq, o.p2p) +
      " " + o.op).slice(0, 44)));
    if (!timed || o.created === null) return;
    const end = o.completed !== null ? o.completed : hi;
    const color = done ? "#66bb6a" : (o.state === "started" ? "#ef6c00" : "#d32f2f");
    svg.appendChild(sv("rect", { x: x(o.created), y: y + 3, height: 12, rx: 2,
      width: Math.max(2, x(end) - x(o.created)), fill: color, opacity: o.completed === null ?
      0.55 : 0.9 }));
    if (o.started !== null) svg.appendChild(sv("line", { x1: x(o.started), x2: x(o.started),
      y1: y + 1, y2: y + 17, stroke: "#1d2330", "stroke-width": 1.5 }));
    const label = o.state + (o.completed !== null ? ", " + (o.completed - o.created).toFixed(1) +
      " ms" : "");
    svg.appendChild(sv("text", { x: x(end) + 6, y: y + 12,
      fill: "#667" }, label));
  });
  const row = el("div", { class: "beside" });
  row.appendChild(svg);
  showLive(rank, row);
  box.appendChild(row);
  box.appendChild(el("p", { class: "hint" }, "Bars: created to completed (faded: not " +
    "completed, drawn to the last time shown); tick: started. Colors: green completed, " +
    "orange started, red issued only."));
}

function renderTiming() {
  const box = document.getElementById("timing");
  const lines = D.progress.concat(D.stragglers);
  if (!lines.length) {
    box.appendChild(el("p", { class: "muted" }, "No straggler above the threshold."));
    return;
  }
  for (const line of lines) box.appendChild(el("p", {}, line));
}

function renderStacks() {
  const box = document.getElementById("stacks");
  for (const e of D.evidence) {
    const kv = el("dl", { class: "kv" });
    for (const [k, v] of e.rows) {
      kv.appendChild(el("dt", {}, k));
      kv.appendChild(el("dd", {}, v));
    }
    box.appendChild(el("div", { class: "stack" }, el("b", {}, "rank " + e.rank +
      ": what the logs and stacks show"), kv));
  }
  if (!D.stacks.length) { box.appendChild(el("p", { class: "muted" }, "No root cause.")); return; }
  for (const s of D.stacks) {
    const div = el("div", { class: "stack" });
    if (!s.info) { div.appendChild(el("div", {}, "rank " + s.rank + " (" + s.role + "): no dump"));
      box.appendChild(div); continue; }
    const i = s.info;
    div.appendChild(el("div", {}, el("b", {}, "rank " + s.rank + " (" + s.role + ")"),
      " " + (i.at_finding ? "at " : "last op ") + i.op + " " + i.place + " " + i.seq + ", " +
      i.state + " (innermost first)"));
    div.appendChild(el("pre", {}, i.frames.length ? i.frames.map(f => f[0] + "  " + f[1] + ":" +
      f[2]).join("\n") : "(no stack in this dump)"));
    box.appendChild(div);
  }
}

function renderInputs() {
  const inp = D.report.inputs, box = document.getElementById("inputs");
  const kv = el("dl", { class: "kv" });
  const rows = [["folder", inp.trace_dir], ["read", D.read], ["files", String(inp.files)],
    ["ranks", String(inp.ranks.length)], ["format versions", inp.versions.join(", ") || "-"],
    ["no dump from", D.no_dump_from],
    ["groups", String(D.report.groups.length)]];
  for (const [k, v] of rows) { kv.appendChild(el("dt", {}, k)); kv.appendChild(el("dd", {}, v)); }
  box.appendChild(kv);
  if (inp.skipped.length) {
    box.appendChild(el("h3", {}, "Skipped files (" + inp.skipped.length + ")"));
    box.appendChild(skippedFiles(inp.skipped));
  }
  if (D.report.notes.length) {
    box.appendChild(el("h3", {}, "Notes"));
    box.appendChild(el("ul", {}, ...D.report.notes.map(n => el("li", {}, n))));
  }
}

function skippedFiles(skipped) {
  // One block per reason, its first SKIPPED_SHOWN files; the rest are drawn when asked for:
  // 100,000 files cut short by a full disk would be 100,000 rows built at load.
  const byReason = new Map();
  for (const s of skipped) {
    if (!byReason.has(s.reason)) byReason.set(s.reason, []);
    byReason.get(s.reason).push(s.file);
  }
  const box = el("div", { id: "skipped" });
  for (const [reason, files] of byReason) {
    const block = el("div", { class: "skip-reason" });
    block.appendChild(el("p", {}, el("b", {}, reason), " (" + files.length + " file" +
      (files.length > 1 ? "s" : "") + ")"));
    block.appendChild(table(["file"], files.slice(0, SKIPPED_SHOWN).map(f => [f])));
    if (files.length > SKIPPED_SHOWN) {
      const more = el("details", {}, el("summary", {}, (files.length - SKIPPED_SHOWN) +
        " more alike"));
      more.addEventListener("toggle", () => {
        if (more.open && more.children.length === 1)
          more.appendChild(table(["file"], files.slice(SKIPPED_SHOWN).map(f => [f])));
      });
      block.appendChild(more);
    }
    box.appendChild(block);
  }
  return box;
}

function indexWaits() {
  // rank -> where it waits, from the status map (blocked cells), for the hover text.
  const M = D.map;
  for (const row of M.rows) row.status.forEach((s, i) => {
    if (s === 1 || s === 2) {
      const g = M.groups[row.group[i]];
      rankWait[M.ranks[i]] = place(g[1], g[0], row.at[i], false) + " (" + M.statuses[s] + ")";
    }
  });
}

renderVerdict(); renderRoot(); indexWaits(); renderMap(); renderWaits(); renderFindings();
renderTimelinePicker(); renderTiming(); renderStacks(); renderInputs();
document.body.setAttribute("data-rendered", "1");
"""
