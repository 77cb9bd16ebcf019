"""Waits and root cause: who waits for whom, followed to the ranks that explain the hang.

Each rank's blocking point is its first incomplete operation (for backends that never update
states, such as gloo, its first collective not issued by every member). A blocking point is a
node; the node waits for its members that are not there. Following those edges across groups
ends at ranks that are not waiting in any collective, left no dump, or disagree with the others:
the root cause. A cycle of nodes is a deadlock from collectives issued in different orders.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.analysis.collectives import CollectiveResult, missing_finding, state_finding
from frtrace.analysis.context import Context
from frtrace.analysis.findings import (
    MISMATCH_KINDS,
    STUCK_AFTER_MS,
    Finding,
    Hop,
    Kind,
    Reason,
    WaitNode,
)
from frtrace.analysis.ops import op_is, pg_seq_key
from frtrace.analysis.p2p import P2PResult
from frtrace.tables.table import Table, group_max

Node = WaitNode


@dataclass
class Blocked:
    """Where one rank waits: the node and the entry that holds it."""

    node: Node
    state: int
    op: str
    p2p_seq_id: int
    pos: int
    # Blocked only maybe: its last collective is in a group whose members are inferred while
    # some ranks left no readable dump (an open group, Context.open_groups), and the backend
    # records no states: whether it completed there or waits for an unseen member is unknown.
    maybe: bool = False


@dataclass
class Root:
    kind: str  # idle, nodump, together, cycle
    nodes: list[Node]
    ranks: list[int]
    weight: int = 0
    elsewhere: int = 0  # idle: other places ranks wait for these ranks (their consequences)
    edges: dict[Node, dict[Node, set[int]]] = field(default_factory=dict)  # a cycle's own
    tied: bool = False  # a cycle whose two orders nothing told apart: its ranks are all named


@dataclass
class WaitResult:
    blocked: dict[int, Blocked] = field(default_factory=dict)
    roots: list[Root] = field(default_factory=list)
    root_findings: list[tuple[Root, Finding]] = field(default_factory=list)


def blocking_points(ctx: Context, coll: CollectiveResult, p2p: P2PResult) -> dict[int, Blocked]:
    """Each rank's first incomplete operation, or nothing when it is not waiting."""
    e = ctx.trace.table
    out: dict[int, Blocked] = {}
    if ctx.view.states_tracked:
        state = ctx.states
        op_names = e.labels["op"]
        p2p_mask = e["is_p2p"]
        usable = (state < 2) & (~p2p_mask | op_is(e, "send") | op_is(e, "recv"))
        usable[ctx.unlaunched_rows] = False  # not launched: nobody waits in it yet
        idx = np.flatnonzero(usable)
        if not len(idx):
            return out
        ranks = e["rank"][idx]
        _, first = np.unique(ranks, return_index=True)
        slots = {}
        if len(p2p.ops):
            pend = p2p.ops.take(p2p.ops["slot_kind"] == p2p.ops.code("slot_kind", "i"))
            slots = {
                (int(r), int(p)): int(s)
                for r, p, s in zip(pend["rank"], pend["pos"], pend["slot"], strict=True)
            }
        pick = idx[first]
        cols = {
            c: e[c][pick]
            for c in ("rank", "pos", "global_src", "global_dst", "collective_seq_id", "p2p_seq_id")
        }
        pgs = e["pg_name"][pick]
        ops = [str(op_names[c]) for c in e["op"][pick].tolist()]
        for k, i in enumerate(pick.tolist()):
            rank, pos, pg = int(cols["rank"][k]), int(cols["pos"][k]), int(pgs[k])
            if p2p_mask[i]:
                sends = ops[k] == "send"
                src = rank if sends else int(cols["global_src"][k])
                dst = int(cols["global_dst"][k]) if sends else rank
                node = WaitNode("p", pg, slots.get((rank, pos), 0), src, dst)
            else:
                node = WaitNode("c", pg, int(cols["collective_seq_id"][k]), -1, -1)
            out[rank] = Blocked(node, int(state[i]), ops[k], int(cols["p2p_seq_id"][k]), pos)
        return out
    keys = coll.incomplete
    view = ctx.view.coll  # ordered by rank and position: a rank's first such row is its lowest
    names = {n: i for i, n in enumerate(ctx.pg_names)}
    if len(keys):
        wanted = np.isin(pg_seq_key(view["pg"], view["seq"]), pg_seq_key(keys["pg"], keys["seq"]))
        rows = np.flatnonzero(wanted)
        _, first = np.unique(view["rank"][rows], return_index=True)
        for i in rows[first].tolist():
            out[int(view["rank"][i])] = _blocked_at(ctx, i)
    torn = {
        (names[f.pg_name], f.collective_seq_id)
        for f in coll.findings
        if f.kind in MISMATCH_KINDS and f.collective_seq_id is not None and f.pg_name in names
    }
    if torn and len(view):
        # Without states, members that disagree on a collective look as if they completed
        # it: gloo lets one side return and the other wait for bytes that never come, or
        # aborts it. A member whose last collective is one its members disagree on went no
        # further: blocked there, maybe (like a rank of an open group).
        last = np.r_[np.flatnonzero(view["rank"][1:] != view["rank"][:-1]), len(view) - 1]
        for i in last.tolist():
            rank, key = int(view["rank"][i]), (int(view["pg"][i]), int(view["seq"][i]))
            if rank not in out and key in torn:
                out[rank] = _blocked_at(ctx, i, maybe=True)
    no_file = set(ctx.trace.no_file)
    if (ctx.open_groups or no_file) and len(view):
        # Without states, a rank not waiting anywhere may wait in its last collective for a
        # member nobody can see: in an open group (members inferred from the dumps while
        # some ranks left none), or where a member left no file at all (a process that
        # died; one whose dump is unreadable was alive to write it).
        last = np.r_[np.flatnonzero(view["rank"][1:] != view["rank"][:-1]), len(view) - 1]
        frontier = _frontier(view)
        for i in last.tolist():
            rank, pg, seq = int(view["rank"][i]), int(view["pg"][i]), int(view["seq"][i])
            if rank in out or frontier.get(pg, seq) > seq:
                continue  # a member went on to a later collective: this one completed
            if pg in ctx.open_groups or no_file.intersection(ctx.group_members(pg)):
                out[rank] = _blocked_at(ctx, i, maybe=True)
    return out


