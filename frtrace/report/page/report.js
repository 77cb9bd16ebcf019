"use strict";
const D = JSON.parse(document.getElementById("frtrace-data").textContent);
// Map colours per status: waiting (started, issued) and stopping short (never issued) in calm
// colours, for red is the root cause's culprits' alone (CULPRIT), whatever their status.
const COLORS = ["#a5d6a7", "#fff176", "#ffcc80", "#b39ddb", "#6d4c41", "#eceff1"];
const CULPRIT = "#d32f2f";
const TIMELINE = { completed: "#66bb6a", started: "#fbc02d", issued: "#90a4ae" };
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
  const culprits = [];
  M.roles.forEach((role, i) => { if (role === 1) culprits.push(i); });
  const culprit = i => M.roles[i] === 1;
  const counts = M.statuses.map(() => 0);
  for (const row of M.rows) row.status.forEach((s, i) => {
    if (s === 5 || !culprit(i)) counts[s]++;  // a culprit's cell is counted as a culprit
  });
  M.statuses.forEach((name, i) => {
    if (i === 5 && !counts[5]) return;
    legend.appendChild(el("span", {}, el("i", { style: "background:" + COLORS[i] }),
      name + " (" + counts[i] + ")"));
  });
  if (!M.states_tracked) legend.appendChild(el("span", { class: "muted" },
    "(this backend does not record started/completed: 'completed' means not waiting there)"));
  const canvas = document.getElementById("map");
  if (culprits.length) legend.appendChild(el("span", { id: "legend-culprit" }, el("i", { style:
    "background:" + CULPRIT + ";border:2px solid #000" }), "root cause culprit (" +
    culprits.length + " rank" + (culprits.length > 1 ? "s" : "") + ")"));
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
      const blamed = culprit(i) && row.status[i] !== 5;
      ctx.fillStyle = blamed ? CULPRIT : COLORS[row.status[i]];
      const x = labelW + (i % perLine) * cell, y = top + Math.floor(i / perLine) * cell;
      ctx.fillRect(x, y, cell - inner, cell - inner);
      if (cell >= 20 && row.status[i] !== 5) {
        ctx.fillStyle = blamed ? "#fff" : "#1d2330"; ctx.font = "10px system-ui, sans-serif";
        ctx.fillText(String(M.ranks[i]).slice(-3), x + 2, y + cell / 2);
        ctx.font = "12px system-ui, sans-serif";
      }
    }
    // The root cause's culprits are red and outlined wherever they appear.
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
  const lines = ["rank " + rank + " in " + place(g[1], g[0], null, false)];
  if (M.roles[i] === 1) lines.push("root cause culprit");
  lines.push("status: " + M.statuses[s],
    "last issued: " + (row.issued[i] < 0 ? "-" : "#" + row.issued[i]) +
      (M.states_tracked ? ", last completed: " + (row.done[i] < 0 ? "-" : "#" + row.done[i]) : ""));
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
    const color = done ? TIMELINE.completed : (o.state === "started" ? TIMELINE.started :
      TIMELINE.issued);
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
    "amber started, grey issued only."));
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
