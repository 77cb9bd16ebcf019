"""What the logs and stacks conclude when there is no dump: who waited where, who never came.

Three kinds of evidence decide, strongest first:
1. A rank that names others: TORCH_DISTRIBUTED_DEBUG=DETAIL's collective fingerprint check
   (each rank names the ranks whose call differs from its own; the rank most of them name is
   the culprit, two ranks naming each other are undecidable) and a monitored barrier (rank 0
   names the ranks that never reached it).
2. NCCL's watchdog and group prefixes: each timed-out line says the group, the seq and the
   writer's rank within the group; the members of that group who never logged the timed-out
   collective, and are not waiting in another group themselves, are the culprits. A member
   the logs never show is found by its rank within the group (the group ranks logged leave a
   gap) and its global rank from the group's order: new_group sorts its ranks, so group rank
   i is the i-th smallest global rank (torch/distributed/distributed_c10d.py,
   `_new_group_with_tag`); between two members whose global ranks are as far apart as their
   group ranks, the ranks in between are the members in between.
3. Each rank's and each untied process's own state: waiting in the collective most wait in
   (a timeout, a lost peer, a live stack inside it), waiting in another one, or absent from
   it and why (an exception of its own, a signal, an error exit, a live stack outside
   collectives, nothing). The absent with evidence of their own trouble are the culprits,
   then the silent ones while others wait, then those waiting elsewhere. A process whose
   rank no evidence states is named by its host and pid, never given a guessed rank.
Every rank the inputs name waiting in one collective is undecidable (`stuck_collective`).
Nothing waiting and nothing failed: no finding; the job is then healthy only where the logs
show it ended (frtrace.analysis.analyze, `Analysis.unseen`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from frtrace.analysis.findings import Finding, Kind, ProcessRef, Reason
from frtrace.evidence.gather import (
    in_collective,
    tie_by_waits,
    untied_on_hosts,
    worker_processes,
)
from frtrace.evidence.logs import OP_NAMES, short_host
from frtrace.evidence.records import (
    CLOCK_SLACK,
    PEER_LOST,
    PENDING,
    TIMEOUT,
    Communicator,
    Entered,
    Evidence,
    ProcessStack,
    RankEvidence,
    Reported,
    Wait,
)

WAITING = "waiting"  # in the collective most ranks waited in
ELSEWHERE = "elsewhere"  # waiting in another collective
RAISED = "raised"  # a Python exception of its own
KILLED = "killed"  # a signal ended it (not the agent's SIGTERM after a failure)
CRASHED = "crashed"  # a nonzero exit code, no traceback, no signal
STUCK = "stuck"  # its live stack is outside collectives
SILENT = "silent"  # nothing: no error, no stack, not waiting (never joined)

FAILED = (RAISED, KILLED, CRASHED, STUCK)  # evidence of its own trouble
# ... whose cause is shown. An error exit alone (CRASHED) is also how a victim ends: gloo
# raises in every rank still waiting once the timeout passes or the peer is gone
# (gloo/transport/tcp/unbound_buffer.cc: "Timed out waiting ...ms for send operation to
# complete"), the uncaught RuntimeError ends the worker with status 1, and torchelastic's
# summary shows only `exitcode : 1` (torch/distributed/elastic/multiprocessing/errors,
# ProcessFailure) where the traceback was not kept: the victim's exit and the culprit's look
# the same.
SHOWN_FAILED = (RAISED, KILLED, STUCK)
TEARDOWN_SIGNALS = ("SIGTERM",)  # what torchelastic sends the survivors of a failure


@dataclass(frozen=True)
class Place:
    """A collective as the logs name it (group and seq are unknown for gloo)."""

    pg_name: str
    pg_desc: str
    op: str
    seq: int | None


@dataclass(frozen=True)
class RankState:
    """One rank at the failure, as its logs and stack show it."""

    rank: int
    state: str
    place: Place | None = None  # where it waited
    wait: Wait | None = None


@dataclass(frozen=True)
class ProcessState:
    """A worker process no evidence ties to a rank, as its live stack shows it."""

    proc: ProcessStack
    state: str  # WAITING, ELSEWHERE or STUCK
    place: Place | None = None


def _best_wait(ev: RankEvidence) -> Wait | None:
    """The wait that says most: a watchdog's (group and seq), then a timeout, then a lost
    peer, then another communication error."""
    if not ev.waits:
        return None

    def score(w: Wait) -> tuple[int, int, int]:
        return (w.seq is not None, w.how == TIMEOUT, w.how == PEER_LOST)

    return max(ev.waits, key=score)


def _place_of(ev: RankEvidence) -> tuple[Place | None, Wait | None]:
    wait = _best_wait(ev)
    if wait is not None:
        op = wait.op
        if not op and ev.stack is not None:
            op = in_collective(ev.stack) or ""
        return Place(wait.pg_name, wait.pg_desc, op, wait.seq), wait
    live = in_collective(ev.stack) if ev.stack is not None else None
    if live is not None:
        return Place("", "", live, None), None
    return None, None


def _own_failure(ev: RankEvidence) -> str | None:
    if ev.raised:
        return RAISED
    exited = ev.exit
    if exited is not None and exited.signal and exited.signal not in TEARDOWN_SIGNALS:
        return KILLED
    if exited is not None and exited.exitcode > 0 and not exited.signal:
        return CRASHED
    if ev.stack is not None and in_collective(ev.stack) is None and ev.stack.main is not None:
        return STUCK
    return None


def rank_states(ev: Evidence) -> tuple[dict[int, RankState], Place | None]:
    """Every rank's state, and the collective most ranks waited in (None if none waited)."""
    places: dict[int, tuple[Place, Wait | None]] = {}
    for rank, rev in ev.ranks.items():
        place, wait = _place_of(rev)
        if place is not None:
            places[rank] = (place, wait)
    live = [_live_place(p) for p in worker_processes(ev)]
    main = _main_place([p for p, _w in places.values()] + [p for p in live if p is not None])
    held = _host_waits(ev, set(places), main)
    states: dict[int, RankState] = {}
    for rank, rev in sorted(ev.ranks.items()):
        if rank in places:
            place, wait = places[rank]
            same = main is not None and _same(place, main)
            states[rank] = RankState(rank, WAITING if same else ELSEWHERE, place, wait)
            continue
        own = _own_failure(rev)
        if own is None and rank in held:
            states[rank] = RankState(rank, WAITING, held[rank])
            continue
        states[rank] = RankState(rank, own or SILENT)
    return states, main


def _host_waits(ev: Evidence, placed: set[int], main: Place | None) -> dict[int, Place]:
    """The ranks of a host whose untied worker processes, as many as its ranks with no stack
    and no wait, all wait inside the collective most ranks wait in: they wait there too,
    though which process is which rank is unknown (py-spy files without ranks)."""
    if main is None:
        return {}
    procs, free_on = untied_on_hosts(ev)
    out: dict[int, Place] = {}
    for host, free in free_on.items():
        ranks = [r.rank for r in free if r.rank not in placed]
        if not ranks:
            continue
        here = procs.get(host, [])
        lives = [_live_place(p) for p in here]
        if len(here) == len(ranks) and all(p is not None and _same(p, main) for p in lives):
            out.update((r, main) for r in ranks)
    return out


def _live_place(proc: ProcessStack) -> Place | None:
    op = in_collective(proc)
    return None if op is None else Place("", "", op, None)


def process_states(ev: Evidence, main: Place | None) -> list[ProcessState]:
    """The untied worker processes' states, by their live stacks."""
    out = []
    for proc in worker_processes(ev):
        place = _live_place(proc)
        if place is None:
            state = STUCK if proc.main is not None and proc.main.frames else SILENT
        else:
            state = WAITING if main is not None and _same(place, main) else ELSEWHERE
        if state != SILENT:
            out.append(ProcessState(proc, state, place))
    return out


def _same(a: Place, b: Place) -> bool:
    """Two ranks' waits name one collective: the same op, and the same group and seq where
    both name them (gloo names neither)."""
    if a.op and b.op and a.op != b.op:
        return False
    if a.pg_name and b.pg_name and a.pg_name != b.pg_name:
        return False
    return a.seq is None or b.seq is None or a.seq == b.seq


def _main_place(places: list[Place]) -> Place | None:
    """The collective most ranks waited in (the most informative spelling of it)."""
    if not places:
        return None
    counts = Counter(places)
    best = max(
        counts,
        key=lambda p: (
            sum(n for q, n in counts.items() if _same(p, q)),
            bool(p.op),
            bool(p.pg_name),
            p.seq is not None,
        ),
    )
    return best


def _culprit_facts(rev: RankEvidence, state: RankState) -> dict[str, Any]:
    """What the sentence about one absent rank needs (report-only facts)."""
    out: dict[str, Any] = {"state": state.state}
    if state.state == RAISED and rev.raised:
        out.update(exception=rev.raised[-1].type, message=rev.raised[-1].message)
    exited = rev.exit
    if exited is not None:
        out.update(exitcode=exited.exitcode, signal=exited.signal)
    if rev.stack is not None and rev.stack.main is not None and rev.stack.main.frames:
        out.update(_where_stuck(rev.stack))
    if state.place is not None:
        out["op"] = state.place.op
    return out


def _where_stuck(stack: ProcessStack) -> dict[str, Any]:
    """The function of the job's own code its main thread is in, and the standard library
    call it waits in, if any (`queue.get`)."""
    main = stack.main
    if main is None or not main.frames:
        return {}
    own, innermost = main.own_frames, main.python_frames
    out: dict[str, Any] = {"function": own[0].text() if own else innermost[0].text()}
    if own and innermost and own[0] is not innermost[0]:
        out["waiting_in"] = innermost[0].function
    return out


def _process_facts(state: ProcessState) -> dict[str, Any]:
    proc = state.proc
    out: dict[str, Any] = {"state": state.state, "host": proc.host, "pid": proc.pid}
    if proc.pid is None:  # a faulthandler dump: where it is tells it from its node's others
        out["at"] = proc.at
    out.update(_where_stuck(proc))
    if state.place is not None:
        out["op"] = state.place.op
    return out


def log_findings(ev: Evidence) -> list[Finding]:
    """The finding the logs and stacks support (at most one), none for a healthy job."""
    reported = reported_findings(ev)
    if reported:
        return reported
    entered = entered_findings(ev)
    if entered:
        return entered
    grouped = group_findings(ev)
    if grouped:
        return grouped
    return state_findings(ev) or store_lost_findings(ev)