def _frontier(view: Table) -> dict[int, int]:
    """Group code -> the highest collective seq any rank issued in it."""
    return {int(pg): int(seq) for pg, seq in group_max(view["pg"], view["seq"]).items()}


def _blocked_at(ctx: Context, row: int, maybe: bool = False) -> Blocked:
    """A rank blocked at the collective in row `row` of the op view."""
    view = ctx.view.coll
    return Blocked(
        WaitNode("c", int(view["pg"][row]), int(view["seq"][row]), -1, -1),
        int(view["state"][row]),
        ctx.view.label("op", view["op"][row]),
        -1,
        int(view["pos"][row]),
        maybe,
    )


def _issuers(ctx: Context, node: Node) -> set[int]:
    """The ranks that issued a collective (they wait for no one to come to it)."""
    coll = ctx.view.coll
    return {int(r) for r in coll["rank"][(coll["pg"] == node.pg) & (coll["seq"] == node.seq)]}


def _members(ctx: Context, node: Node) -> list[int]:
    """The members of a wait node: an open group's may include every rank without a dump."""
    if node[0] == "c":
        members = ctx.group_members(node[1])
        if node[1] in ctx.open_groups:
            return sorted(set(members) | ctx.without_dump)
        return members
    return sorted({node[3], node[4]})


