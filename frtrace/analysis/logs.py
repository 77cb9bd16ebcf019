"""What the logs and stacks conclude when there is no dump: who waited where, who never came.

Each rank is given one state from its evidence (frtrace.evidence): waiting in the collective
most ranks waited in (a timeout, a lost peer, a live stack inside it), waiting in another
one, or absent from it and why: it raised an exception of its own, a signal killed it, it
exited with an error, its live stack is outside collectives, or the logs say nothing of it
(it never joined, and was torn down afterwards). The ranks absent from the collective the
others waited in are the culprits, as a dump would name them (`missing_ranks`); when several
are absent, those with evidence of their own failure are named before those that only
went silent (torn down by the agent after the failure), and ranks waiting elsewhere are
named only when no rank is absent. Every rank the inputs name waiting in one collective is
undecidable (`stuck_collective`, reason `all_waiting`): the rank they wait for may be in
logs that were not given, or the hang is inside the collective. Nothing waiting and nothing
failed: healthy, no finding.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from frtrace.analysis.findings import Finding, Kind, Reason
from frtrace.evidence.gather import in_collective
from frtrace.evidence.records import PEER_LOST, TIMEOUT, Evidence, RankEvidence, Wait

WAITING = "waiting"  # in the collective most ranks waited in
ELSEWHERE = "elsewhere"  # waiting in another collective
RAISED = "raised"  # a Python exception of its own
KILLED = "killed"  # a signal ended it (not the agent's SIGTERM after a failure)
CRASHED = "crashed"  # a nonzero exit code, no traceback, no signal
STUCK = "stuck"  # its live stack is outside collectives
SILENT = "silent"  # nothing: no error, no stack, not waiting (never joined)

FAILED = (RAISED, KILLED, CRASHED, STUCK)  # evidence of its own trouble
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
    main = _main_place([p for p, _w in places.values()])
    states: dict[int, RankState] = {}
    for rank, rev in sorted(ev.ranks.items()):
        if rank in places:
            place, wait = places[rank]
            same = main is not None and _same(place, main)
            states[rank] = RankState(rank, WAITING if same else ELSEWHERE, place, wait)
            continue
        states[rank] = RankState(rank, _own_failure(rev) or SILENT)
    return states, main


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
        out["function"] = rev.stack.main.python_frames[0].text()
    if state.place is not None:
        out["op"] = state.place.op
    return out


def log_findings(ev: Evidence) -> list[Finding]:
    """The finding the logs and stacks support (at most one), none for a healthy job."""
    states, main = rank_states(ev)
    world = sorted(states)
    waiting = [r for r, s in states.items() if s.state == WAITING]
    elsewhere = [r for r, s in states.items() if s.state == ELSEWHERE]
    culprits, failed = _culprits(states, elsewhere)
    if main is None and not failed:
        return []  # nobody waited, nobody failed by itself
    facts: dict[str, Any] = {"source": "logs"}
    facts.update(_wait_facts([w for r in waiting if (w := states[r].wait) is not None]))
    pg_name = main.pg_name if main is not None else ""
    pg_desc = main.pg_desc if main is not None else ""
    seq = main.seq if main is not None else None
    op = (main.op or None) if main is not None else None
    if not culprits:  # every rank waits in it: the hang is inside the collective
        return [
            Finding(
                kind=Kind.STUCK_COLLECTIVE,
                pg_name=pg_name,
                pg_desc=pg_desc,
                collective_seq_id=seq,
                p2p_seq_id=None,
                op=op,
                culprit_ranks=waiting,
                waiting_ranks=waiting,
                expected_ranks=world,
                reason=Reason.ALL_WAITING,
                facts=facts,
                undecidable=True,
            )
        ]
    facts["culprits"] = {str(r): _culprit_facts(ev.ranks[r], states[r]) for r in culprits}
    if elsewhere and culprits != elsewhere:
        facts["elsewhere"] = {str(r): _op(states[r]) for r in elsewhere}
    return [
        Finding(
            kind=Kind.MISSING_RANKS,
            pg_name=pg_name,
            pg_desc=pg_desc,
            collective_seq_id=seq,
            p2p_seq_id=None,
            op=op,
            culprit_ranks=culprits,
            waiting_ranks=waiting,
            expected_ranks=world,
            reason=Reason.NEVER_JOINED,
            facts=facts,
            issued_by=waiting,
            not_issued_by=culprits,
            undecidable=len(culprits) > 1 and not failed,
        )
    ]


def _culprits(states: dict[int, RankState], elsewhere: list[int]) -> tuple[list[int], bool]:
    """The ranks to blame, and whether they failed by themselves: the absent ranks with
    evidence of their own failure; else, while others wait, every absent rank (torn down
    or never joined); else the ranks waiting in another collective."""
    absent = [r for r, s in states.items() if s.state not in (WAITING, ELSEWHERE)]
    failed = [r for r in absent if states[r].state in FAILED]
    if failed:
        return failed, True
    if absent and any(s.state == WAITING for s in states.values()):
        return absent, False
    return elsewhere, False


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