def store_lost_findings(ev: Evidence) -> list[Finding]:
    """Where nothing else is found: a torchrun agent that died of losing its rendezvous store
    (Ending.store_lost) shows the job failed; the store is one of the job's agents, so the
    node that went away holds the ranks no input shows (`_unseen`), all named, undecidable
    where several. None where every rank is seen: then the logs cannot say which node."""
    lost = list(ev.ending.store_lost)
    unseen = _unseen(ev)
    if not lost or not unseen:
        return []
    return [
        Finding(
            kind=Kind.MISSING_RANKS,
            pg_name="",
            pg_desc="",
            collective_seq_id=None,
            p2p_seq_id=None,
            op=None,
            culprit_ranks=unseen,
            waiting_ranks=[],
            expected_ranks=sorted({*ev.ranks, *unseen}),
            reason=Reason.STORE_LOST,
            facts={"source": "logs", "store_lost": lost, "unseen": unseen},
            not_issued_by=unseen,
            undecidable=len(unseen) > 1,
        )
    ]


# --- 1. ranks naming others ---------------------------------------------------------------


def reported_findings(ev: Evidence) -> list[Finding]:
    """A monitored barrier's or the fingerprint check's verdict, when the logs hold one."""
    barrier = [r for r in ev.reports if r.how == "monitored_barrier"]
    prints = [r for r in ev.reports if r.how == "fingerprint"]
    states, _main = rank_states(ev)
    if barrier:
        culprits = sorted({r for report in barrier for r in report.ranks})
        timeout = max((r.timeout_ms or 0) for r in barrier) or None
        facts: dict[str, Any] = {"source": "logs", "decided_by": "monitored_barrier"}
        if timeout:
            facts["timeout_ms"] = timeout
        return [_named(Kind.MISSING_RANKS, culprits, states, ev, facts, undecidable=False)]
    if not prints:
        return _unanswered(ev, states)
    named: dict[int, set[int]] = defaultdict(set)  # rank -> the ranks that name it
    writers: set[int] = set()
    for report in prints:
        writers.update(report.against)
        for rank in report.ranks:
            named[rank].update(report.against)
    most = max(len(v) for v in named.values())
    top = sorted(r for r, v in named.items() if len(v) == most)
    # one rank's word against another's decides nothing: a culprit is named by most writers,
    # and by two at least
    decided = len(top) == 1 and most >= 2 and most * 2 > len(writers)
    culprits = top if decided else sorted(set(named) | writers)
    facts = {
        "source": "logs",
        "decided_by": "fingerprint",
        "named_by": {str(r): sorted(v) for r, v in sorted(named.items())},
    }
    if not decided and (sides := _fingerprint_sides(prints, _world_of(ev))) is not None:
        culprits, decided = sides[1], True
        facts["agree"] = sides[0]
    kind = _fingerprint_kind(prints)
    return [_named(kind, culprits, states, ev, facts, undecidable=not decided)]


def _fingerprint_sides(prints: list[Reported], world: int) -> tuple[int, list[int]] | None:
    """Where the fingerprint checks' own order decides: each rank compares its call with
    every rank's in rank order and raises at the first that differs
    (`CollectiveFingerPrint::verify_tensors`, ProcessGroupWrapper.cpp), so a writer that
    names rank r agrees with every rank below r. With rank 0's side so known to hold most of
    the world, the ranks known to differ from it are the culprits: (how many agree, those).
    None where the reports contradict that order or that side is no majority."""
    agree_below = 0  # ranks [0, agree_below) are on rank 0's side
    writers: set[int] = set()  # writers on rank 0's side
    differ: set[int] = set()
    for p in prints:
        if len(p.ranks) != 1 or len(p.against) != 1:
            return None
        w, r = p.against[0], p.ranks[0]
        if not (0 <= w < world and 0 <= r < world) or w == r:
            return None
        if r == 0:  # the writer differs from rank 0
            differ.add(w)
        else:  # the writer and ranks 0 to r - 1 agree; r differs from them
            agree_below = max(agree_below, r)
            writers.add(w)
            differ.add(r)
    side = agree_below + sum(1 for w in writers if w >= agree_below)
    if any(r < agree_below or r in writers for r in differ) or side * 2 <= world:
        return None
    return side, sorted(differ)


def _unanswered(ev: Evidence, states: dict[int, RankState]) -> list[Finding]:
    """A monitored barrier that rank 0 never answered, its own verdict not in the logs
    (ProcessGroupGloo::monitoredBarrier: the other ranks send to rank 0 and wait for its
    answer, and only rank 0 times the barrier). The ranks that say they reached it are not
    the culprit; the candidates are rank 0 and every rank of the world that did not say so.
    Decided where one candidate is left, or one of them failed by itself; else the other
    readings of the logs are asked. Only where each writer numbers itself as in the world
    (a subgroup's barrier has a rank 0 of its own) and the world's size is stated."""
    reached = [r for r in ev.reports if r.how == "reached"]
    if not reached or ev.world_size is None:
        return []
    if any(r.by is None or r.ranks != (r.by,) for r in reached):
        return []
    came = {r.by for r in reached}
    if not 0 < ev.world_size - len(came) <= UNSEEN_NAMED:  # a size from untrusted lines
        return []
    candidates = [r for r in range(ev.world_size) if r not in came]
    failed = [r for r in candidates if r in states and states[r].state in SHOWN_FAILED]
    culprits = failed if len(failed) == 1 else candidates
    if len(culprits) != 1:
        return []
    facts: dict[str, Any] = {
        "source": "logs",
        "decided_by": "monitored_barrier_unanswered",
        "reached": sorted(came),
        "never_said": candidates,
    }
    return [_named(Kind.MISSING_RANKS, culprits, states, ev, facts, undecidable=False)]


def entered_findings(ev: Evidence) -> list[Finding]:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL logs each collective a rank enters, numbered in its
    group, before the monitored barrier of its checks (frtrace.evidence.logs, `_RUNNING`):
    ranks that entered the world's #K wait there for those whose last was #K-1. Asked only
    where every rank the inputs show logged them, and the others are ranks the world has that
    no input shows (ranks 0 to the world's size or, the size untold, to the highest seen):
    those seen at #K-1 never entered #K, and the unseen, which may not have either, are
    named as such; each rank's lines of the world's group are
    told from a subgroup's (`_world_lines`); the ranks at #K agree on its op, and every other
    rank stopped at #K-1 on the op the first ones had there (entering #K-1's barrier took
    every rank: none can be further behind), past every subgroup collective it entered
    since (others entered it too and went on: it is not waiting in one)."""
    logged = {r: rev.entered for r, rev in ev.ranks.items() if rev.entered}
    world = _world_of(ev)
    unseen = _unseen(ev)  # in no input: they may stand at #K or #K-1
    if not logged or len(logged) != len(ev.ranks) or len(ev.ranks) + len(unseen) != world:
        return []
    streams = _world_lines(logged)
    if streams is None:
        return []
    last = {r: lines[-1] for r, lines in streams.items()}
    top = max(e.seq for e in last.values())
    ahead = sorted(r for r, e in last.items() if e.seq == top)
    behind = sorted(r for r, e in last.items() if e.seq != top)
    if not behind or any(last[r].seq != top - 1 for r in behind):
        return []
    ops = {last[r].op for r in ahead}
    before = {last[r].op for r in behind}
    before |= {e.op for r in ahead for e in streams[r][:-1] if e.seq == top - 1}
    if len(ops) != 1 or len(before) != 1:
        return []
    passed = _passed(logged, streams)
    if not all(_passed_since(r, last[r], logged, passed) for r in behind):
        return []
    tie_by_waits(ev, set(ahead), set(logged))  # the culprit's live stack, where it was untied
    states, _main = rank_states(ev)
    facts: dict[str, Any] = {"source": "logs", "decided_by": "entered", "entered": top}
    if unseen:  # those seen behind never entered #K; these may not have either
        facts["unseen"] = unseen
    f = _named(Kind.MISSING_RANKS, behind, states, ev, facts, undecidable=False)
    op = ops.pop()
    f.op = OP_NAMES.get(op, op.lower())
    f.collective_seq_id = top
    f.waiting_ranks = f.issued_by = ahead
    f.not_issued_by = behind
    return [f]


def _world_lines(logged: dict[int, list[Entered]]) -> dict[int, list[Entered]] | None:
    """Each rank's DETAIL lines of the world's group. One group's lines state one group
    rank and number on by one, so a rank's lines split into runs; the world's run states the
    rank itself. A subgroup where the rank is also its group rank gives a second such run:
    the world's is then the one that ends where the other ranks' world runs end (within
    one). None where a line could continue two runs that differ (two alike so far, as the
    world's and a subgroup's first calls often are, are one choice), or no run can be told
    the world's."""
    runs: dict[int, list[list[Entered]]] = {}
    for rank, lines in logged.items():
        mine: list[list[Entered]] = []
        for e in lines:
            follow = [
                run
                for run in mine
                if run[-1].group_rank == e.group_rank and run[-1].seq + 1 == e.seq
            ]
            if len(follow) > 1 and any(_calls(run) != _calls(follow[0]) for run in follow):
                return None  # which run it continues would matter
            if not follow:  # a number no line states (real gloo runs skip one every rank
                # skips): the one run of this group rank that it can continue, if one
                later = [r for r in mine if r[-1].group_rank == e.group_rank and r[-1].seq < e.seq]
                follow = later if len(later) == 1 else []
            if follow:
                follow[0].append(e)
            else:
                mine.append([e])
        runs[rank] = [run for run in mine if run[0].group_rank == rank]
        if not runs[rank]:
            return None
    sure = [rs[0][-1].seq for rs in runs.values() if len(rs) == 1]
    if not sure:
        return None
    low, high = min(sure), max(sure)
    out: dict[int, list[Entered]] = {}
    for rank, rs in runs.items():
        fits = [run for run in rs if high - 1 <= run[-1].seq <= low + 1] if len(rs) > 1 else rs
        if len(fits) != 1:
            return None
        out[rank] = fits[0]
    return out


def _calls(run: list[Entered]) -> list[tuple[int, int, str]]:
    """A run's collectives, where it logged them aside: two runs alike so far are
    interchangeable, whichever a line continues."""
    return [(e.group_rank, e.seq, e.op) for e in run]


def _passed_since(
    rank: int,
    mark: Entered,
    logged: dict[int, list[Entered]],
    passed: dict[tuple[int, str], set[int]],
) -> bool:
    """Whether every subgroup collective `rank` entered after its world line `mark` is one a
    rank entered and then logged a later line after (`passed`: the ranks that did, by (seq,
    op)): that collective ended, and the rank is not waiting in it."""
    lines = logged[rank]
    return all(passed.get((e.seq, e.op)) for e in lines[lines.index(mark) + 1 :])