def analyze_waits(
    ctx: Context, coll: CollectiveResult, p2p: P2PResult, findings: list[Finding]
) -> WaitResult:
    blocked = blocking_points(ctx, coll, p2p)
    result = WaitResult(blocked=blocked)
    if not blocked:
        return result
    waiters: dict[Node, set[int]] = {}
    for rank, b in blocked.items():
        waiters.setdefault(b.node, set()).add(rank)
    edges: dict[Node, dict[Node, set[int]]] = {}
    idle: dict[Node, set[int]] = {}
    nodump: dict[Node, set[int]] = {}
    for node, here in waiters.items():
        came = _issuers(ctx, node) if any(blocked[r].maybe for r in here) else here
        for m in _members(ctx, node):
            if m in here or m in came:
                continue
            if m not in ctx.dumped:
                nodump.setdefault(node, set()).add(m)
            elif m in blocked:
                edges.setdefault(node, {}).setdefault(blocked[m].node, set()).add(m)
            else:
                idle.setdefault(node, set()).add(m)
    unreadable = set(ctx.trace.unreadable)
    for node in list(nodump):
        if _disagree(findings, ctx, node) or node in idle:
            # The ranks there disagree, or a rank that can be seen never came (it stopped):
            # one without a dump may be party to it, or have ended along (a launcher tears
            # the job down once a rank raises: fixtures/logs/raise).
            del nodump[node]
        elif node in edges:
            # Ranks that can be seen are awaited too, held up in another collective. One
            # whose dump is unreadable was alive to write it, most likely held up as they
            # are: no cause of it. One that left no file at all is: ranks wait for it
            # whatever the others do (a lost host beside another fault).
            gone = nodump[node] - unreadable
            if gone:
                nodump[node] = gone
            else:
                del nodump[node]
    roots: list[Root] = []
    kept, redirects = _first_missed(ctx, idle, waiters, blocked)
    for node, ranks in kept.items():
        away = {src for src, dst, r in redirects if dst == node and r in ranks}
        roots.append(Root("idle", [node], sorted(ranks), elsewhere=len(away)))
    for src_node, dst_node, rank in redirects:
        edges.setdefault(src_node, {}).setdefault(dst_node, set()).add(rank)
    for node in waiters:
        if node not in edges and node not in idle and node not in nodump:
            roots.append(Root("together", [node], sorted(waiters[node])))
    for scc in _cycles(edges):
        own = {a: edges.get(a, {}) for a in scc}
        cyc_ranks, tied = _cycle_culprits(ctx, scc, edges, blocked)
        roots.append(Root("cycle", scc, cyc_ranks, edges=own, tied=tied))
    reverse: dict[Node, set[Node]] = {}
    for src, targets in edges.items():
        for dst in targets:
            reverse.setdefault(dst, set()).add(src)

    def held_up(nodes: list[Node]) -> int:
        return len(set().union(*(waiters.get(n, set()) for n in _upstream(nodes, reverse))))

    if nodump:
        # Ranks without a dump are one cause wherever ranks wait for them (a lost host
        # leaves one rank missing from each of many groups): the place holding up the most
        # ranks first.
        nodes = sorted(nodump, key=lambda n: (-held_up([n]), n))
        roots.append(Root("nodump", nodes, sorted(set().union(*nodump.values()))))
    for root in roots:
        root.weight = held_up(root.nodes)
    roots = [r for r in roots if not _only_unreadable_maybe(ctx, r, waiters, blocked, reverse)]
    order = {"cycle": 0, "idle": 1, "nodump": 2, "together": 3}
    roots.sort(key=lambda r: (-r.weight, order[r.kind]))
    result.roots = roots
    for root in roots:
        finding = _root_finding(ctx, root, waiters, blocked, findings, p2p)
        if finding is None:
            continue
        finding.chain = _chain(ctx, root, waiters, edges, reverse, blocked)
        finding.chain_end = root.kind
        finding.ranks_waiting_on_this = root.weight
        result.root_findings.append((root, finding))
        if root.kind == "nodump":
            # The other places ranks wait for them: repeats of this cause (consequences).
            for other in root.nodes[1:]:
                absent = sorted(nodump[other])
                again = nodump_finding(ctx, other, absent, sorted(waiters[other]), blocked)
                result.root_findings.append((root, again))
    return result


def _disagree(findings: list[Finding], ctx: Context, node: Node) -> bool:
    """The ranks at a collective disagree on it (a mismatch finding there)."""
    return node.kind == "c" and (
        _existing(findings, MISMATCH_KINDS, ctx.name(node.pg), node.seq) is not None
    )


def _first_missed(
    ctx: Context,
    idle: dict[Node, set[int]],
    waiters: dict[Node, set[int]],
    blocked: dict[int, Blocked],
) -> tuple[dict[Node, set[int]], list[tuple[Node, Node, int]]]:
    """An idle rank holds up every group that waits for it; keep the op it stopped before.

    Its own history tells which call would have come next; the other waits are its
    consequences and join that root (their waiting ranks still count toward its weight).
    Where that history is silent or fits several of them (or the dump holds no completed
    work, `onlyActive`), the op its peers reached first (by their enqueue times) is the one
    it stopped before.
    """
    created = ctx.trace.table["time_created_ns"]

    def first_reached(node: Node) -> int:
        times = [int(created[ctx.row(w, blocked[w].pos)]) for w in waiters.get(node, ())]
        return min((t for t in times if t > 0), default=0)

    by_rank: dict[int, list[Node]] = {}
    for node, ranks in idle.items():
        for r in ranks:
            by_rank.setdefault(r, []).append(node)
    kept: dict[Node, set[int]] = {}
    redirects: list[tuple[Node, Node, int]] = []
    for rank, every in by_rank.items():
        hints = {n: _peer_went_on(ctx, rank, n) for n in every if len(every) > 1}
        nodes = [n for n in every if hints.get(n) is None] or every
        went_on = {h for h in hints.values() if h is not None}
        if len(nodes) > 1 and went_on:
            fits = [n for n in nodes if _call_at(ctx, rank, n, waiters, blocked) in went_on]
            if len(fits) == 1:
                nodes = fits  # the call a peer made where this rank stopped
        if len(nodes) == 1:
            usual = nodes
        else:
            usual = [n for n in nodes if ctx.next_is_usual(rank, _would_be_at(ctx, rank, n))]
        if len(nodes) > 1 and (len(usual) != 1 or not ctx.has_history(rank)):
            # History is silent or ambiguous: the op its peers reached first is the one it
            # stopped before. Receives are posted ahead of time: only collectives tell.
            pool = usual if len(usual) > 1 and ctx.has_history(rank) else nodes
            timed = [n for n in pool if n.kind == "c"] or pool
            reached = {n: first_reached(n) for n in timed}
            if all(reached.values()):
                usual = [min(timed, key=lambda n: (reached[n], n))]
        if len(usual) == 1:
            kept.setdefault(usual[0], set()).add(rank)
            redirects += [(n, usual[0], rank) for n in every if n != usual[0]]
        else:
            for node in nodes:
                kept.setdefault(node, set()).add(rank)
    return kept, redirects


