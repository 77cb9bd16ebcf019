"""One view of an analysis, built once, that the text, JSON and HTML reports render.

What the reports show is decided here, once: each finding's role (root cause, cause,
consequence) with its words, the findings alike folded into rows, where ranks wait, the
root cause's culprits and the ranks waiting on them, and the verdict. The three formats
then cannot disagree, and none of them works anything out again from the analysis.
Every sentence comes from `frtrace.report.wording`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from frtrace.analysis.analyze import Analysis, Unseen
from frtrace.analysis.findings import Finding, Place
from frtrace.report.evidence import hosts_of, rank_count
from frtrace.report.fmt import processes_text, ranks_subject
from frtrace.report.wording import (
    chain_lines,
    decided_line,
    detail,
    detail_cut,
    note_text,
    progress_lines,
    stall_lines,
    straggler_lines,
    unseen_lines,
    where,
)

ROOT, CAUSE, CONSEQUENCE = "ROOT CAUSE", "cause", "consequence"  # a finding's role
CULPRIT, WAITING = "culprit", "waiting"  # a rank's role in the root cause


@dataclass(frozen=True, eq=False)
class Shown:
    """One finding as the reports show it: its role and its words (worded on first use)."""

    finding: Finding
    role: str

    @property
    def seq(self) -> int | None:
        f = self.finding
        return f.collective_seq_id if f.collective_seq_id is not None else f.p2p_seq_id

    @property
    def p2p(self) -> bool:
        f = self.finding
        return f.collective_seq_id is None and f.p2p_seq_id is not None

    @cached_property
    def place(self) -> str:
        return where(self.finding.place)

    @cached_property
    def detail(self) -> str:
        """What went wrong and why these ranks are blamed, in full."""
        return detail(self.finding)

    def detail_cut(self, items: int) -> str:
        """The detail with its lists of waits cut to `items`, never the sentence that says
        what the culprit did (the text report's short form)."""
        return detail_cut(self.finding, items)

    @cached_property
    def chain(self) -> list[str]:
        """The wait-for chain as hops, farthest waiter first."""
        return chain_lines(self.finding)

    @cached_property
    def merged_chain(self) -> list[str]:
        """The chain with consecutive hops alike folded into one line each."""
        return merged_chain(self.chain)


@dataclass(frozen=True)
class Folded:
    """Findings alike (same role, kind, group kind, seq and op; one per group) as one row:
    the first one's words, every culprit and waiting rank of them all."""

    first: Shown
    count: int
    culprits: list[int]
    waiting: list[int]

    @property
    def role(self) -> str:
        return self.first.role


@dataclass(frozen=True)
class WaitPlace:
    """Ranks blocked at one place: a group kind, a seq (-1: a send or recv), what they do."""

    kind: str
    seq: int
    what: str  # `all_reduce started`, `p2p send issued`
    ranks: list[int]
    groups: list[str]  # the groups' names, shortest first


@dataclass(frozen=True)
class Verdict:
    """The job's verdict: `state` (OK, UNKNOWN, STOPPED, HUNG or FAILED) and the line that
    says it, less its exit status."""

    state: str
    text: str
    ok: bool
    undetermined: bool

    def line(self, exit_status: int | None = None) -> str:
        """The one line a person (or a log grep) needs, ending in the exit status."""
        code = (0 if self.ok else 1) if exit_status is None else exit_status
        return f"{self.text}; exit {code}"

    @property
    def name(self) -> str:
        """`ok`, `unknown` or `findings`: the JSON report's verdict."""
        return "unknown" if self.undetermined else ("ok" if self.ok else "findings")


@dataclass(frozen=True)
class ReportView:
    """Everything the reports show of one analysis. `analysis` stays reachable for what
    each format draws from the inputs (stacks, timelines, the files read)."""

    analysis: Analysis
    findings: list[Shown]
    root: Shown | None
    folded: list[Folded]
    waits: list[WaitPlace]
    verdict: Verdict
    culprits: list[int]  # the root cause's
    waiting: list[int]  # ranks the root cause holds up, its culprits aside
    hosts: list[str]  # the culprits' hosts, where the inputs tell them
    notes: list[str]
    unseen: Unseen | None
    unseen_lines: list[str]
    stragglers: list[str]
    progress: list[str]
    stall: tuple[str, str] | None  # where the culprit is stuck, what to look at
    decided: str  # what broke a two-sided tie
    roles: dict[int, str] = field(default_factory=dict)

    @property
    def others(self) -> list[Shown]:
        """Every finding but the root cause."""
        return [s for s in self.findings if s.role != ROOT]

    def role_of(self, rank: int) -> str:
        """`culprit`, `waiting` (on the root cause, or blocked elsewhere), or ''."""
        return self.roles.get(rank, "")

    def entry_at(self, rank: int, f: Finding) -> tuple[dict[str, Any], bool] | None:
        """(the rank's entry at the finding, True), else (its last entry, False)."""
        analysis = self.analysis
        mine = analysis.ctx.history(rank)
        if not len(mine):
            return None
        in_group = mine["pg_name"] == mine.code("pg_name", f.pg_name)
        if f.collective_seq_id is not None:
            at = np.flatnonzero(
                in_group & (mine["collective_seq_id"] == f.collective_seq_id) & ~mine["is_p2p"]
            )
            if len(at):
                return mine.record(int(at[0])), True
        if f.p2p_seq_id is not None:
            at = np.flatnonzero(in_group & (mine["p2p_seq_id"] == f.p2p_seq_id) & mine["is_p2p"])
            if len(at):
                return mine.record(int(at[0])), True
            # p2p seqs count per rank: a peer waiting in the group is at its own blocking entry.
            b = analysis.blocked.get(rank)
            if b is not None:
                at = np.flatnonzero(in_group & mine["is_p2p"] & (mine["pos"] == b.pos))
                if len(at):
                    return mine.record(int(at[0])), True
        return mine.record(len(mine) - 1), False

    def stack_of(self, rank: int, f: Finding) -> dict[str, Any] | None:
        """Where a rank is, for the finding: its entry there (else its last) and that stack."""
        found = self.entry_at(rank, f)
        if found is None:
            return None
        entry, at_finding = found
        p2p = bool(entry["is_p2p"])
        seq = f"p2p#{entry['p2p_seq_id']}" if p2p else f"#{entry['collective_seq_id']}"
        sid = int(entry["stack_id"])
        frames = list(self.analysis.ctx.trace.stacks[sid]) if sid >= 0 else []
        return {
            "at_finding": bool(at_finding),
            "op": str(entry["op"]),
            "place": where(Place(str(entry["pg_name"]), str(entry["pg_desc"]))),
            "seq": seq,
            "state": str(entry["state"]),
            "frames": [(str(n), str(fn), int(ln)) for n, fn, ln in frames],
        }


def build_view(analysis: Analysis) -> ReportView:
    """The view every report renders, built once per analysis."""
    root_finding = analysis.root_cause
    shown = [Shown(f, _role(f, root_finding)) for f in analysis.findings]
    root = next((s for s in shown if s.role == ROOT), None)
    if root is None and root_finding is not None:  # narrowed: the root lies outside
        root = Shown(root_finding, ROOT)
    culprits = list(root_finding.culprit_ranks) if root_finding is not None else []
    waiting = (
        [r for r in root_finding.waiting_ranks if r not in culprits]
        if root_finding is not None
        else []
    )
    roles = {r: WAITING for r in analysis.blocked}
    roles.update({r: WAITING for r in waiting})
    roles.update({r: CULPRIT for r in culprits})
    return ReportView(
        analysis=analysis,
        findings=shown,
        root=root,
        folded=fold(shown),
        waits=wait_places(analysis),
        verdict=_verdict(analysis),
        culprits=culprits,
        waiting=waiting,
        hosts=culprit_hosts(analysis, root_finding),
        notes=[note_text(n) for n in analysis.notes],
        unseen=analysis.unseen,
        unseen_lines=unseen_lines(analysis.unseen) if analysis.unseen is not None else [],
        stragglers=straggler_lines(analysis.stragglers),
        progress=progress_lines(analysis.progress),
        stall=stall_lines(root_finding) if root_finding is not None else None,
        decided=decided_line(root_finding) if root_finding is not None else "",
        roles=roles,
    )


def culprit_hosts(analysis: Analysis, f: Finding | None) -> list[str]:
    """The hosts of a finding's culprits: its ranks', then its untied processes'."""
    if f is None:
        return []
    hosts = hosts_of(analysis, f.culprit_ranks)
    for p in f.culprit_processes:
        if p.host and p.host not in hosts:
            hosts.append(p.host)
    return hosts


def _role(f: Finding, root: Finding | None) -> str:
    if f is root:
        return ROOT
    return CONSEQUENCE if f.secondary else CAUSE


def fold(shown: list[Shown]) -> list[Folded]:
    """Findings alike (same role, kind, group kind, seq and op; one per group) as one row
    each, in the order of their first finding."""
    alike: dict[tuple, list[Shown]] = {}
    for s in shown:
        f = s.finding
        alike.setdefault((s.role, f.kind, f.pg_desc or f.pg_name, s.seq, f.op), []).append(s)
    return [
        Folded(
            items[0],
            len(items),
            sorted({r for x in items for r in x.finding.culprit_ranks}),
            sorted({r for x in items for r in x.finding.waiting_ranks}),
        )
        for items in alike.values()
    ]


def wait_places(analysis: Analysis) -> list[WaitPlace]:
    """Where ranks wait, folded per (group kind, seq, state): most waiting ranks first."""
    ctx = analysis.ctx
    out: dict[tuple[str, int, str], tuple[list[int], set[str]]] = {}
    for rank, b in analysis.blocked.items():
        pg = int(b.node[1])
        name = ctx.name(pg)
        kind = ctx.pg_desc.get(name, "") or f"pg {name}"
        p2p = b.node[0] == "p"
        seq = -1 if p2p else int(b.node[2])
        state = "started" if b.state == 1 else "issued"
        key = (kind, seq, f"{'p2p ' if p2p else ''}{b.op} {state}")
        ranks, groups = out.setdefault(key, ([], set()))
        ranks.append(rank)
        groups.add(name)
    order = sorted(out.items(), key=lambda kv: (-len(kv[1][0]), kv[0]))
    return [
        WaitPlace(kind, seq, what, ranks, sorted(groups, key=lambda n: (len(n), n)))
        for (kind, seq, what), (ranks, groups) in order
    ]


def _verdict(analysis: Analysis) -> Verdict:
    ok, undetermined = analysis.ok, analysis.undetermined
    f = analysis.root_cause
    stopped = analysis.stopped
    if f is None and stopped:
        text = f"{ranks_subject(stopped)} did not advance since the older snapshot"
        return Verdict("STOPPED", f"STOPPED: {text}", ok, undetermined)
    n = rank_count(analysis)
    if f is None and undetermined:
        seen = (
            "the logs do not show how it ended"
            if analysis.unseen and analysis.unseen.logs
            else ("the job is not seen whole")
        )
        text = f"no finding in the {n} rank(s) read, but {seen}"
        return Verdict("UNKNOWN", f"UNKNOWN: {text}", ok, undetermined)
    if f is None:
        text = f"no desync, mismatch or missing rank found in {n} ranks"
        return Verdict("OK", f"OK: {text}", ok, undetermined)
    from_logs = not len(analysis.ctx.trace.file_table)
    waited = f.waiting_ranks or f.facts.get("waiting_processes")
    state = "HUNG" if analysis.blocked or (from_logs and waited) else "FAILED"
    hosts = culprit_hosts(analysis, f)
    on = f" on {', '.join(hosts[:3])}{',...' if len(hosts) > 3 else ''}" if hosts else ""
    if f.culprit_ranks:
        who = ranks_subject(f.culprit_ranks)
    elif f.culprit_processes:
        procs = f.culprit_processes[:3]
        if all(p.pid is not None for p in procs):
            pids = ", ".join(str(p.pid) for p in procs)
            who = f"pid{'s' if len(f.culprit_processes) > 1 else ''} {pids} (rank unknown)"
        else:  # a faulthandler dump names no pid
            who = processes_text((p.pid, "") for p in procs) + " (rank unknown)"
    else:
        who = "not in the inputs"
    text = f"{state}: root cause {f.kind}, culprit {who}{on}, {where(f.place)}"
    return Verdict(state, text, ok, undetermined)


# --- hops alike --------------------------------------------------------------------------

_RANKS = r"ranks? (?:\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*(?:,\.\.\.)?(?: \(\d+ ranks\))?)"
_HOP_TOKENS = re.compile(rf"(?P<ranks>{_RANKS})|(?P<verb>\b(?:waits|wait)\b)|#(?P<seq>\d+)")


def _template(hop: str) -> str:
    return _HOP_TOKENS.sub(
        lambda m: "R" if m.group("ranks") else ("W" if m.group("verb") else "#S"), hop
    )


def _rank_set(text: str) -> list[int] | None:
    """The ranks of `rank 3` / `ranks 0-2,7`; None when the list was elided."""
    body = text.split(" ", 1)[1]
    if "..." in body:
        return None
    out: list[int] = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _merge_hops(hops: list[str]) -> str:
    """Hops differing only in ranks and sequence numbers as one line that counts them."""
    if len(hops) == 1:
        return hops[0]
    found = [list(_HOP_TOKENS.finditer(h)) for h in hops]
    first = found[0]
    pieces: list[str] = []
    pos = 0
    plural = False
    for k, m in enumerate(first):
        pieces.append(hops[0][pos : m.start()])
        pos = m.end()
        if m.group("ranks"):
            sets = [_rank_set(f[k].group("ranks")) for f in found]
            if any(s is None for s in sets):
                pieces.append(m.group("ranks") + " (and others)")
                plural = True
            else:
                union = sorted({r for s in sets for r in s or []})
                pieces.append(ranks_subject(union))
                plural = plural or len(union) > 1
        elif m.group("verb"):
            pieces.append("wait" if plural else "waits")
        else:
            seqs = sorted({int(f[k].group("seq")) for f in found})
            pieces.append(f"#{seqs[0]}" if len(seqs) == 1 else f"#{seqs[0]}-{seqs[-1]}")
    pieces.append(hops[0][pos:])
    return "".join(pieces) + f" [{len(hops)} hops alike]"


def merged_chain(hops: list[str]) -> list[str]:
    """Consecutive hops alike (same words, other ranks or seq) folded into one line each."""
    out: list[str] = []
    run: list[str] = []
    for hop in hops:
        if run and _template(hop) != _template(run[-1]):
            out.append(_merge_hops(run))
            run = []
        run.append(hop)
    if run:
        out.append(_merge_hops(run))
    return out