def _passed(
    logged: dict[int, list[Entered]], streams: dict[int, list[Entered]]
) -> dict[tuple[int, str], set[int]]:
    """The ranks that logged a later line after each (seq, op) of a subgroup's."""
    out: dict[tuple[int, str], set[int]] = defaultdict(set)
    for rank, theirs in logged.items():
        for t in theirs[:-1]:
            if t not in streams[rank]:
                out[(t.seq, t.op)].add(rank)
    return out


def settle_even_split(f: Finding, ev: Evidence) -> None:
    """Settle the dumps' even split (as many members issued the collective as did not, and no
    history tells which side is wrong) where every member that did not issue it was still
    running when torchelastic's agent ended it (`Sending process P closing signal`:
    RankEvidence.closed), exited by itself in no way the logs show, and is not seen inside a
    collective: held outside collectives, those are the cause. A member that had finished
    would have exited by itself; one that moved on would have issued a later collective.
    Settled, `f` names those members as its culprits."""
    absent = [r for r in f.not_issued_by if r in f.culprit_ranks]
    if not f.undecidable or f.reason != Reason.EVEN_SPLIT_MISSING or not absent:
        return
    if _failed_apart(f, ev, absent):
        return
    for r in absent:
        rev = ev.ranks.get(r)
        if rev is None or not rev.closed or rev.exits:
            return
        if rev.stack is not None and in_collective(rev.stack) is not None:
            return
    f.culprit_ranks = absent
    f.waiting_ranks = [r for r in f.issued_by if r not in absent]
    f.undecidable = False
    f.reason = Reason.STILL_RUNNING
    f.facts["closed"] = {str(r): ev.ranks[r].closed for r in absent}


def _failed_apart(f: Finding, ev: Evidence, absent: list[int]) -> bool:
    """Settle an even split where every member that did not issue the collective failed by
    itself outside any collective (an exception, a signal, an error exit, a live stack
    outside collectives) and no member that issued it did: the failure is why it never came.
    True when settled."""

    def own(r: int) -> str | None:
        rev = ev.ranks.get(r)
        return _own_failure(rev) if rev is not None and not rev.waits else None

    failed = {r: own(r) for r in absent}
    if not all(failed.values()) or any(own(r) for r in f.issued_by if r not in absent):
        return False
    f.culprit_ranks = absent
    f.waiting_ranks = [r for r in f.issued_by if r not in absent]
    f.undecidable = False
    f.reason = Reason.FAILED_BY_ITSELF
    f.facts["failed"] = {str(r): state for r, state in failed.items()}
    return True


def _fingerprint_kind(prints: list[Reported]) -> Kind:
    """What the fingerprints differ in: the op (type), the shapes (size), the dtypes, or the
    sequence number alone (a rank missed or added a collective)."""
    aspects = " ".join(r.detail for r in prints)
    if "Op type" in aspects:
        return Kind.TYPE_MISMATCH
    if "Tensor shapes" in aspects:
        return Kind.SIZE_MISMATCH
    if "Tensor dtypes" in aspects:
        return Kind.DTYPE_MISMATCH
    return Kind.MISSING_RANKS


def _named(
    kind: Kind,
    culprits: list[int],
    states: dict[int, RankState],
    ev: Evidence,
    facts: dict[str, Any],
    undecidable: bool,
) -> Finding:
    waiting = [r for r, s in states.items() if s.wait is not None and r not in culprits]
    ops = Counter(s.place.op for r, s in states.items() if s.place is not None and s.place.op)
    facts["culprits"] = {
        str(r): _culprit_facts(ev.ranks[r], states[r]) for r in culprits if r in ev.ranks
    }
    return Finding(
        kind=kind,
        pg_name="",
        pg_desc="",
        collective_seq_id=None,
        p2p_seq_id=None,
        op=ops.most_common(1)[0][0] if ops else None,
        culprit_ranks=culprits,
        waiting_ranks=waiting,
        expected_ranks=sorted(set(states) | set(culprits)),
        reason=Reason.NAMED_BY_CHECK,
        facts=facts,
        undecidable=undecidable,
    )


# --- 2. NCCL's groups ------------------------------------------------------------------------


@dataclass
class _Group:
    """What the logs show of one NCCL group: its members (global -> group rank), size."""

    name: str
    desc: str = ""
    members: dict[int, int] | None = None
    size: int | None = None
    stated: bool = False  # the size is stated (the group's own line, its communicator)


MAX_GROUP = 1 << 20  # the most members a group's lines may claim (10x the largest jobs)


def _groups(ev: Evidence) -> tuple[dict[str, _Group], dict[str, int]]:
    """The groups the logs show, and each DeviceMesh dimension's step (`mesh_steps`)."""
    groups: dict[str, _Group] = {}
    waited = {w.pg_name for rev in ev.ranks.values() for w in rev.waits if w.pg_name}
    for rank, rev in ev.ranks.items():
        lines = [(g.pg_name, g.pg_desc, g.group_rank, g.size) for g in rev.groups]
        lines += [
            (w.pg_name, w.pg_desc, w.group_rank, None)
            for w in rev.waits
            if w.pg_name and w.group_rank is not None
        ]
        for name, desc, group_rank, size in lines:
            g = groups.setdefault(name, _Group(name, desc, {}))
            assert g.members is not None
            g.members[rank] = group_rank
            g.desc = g.desc or desc
            if size is not None:
                g.size, g.stated = max(g.size or 0, size), True
    # the default group holds every rank, its group rank the global rank
    # (torch/distributed/distributed_c10d.py, init_process_group)
    world = max([*ev.ranks, (ev.world_size or 0) - 1], default=-1) + 1
    for g in groups.values():
        if g.desc == "default_pg" and g.members is not None:
            g.members.update({r: r for r in ev.ranks})
            g.size = max(g.size or 0, world)
    _members_from_communicators(ev, groups)
    # groups of one description have one size (DeviceMesh's dimensions): a sibling whose
    # members reach a higher group rank shows a member this group's logs do not; a group
    # where a collective timed out has another member (one rank alone waits for nobody)
    widest: dict[str, int] = {}
    for g in groups.values():
        if g.desc and g.members:
            seen = max(g.size or 0, max(g.members.values()) + 1, 2 if g.name in waited else 0)
            widest[g.desc] = max(widest.get(g.desc, 0), seen)
    for g in groups.values():
        if g.desc in widest:
            g.size = max(g.size or 0, widest[g.desc])
    steps = mesh_steps(groups.values())  # sizes do not change them: members do
    if world > 1:
        steps.update(_mesh_layout_steps(groups, world, steps))
        _mesh_sizes(groups, world, steps)
    # a member derived in another group is a rank of the world the logs never show
    top = max(
        (
            max(all_members(g.members, g.size, steps.get(g.desc)))
            for g in groups.values()
            if g.members and g.desc != "default_pg"
        ),
        default=-1,
    )
    for g in groups.values():
        if g.desc == "default_pg" and not ev.world_size:
            g.size = max(g.size or 0, top + 1)
        if g.size is not None and g.size > MAX_GROUP:  # read from untrusted lines
            g.size, g.stated = None, False
    return groups, steps


def _mesh_layout_steps(
    groups: dict[str, _Group], world: int, known: dict[str, int]
) -> dict[str, int]:
    """A DeviceMesh dimension's step where no group of it shows two members, and the members
    its groups show leave one: init_device_mesh lays the mesh over the world's ranks in
    order (`torch.arange(world).view(mesh_shape)`, torch/distributed/device_mesh.py), so along
    a dimension of size n and step s (n x s divides the world) rank r is group rank
    (r // s) % n. Ranks 1 and 5 both at group rank 1 of pairs leave step 1 alone."""
    shown: dict[str, list[tuple[int, int]]] = defaultdict(list)
    low: dict[str, int] = {}
    for g in groups.values():
        if g.desc.startswith("mesh_") and g.desc not in known and g.members:
            shown[g.desc] += g.members.items()
            low[g.desc] = max(low.get(g.desc, 2), g.size or 2)
    out: dict[str, int] = {}
    for desc, members in shown.items():
        fits = {step for step, _n in _layout_fits(members, world, low[desc])}
        if len(fits) == 1:
            out[desc] = fits.pop()
    return out