PEERS_COMPARED = 3  # issuers compared with an idle rank (each may cost a history fetch)
Call = tuple[str, int]  # op, call site (stack id, or -1 - op code where there is none)


def _peer_went_on(ctx: Context, rank: int, node: Node) -> Call | None:
    """The call `rank` stopped before, when a peer that issued this collective shows it was
    not this one: the peer made the same calls as `rank` since their previous collective of
    the group, then more before this one (None: no such peer).

    A rank that stops before a pipeline send leaves its tensor-parallel peer waiting in the
    next all_reduce, and the receiver waiting for the send; the peer's own calls show that
    the send came first. Peers whose calls differ (another pipeline stage) tell nothing; the
    nearest ranks are asked first."""
    if node.kind != "c":
        return None
    since = ctx.op_pos(rank, node.pg, node.seq - 1)
    if since is None:
        return None
    tail = [site for _pg, site in ctx.steps(rank)[since:]]
    for peer in _nearest_issuers(ctx, node.pg, node.seq, rank, {rank})[:PEERS_COMPARED]:
        start = ctx.op_pos(peer, node.pg, node.seq - 1)
        end = ctx.op_pos(peer, node.pg, node.seq)
        if start is None or end is None:
            continue
        between = [site for _pg, site in ctx.steps(peer)[start:end]]
        if len(tail) < len(between) and between[: len(tail)] == tail:
            return ctx.calls(peer)[start + len(tail)][2], between[len(tail)]
    return None


def _nearest_issuers(ctx: Context, pg: int, seq: int, rank: int, besides: set[int]) -> list[int]:
    """The ranks that issued collective (pg, seq), but `besides`, nearest to `rank` first
    (the usual layouts put a rank's twins next to it)."""
    issued = _issuers(ctx, WaitNode("c", pg, seq, -1, -1))
    return sorted(issued - besides, key=lambda r: (abs(r - rank), r))


def _call_at(
    ctx: Context, rank: int, node: Node, waiters: dict[Node, set[int]], blocked: dict[int, Blocked]
) -> Call | None:
    """The call `rank` would make at this node: its op, and the call site its peers used
    there (its own last call on the channel, for p2p)."""
    step = _would_be_step(ctx, rank, node)
    if step is None:
        return None
    if node.kind == "p":
        return ("send" if node.src == rank else "recv"), step[1]
    peer = min(waiters.get(node, ()), default=None)
    return None if peer is None else (blocked[peer].op, step[1])


def _would_be_step(ctx: Context, rank: int, node: Node) -> tuple[int, int] | None:
    """The (group, call site) of the op `rank` would issue at this node (see _would_be_at)."""
    at = _would_be_at(ctx, rank, node)
    return None if at is None else ctx.steps(at[0])[at[1]]


def _would_be_at(ctx: Context, rank: int, node: Node) -> tuple[int, int] | None:
    """(rank, position) of a call like the one `rank` would issue at this node: a peer's
    call at a collective, its own last call on the channel for p2p."""
    if node.kind == "c":
        coll = ctx.view.coll
        at = np.flatnonzero((coll["pg"] == node.pg) & (coll["seq"] == node.seq))
        if not len(at):
            return None
        return int(coll["rank"][at[0]]), int(coll["pos"][at[0]])
    peer_op = "recv" if node.dst == rank else "send"
    e = ctx.trace.table.take(ctx.rank_rows(rank))
    mine = np.flatnonzero(
        e["is_p2p"]
        & op_is(e, peer_op)
        & (e["global_src"] == node.src)
        & (e["global_dst"] == node.dst)
    )
    return (rank, int(e["pos"][mine[-1]])) if len(mine) else None


def _only_unreadable_maybe(
    ctx: Context,
    root: Root,
    waiters: dict[Node, set[int]],
    blocked: dict[int, Blocked],
    reverse: dict[Node, set[Node]],
) -> bool:
    """A root of ranks whose dump file is there but unreadable, that no rank is known to wait
    for: everyone upstream only may wait (no states, last collective shared with them). A
    rank that was alive to write a dump is no cause on that evidence: the job is unknown."""
    if root.kind != "nodump" or not set(root.ranks) <= set(ctx.trace.unreadable):
        return False
    upstream = _upstream(root.nodes, reverse)
    return all(blocked[r].maybe for n in upstream for r in waiters.get(n, ()))


def _upstream(nodes: list[Node], reverse: dict[Node, set[Node]]) -> set[Node]:
    seen = set(nodes)
    queue = deque(nodes)
    while queue:
        for prev in sorted(reverse.get(queue.popleft(), ())):
            if prev not in seen:
                seen.add(prev)
                queue.append(prev)
    return seen


def _cycles(edges: dict[Node, dict[Node, set[int]]]) -> list[list[Node]]:
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    on_stack: set[Node] = set()
    stack: list[Node] = []
    out: list[list[Node]] = []
    counter = 0
    for start in list(edges):
        if start in index:
            continue
        work = [(start, iter(edges.get(start, {})))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, {}))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _cycle_culprits(
    ctx: Context,
    scc: list[Node],
    edges: dict[Node, dict[Node, set[int]]],
    blocked: dict[int, Blocked],
) -> tuple[list[int], bool]:
    """Ranks that issued the cycle's collectives in the minority order, and whether they are a
    tie nothing broke (both orders named).

    For each pair of collectives in the cycle, the ranks in both groups issued one first; the
    minority order is to blame. An even split goes to the ranks whose twins made another call
    where they are blocked (while the others' twins made the same), else to the rank whose step
    into its blocking op never happened before in its own history of call sites (not from
    JSON dumps: an op sequence never breaks a tie). Without either, the smallest side of the
    cycle.
    """
    colls = [n for n in scc if n[0] == "c"]
    culprits: set[int] = set()
    ties: set[int] = set()
    anchors: dict[int, Node] = {}  # a tied rank: the larger group of its pair (twins to ask)
    for i, x in enumerate(colls):
        for y in colls[i + 1 :]:
            both = set(ctx.group_members(x[1])) & set(ctx.group_members(y[1]))
            orders = {r: o for r in both if (o := _order(ctx, r, x, y)) is not None}
            firsts = {o for o in orders.values()}
            if len(firsts) < 2:
                continue
            xy = sorted(r for r, o in orders.items() if o == "xy")
            yx = sorted(r for r, o in orders.items() if o == "yx")
            if len(xy) != len(yx):
                culprits.update(xy if len(xy) < len(yx) else yx)
            else:
                ties.update(xy + yx)
                wide = max(x, y, key=lambda n: (len(ctx.group_members(n.pg)), n))
                anchors.update((r, wide) for r in xy + yx)
    if culprits:
        return sorted(culprits), False
    twins = {r: _twins_agree(ctx, r, anchors[r], ties, blocked) for r in ties if r in blocked}
    odd = sorted(r for r, agree in twins.items() if agree is False)
    if odd and len(twins) == len(ties) and all(twins[r] for r in ties if r not in odd):
        return odd, False
    # A rank's own history decides by call sites only (JSON dumps: no tie-break by the ops).
    sites = bool(ties) and ctx.decided_by(sorted(ties)) == "stacks"
    novel = sorted(r for r in ties if sites and r in blocked and _novel_step(ctx, r, blocked[r]))
    if novel and len(novel) < len(ties):
        return novel, False
    if ties:
        return sorted(ties), True
    inside = set(scc)
    sides: list[set[int]] = [
        ranks for a in scc for b, ranks in edges.get(a, {}).items() if b in inside
    ]
    return sorted(min(sides, key=lambda side: len(side))), False  # type: ignore[arg-type]


TWIN_BACK = 64  # calls before the anchor compared with a twin's (when both dumps hold them)
TWIN_CONTEXT = 4  # matching calls needed before a peer counts as a twin
TWIN_PEERS = 8  # peers compared, nearest first: from a stage's first rank, 4 are in the stage below