def _layout_fits(
    members: Iterable[tuple[int, int]], world: int, low: int, size: int | None = None
) -> set[tuple[int, int]]:
    """The (step, size) pairs of a DeviceMesh dimension that put every shown member
    (global rank, group rank) at its group rank: along a dimension of size n and step s
    (n x s divides the world) rank r is group rank (r // s) % n. Sizes from `low` up, or
    `size` alone where given."""
    shown = list(members)
    divisors = _divisors(world)
    return {
        (step, n)
        for d in divisors
        for step in divisors
        if d % step == 0
        and (n := d // step) >= low
        and (size is None or n == size)
        and all((r // step) % n == gr for r, gr in shown)
    }


def _divisors(n: int) -> list[int]:
    """n's divisors in order, in sqrt(n) steps: a world size comes from untrusted lines."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _mesh_sizes(groups: dict[str, _Group], world: int, steps: dict[str, int]) -> None:
    """A DeviceMesh dimension's size where the members shown leave one choice, else the
    least it can be: its groups are its slices of a mesh laid out over the world's ranks
    (init_device_mesh: `torch.arange(world_size).view(mesh_shape)`,
    torch/distributed/device_mesh.py), so size x step divides the world size, every slice
    lies within the world, and a slice's first rank is at coordinate 0 along it."""
    for desc, step in steps.items():
        same = [g for g in groups.values() if g.desc == desc and g.members]
        if any(g.stated for g in groups.values() if g.desc == desc):
            continue  # a size the groups state wins over one inferred
        low = max(2, *(g.size or 0 for g in same))
        firsts = []  # each slice's first rank, from its lowest member shown
        for g in same:
            g0, r0 = min((gr, r) for r, gr in (g.members or {}).items())
            firsts.append(r0 - g0 * step)
        fits = [
            n
            for n in (_divisors(world // step) if world % step == 0 else [])
            if n >= low
            and all(
                first >= 0 and (first // step) % n == 0 and first + (n - 1) * step < world
                for first in firsts
            )
        ]
        if fits:  # one: the size; several: every one holds the least's members
            for g in same:
                g.size = fits[0]


def _members_from_communicators(ev: Evidence, groups: dict[str, _Group]) -> None:
    """A group's members the watchdog lines do not show, from NCCL's communicators: a
    ProcessGroupNCCL's communicator has the group's size and each member at its group rank
    (ProcessGroupNCCL::initNCCLComm passes the group rank to ncclCommInitRankConfig). The
    communicators that hold every member shown, each at its group rank (and of the group's
    size where it is known), are the group's possible ones; a size or a member is taken
    where they all agree on it (a lone send/recv's own communicator, 2 ranks, the lower one
    first, may fit as well: where it disagrees, nothing is taken)."""
    if not ev.communicators:
        return
    holding: dict[tuple[int, int], list[Communicator]] = defaultdict(list)
    for c in ev.communicators.values():  # a rank is in a few: each group looks at those
        for r, cr in c.members.items():
            holding[(r, cr)].append(c)
    for g in groups.values():
        if not g.members or g.desc == "default_pg" or len(g.members) >= (g.size or 1 << 30):
            continue
        shown = g.members
        fits = [
            c
            for c in holding.get(next(iter(shown.items())), [])
            if (not g.size or c.nranks == g.size)
            and all(c.members.get(r) == gr for r, gr in shown.items())
        ]
        sizes = {c.nranks for c in fits}
        if len(sizes) != 1 or next(iter(sizes)) > MAX_GROUP:
            continue
        g.size, g.stated = sizes.pop(), True
        taken = set(shown.values())
        for i in range(g.size):
            if i in taken:
                continue
            said = {frozenset(r for r, cr in c.members.items() if cr == i) for c in fits}
            if len(said) == 1 and len(only := next(iter(said))) == 1:
                g.members[next(iter(only))] = i


def member_global(
    members: dict[int, int], group_rank: int, mesh_step: int | None = None
) -> int | None:
    """The global rank of a group member the logs never show (`members_global`)."""
    return members_global(members, [group_rank], mesh_step)[group_rank]


def members_global(
    members: dict[int, int], group_ranks: Iterable[int], mesh_step: int | None = None
) -> dict[int, int | None]:
    """The global ranks of group members the logs never show, from the members they show:
    group ranks follow global ranks in order (new_group sorts them), so a member between two
    shown members whose global ranks are as far apart as their group ranks is the rank in
    between; in a group whose shown members are all evenly spaced (DeviceMesh's groups are),
    it is as far from them as its group rank says; where they show no spacing, a DeviceMesh
    dimension's (`mesh_step`, as its sibling groups show it) tells. None when none holds.
    The members are sorted once, however many are asked for (a group of thousands)."""
    by_group = sorted((g, r) for r, g in members.items())
    pairs = list(itertools.pairwise(by_group))
    steps = {(r1 - r0) // (g1 - g0) for (g0, r0), (g1, r1) in pairs if g1 - g0 == 1}
    if not steps and mesh_step is not None:
        steps = {mesh_step}
    step = steps.pop() if len(steps) == 1 else None
    if step is not None and (
        step <= 0 or any((r1 - r0) != (g1 - g0) * step for (g0, r0), (g1, r1) in pairs)
    ):
        step = None
    out: dict[int, int | None] = {}
    for i in group_ranks:
        lowest, highest = member_range(members, i, -1, by_group)
        if lowest == highest:  # distinct sorted integers: no room for another
            out[i] = lowest
        elif step is None or not by_group:
            out[i] = None
        else:
            guess = by_group[0][1] + (i - by_group[0][0]) * step
            out[i] = guess if guess >= 0 else None
    return out


def mesh_steps(groups: Iterable[_Group]) -> dict[str, int]:
    """Each DeviceMesh dimension's spacing of global ranks, where its groups show one: a
    dimension's groups are slices of the mesh along it (torch/distributed/device_mesh.py,
    `_init_process_groups`: `group_desc = f"mesh_{name}"`, the ranks from the mesh's layout),
    so every one of them is evenly spaced by the same step."""
    seen: dict[str, set[int]] = defaultdict(set)
    for g in groups:
        if not g.desc.startswith("mesh_") or not g.members or len(g.members) < 2:
            continue
        by_group = sorted((gr, r) for r, gr in g.members.items())
        steps = {
            (r1 - r0) // (g1 - g0) if g1 != g0 and (r1 - r0) % (g1 - g0) == 0 else -1
            for (g0, r0), (g1, r1) in itertools.pairwise(by_group)
        }
        seen[g.desc].update(steps if len(steps) == 1 else {-1})
    return {desc: next(iter(s)) for desc, s in seen.items() if len(s) == 1 and min(s) > 0}


def _group_rank(pair: tuple[int, int]) -> int:
    return pair[0]


def member_range(
    members: dict[int, int],
    group_rank: int,
    top: int,
    by_group: list[tuple[int, int]] | None = None,
) -> tuple[int, int]:
    """The global ranks a group member could be, from the members the logs show: group ranks
    follow global ranks in order, so it lies between its shown neighbours with room for the
    members between (`top`: the highest global rank known). `by_group`: the members as
    sorted (group rank, global rank) pairs, where the caller asks for many members."""
    if by_group is None:
        by_group = sorted((g, r) for r, g in members.items())
    lo = bisect.bisect_left(by_group, group_rank, key=_group_rank)
    hi = bisect.bisect_right(by_group, group_rank, key=_group_rank)
    below = by_group[lo - 1] if lo > 0 else None
    above = by_group[hi] if hi < len(by_group) else None
    lowest = below[1] + (group_rank - below[0]) if below else group_rank
    highest = above[1] - (above[0] - group_rank) if above else top
    return lowest, highest


def group_findings(ev: Evidence) -> list[Finding]:
    """NCCL's view: in each group where members timed out, the members that did not. A rank
    absent from several timed-out groups explains more of the hang than one absent from
    one (where many are absent, most were only torn down before they could log), so the
    culprit is the absentee the most groups wait for."""
    states, _main = rank_states(ev)
    at: dict[tuple[str, int | None], set[int]] = defaultdict(set)
    waits: dict[tuple[str, int | None], dict[int, Wait]] = defaultdict(dict)
    began: dict[tuple[str, int | None], dict[int, Wait]] = defaultdict(dict)
    for rank, rev in ev.ranks.items():
        for w in rev.waits:
            if w.pg_name:
                at[(w.pg_name, w.seq)].add(rank)
                waits[(w.pg_name, w.seq)][rank] = w
                if w.started is not None:  # the first report of a wait; repeats are later
                    known = began[(w.pg_name, w.seq)]
                    if rank not in known or w.started < _start(known[rank]):
                        known[rank] = w
    if not at:
        return []
    _pending_inside(ev, at, waits)
    groups, steps = _groups(ev)
    waiting_anywhere = set().union(*at.values())
    # the sizes each group's members waited with, by (description, seq): siblings' sizes
    sizes: dict[tuple[str, int | None], dict[str, list[int]]] = defaultdict(dict)
    for (name, seq), here in waits.items():
        desc = groups[name].desc if name in groups else ""
        sizes[(desc, seq)][name] = [w.numel for w in here.values() if w.numel]
    found: dict[tuple[str, int | None], Finding] = {}
    unshown: dict[str, tuple[dict[int, int | None], set[int]]] = {}
    for name, seq in at:
        g = groups.get(name, _Group(name, members={}))
        usual = _siblings_size(sizes[(g.desc, seq)], name) if g.desc else None
        if name not in unshown:  # one group's many timed-out seqs share it
            siblings = {
                r
                for other in groups.values()
                if other.desc == g.desc and other.name != name
                for r in (other.members or {})
            }
            unshown[name] = _unshown(ev, g, waiting_anywhere, siblings, steps.get(g.desc))
        place = _group_place(
            ev, states, g, seq, waits[(name, seq)], waiting_anywhere, unshown[name], usual
        )
        if place is not None:
            found[(name, seq)] = place
    mismatched = [f for f in found.values() if f.kind == Kind.SIZE_MISMATCH]
    if mismatched:
        return [max(mismatched, key=lambda f: (len(f.waiting_ranks), f.pg_name))]
    # an order that differs explains a deadlock no absentee does: only where no absentee
    # explains a wait the order does not (one that failed by itself, or one its mesh peers
    # wait for; a silent rank missing from the default group's collective alone may only
    # have been ended before its watchdog fired, and the order holds every rank there)
    failed = any(
        r in states and states[r].state in FAILED for f in found.values() for r in f.culprit_ranks
    )
    absentees = [  # each other collective with absentees: every member not waiting in it
        all_members(h.members or {}, h.size, steps.get(h.desc)) - at[place]
        for place, f in found.items()
        if f.culprit_ranks
        and (h := groups.get(place[0], _Group(place[0], members={}))).desc != "default_pg"
    ]
    order = _order_differs(ev, at, groups, steps, began, failed, absentees)
    if order is not None:
        return [order]
    ordered = _program_order(_by_rank(began), groups)  # one program's order, as ranks show it
    derived = {name: {r for r in d.values() if r is not None} for name, (d, _) in unshown.items()}
    stuck, also = _waited_on(at, groups, began, ordered, derived)
    if stuck is not None and not failed:  # a whole group waits inside it, others wait for it
        name, seq = stuck
        f = _stuck_at(ev, groups.get(name, _Group(name, members={})), seq, at, waits)
        if also:  # as well waited on, and no clock says which began first
            f.facts["also_stuck"] = [
                {"pg": n, "seq": q, "ranks": sorted(at[(n, q)])} for n, q in also
            ]
        return [f]
    explains: Counter[int] = Counter()
    behind: Counter[int] = Counter()
    # a call whose members are held in a call before it needs no absentee of its own
    held = _held_first(at, groups, steps, ordered)
    counted = [p for p, f in found.items() if f.culprit_ranks and _call(p, groups) not in held]
    counted = counted or list(found)
    for p in counted:
        f = found[p]
        for r in f.culprit_ranks:
            explains[r] += 1
            behind[r] += len(f.waiting_ranks)
    if explains:

        def weight(r: int) -> tuple[bool, int, int]:
            return (r in states and states[r].state in FAILED, explains[r], behind[r])

        best = max(weight(r) for r in explains)
        chosen = sorted(r for r in explains if weight(r) == best)
        root = max(
            (found[p] for p in counted if chosen[0] in found[p].culprit_ranks),
            key=lambda f: (len(f.waiting_ranks), f.pg_name),
        )
        others = [r for r in root.culprit_ranks if r not in chosen]
        if others:
            root.facts["also_absent"] = others
        root.culprit_ranks = root.not_issued_by = chosen
        root.facts["culprits"] = {
            k: v for k, v in root.facts.get("culprits", {}).items() if int(k) in chosen
        }
        # an absentee that wrote no line of its own (its log lost) is no surer absent than
        # inside: only the others' watchdogs speak for it
        unseen_only = all(not _wrote(ev, r) for r in chosen)
        root.undecidable = len(chosen) > 1 or unseen_only
        if root.undecidable and root.waiting_ranks and not best[0]:
            # several members showed no trouble of their own: they never joined it, or the
            # whole group waits inside it and their watchdogs had not fired when the job came
            # down (each fires at its own start plus the timeout: ProcessGroupNCCL.cpp,
            # WorkNCCL::checkTimeout); nothing tells these apart: the waiting are named too
            root.facts["or_inside"] = list(root.waiting_ranks)
            root.culprit_ranks = sorted({*chosen, *root.waiting_ranks})
        return [root]
    if found:  # members the logs never show, their global ranks untold
        unknown = max(found.values(), key=lambda f: (len(f.waiting_ranks), f.pg_name))
        mesh_group = groups.get(unknown.pg_name)
        could = (
            _layout_members(mesh_group, _world_size(groups)) if mesh_group is not None else set()
        )
        if could:  # the ranks the mesh's layout leaves for the members no line shows
            unknown.culprit_ranks = unknown.not_issued_by = sorted(could)
            unknown.facts["layout_candidates"] = sorted(could)
            unknown.undecidable = True
        return [unknown]
    # every member the logs show waits where it timed out: inside the collective, or the
    # member they wait for is not in the logs
    (name, seq), _waiting = max(
        at.items(), key=lambda kv: (len(kv[1]), kv[0][0], -1 if kv[0][1] is None else kv[0][1])
    )
    return [_stuck_at(ev, groups.get(name, _Group(name, members={})), seq, at, waits)]


Place_ = tuple[str, int | None]


def _pending_inside(
    ev: Evidence,
    at: dict[Place_, set[int]],
    waits: dict[Place_, dict[int, Wait]],
) -> None:
    """Members whose watchdog had not fired but whose group's heartbeat monitor logged the
    timed-out work enqueued (`Last enqueued NCCL work: 2, last completed NCCL work: 1` with
    the dump signal) joined it: they wait inside it with the others."""
    by_name: dict[str, list[tuple[int, dict[int, Wait]]]] = defaultdict(list)
    for (name, seq), here in waits.items():
        if seq is not None:
            by_name[name].append((seq, here))
    for rank, rev in ev.ranks.items():
        for line in rev.groups:
            if line.enqueued is None or line.pg_name not in by_name:
                continue
            for seq, here in by_name[line.pg_name]:
                if rank not in here and seq <= line.enqueued:
                    name, op = line.pg_name, next(iter(here.values())).op
                    here[rank] = Wait(
                        PENDING,
                        op,
                        line.where,
                        pg_name=name,
                        pg_desc=line.pg_desc,
                        seq=seq,
                        group_rank=line.group_rank,
                        last_enqueued=line.enqueued,
                        last_completed=line.completed,
                    )
                    at[(name, seq)].add(rank)


def _held_first(
    at: dict[Place_, set[int]],
    groups: dict[str, _Group],
    steps: dict[str, int],
    ordered: set[tuple[Call_, Call_]],
) -> set[Call_]:
    """The timed-out calls whose waits members held in an earlier call explain. A call comes
    before another where a member its peers wait for in the second waits itself in the
    first, or where a rank surely began the first before the second (`ordered`,
    `_program_order`): one program, so the order holds on every rank. The second's silent
    absentees may be held in the first as well, torn down before they logged, so their
    absence there is no evidence against them. Orders shown both ways (an order cycle) are
    not taken."""
    where: dict[int, list[Place_]] = defaultdict(list)
    for q, there in at.items():
        for r in there:
            where[r].append(q)
    shown: set[tuple[Call_, Call_]] = set()
    silent: dict[Place_, set[int]] = {}  # each timed-out place's members not waiting there
    for p, there in at.items():
        g = groups.get(p[0])
        if g is None or not g.members:
            continue
        silent[p] = all_members(g.members, g.size, steps.get(g.desc)) - there
        for r in silent[p]:
            shown.update((_call(q, groups), _call(p, groups)) for q in where.get(r, ()))
    # several ranks missing from one call (across its sibling groups), all of them silent
    # members of another timed-out group: one culprit keeps the others of them only by
    # holding them in that group's call, so it comes first (were that call after, they would
    # have passed it without the culprit); unless a rank waiting in one shows the other order
    absent: dict[Call_, set[int]] = defaultdict(set)
    for p, gone in silent.items():
        absent[_call(p, groups)] |= gone
    inferred = {
        (_call(q, groups), call)
        for call, gone in absent.items()
        if len(gone) >= 2 and not any(r in where for r in gone)
        for q, quiet in silent.items()
        if _call(q, groups) != call and gone <= quiet
    }
    shown |= {(a, b) for a, b in inferred if (b, a) not in shown}
    shown |= ordered
    return {b for a, b in shown if (b, a) not in shown and a != b}


def _start(w: Wait) -> float:
    """When a timed-out work began, at the earliest (a wait kept in `began` has a start)."""
    assert w.started is not None
    return w.started


def _before(a: Wait, b: Wait, same_rank: bool) -> bool:
    """Whether work `a` certainly began before work `b`. A c10 header states the wall
    clock's whole second (CLOCK_SLACK) and CLOCK_MONOTONIC's fraction, so starts less than a
    second apart have no order by the clock alone. One process's two timeouts have more:
    one host's fractions give the lines' distance mod 1 s (two candidates within the
    seconds' bounds), and their order in one file (written as its watchdogs fired) leaves
    one; less the difference in how long the works ran, that is how far apart they began."""
    if _start(a) + CLOCK_SLACK <= _start(b):
        return True
    if not same_rank or a.ran_ms is None or b.ran_ms is None:
        return False
    if a.mono is None or b.mono is None:
        return False
    seconds = round((_start(b) + b.ran_ms / 1000) - (_start(a) + a.ran_ms / 1000))
    frac = (b.mono - a.mono) % 1.0
    apart = [d for d in (seconds + frac, seconds + frac - 1) if seconds - 1 < d < seconds + 1]
    if a.where.file == b.where.file and a.where.line and b.where.line:
        ordered = a.where.line < b.where.line
        apart = [d for d in apart if (d >= 0) == ordered or d == 0]
    ran = (b.ran_ms - a.ran_ms) / 1000
    return bool(apart) and all(d - ran > 0 for d in apart)


def _by_rank(began: dict[Place_, dict[int, Wait]]) -> dict[int, list[tuple[Place_, Wait]]]:
    """Each rank's timed-out works that have a start, with their places."""
    out: dict[int, list[tuple[Place_, Wait]]] = defaultdict(list)
    for place, there in began.items():
        for rank, w in there.items():
            out[rank].append((place, w))
    return out


def _waited_on(
    at: dict[Place_, set[int]],
    groups: dict[str, _Group],
    began: dict[Place_, dict[int, Wait]],
    ordered: set[tuple[Call_, Call_]],
    derived: dict[str, set[int]],
) -> tuple[Place_ | None, list[Place_]]:
    """The timed-out collective whose group's every member waits in it while members of
    other timed-out groups, absent from theirs, wait there too: the end of the chain (a hang
    inside the collective, or a member's disagreement the logs cannot show). Between equal
    candidates, the one that began first: every wait behind it began later (NCCL's
    watchdog line states how long the work ran, its header when). With no clock to tell
    them apart, the others that could be it come second (the reading stays undecidable).
    Where no other group's absentee waits in one, a whole group's that no other wait the
    logs show began before is the first to stop: the rest began behind it (other whole
    groups' that began too close to it for the clocks come second). A member's two works
    too close for its clock are in the order other ranks surely began them in (`ordered`,
    `_program_order`), or the order the ranks waiting with it in the first show
    (`peer_order`): where other ranks show the other order too, the ranks of one collective
    still ran one code to it (a pipeline's stages run different orders, each receiving,
    running its forward's collectives, then sending: torch/distributed/pipelining/
    schedules.py, ScheduleGPipe._step_microbatches; a stage's tp group lies within it).
    A group's members are those its lines show and those its shown members and the layout
    put there (`derived`, `_unshown`): a rank that never logged in a group it belongs to is
    as absent from it as one that did."""
    of_rank = _by_rank(began)
    peers: dict[Place_, set[tuple[Call_, Call_]]] = {}

    def peer_order(q: Place_) -> set[tuple[Call_, Call_]]:
        """The program's order as the ranks waiting at `q` show it."""
        if q not in peers:
            peers[q] = _program_order({r: of_rank[r] for r in at[q] if r in of_rank}, groups)
        return peers[q]

    absent: Counter[int] = Counter()  # in how many timed-out collectives each rank is missing
    for (name, _seq), there in at.items():
        h = groups.get(name)
        if h is not None:
            members = set(h.members or {}) | derived.get(name, set())
            absent.update(r for r in members if r not in there)
    whole: list[Place_] = []
    full: set[Place_] = set()  # every member waits in it
    scored: dict[Place_, tuple[int, int]] = {}
    for place, waiting in at.items():
        g = groups.get(place[0])
        members = set((g.members or {}) if g is not None else {})
        if g is None or not g.size or len(members) != g.size or members - waiting:
            continue
        full.add(place)
        # a member already waiting in another collective when its work here began is stuck
        # there first (each rank enqueues in program order; its oldest pending one is where
        # it stopped): this one waits behind that
        here = began.get(place, {})
        if any(
            _before(other, w, True)
            or (pair := (_call(q, groups), _call(place, groups))) in ordered
            or pair in peer_order(q)
            for r, w in here.items()
            for q, other in of_rank[r]
            if q != place
        ):
            continue
        whole.append(place)
        behind = sum(absent[r] for r in waiting)
        if behind:
            scored[place] = (behind, len(waiting))
    # when each began: its earliest member's start, known only when every member's is
    start = {
        p: min(began[p].values(), key=_start) for p in at if began.get(p) and set(began[p]) >= at[p]
    }
    if not scored:
        if len(start) != len(at) or not whole:
            return None, []
        first = min(whole, key=lambda p: (_start(start[p]), _place_key(p)))
        # a wait the logs show began before it: no whole group is first; a whole group
        # could not stop the job before its last member began it
        opened = {
            p: max(began[p].values(), key=_start) if p in full else w for p, w in start.items()
        }
        if any(_before(opened[p], start[first], False) for p in start):
            return None, []
        # whole groups whose work began too close to it for the clocks to order them
        rivals = [p for p in whole if p != first and not _before(start[first], start[p], False)]
        return first, sorted(rivals, key=_place_key)
    best = max(scored.values())
    tied = sorted((p for p, v in scored.items() if v == best), key=_place_key)
    if len(tied) > 1 and all(p in start for p in tied):
        first = min(tied, key=lambda p: (_start(start[p]), _place_key(p)))
        if all(_before(start[first], start[p], False) for p in tied if p != first):
            return first, []
    return tied[0], tied[1:]


Call_ = tuple[str, int | None]  # one call of the program: its group's description, seq


def _call(place: Place_, groups: dict[str, _Group]) -> Call_:
    """What sibling groups share: a DeviceMesh dimension's groups run one program on their
    shards, so their seq-th collectives are one call of it (a group without a description
    stands for itself)."""
    g = groups.get(place[0])
    return (g.desc if g is not None and g.desc else f"pg {place[0]}", place[1])


def _program_order(
    of_rank: dict[int, list[tuple[Place_, Wait]]], groups: dict[str, _Group]
) -> set[tuple[Call_, Call_]]:
    """The orders of two calls of the program (timed-out works) that some rank shows surely
    (`_before`) and none shows the other way round: every rank runs one program, so a rank
    with both pending began them in that order too, though its clocks are too close to
    tell. An order two ranks show differently (an order cycle) is taken from neither."""
    shown: set[tuple[Call_, Call_]] = set()
    for waits in of_rank.values():
        for p, w in waits:
            for q, v in waits:
                if p != q and _before(w, v, True):
                    shown.add((_call(p, groups), _call(q, groups)))
    return {(a, b) for a, b in shown if (b, a) not in shown}


def _order_differs(
    ev: Evidence,
    at: dict[Place_, set[int]],
    groups: dict[str, _Group],
    steps: dict[str, int],
    began: dict[Place_, dict[int, Wait]],
    failed: bool = False,
    absentees: Iterable[set[int]] = (),
) -> Finding | None:
    """A few ranks called the default group's collective before their mesh group's, while
    most called their mesh group's first: their order differs, and each side waits for the
    other (a deadlock no member's absence explains). Every rank is in the default group and
    in one group of each mesh dimension, and runs one program, so the order of the two is
    the same on every rank but the culprits'. A rank's order: which of its waits began
    first (NCCL's `ran for` and the line's clock, `_before`), told only where both are
    pending: a rank seen in one alone may have finished the other, not called it yet, or not
    logged it; one whose two began too close for the clock is not counted.

    The culprits are either a side three times outnumbered by the other (asked only where
    no rank `failed` by itself and no mesh collective with `absentees` lacks a rank whose
    order differs: collectives issued from other threads, DDP's and FSDP's backward hooks,
    may reach NCCL in another order on some ranks without harm), or the ranks that called
    the default group's first while their own mesh group's peers wait in that mesh
    collective and none of them called the default group's: the peers wait for them there,
    and they wait for the peers in the default group, the absentees it shows (`_cut_off`).
    Where too few show either order, both sides are named (undecidable)."""
    defaults = [p for p in at if groups.get(p[0], _Group("")).desc == "default_pg"]
    if len(defaults) != 1:
        return None
    a = defaults[0]
    there = at[a]
    by_desc: dict[str, list[Place_]] = defaultdict(list)
    for p in at:
        g = groups.get(p[0])
        if g is not None and g.desc.startswith("mesh_"):
            by_desc[g.desc].append(p)
    # of the mesh dimensions whose order differs, the one whose peers most wait on the culprits
    best: tuple[int, Finding] | None = None
    for desc, places in sorted(by_desc.items()):
        # each rank's waits in a group of this kind
        mesh = _by_rank({p: began.get(p, {}) for p in places})
        pending = {r for p in places for r in at[p]}
        early: list[int] = []  # called the default group's first
        late: list[int] = []
        for r in sorted(there & pending):
            start = began.get(a, {}).get(r)
            if start is None or r not in mesh:
                return None  # no clock to order them: nothing is said
            if all(_before(start, w, True) for _p, w in mesh[r]):
                early.append(r)
            elif any(_before(w, start, True) for _p, w in mesh[r]):
                late.append(r)
        # a rank at the default group's collective that never entered a mesh collective its
        # peers wait in (none of them at the default group's) called the default group's
        # first, or skipped the mesh one: its order differs as much as a rank's seen in both
        members = {
            p: all_members(groups[p[0]].members or {}, groups[p[0]].size, steps.get(desc)) | at[p]
            for p in places
        }
        skipped = sorted(
            r
            for r in there - pending
            if any(r in members[p] and at[p] and not at[p] & there for p in places)
        )
        crossed = _crossed(early + skipped, places, at, there, members)
        # absentees explain a mesh collective's wait the order does not, unless a member
        # crossed is absent from it: its order is why (the silent others may only have been
        # torn down before their watchdogs fired)
        explained = failed or any(not gone & set(crossed) for gone in absentees)
        cut = _cut_off(crossed, places, at, there)
        either: list[int] = []
        if cut:  # the others went to the mesh collective first: they passed it, or wait there
            early, late = cut, sorted((there | pending) - set(cut))
        elif crossed and not explained:
            # each side waits for the other, and too few show either order to say whose
            # differs: the ranks of both sides are named
            either = sorted(
                {*crossed, *(r for p in places if set(crossed) & members[p] for r in at[p] - there)}
            )
            early, late = either, []
        elif explained or not (early and len(early) * 3 <= len(late)):
            continue
        # a clear majority keeps the other order, or the early ranks' peers are cut off
        other = min(
            (p for p in places if members[p] & set(early)),
            key=lambda p: min((_start(w) for w in began.get(p, {}).values()), default=0.0),
            default=None,
        )
        facts: dict[str, Any] = {
            "source": "logs",
            "decided_by": "nccl_groups",
            "same_order": len(late),
            "default_first": [r for r in either if r in crossed],
            "other": {"pg": other[0], "seq": other[1], "desc": desc} if other else {"desc": desc},
        }
        g = groups[a[0]]
        op = next((w.op for r in early for w in ev.ranks[r].waits if w.pg_name == a[0]), "")
        found = _group_finding(
            Kind.ORDER_CYCLE,
            Reason.ORDER_DIFFERS,
            g,
            a[1],
            op,
            early,
            sorted(there - set(early)),
            dict(g.members or {}),
            facts,
            undecidable=bool(either),
        )
        held = len({q for p in places if members[p] & set(early) for q in at[p]} - set(early))
        if best is None or held > best[0]:
            best = (held, found)
    return best[1] if best is not None else None


INFERRED_MEMBERS = 64  # the most members of one group whose global rank is derived, not shown


def all_members(members: dict[int, int], size: int | None, step: int | None) -> set[int]:
    """A group's global ranks: those the logs show (global -> group rank), and those its
    size leaves to derive (`member_global`: where a member that never logs in it is); none
    derived where more than INFERRED_MEMBERS are unshown (a size read from untrusted lines)."""
    shown = set(members.values())
    out = set(members)
    missing = (i for i in range(size or 0) if i not in shown)
    unknown = list(itertools.islice(missing, INFERRED_MEMBERS + 1))
    if members and len(unknown) <= INFERRED_MEMBERS:
        out.update(r for r in members_global(members, unknown, step).values() if r is not None)
    return out


def _siblings_size(sizes: dict[str, list[int]], name: str) -> tuple[int, list[str]] | None:
    """The one size the members of the groups other than `name` (of one description, at
    one seq) waited with, and those groups; None where fewer than two such members logged
    it, or they differ: a DeviceMesh dimension's groups run one program on their shards, so
    their collectives agree."""
    others = {n: v for n, v in sizes.items() if n != name and v}
    values = {v for sizes_of in others.values() for v in sizes_of}
    if sum(len(v) for v in others.values()) < 2 or len(values) != 1:
        return None
    return values.pop(), sorted(others, key=lambda n: (len(n), n))  # pg 2 before pg 10


def _world_size(groups: dict[str, _Group]) -> int:
    """The default group's size: the world's, as `_groups` found it (0 where untold)."""
    return max((g.size or 0 for g in groups.values() if g.desc == "default_pg"), default=0)


def _layout_members(g: _Group, world: int) -> set[int]:
    """The global ranks a DeviceMesh group's members the logs never show could be, for
    every step and size its shown members fit (`_layout_fits`: init_device_mesh lays the
    mesh over the world's ranks in order, `torch.arange(world).view(mesh_shape)`,
    torch/distributed/device_mesh.py). Empty past INFERRED_MEMBERS."""
    members = g.members or {}
    if not g.desc.startswith("mesh_") or not members or world <= 1:
        return set()
    if not g.size or g.size > INFERRED_MEMBERS:
        return set()
    r0, g0 = min(members.items(), key=lambda kv: kv[1])
    unshown = [i for i in range(g.size) if i not in set(members.values())]
    fits = _layout_fits(members.items(), world, g.size, g.size if g.stated else None)
    out = {r0 + (i - g0) * step for step, _n in fits for i in unshown}
    return {r for r in out if 0 <= r < world and r not in members}


def _crossed(
    early: list[int],
    places: list[Place_],
    at: dict[Place_, set[int]],
    there: set[int],
    members: dict[Place_, set[int]],
) -> list[int]:
    """The ranks of `early` (they began the default group's collective, pending at `there`,
    before their mesh group's, or never entered their mesh group's) whose mesh peers wait in
    that mesh collective (`members`: each place's group) and none of whom is at `there`:
    each side waits for the other."""
    return sorted(
        r
        for r in early
        if any((peers := at[p] - {r}) and not peers & there for p in places if r in members[p])
    )


def _cut_off(
    cut: list[int], places: list[Place_], at: dict[Place_, set[int]], there: set[int]
) -> list[int]:
    """The ranks `_crossed` found, where they are the side whose order differs: asked where
    every rank at `there` is one, or they are outnumbered three to one by the others there;
    and where the ranks pending in a mesh collective of this kind and not at `there` (the
    usual order: the mesh group's first) outnumber them three to one: one rank's order
    against one other's says nothing."""
    rest = len(there) - len(cut)
    usual = {r for p in places for r in at[p]} - there
    if not cut or len(cut) * 3 > len(usual):
        return []
    return cut if rest == 0 or len(cut) * 3 <= rest else []


def _place_key(place: Place_) -> tuple[int, str, int]:
    """A place's order without the inputs' order: groups by their number, then seq."""
    name, seq = place
    return (int(name) if name.isdigit() else 1 << 62, name, -1 if seq is None else seq)


def network_facts(ev: Evidence) -> list[dict[str, Any]]:
    """NCCL's WARNs that name a peer (`NET/IB: Got completion from peer 10.2.0.5<33092> with
    error 12`), with the peer's host where NCCL's bootstrap lines tie its address to one."""
    out: list[dict[str, Any]] = []
    for rev in ev.ranks.values():
        for w in rev.warnings:
            if w.peer and len(out) < 8:
                out.append(
                    {"host": w.host, "peer": w.peer, "peer_host": ev.addresses.get(w.peer, "")}
                )
    return out


def _stuck_at(
    ev: Evidence,
    g: _Group,
    seq: int | None,
    at: dict[Place_, set[int]],
    waits: dict[Place_, dict[int, Wait]],
) -> Finding:
    """Every member of a group waits in one collective: undecidable from the logs."""
    here = waits[(g.name, seq)]
    facts: dict[str, Any] = {"source": "logs", "decided_by": "nccl_groups"}
    if network := network_facts(ev):
        facts["network"] = network
    facts.update(_wait_facts(list(here.values())))
    if g.size:
        facts["group_size"] = g.size
    ranks = sorted(at[(g.name, seq)])
    op = next(iter(here.values())).op
    return _group_finding(
        Kind.STUCK_COLLECTIVE,
        Reason.ALL_WAITING,
        g,
        seq,
        op,
        ranks,
        ranks,
        dict(g.members or {}),
        facts,
        undecidable=True,
    )


def _unshown(
    ev: Evidence, g: _Group, waiting_anywhere: set[int], siblings: set[int], mesh_step: int | None
) -> tuple[dict[int, int | None], set[int]]:
    """A group's members the logs never show, by group rank: the global rank where the shown
    members leave one (`members_global`, or the one rank their order leaves: not waiting,
    in no sibling group of the same description), else None; and the ranks that could be
    the unresolved ones, where none of them waits anywhere (and, where no line states the
    size, every silent rank above the highest shown member). Past UNSEEN_NAMED unshown
    members (a size from untrusted lines, or a world mostly unseen) none is resolved."""
    members = dict(g.members or {})
    shown = set(members.values())
    missing = (i for i in range(g.size or 0) if i not in shown)
    unknown = list(itertools.islice(missing, UNSEEN_NAMED + 1))
    if len(unknown) > UNSEEN_NAMED:
        return dict.fromkeys(unknown[:UNSEEN_NAMED]), set()
    derived = members_global(members, unknown, mesh_step)
    candidates: set[int] = set()
    top = max(ev.ranks, default=-1)
    by_group = sorted((g, r) for r, g in members.items())
    for i, rank in derived.items():
        if rank is not None:
            continue
        lowest, highest = member_range(members, i, top, by_group)
        fits = [
            r for r in ev.ranks if lowest <= r <= highest and r not in members and r not in siblings
        ]
        if len(fits) == 1:
            derived[i] = fits[0]
        elif fits and not any(r in waiting_anywhere for r in fits):
            candidates.update(fits)
    if candidates and not g.stated:
        # a size no line states is only the least the members show: members above the
        # highest shown may be there too, any silent rank above it
        above = max(members, default=-1)
        candidates.update(
            r
            for r in ev.ranks
            if r > above and r not in members and r not in siblings and r not in waiting_anywhere
        )
    return derived, candidates


def _group_place(
    ev: Evidence,
    states: dict[int, RankState],
    g: _Group,
    seq: int | None,
    at: dict[int, Wait],
    waiting_anywhere: set[int],
    unshown: tuple[dict[int, int | None], set[int]],
    usual: tuple[int, list[str]] | None = None,
) -> Finding | None:
    """The finding at one timed-out (group, seq) where ranks `at` waited, or None when its
    members are all there and agree (then it is a consequence or stuck, decided elsewhere).
    A member the logs never show is as `unshown` resolves it (`_unshown`). Members split
    evenly on the size are told apart by `usual`: the one size the sibling groups (same
    description, same seq) waited with, and those groups."""
    members = dict(g.members or {})
    waiting = sorted(at)
    wait = at[waiting[0]]
    numels = {r: w.numel for r, w in at.items() if w.numel}
    sizes = set(numels.values())
    facts: dict[str, Any] = {"source": "logs", "decided_by": "nccl_groups"}
    facts.update(_wait_facts(list(at.values())))
    if len(sizes) > 1:  # the members disagree on the size
        counts = Counter(numels.values())
        common, n = counts.most_common(1)[0]
        reason = Reason.MINORITY_DIFFERS
        # NCCL's `NumelIn` (WorkNCCL's `<<`), the way the dumps' findings word a column
        facts.update(column="input_numel", by_rank={str(r): v for r, v in numels.items()})
        if n * 2 > len(numels):
            culprits = sorted(r for r, v in numels.items() if v != common)
            undecidable = False
            theirs = numels[culprits[0]]
            facts.update(majority_size=n, theirs=theirs, ours=common)
        elif usual is not None and usual[0] in numels.values():
            culprits = sorted(r for r, v in numels.items() if v != usual[0])
            undecidable, reason = False, Reason.SIBLINGS_DIFFER
            facts.update(decided_by="siblings", siblings=usual[1], sibling_call=usual[0])
        else:
            culprits, undecidable = sorted(numels), True
            reason = Reason.EVEN_SPLIT
        facts["numel"] = {str(r): v for r, v in sorted(numels.items())}
        return _group_finding(
            Kind.SIZE_MISMATCH,
            reason,
            g,
            seq,
            wait.op,
            culprits,
            [r for r in waiting if r not in culprits],
            members,
            facts,
            undecidable,
        )
    absent = [r for r in members if r not in waiting]
    blocked = [r for r in absent if r in waiting_anywhere]
    stopped = [r for r in absent if r not in waiting_anywhere]
    derived, candidates = unshown
    for rank in derived.values():
        if rank is not None and rank not in members:
            if rank in waiting_anywhere:
                blocked.append(rank)
            else:
                stopped.append(rank)
    hidden = sorted(i for i, rank in derived.items() if rank is None)
    if candidates and not stopped:
        facts["candidates"] = sorted(candidates)
        stopped = sorted(candidates)
    if not stopped and not hidden:
        return None
    if usual is not None and len(numels) == len(at) and len(sizes) == 1 and usual[0] not in sizes:
        # the members that waited agree on a size no sibling group waited with (a mesh
        # dimension's groups run one program), and the others logged nothing: theirs is the
        # odd call, whether the silent ones wait inside it with the usual size or not
        facts.update(column="input_numel", by_rank={str(r): v for r, v in sorted(numels.items())})
        facts.update(decided_by="siblings", siblings=usual[1], sibling_call=usual[0])
        facts.update(silent=sorted(set(stopped)), unknown_members=hidden)
        return _group_finding(
            Kind.SIZE_MISMATCH, Reason.SIBLINGS_DIFFER, g, seq, wait.op, waiting, [], members,
            facts, undecidable=False,
        )  # fmt: skip
    if blocked:
        facts["elsewhere"] = {str(r): _op(states[r]) for r in sorted(blocked) if r in states}
    if hidden:
        facts["unknown_members"] = hidden
    culprits = sorted(set(stopped))
    facts["culprits"] = {
        str(r): _culprit_facts(ev.ranks[r], states[r]) if r in ev.ranks else {"state": SILENT}
        for r in culprits
    }
    if g.size:
        facts["group_size"] = g.size
    return _group_finding(
        Kind.MISSING_RANKS,
        Reason.NEVER_JOINED,
        g,
        seq,
        wait.op,
        culprits,
        waiting,
        {**members, **{r: i for i, r in derived.items() if r is not None}},
        facts,
        undecidable=not culprits,
    )


def _group_finding(
    kind: Kind,
    reason: Reason,
    g: _Group,
    seq: int | None,
    op: str,
    culprits: list[int],
    waiting: list[int],
    members: dict[int, int],
    facts: dict[str, Any],
    undecidable: bool,
) -> Finding:
    return Finding(
        kind=kind,
        pg_name=g.name,
        pg_desc=g.desc,
        collective_seq_id=seq,
        p2p_seq_id=None,
        op=op or None,
        culprit_ranks=culprits,
        waiting_ranks=waiting,
        expected_ranks=sorted(set(members) | set(waiting) | set(culprits)),
        reason=reason,
        facts=facts,
        issued_by=waiting if kind == Kind.MISSING_RANKS else [],
        not_issued_by=culprits if kind == Kind.MISSING_RANKS else [],
        undecidable=undecidable,
    )


# --- 3. each rank's and process's state ----------------------------------------------------


def state_findings(ev: Evidence) -> list[Finding]:
    """The finding the ranks' and untied processes' states support."""
    states, main = rank_states(ev)
    procs = process_states(ev, main)
    world = sorted(states)
    waiting = [r for r, s in states.items() if s.state == WAITING]
    elsewhere = [r for r, s in states.items() if s.state == ELSEWHERE]
    anyone_waits = bool(waiting) or any(p.state == WAITING for p in procs)
    if not anyone_waits:  # a live stack outside collectives is no fault while none waits
        states = {r: RankState(r, SILENT) if s.state == STUCK else s for r, s in states.items()}
        procs = [p for p in procs if p.state != STUCK]
    culprits, failed = _culprits(states, elsewhere, anyone_waits)
    torn = _torn_down(ev, states, culprits) if not failed else None
    if torn is not None:  # alive after the peer died: not the peer that died
        culprits = [r for r in culprits if r not in torn]
    stuck = [p for p in procs if p.state == STUCK]
    away = False  # the culprits are untied processes waiting in another collective
    if not failed and stuck:  # a live stack outside collectives, its rank untold
        culprits, failed = [], True
    elif not culprits and not stuck:
        stuck = [p for p in procs if p.state == ELSEWHERE] if anyone_waits else []
        away = bool(stuck)
    else:
        stuck = []
    crashed = any(_state(states, r) == CRASHED for r in culprits)
    if main is None and not failed and not stuck and not crashed:
        return []  # nobody waited, nobody failed by itself
    facts: dict[str, Any] = {"source": "logs"}
    # blamed only for not being seen in the collective: a rank no input shows is no less absent
    absent_only = bool(culprits) and not failed and culprits != elsewhere
    if absent_only and (unseen := _unseen(ev)):
        facts["unseen"] = unseen
        culprits = sorted({*culprits, *unseen})
    facts.update(_wait_facts([w for r in waiting if (w := states[r].wait) is not None]))
    pg_name = main.pg_name if main is not None else ""
    pg_desc = main.pg_desc if main is not None else ""
    seq = main.seq if main is not None else None
    op = (main.op or None) if main is not None else None
    waiting_procs = [p for p in procs if p.state == WAITING]
    if waiting_procs:
        facts["waiting_processes"] = [
            {"host": p.proc.host, "pid": p.proc.pid} for p in waiting_procs
        ]

    def finding(kind: Kind, reason: Reason, blamed: list[int], undecidable: bool) -> Finding:
        return Finding(
            kind=kind,
            pg_name=pg_name,
            pg_desc=pg_desc,
            collective_seq_id=seq,
            p2p_seq_id=None,
            op=op,
            culprit_ranks=blamed,
            waiting_ranks=waiting,
            expected_ranks=world,
            reason=reason,
            facts=facts,
            issued_by=waiting if kind == Kind.MISSING_RANKS else [],
            not_issued_by=blamed if kind == Kind.MISSING_RANKS else [],
            undecidable=undecidable,
            culprit_processes=[
                ProcessRef(p.proc.host, p.proc.pid, (p.proc.where.file, p.proc.where.line))
                for p in stuck
            ],
        )

    if torn is not None and not culprits and not stuck:  # the rank that died is in no input
        facts["torn_down"] = torn
        unseen = _unseen(ev)
        if unseen:  # it is one of the ranks the world has that no input shows
            facts["unseen"] = unseen
        if ev.world_size is None and ev.ranks:  # or one past the highest seen, if any
            facts["unseen_above"] = max(ev.ranks)
        return [finding(Kind.MISSING_RANKS, Reason.NEVER_JOINED, unseen, True)]
    if not culprits and not stuck:  # every rank seen waits in it
        unseen = _unseen(ev)
        if unseen:  # the rank they wait for may be one no input shows (its node's log lost)
            facts["unseen"] = unseen
            found = finding(Kind.MISSING_RANKS, Reason.NEVER_JOINED, unseen, True)
            if ev.agent_workers and len(ev.agent_workers) == len(unseen):
                # their processes, as their agents name them (which is which: untold)
                found.culprit_processes = [ProcessRef(h, p) for h, p in ev.agent_workers]
            return [found]
        return [finding(Kind.STUCK_COLLECTIVE, Reason.ALL_WAITING, waiting, True)]
    # an untied process that can be no seen rank is one rank more on its side
    elsewhere_procs = [p for p in procs if p.state == ELSEWHERE]
    others_waiting = _other_processes(ev, waiting_procs)
    others_elsewhere = _other_processes(ev, elsewhere_procs)
    split = (
        culprits == elsewhere
        and not failed
        and not stuck
        and len(elsewhere) + others_elsewhere >= len(waiting) + others_waiting
    )
    if split:  # as many wait in another collective as in this one: which side skipped or
        # added a call is unknown, and both are named
        facts["split"] = {str(r): _op(states[r]) for r in sorted(set(elsewhere) | set(waiting))}
        culprits = sorted(set(elsewhere) | set(waiting))
        # the untied processes counted on a side are as much its members
        stuck = (waiting_procs if others_waiting else []) + (
            elsewhere_procs if others_elsewhere else []
        )
        if stuck:
            facts["split_processes"] = [_process_facts(p) for p in stuck]
    elif away and len(stuck) >= len(waiting) + len(waiting_procs):  # the same, by live stacks
        split = True
        facts["split"] = {str(r): _op(states[r]) for r in waiting}
        facts["split_processes"] = [_process_facts(p) for p in stuck + waiting_procs]
        culprits, stuck = sorted(waiting), stuck + waiting_procs
    facts["culprits"] = {
        str(r): _culprit_facts(ev.ranks[r], states[r]) for r in culprits if r in ev.ranks
    }
    if stuck:
        facts["processes"] = [_process_facts(p) for p in stuck]
    if elsewhere and culprits != elsewhere and not split:
        facts["elsewhere"] = {str(r): _op(states[r]) for r in elsewhere}
        if not failed:  # named beside the silent: so are the waiting, where they may be wrong
            facts["or_sides"] = [r for r in waiting if r in culprits]
    if not failed and (victims := [r for r in culprits if _state(states, r) == CRASHED]):
        facts["or_victims"] = victims  # an error exit may be a victim's, of a silent rank
    undecidable = split or (len(culprits) + len(stuck) > 1 and not failed)
    return [finding(Kind.MISSING_RANKS, Reason.NEVER_JOINED, culprits, undecidable)]


def _wrote(ev: Evidence, rank: int) -> bool:
    """Whether any input holds a line the rank wrote itself (a group's init line, a wait, an
    error, a stack, a line of its own): a summary entry about it is its agent's."""
    rev = ev.ranks.get(rank)
    if rev is None:
        return False
    return bool(rev.last_lines or rev.waits or rev.groups or rev.raised or rev.entered) or (
        rev.stack is not None
    )


def _state(states: dict[int, RankState], rank: int) -> str | None:
    return states[rank].state if rank in states else None


def _other_processes(ev: Evidence, procs: list[ProcessState]) -> int:
    """How many of the untied processes `procs` are no rank the inputs show: on each host,
    those beyond its seen ranks that have no stack of their own (`untied_on_hosts`: one
    process is one rank, and a seen rank without a stack may be any of its host's untied
    processes)."""
    if any(r.stack is None and not r.host for r in ev.ranks.values()):
        return 0  # a stackless rank whose host is untold may be any of them
    _procs, free_on = untied_on_hosts(ev)
    on_host = Counter(short_host(p.proc.host) for p in procs)
    return sum(max(0, n - len(free_on.get(host, []))) for host, n in on_host.items())


UNSEEN_NAMED = 4096  # the most ranks no input shows that a finding lists as candidates


def _world_of(ev: Evidence) -> int:
    """The world's size: as stated or, untold, up to the highest rank seen (global ranks run
    from 0 without a gap, so those below it exist), and at least the ranks seen and the
    workers their agents name that are none of them."""
    if ev.world_size is not None:
        return ev.world_size
    return max(max(ev.ranks, default=-1) + 1, len(ev.ranks) + len(ev.agent_workers))


def _unseen(ev: Evidence) -> list[int]:
    """The ranks no input shows that the world certainly has: every one below its stated
    size or, the size untold, below the highest rank seen (ranks run from 0 without a gap);
    [] where more than UNSEEN_NAMED are unseen: a list that long helps nobody."""
    world = _world_of(ev)
    if not 0 < world - len(ev.ranks) <= UNSEEN_NAMED:
        return []
    return [r for r in range(world) if r not in ev.ranks]


def _culprits(
    states: dict[int, RankState], elsewhere: list[int], anyone_waits: bool
) -> tuple[list[int], bool]:
    """The ranks to blame, and whether they failed by themselves: the absent ranks with
    evidence of their own failure whose cause is shown; else those whose only evidence is an
    error exit, named with the silent ones beside them (a victim exits so too); else, while
    others wait, every absent rank (torn down or never joined), with the ranks waiting in
    another collective (and the waiting, where theirs may be the smaller side); else the
    ranks waiting in another collective."""
    absent = [r for r, s in states.items() if s.state not in (WAITING, ELSEWHERE)]
    shown = [r for r in absent if states[r].state in SHOWN_FAILED]
    if shown:
        return shown, True
    crashed = [r for r in absent if states[r].state == CRASHED]
    silent = [r for r in absent if states[r].state == SILENT]
    if crashed and silent:  # the error exits may be victims' of a silent rank: both named
        return sorted(crashed + silent), False
    if crashed:
        return crashed, True
    if absent and anyone_waits and elsewhere:
        # ranks seen in another collective are as unexplained as the silent ones (one side
        # skipped or added a call, or the silent hold both): all named, and the waiting too
        # where the silent could make theirs the smaller side
        waiting = [r for r, s in states.items() if s.state == WAITING]
        side = waiting if len(elsewhere) + len(absent) >= len(waiting) else []
        return sorted([*absent, *elsewhere, *side]), False
    if absent and anyone_waits:
        return absent, False
    return elsewhere, False


def _torn_down(ev: Evidence, states: dict[int, RankState], silent: list[int]) -> list[int] | None:
    """When every waiting rank's wait ended with a peer's connection closing (gloo: that
    peer's process ended), the silent ranks that were alive after it: a rank torchrun's
    agent ended afterwards with its closing SIGTERM was not that peer. None when the waits
    did not all lose a peer. The agent's closing signal shows in its summary, or in its
    `Sending process <pid> closing signal SIGTERM` line where the pid is the rank's."""
    waits = [s.wait for s in states.values() if s.state == WAITING and s.wait is not None]
    if not waits or any(w.how != PEER_LOST for w in waits):
        return None
    out = []
    for r in silent:
        rev = ev.ranks.get(r)
        exited = rev.exit if rev is not None else None
        closed = rev is not None and rev.closed in TEARDOWN_SIGNALS
        if closed or (exited is not None and exited.signal in TEARDOWN_SIGNALS):
            out.append(r)
    return out


def _wait_facts(waits: list[Wait]) -> dict[str, Any]:
    """How the waiting ranks' waits ended (the most common way) and the longest timeout
    they name; nothing when no waiting rank left a wait in the logs."""
    if not waits:
        return {}
    facts: dict[str, Any] = {"how": Counter(w.how for w in waits).most_common(1)[0][0]}
    timeouts = [w.timeout_ms for w in waits if w.timeout_ms]
    if timeouts:
        facts["timeout_ms"] = max(timeouts)
    return facts


def _op(state: RankState) -> str:
    return state.place.op if state.place is not None else ""


# --- how the job ended -----------------------------------------------------------------------


@dataclass(frozen=True)
class EndingGap:
    """Why logs without dumps cannot show a job healthy: the nodes whose torchrun agent
    logged that all its workers finished, how many nodes the job has (its agents' rosters),
    and slurm's cancels."""

    nodes_done: tuple[str, ...]
    nodes: int | None
    cancelled: tuple[str, ...]  # slurm's words, `CANCELLED AT ...` / `DUE TO TIME LIMIT`


def ending_gap(ev: Evidence) -> EndingGap | None:
    """None when the logs show every node's workers finished (torchrun's agent logs `[<role>]
    worker group successfully finished` once its workers all exited 0, torch/distributed/
    elastic/agent/server/api.py, SimpleElasticAgent._invoke_run, and its roster says how
    many nodes the job has); else what is missing. Nothing else proves a job ended cleanly:
    a log that stops, or ranks that printed `done`, do not."""
    end = ev.ending
    ended = {"time_limit": "the time limit ended", "node_failure": "a node failure ended"}
    cancelled = tuple(
        f"{ended.get(e.event, 'slurm cancelled')} the job" + (f" on {e.node}" if e.node else "")
        for e in end.cancelled
    ) + tuple(
        f"torchrun's agents were sent {sig} (a cancel or a time limit) and ended the workers"
        for sig in end.signalled
    )
    done = end.succeeded_nodes
    if not cancelled and end.nodes and len(set(done)) >= end.nodes and not end.failed_nodes:
        return None
    return EndingGap(tuple(done), end.nodes, cancelled)