def _twins_agree(
    ctx: Context, rank: int, anchor: Node, ties: set[int], blocked: dict[int, Blocked]
) -> bool | None:
    """Whether ranks in the same role made the call `rank` is blocked in, at that point.

    Twins are issuers of the anchor group's previous collective outside the tie, nearest
    first, whose calls (group kind, call site, op) around it match the rank's, from up to
    TWIN_BACK calls before it to just before the rank's blocking op. True: one made that call
    there too; False: they made another call there; None: no twin. In a two-member group each
    side of a swapped pair has issued one of the two collectives first, but only the rank
    that swapped them differs from its twins (ranks of another tensor-parallel group at the
    same pipeline stage)."""

    def calls(r: int, begin: int, count: int) -> list[tuple[str, int, str]]:
        return [(ctx.desc(pg), site, op) for pg, site, op in ctx.calls(r)[begin : begin + count]]

    start, at = ctx.op_pos(rank, anchor.pg, anchor.seq - 1), blocked[rank].pos
    if start is None or at <= start:
        return None
    verdict = None
    for peer in _nearest_issuers(ctx, anchor.pg, anchor.seq - 1, rank, ties)[:TWIN_PEERS]:
        begin = ctx.op_pos(peer, anchor.pg, anchor.seq - 1)
        if begin is None:
            continue
        back = min(start, begin, TWIN_BACK)
        mine = calls(rank, start - back, at - start + back + 1)
        seen = calls(peer, begin - back, len(mine))
        if len(mine) - 1 < TWIN_CONTEXT or len(seen) < len(mine) or seen[:-1] != mine[:-1]:
            continue  # another role, too little to tell, or not that far yet
        if seen[-1] == mine[-1]:
            return True
        verdict = False
    return verdict


def _order(ctx: Context, rank: int, x: Node, y: Node) -> str | None:
    """'xy' or 'yx': which of two collectives the rank issued first (None if neither)."""
    px, py = ctx.op_pos(rank, x.pg, x.seq), ctx.op_pos(rank, y.pg, y.seq)
    if px is not None and py is not None:
        return "xy" if px < py else "yx"
    if px is not None:
        return "xy"
    if py is not None:
        return "yx"
    return None


def _novel_step(ctx: Context, rank: int, at: Blocked) -> bool:
    """The step into the blocking op (previous call -> this call, each a group, call site and
    op: one call site may issue several ops) never occurred earlier on this rank."""
    steps = ctx.calls(rank)
    k = at.pos
    if k <= 0 or k >= len(steps):
        return False
    earlier = set(itertools.pairwise(steps[:k]))
    return (steps[k - 1], steps[k]) not in earlier


def _existing(
    findings: list[Finding],
    kinds: set[Kind] | frozenset[Kind],
    pg_name: str,
    seq: int | None,
    p2p: bool = False,
) -> Finding | None:
    for f in findings:
        if (
            f.kind in kinds
            and f.pg_name == pg_name
            and ((f.p2p_seq_id is not None) if p2p else f.collective_seq_id == seq)
        ):
            return f
    return None


def _root_finding(
    ctx: Context,
    root: Root,
    waiters: dict[Node, set[int]],
    blocked: dict[int, Blocked],
    findings: list[Finding],
    p2p: P2PResult,
) -> Finding | None:
    node = root.nodes[0]
    kind, pg, seq, src, dst = node
    here = sorted(waiters.get(node, set()))
    if root.kind == "cycle":
        return _cycle_finding(ctx, root, waiters, blocked, _cycle_hops(ctx, root, waiters))
    if root.kind == "nodump":
        maybe = all(blocked[r].maybe for n in root.nodes for r in waiters[n])
        words = len({r for n in root.nodes for r in waiters[n]})
        return nodump_finding(
            ctx, node, root.ranks, here, blocked, len(root.nodes), maybe, lone=words < 2
        )
    if root.kind == "idle" and kind == "c":
        coll = ctx.view.coll
        rows = coll.take((coll["pg"] == pg) & (coll["seq"] == seq))
        have = sorted(int(r) for r in rows["rank"])
        finding = missing_finding(ctx, pg, seq, rows, have, root.ranks, root.elsewhere)
        if finding.culprit_ranks == root.ranks:
            finding.facts.update(idle=True, states_tracked=ctx.view.states_tracked)
        return finding
    if root.kind == "idle":
        b = blocked[here[0]]
        return ctx.finding(
            Kind.MISSING_RANKS,
            pg,
            p2p_seq_id=_next_p2p_seq(ctx, root.ranks[0], pg),
            op="recv" if b.op == "send" else "send",
            culprit_ranks=root.ranks,
            waiting_ranks=here[:1],
            expected_ranks=sorted({src, dst}),
            reason=Reason.NEVER_POSTED,
            facts={**_node_facts(node), "waiting_op": b.op, "waiting_p2p_seq_id": b.p2p_seq_id},
        )
    # Every member is at the node: they disagree, or some never started it.
    if kind == "p":
        found = _existing(p2p.findings, {Kind.P2P_MISMATCH}, ctx.name(pg), None, p2p=True)
    else:
        found = _existing(findings, MISMATCH_KINDS, ctx.name(pg), seq)
    if found is not None:
        return found
    stuck = sorted(r for r in here if blocked[r].state == 0)
    running = sorted(r for r in here if blocked[r].state == 1)
    if not (stuck and running):
        return stuck_finding(ctx, node, here, blocked)
    if kind == "c":
        existing = _existing(findings, {Kind.STATE_MISMATCH}, ctx.name(pg), seq)
        if existing is not None:
            return existing
    return state_finding(
        ctx,
        pg,
        stuck,
        running,
        blocked[stuck[0]].op,
        **_seq_ids(node, blocked[stuck[0]]),
        expected_ranks=_members(ctx, node),
    )


def nodump_finding(
    ctx: Context,
    node: Node,
    ranks: list[int],
    here: list[int],
    blocked: dict[int, Blocked],
    places: int = 1,
    maybe: bool = False,
    lone: bool = False,
) -> Finding:
    """Ranks `here` wait at `node` for `ranks`, which left no usable dump (`places`: how many
    places ranks wait for them in; `maybe`: no rank is known to wait, some may). Where one
    rank alone may wait (`lone`; gloo records no completion, and a gloo job dumps only where
    its own code asks, so a rank without a dump may just not have written one), that rank may
    as well have completed the call and stopped outside collectives: one rank's word decides
    nothing, and it is named too, undecidable. Where several may wait, the finding is
    undecidable still: every rank of a job that ended cleanly looks the same in gloo's
    dumps (its last call not known to have completed), so whether they wait at all is
    unknown; the logs, when given, tell (frtrace.analysis.analyze._with_logs)."""
    doubt = maybe and lone
    blamed = sorted({*ranks, *here}) if doubt else ranks
    return ctx.finding(
        Kind.MISSING_DUMP,
        node.pg,
        **_seq_ids(node, blocked[here[0]]),
        op=blocked[here[0]].op,
        culprit_ranks=blamed,
        undecidable=maybe,
        waiting_ranks=here,
        expected_ranks=_members(ctx, node),
        reason=Reason.NO_DUMP,
        facts={
            "no_dump": ranks,
            "unreadable": sorted(set(ranks) & set(ctx.trace.unreadable)),
            "places": places,
            "maybe": maybe,
            **_node_facts(node),
        },
    )


def _seq_ids(node: Node, b: Blocked | None) -> dict[str, Any]:
    """A finding's sequence numbers at a wait node: the collective's seq, or the p2p seq of
    the blocked rank's op on the channel."""
    if node.kind == "c":
        return {"collective_seq_id": node.seq, "p2p_seq_id": None}
    return {"collective_seq_id": None, "p2p_seq_id": b.p2p_seq_id if b is not None else None}


def _node_facts(node: Node) -> dict:
    """A p2p node's channel, for the report to name where ranks wait."""
    return {"node": {"src": node.src, "dst": node.dst}} if node.p2p else {}


def stuck_finding(
    ctx: Context, node: Node, here: list[int], blocked: dict[int, Blocked]
) -> Finding:
    """Every member issued the op (and, with timing, started it), they agree, none completed:
    the hang is inside the collective (network, NCCL, a GPU), not in any one rank's code."""
    pg = node.pg
    ages = [a for r in here if (a := ctx.in_flight_ms(r, blocked[r].pos)) is not None]
    timeout = ctx.timeout_ms(here[0], blocked[here[0]].pos)
    return ctx.finding(
        Kind.STUCK_COLLECTIVE,
        pg,
        **_seq_ids(node, blocked[here[0]]),
        op=blocked[here[0]].op,
        culprit_ranks=here,
        waiting_ranks=[],
        expected_ranks=_members(ctx, node),
        reason=Reason.STUCK,
        facts={
            "started": sorted(r for r in here if blocked[r].state == 1),
            "in_flight_ms": round(max(ages), 1) if ages else None,
            "timeout_ms": timeout or None,
            "confirmed": bool(ages) and max(ages) >= min(timeout or STUCK_AFTER_MS, STUCK_AFTER_MS),
            **_node_facts(node),
        },
    )


def _next_p2p_seq(ctx: Context, rank: int, pg: int) -> int | None:
    """The p2p_seq_id a rank would give its next p2p op in a group."""
    e = ctx.trace.table.take(ctx.rank_rows(rank))
    mine = e["p2p_seq_id"][e["pg_name"] == pg]
    return int(mine.max()) + 1 if len(mine) else None


def _cycle_hops(ctx: Context, root: Root, waiters: dict[Node, set[int]]) -> list[Hop]:
    inside = set(root.nodes)
    return [
        Hop(tuple(sorted(waiters[a])), ctx.place(a), tuple(sorted(ranks)))
        for a in root.nodes
        for b, ranks in root.edges.get(a, {}).items()
        if b in inside
    ]


def _cycle_finding(
    ctx: Context,
    root: Root,
    waiters: dict[Node, set[int]],
    blocked: dict[int, Blocked],
    hops: list[Hop],
) -> Finding:
    culprit_nodes = {blocked[r].node for r in root.ranks if r in blocked}
    node = sorted(culprit_nodes)[0] if culprit_nodes else root.nodes[0]
    pg = node.pg
    others = sorted(set().union(*(waiters[n] for n in root.nodes)) - set(root.ranks))
    first = root.ranks[0]
    return ctx.finding(
        Kind.ORDER_CYCLE,
        pg,
        **_seq_ids(node, blocked.get(first)),
        op=blocked[first].op if first in blocked else None,
        culprit_ranks=root.ranks,
        waiting_ranks=others,
        expected_ranks=_members(ctx, node),
        reason=Reason.CYCLE,
        cycle=[ctx.place(n) for n in root.nodes],
        chain=hops,
        undecidable=root.tied,
    )


def _chain(
    ctx: Context,
    root: Root,
    waiters: dict[Node, set[int]],
    edges: dict[Node, dict[Node, set[int]]],
    reverse: dict[Node, set[Node]],
    blocked: dict[int, Blocked],
) -> list[Hop]:
    """From the farthest waiting ranks down to the root, one hop per group."""
    if root.kind == "cycle":
        return _cycle_hops(ctx, root, waiters)

    def _maybe(node: Node) -> bool:
        return all(blocked[r].maybe for r in waiters[node])

    target = root.nodes[0]
    dist = {target: 0}
    nxt: dict[Node, Node] = {}
    queue = deque([target])
    while queue:
        cur = queue.popleft()
        for prev in sorted(reverse.get(cur, ())):
            if prev not in dist:
                dist[prev] = dist[cur] + 1
                nxt[prev] = cur
                queue.append(prev)
    # Farthest from the root, then most waiters, then the lowest node: the same on every run.
    start = min(dist, key=lambda n: (-dist[n], -len(waiters.get(n, ())), n))
    hops = []
    cur = start
    while cur != target:
        step = nxt[cur]
        via = tuple(sorted(edges[cur][step]))
        hops.append(Hop(tuple(sorted(waiters[cur])), ctx.place(cur), via, _maybe(cur)))
        cur = step
    hops.append(
        Hop(tuple(sorted(waiters[target])), ctx.place(target), tuple(root.ranks), _maybe(target))
    )
    return hops


def mark_secondary(
    ctx: Context,
    findings: list[Finding],
    blocked: dict[int, Blocked],
    stopped: frozenset[int] = frozenset(),
) -> None:
    """A finding whose culprits (or, for a missing collective, whose absent members) all wait
    somewhere else is a consequence, not a cause. `stopped`: ranks a root cause found stopped
    outside collectives; an absent member among them is accounted for too (a hang that
    cascades: one absent member waits for the stopped one elsewhere, the other is it)."""
    names = {n: i for i, n in enumerate(ctx.pg_names)}
    for f in findings:
        if f.kind not in (Kind.MISSING_RANKS, Kind.STATE_MISMATCH) or f.collective_seq_id is None:
            continue
        seq = f.hang_seq if f.hang_seq is not None else f.collective_seq_id
        here = WaitNode("c", names.get(f.pg_name, -1), seq, -1, -1)
        suspects = f.not_issued_by or f.culprit_ranks
        away = {r: blocked[r].node for r in suspects if r in blocked}

        # A rank that issued this collective while blocked in the same kind of op (group
        # kind and op: another stage's pipeline recv), having enqueued more behind that wait
        # than the suspect did, shows such a wait does not stop a rank from issuing it (work
        # is enqueued ahead of the GPU): the suspect stopped issuing on its own.
        def role(r: int) -> tuple[str, str]:
            return ctx.desc(blocked[r].node.pg), blocked[r].op

        def behind(r: int) -> int:  # entries recorded after its blocking op (all unsettled)
            return int((ctx.trace.table["pos"][ctx.rank_rows(r)] > blocked[r].pos).sum())

        ahead: dict[tuple[str, str], int] = {}
        for r in f.issued_by:
            if r in blocked:
                ahead[role(r)] = max(ahead.get(role(r), 0), behind(r))
        away = {r: n for r, n in away.items() if behind(r) >= ahead.get(role(r), 0)}
        idle = {r for r in suspects if r not in blocked and r in stopped}
        if (
            away
            and len(away) + len(idle) == len(suspects)
            and all(n != here for n in away.values())
        ):
            f.blocked_in = {r: ctx.place(n) for r, n in away.items()}
            f.mark_consequence(suspects, Reason.BLOCKED_ELSEWHERE)
