"""Sentences for people: what a finding means and how its wait chain reads.

Analysis produces typed facts (`frtrace.analysis.findings`); every word a user reads about
them is chosen here, so the text, JSON and HTML reports say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable

from frtrace.analysis.findings import Finding, Hop, Note, Place
from frtrace.loading.memory import Shortfall
from frtrace.report.fmt import process_text, rank_ranges, verb, who

UNKNOWN_GROUP = "group not in logs"  # what the logs of a gloo job never name


def where(place: Place) -> str:
    """`mesh_tp#73 (pg 3)`, `mesh_pp p2p#4 (pg 9)`, `mesh_pp (pg 9) p2p 0->4`."""
    label = place.pg_desc or (f"pg {place.pg_name}" if place.pg_name else UNKNOWN_GROUP)
    if place.p2p and place.src >= 0:
        return f"{label}{_pg(place)} p2p {place.src}->{place.dst}"
    mark = " p2p#" if place.p2p else "#"
    seq = f"{mark}{place.seq}" if place.seq is not None and place.seq >= 0 else ""
    if seq and label == UNKNOWN_GROUP:  # `collective #3 (group not in logs)`
        return f"collective {seq.strip()} ({UNKNOWN_GROUP})"
    return f"{label}{seq}{_pg(place)}"


def _pg(place: Place) -> str:
    return f" (pg {place.pg_name})" if place.pg_desc else ""


def waits_in(ranks: list[int] | tuple[int, ...], place: Place) -> str:
    """'rank 3 waits in mesh_tp#7' / 'ranks 0-2 wait in ...': one hop of a chain."""
    return f"{who(ranks)} {verb(ranks, 'waits', 'wait')} in {where(place)}"


def _at(f: Finding, seq: int | None) -> str:
    return where(Place(f.pg_name, f.pg_desc, seq))


def _the_others(count: int) -> str:
    """'the other member' or 'the other 3 members'."""
    return "the other member" if count == 1 else f"the other {count} members"


def _not_issued(f: Finding) -> str:
    """'rank 5 never issued mesh_tp#11 (pg 3) (all_reduce) that rank 4 issued'."""
    return (
        f"{who(f.culprit_ranks)} never issued {_at(f, f.collective_seq_id)} ({f.op}) that "
        f"{who(f.issued_by)} issued"
    )


def _never_issued(f: Finding) -> str:
    return _not_issued(f) + _idle(f) + _one_stall_read(f)


def _minority_issued(f: Finding) -> str:
    return (
        f"{who(f.issued_by)} issued {_at(f, f.collective_seq_id)} ({f.op}) that "
        f"{_the_others(len(f.not_issued_by))} never issued"
    )


def _extra_call(f: Finding) -> str:
    return (
        f"rank {f.culprit_ranks[0]} issued an extra collective at {_at(f, f.collective_seq_id)}"
        " that the other member never issued (a call site the others skip); from then on its "
        f"collectives pair one off, and {_at(f, f.hang_seq)} has no partner"
    )


def _stopped_early(f: Finding) -> str:
    ranks = f.culprit_ranks
    return (
        f"{_not_issued(f)}; {verb(ranks, 'its own history shows', 'their own histories show')}"
        f" this call always followed {verb(ranks, 'its', 'their')} last one: "
        f"{verb(ranks, 'it', 'they')} stopped before it{_idle(f)}"
    )


def _siblings(f: Finding) -> str:
    """'mesh_tp (pg 3, pg 5)': the sibling groups that decided a tie."""
    names = ", ".join(f"pg {g}" for g in f.facts.get("siblings", []))
    return f"{f.pg_desc or 'groups of this kind'} ({names})"


def _siblings_issued(f: Finding) -> str:
    ranks = f.culprit_ranks
    return (
        f"{_not_issued(f)}; every member of the other {_siblings(f)} issued it too, "
        f"alike: ranks in the same role made this call, {verb(ranks, 'it', 'they')} stopped "
        f"before it{_idle(f)}"
    )


def _siblings_differ(f: Finding) -> str:
    ranks = f.culprit_ranks
    gone = list(f.facts.get("no_dump", []))
    beside = (
        f"; {who(gone)} left no dump, and {verb(gone, 'its', 'their')} end follows from this"
        " (gloo aborts a rank that receives more than its call expects)"
        if gone and not f.waiting_ranks
        else ""
    )
    silent = [int(r) for r in f.facts.get("silent", [])]
    if silent:  # the members that could tell were torn down before they logged
        beside = (
            f"; {who(silent)} of the group logged nothing (inside it with another size, or "
            "never there; from the logs)"
        )
    return (
        f"{where(f.place)}: {who(ranks)} issued {_column_values(f, ranks)}, where the other "
        f"{_siblings(f)} issued {f.facts.get('sibling_call', '-')} at the same seq: "
        f"{verb(ranks, 'its', 'their')} call differs from what ranks in the same role made"
        f"{beside}"
    )


def _column_values(f: Finding, ranks: list[int]) -> str:
    by_rank = f.facts.get("by_rank", {})
    values = sorted({str(by_rank.get(str(r), "-")) for r in ranks})
    return "; ".join(values)


def _gone_in_mismatch(f: Finding) -> str:
    m = f.facts.get("mismatch") or {}
    place = where(Place(str(m.get("pg_name")), str(m.get("pg_desc", "")), m.get("seq")))
    return (
        f"{waits_in(f.waiting_ranks, _blocking_place(f))} for {who(f.culprit_ranks)}, which "
        f"left no dump: {verb(f.culprit_ranks, 'it was a member', 'they were members')} of "
        f"{place}, where the root cause's ranks disagreed (a consequence)"
    )


def _awaited_elsewhere(f: Finding) -> str:
    n = int(f.facts.get("elsewhere", 0))
    places = "another place" if n == 1 else f"{n} other places"
    ranks = f.culprit_ranks
    return (
        f"{_not_issued(f)}; ranks also wait for {verb(ranks, 'it', 'them')} in {places}, which "
        f"an extra call here would not explain: {verb(ranks, 'it', 'they')} stopped{_idle(f)}"
    )


def _not_launched(f: Finding) -> str:
    ranks = f.culprit_ranks
    parts = f.facts.get("parts", {})
    counts = sorted({int(n) for n in parts.values()}) if isinstance(parts, dict) else []
    if str(f.op or "").endswith("coalesced"):
        recorded = f"{counts[0]} of its parts" if len(counts) == 1 else "some of its parts"
        what = (
            f"began {_at(f, f.collective_seq_id)} ({f.op}), a coalescing block that "
            f"{who(f.issued_by)} issued whole, and never ended it: {verb(ranks, 'it', 'they')} "
            f"recorded {recorded}, then stopped before the block's end, where NCCL launches it"
        )
    else:
        what = (
            f"recorded {_at(f, f.collective_seq_id)} ({f.op}) that {who(f.issued_by)} issued, "
            "but never enqueued it (pg_status does not count it): "
            f"{verb(ranks, 'it', 'they')} stopped while issuing it, before NCCL launched it"
        )
    return f"{who(ranks)} {what}{_idle(f)}"


def _even_split_missing(f: Finding) -> str:
    return (
        f"{who(f.issued_by)} issued {_at(f, f.collective_seq_id)} ({f.op}) and "
        f"{who(f.not_issued_by)} did not; with two equal sides and no telling "
        "history this is undecidable: both are named"
    )


def _still_running(f: Finding) -> str:
    absent = f.not_issued_by
    signals = sorted(set(f.facts.get("closed", {}).values())) or ["a signal"]
    return (
        f"{who(f.issued_by)} issued {_at(f, f.collective_seq_id)} ({f.op}) and {who(absent)} "
        f"did not; the logs show {who(absent)} still running until {verb(absent, 'its', 'their')} "
        f"torchrun agent ended {verb(absent, 'it', 'them')} ({', '.join(signals)}), outside "
        "any collective: held elsewhere (a rank that had finished would have exited by itself)"
    )


def _failed_by_itself(f: Finding) -> str:
    absent = f.not_issued_by
    how = {"raised": "raised an exception", "killed": "was killed by a signal"}
    how |= {"crashed": "exited with an error", "stuck": "is stuck outside collectives"}
    states = sorted({how.get(str(s), str(s)) for s in f.facts.get("failed", {}).values()})
    return (
        f"{who(f.issued_by)} issued {_at(f, f.collective_seq_id)} ({f.op}) and {who(absent)} "
        f"did not; the logs show {who(absent)} {' and '.join(states)} outside any collective, "
        "and no rank that issued it failed by itself: that failure is why it never came"
    )


def _store_lost(f: Finding) -> str:
    hosts = ", ".join(str(h) for h in f.facts.get("store_lost", []))
    ranks = f.culprit_ranks
    where = (
        f"{who(ranks)}, the one rank the job has that no input shows, was on it"
        if not f.undecidable
        else f"it held some of {who(ranks)}, which no input shows (undecidable)"
    )
    return (
        f"torchrun's agent on {hosts} died when it lost its rendezvous store "
        "(RendezvousConnectionError: the connection to the C10d store failed); the store is "
        f"hosted by one of the job's agents, so a node went away: {where}; give every node's "
        "logs (from the logs)"
    )


def _left_in_rooted(f: Finding) -> str:
    ranks = f.culprit_ranks
    before = _at(f, (f.collective_seq_id or 0) - 1)
    return (
        f"{who(ranks)} never left {before} ({f.facts.get('rooted_op')}), which "
        f"{who(f.issued_by)} completed before moving on: a rooted collective lets the root's "
        f"side finish while others still wait, so {who(ranks)} {verb(ranks, 'is', 'are')} to "
        "blame (the root or size they disagree on is not recorded: check the call's arguments)"
    )


def _unrecorded_p2p(f: Finding) -> str:
    ranks = f.culprit_ranks
    groups = ", ".join(f"pg {g}" for g in f.facts.get("groups", []))
    if f.facts.get("tied"):
        absent, issued = f.not_issued_by, f.issued_by
        what = (
            f"in {where(f.place)} of groups {groups}, {who(issued)} issued it and "
            f"{who(absent)} did not: {who(absent)} stopped (one stall), or {who(issued)} made "
            "the same extra call; these dumps have no call sites to tell, so all are named"
        )
    else:
        what = (
            f"{who(ranks)} stopped before {where(f.place)} of {verb(ranks, 'its', 'their')} "
            f"groups ({groups}), where {who(f.waiting_ranks)} "
            f"{verb(f.waiting_ranks, 'waits', 'wait')}: one stall"
        )
    return (
        f"{what}. gloo records no send/recv, so a pipeline stage that stalls stops the stage it "
        "feeds at the same point, out of sight; which of them stopped first cannot be told from "
        "the dumps (or they stalled apart: the dumps look the same)"
    )


def _one_stall_read(f: Finding) -> str:
    """The reading not taken, where ranks stopped at the same point of parallel groups."""
    if f.facts.get("other_reading") != "one_stall":
        return ""
    return (
        f"; ranks of other {f.pg_desc or 'such'} groups stopped at the same point too: one "
        "stall passed on by unrecorded send/recv would need a pipeline between them, and the "
        "recorded groups already join them (no stage boundary), so each stop is a cause"
    )


def _same_stall(f: Finding) -> str:
    return (
        f"{who(f.culprit_ranks)} stopped before {where(f.place)} too: the same stall as the "
        "root cause (no send/recv recorded between them; a consequence)"
    )


def _after_mismatch(f: Finding) -> str:
    m = f.facts.get("mismatch") or {}
    place = where(Place(f.pg_name, f.pg_desc, None))
    if isinstance(m, dict) and m:
        place = where(Place(str(m.get("pg_name")), f.pg_desc, m.get("seq")))
    ranks = f.culprit_ranks
    return (
        f"{who(ranks)} never issued {_at(f, f.collective_seq_id)}: {verb(ranks, 'its', 'their')}"
        f" last collective was {place}, where {verb(ranks, 'it', 'they')} disagreed with "
        "the others (a consequence of the root cause)"
    )


def _idle(f: Finding) -> str:
    if not f.facts.get("idle"):
        return ""
    ranks = f.culprit_ranks
    done = (
        f" ({verb(ranks, 'its last operation', 'their last operations')} completed)"
        if f.facts.get("states_tracked")
        else ""
    )
    return (
        f"; {who(ranks)} {verb(ranks, 'is', 'are')} not waiting in any collective{done}: look "
        f"at what {verb(ranks, 'it does', 'they do')} outside collectives"
    )


def _column(f: Finding) -> str:
    return str(f.facts.get("column", "")).replace("_", " ")


def _minority_differs(f: Finding) -> str:
    return (
        f"{where(f.place)}: {who(f.culprit_ranks)} "
        f"{verb(f.culprit_ranks, 'disagrees', 'disagree')} with "
        f"{_the_others(int(f.facts.get('majority_size', 0)))} on {_column(f)} "
        f"({f.facts.get('theirs') or '-'} vs {f.facts.get('ours') or '-'})"
    )


def _history_changed(f: Finding) -> str:
    return (
        f"{where(f.place)}: members split on {_column(f)}; {who(f.culprit_ranks)} changed "
        f"what {verb(f.culprit_ranks, 'it issues', 'they issue')} at this call site, the "
        "others did not"
    )


def _even_split(f: Finding) -> str:
    by_rank = f.facts.get("by_rank", {})
    values = "; ".join(f"rank {k}: {v}" for k, v in by_rank.items())
    return (
        f"{where(f.place)}: members split evenly on {_column(f)} ({values}); undecidable, all "
        "are named"
    )


def _numel(f: Finding) -> str:
    return (
        f"{where(f.place)}: numel of {who(f.culprit_ranks)} does not fit a group "
        f"of {f.facts.get('group_size')} (input {f.facts.get('input_numel')}, output "
        f"{f.facts.get('output_numel')})"
    )


def _not_started(f: Finding) -> str:
    running, ranks = f.waiting_ranks, f.culprit_ranks
    return (
        f"every member issued {where(f.place)}, but {who(ranks)} never started it "
        f"while {who(running)} {verb(running, 'runs', 'run')} it: "
        f"{verb(ranks, 'its GPU is', 'their GPUs are')} stuck before this operation"
    )


def _p2p_pair(f: Finding) -> str:
    src, dst = f.facts.get("src"), f.facts.get("dst")
    why = {
        "sender_changed": f"rank {src} changed what it sends at this call site; rank {dst} did not",
        "receiver_changed": f"rank {dst} changed what it receives at this call site; rank "
        f"{src} did not",
        "p2p_undecidable": "no history tells which side changed: undecidable, both are named",
    }[f.reason]
    return (
        f"{where(f.place)}: rank {src} sends {f.facts.get('send')} to rank {dst}, which "
        f"receives {f.facts.get('recv')}; {why}"
    )


def _no_dump(f: Finding) -> str:
    place = _blocking_place(f)
    ranks = list(f.facts.get("no_dump", f.culprit_ranks))
    unreadable = list(f.facts.get("unreadable", []))
    gone = [r for r in ranks if r not in unreadable]
    what = []
    if gone:
        what.append(f"{who(gone)} left no dump")
    if unreadable:
        what.append(f"the dump of {who(unreadable)} is unreadable (cut or corrupt)")
    waiting = f.waiting_ranks
    if f.facts.get("maybe"):
        waits = f"{who(waiting)} may wait in {where(place)}"
    else:
        waits = waits_in(waiting, place)
    places = int(f.facts.get("places", 1))
    also = f" (and in {places - 1} more group(s))" if places > 1 else ""
    hint = (
        f"look at how {verb(gone, 'that process', 'those processes')} ended (crash, OOM "
        "kill, lost host)"
        if gone
        else f"look at how {verb(unreadable, 'it', 'they')} ended and at "
        + verb(
            unreadable,
            "its logs (killed while writing its dump?)",
            "their logs (killed while writing their dumps?)",
        )
    )
    lines = f"{waits} for {who(ranks)}{also}; {', and '.join(what)}: {hint}"
    lone = len(waiting) == 1 and set(waiting) <= set(f.culprit_ranks)
    if f.facts.get("maybe") and lone:  # one rank's word
        lines += (
            f"; no states tell whether {who(waiting)} completed there instead and stopped "
            "elsewhere, and one rank's word decides nothing (undecidable)"
        )
    elif f.facts.get("maybe") and f.undecidable:
        lines += (
            "; no states tell whether the waiting ranks completed there instead (a job that "
            "ended cleanly looks the same in gloo's dumps): undecidable; give the job's logs"
        )
    elif f.facts.get("maybe"):
        lines += "; no states tell whether the waiting ranks completed there instead"
    return lines


def _no_dump_elsewhere(f: Finding) -> str:
    return (
        f"{waits_in(f.waiting_ranks, _blocking_place(f))} for {who(f.culprit_ranks)}, which "
        "left no dump: the same cause as the root cause (a consequence)"
    )


def _unreadable_elsewhere(f: Finding) -> str:
    ranks = f.culprit_ranks
    return (
        f"{waits_in(f.waiting_ranks, _blocking_place(f))} for {who(ranks)}, whose dump is "
        f"unreadable: where {verb(ranks, 'it', 'they')} waited is out of sight, most likely "
        "held up by the root cause (a consequence, as far as the dumps tell)"
    )


def _blocking_place(f: Finding) -> Place:
    node = f.facts.get("node")
    if isinstance(node, dict):
        return Place(f.pg_name, f.pg_desc, None, True, int(node["src"]), int(node["dst"]))
    return f.place


def _partial_groups(f: Finding) -> str:
    names = list(f.facts.get("groups", []))
    more = int(f.facts.get("groups_total", len(names))) - len(names)
    groups = ", ".join(names) + (f" and {more} more" if more > 0 else "")
    ranks = f.culprit_ranks
    return (
        f"{who(ranks)} {verb(ranks, 'is a member', 'are members')} of groups {groups} but "
        f"left no usable dump: the analysis of those groups is partial"
    )


def _never_posted(f: Finding) -> str:
    place = _blocking_place(f)
    mine, theirs = f.facts.get("waiting_op"), f.op
    ranks = f.culprit_ranks
    return (
        f"{waits_in(f.waiting_ranks, place)} ({mine}) but {who(ranks)} never posted the "
        f"matching {theirs} and {verb(ranks, 'is', 'are')} not waiting in any collective: look "
        f"at what {verb(ranks, 'it does', 'they do')} outside collectives"
    )


def _cycle(f: Finding, items: int | None = None) -> str:
    """The deadlock's waits, then what the culprit did; `items` cuts the waits (the culprit's
    own first), never that sentence."""
    ranks = f.culprit_ranks
    # One hop per edge: a node that waits for ranks in several others would repeat itself.
    waits = list(
        dict.fromkeys(
            (waits_in(h.ranks, h.place), bool(set(h.ranks) & set(ranks))) for h in f.chain
        )
    )
    parts = "; ".join(text for text, _mine in _cut(waits, items))
    if f.undecidable:
        return (
            f"deadlock: {parts}; each waits for the other. {who(ranks).capitalize()} issued "
            "the two collectives in different orders, and nothing tells which of them swapped "
            "them (no ranks in the same role, no call sites): undecidable, all are named"
        )
    return (
        f"deadlock: {parts}; each waits for the other. {who(ranks).capitalize()} issued "
        f"{where(f.place)} before the collective {verb(ranks, 'its', 'their')} peers are in: "
        f"{verb(ranks, 'it calls', 'they call')} collectives in a different order"
    )


def _cut(waits: list[tuple[str, bool]], items: int | None) -> list[tuple[str, bool]]:
    """At most `items` waits, in their order, the culprits' first; one more says how many
    are left out."""
    if items is None or len(waits) <= items:
        return waits
    order = sorted(range(len(waits)), key=lambda i: (not waits[i][1], i))
    kept = sorted(order[: max(1, items)])
    left = len(waits) - len(kept)
    return [*(waits[i] for i in kept), (f"{left} other wait{'s' if left > 1 else ''} (-v)", False)]


def _stuck(f: Finding) -> str:
    age, timeout = f.facts.get("in_flight_ms"), f.facts.get("timeout_ms")
    if age is not None:
        how = f"has been in flight for {age / 1e3:.1f} s"
        if timeout:
            how += f" (timeout {timeout / 1e3:.0f} s)"
    else:
        how = (
            "never completed (without timing in the dumps, work in flight at an on-demand "
            "dump looks the same)"
        )
    ranks = f.culprit_ranks
    return (
        f"{who(ranks)} {verb(ranks, '', 'all ')}issued {where(f.place)} and "
        f"{verb(ranks, 'agrees', 'agree')} on it, but it {how}: "
        "the hang is inside the collective (network, NCCL or a GPU), not in any one rank's code"
    )


def _blocked_elsewhere(f: Finding) -> str:
    places = ", ".join(sorted({where(p) for p in f.blocked_in.values()}))
    ranks = f.culprit_ranks
    done = "started" if f.kind == "state_mismatch" else "issued"
    away = sorted(f.blocked_in)
    idle = sorted(set(ranks) - set(away))
    if not idle:
        why = f"{verb(ranks, 'it is', 'they are')} blocked in {places}"
    else:  # the rest stopped: a root cause names them
        why = (
            f"{who(away)} {verb(away, 'is', 'are')} blocked in {places}, and {who(idle)} "
            f"stopped before the root cause's collective"
        )
    return (
        f"{who(ranks)} {verb(ranks, 'has', 'have')} not {done} {where(f.place)}: {why} (a "
        "consequence, see the root cause)"
    )


def _stopped_earlier(f: Finding) -> str:
    ranks = f.culprit_ranks
    return (
        f"{who(ranks)} stopped before the root cause's collective, so "
        f"{verb(ranks, 'it', 'they')} never issued this one either (a consequence)"
    )


_HOW = {
    "timeout": "until their timeout",
    "peer_lost": "until a peer's connection closed",
    "comm_error": "until a communication error",
    "pending": "(some of them by their monitors' word: it was enqueued)",
}


def _never_joined(f: Finding) -> str:
    waiting, culprits = f.waiting_ranks, f.culprit_ranks
    what = f.op or "a collective"
    if f.pg_name or f.pg_desc:
        what += f" at {where(f.place)}"
    procs = list(f.facts.get("processes", []))
    unknown = list(f.facts.get("unknown_members", []))
    inside = [int(r) for r in f.facts.get("or_inside", [])]
    culprits = [r for r in culprits if r not in inside]
    layout = [int(r) for r in f.facts.get("layout_candidates", [])]
    if layout:  # they are the unknown members' possible ranks, said with them below
        culprits = [r for r in culprits if r not in layout]
    # named beside the silent ranks, each said below: the ranks in another collective (and
    # the waiting, where theirs may be the wrong side), the ranks no input shows
    unseen = list(f.facts.get("unseen", []))
    away = {
        int(r): str(op)
        for r, op in dict(f.facts.get("elsewhere", {})).items()
        if int(r) in culprits
    }
    wrong_side = [int(r) for r in f.facts.get("or_sides", [])] if away else []
    also_unseen = [r for r in unseen if r in culprits] if set(culprits) - set(unseen) else []
    culprits = [
        r for r in culprits if r not in away and r not in wrong_side and r not in also_unseen
    ]
    blamed = who(culprits) if culprits else ""
    if procs:
        pids = _processes_text(procs)
        blamed = f"{blamed} and {pids}" if blamed else pids
    if unknown:
        members = f"group rank{'s' if len(unknown) > 1 else ''} {rank_ranges(unknown, 6)}"
        blamed = f"{blamed} and {members}" if blamed else members
    if "torn_down" in f.facts and (not blamed or unseen):
        torn = list(f.facts["torn_down"])
        alive = (
            f"{who(torn)} {verb(torn, 'was', 'were')} alive until {verb(torn, 'its', 'their')} "
            f"agent ended {verb(torn, 'it', 'them')} afterwards, so "
            if torn
            else ""
        )
        above = f.facts.get("unseen_above")  # the world's size untold: ranks past it may be
        past = f"rank {above + 1} or above" if above is not None else ""
        among = ""
        if unseen:
            among = f" (one of {who(unseen)}, which no input shows{f', or {past}' if past else ''})"
        elif past:
            among = f" ({past}, if the job had more ranks than it shows)"
        return (
            f"{who(waiting)} lost a peer in {what} (its connection closed: its process ended); "
            f"{alive}the rank that died is in none of these inputs{among}: give every node's "
            "logs (from the logs; undecidable)"
        )
    split = dict(f.facts.get("split", {}))
    split_procs = list(f.facts.get("split_processes", []))
    if split or split_procs:  # as many ranks wait in one collective as in another
        sides: dict[str, list[int]] = {}
        for r, op in split.items():
            sides.setdefault(str(op), []).append(int(r))
        named = {op: [who(sorted(ranks))] for op, ranks in sides.items()}
        for p in split_procs:
            named.setdefault(str(p.get("op") or ""), []).append(_processes_text([p]))
        parts = [f"{' and '.join(n)} in {op or 'a collective'}" for op, n in named.items()]
        return (
            f"{' and '.join(parts)}: as many ranks wait in one collective as in the other, so "
            "which side skipped or added a call is undecidable; all are named (from the logs)"
        )
    if unseen and culprits == unseen:  # every rank seen waits: the culprit is not seen
        how = _HOW.get(str(f.facts.get("how", "")), "")
        workers = f.culprit_processes  # the agents' processes, where they are as many
        shown = ", ".join(process_text(w.pid, w.host, "") for w in workers[:4])
        agents = (
            f" (its agent names its process: {shown})"
            if len(workers) == 1
            else f" (their agents name their processes: {shown})"
            if workers
            else ""
        )
        return (
            f"{who(waiting)}, every rank these inputs show, waited in {what}"
            f"{' ' + how if how else ''}; the rank they wait for is "
            f"{'one of ' if len(unseen) > 1 else ''}{who(unseen)}, which no input shows"
            f"{agents}, or the hang is inside the collective: give every node's logs (from "
            "the logs; undecidable)"
        )
    if waiting or f.facts.get("waiting_processes"):
        how = _HOW.get(str(f.facts.get("how", "")), "")
        timeout = f.facts.get("timeout_ms")
        if how == _HOW["timeout"] and timeout:
            how += f" ({float(timeout) / 1e3:g} s)"
        procs_waiting = list(f.facts.get("waiting_processes", []))
        waiters = who(waiting) if waiting else f"{len(procs_waiting)} processes"
        head = f"{waiters} waited in {what}{' ' + how if how else ''}"
        if waiting and procs_waiting:  # untied processes whose live stacks wait there too
            one = len(procs_waiting) == 1
            head += (
                f", as {_processes_text(procs_waiting)} "
                f"{'does by its live stack' if one else 'do by their live stacks'}"
            )
        head += f"; {blamed} never joined it"
    else:
        head = "no rank was seen waiting in a collective"
    states = f.facts.get("culprits", {})
    parts = [f"rank {r} {culprit_state(states.get(str(r), {}))}" for r in culprits[:4]]
    if len(culprits) > 4:
        parts.append(f"{len(culprits) - 4} more alike")
    parts += [f"{_processes_text([p])} {culprit_state(p)}" for p in procs[:4]]
    if unknown and layout:
        parts = [
            f"{members} of the group {'are' if len(unknown) > 1 else 'is'} in no log; by the "
            f"mesh's layout (init_device_mesh) {who(layout)} could be it, which is undecidable"
        ]
    elif unknown:
        parts.append(
            f"{members} of the group {'are' if len(unknown) > 1 else 'is'} in no log (its "
            "global rank cannot be told from the members the logs show)"
        )
    if inside:  # the silent ones never joined, or every member waits inside it
        return (
            f"{head}, or all of them wait inside it (a stuck collective) and the "
            f"watchdogs of {who(culprits)} had not fired when the job came down: "
            f"{'; '.join(parts)}; which is undecidable, all are named (from the logs)"
        )
    doubts = []
    victims = [int(r) for r in f.facts.get("or_victims", [])]
    if victims:
        doubts.append(
            f"an error exit without its traceback is also how a rank that waited for another "
            f"ends (its collective raised), so {who(victims)} may be "
            f"{verb(victims, 'a victim', 'victims')} of the silent"
        )
    if away:
        ops: dict[str, list[int]] = {}
        for r, op in sorted(away.items()):
            ops.setdefault(op or "another collective", []).append(r)
        there = " and ".join(f"{who(rs)} in {op}" for op, rs in ops.items())
        doubts.append(
            f"{there} waited elsewhere: one side skipped or added a call"
            + (f" (and {who(wrong_side)} may be that side)" if wrong_side else "")
            + ", or the silent hold both"
        )
    if also_unseen:
        doubts.append(f"{who(also_unseen)}, which no input shows, may be absent as well")
    if doubts:
        return (
            f"{head}: {'; '.join(parts)}; but {'; '.join(doubts)}: which is undecidable, all "
            "are named (from the logs)"
        )
    return f"{head}: {'; '.join(parts)} (from the logs)"


def _processes_text(procs: list[dict[str, object]]) -> str:
    """`pid 4123 on node17 (its rank not in the logs)`, for processes untied to a rank."""
    shown = [process_text(p.get("pid"), p.get("host"), p.get("at")) for p in procs]
    return f"{', '.join(shown[:4])} (rank not in the logs)"


def _named_by_check(f: Finding) -> str:
    culprits = f.culprit_ranks
    if f.facts.get("decided_by") == "monitored_barrier":
        timeout = f.facts.get("timeout_ms")
        within = f" in {float(timeout) / 1e3:g} s" if timeout else ""
        return (
            f"rank 0's monitored barrier names {who(culprits)}: {verb(culprits, 'it', 'they')} "
            f"never reached it{within} (TORCH_DISTRIBUTED_DEBUG=DETAIL; from the logs)"
        )
    if f.facts.get("decided_by") == "monitored_barrier_unanswered":
        came = [int(r) for r in f.facts.get("reached", [])]
        silent = [int(r) for r in f.facts.get("never_said", culprits)]
        state = culprit_state(f.facts.get("culprits", {}).get(str(culprits[0]), {}))
        head = (
            f"{who(came)} reached a monitored barrier and got no answer from rank 0, the rank "
            "that times it; "
        )
        if silent == culprits:
            head += f"of the world's ranks, {who(culprits)} alone never said it reached it"
        else:
            head += (
                f"of {who(silent)}, which never said they reached it, only {who(culprits)} failed"
            )
        return f"{head}: rank {culprits[0]} {state} (TORCH_DISTRIBUTED_DEBUG=DETAIL; from the logs)"
    if f.facts.get("decided_by") == "entered":
        seq = f.collective_seq_id
        unseen = [int(r) for r in f.facts.get("unseen", [])]
        also = (
            f"; {who(unseen)}, which no input shows, may not have entered it either"
            if unseen
            else ""
        )
        return (
            f"TORCH_DISTRIBUTED_DEBUG=DETAIL logs each collective a rank enters: "
            f"{who(f.waiting_ranks)} entered collective #{seq} ({f.op}), {who(culprits)} "
            f"stopped after #{(seq or 1) - 1} and never entered it{also} (from the logs)"
        )
    named_by = f.facts.get("named_by", {})
    if f.undecidable:
        return (
            f"the collective fingerprint check (TORCH_DISTRIBUTED_DEBUG=DETAIL) finds "
            f"{who(culprits)} calling different collectives, and no majority says which "
            "differs: undecidable, all named (from the logs)"
        )
    namers = sorted({int(r) for v in named_by.values() for r in v} - set(culprits))
    agree = f.facts.get("agree")
    most = (
        f"; {agree} ranks, rank 0's side, made one call (each rank's check stops at the "
        "first rank, in order, whose call differs from its own)"
        if agree
        else ""
    )
    return (
        f"the collective fingerprint check (TORCH_DISTRIBUTED_DEBUG=DETAIL) of {who(namers)} "
        f"names {who(culprits)}: {verb(culprits, 'its', 'their')} call differs from theirs"
        f"{most} (from the logs)"
    )


def _order_differs(f: Finding) -> str:
    other = f.facts.get("other", {})
    call = f"{other.get('desc', 'mesh')} collective"
    call += f" (pg {other['pg']} seq {other['seq']})" if "pg" in other else ""
    first = [int(r) for r in f.facts.get("default_first", [])]
    if f.undecidable and first:
        rest = [r for r in f.culprit_ranks if r not in first]
        return (
            f"{who(first)} called {f.op or 'a collective'} at {where(f.place)} before the "
            f"{call}, which {who(rest)} {verb(rest, 'waits', 'wait')} in without having "
            "called the first: the order of calls differs, and each side waits for the "
            "other; too few ranks show either order to say whose is the program's, so "
            "undecidable, both sides are named (from the logs)"
        )
    mesh = f"{'its' if len(f.culprit_ranks) == 1 else 'their'} {call}"
    n = int(f.facts.get("same_order", 0))
    return (
        f"{who(f.culprit_ranks)} called {f.op or 'a collective'} at {where(f.place)} before "
        f"{mesh}, while {n} rank{'s' if n != 1 else ''} called the {other.get('desc', 'mesh')} "
        "one first: the order of calls differs, and each side waits for the other "
        "(from the logs)"
    )


def _all_waiting(f: Finding) -> str:
    ranks = f.waiting_ranks
    how = _HOW.get(str(f.facts.get("how", "")), "")
    what = (f.op or "a collective") + (f" at {where(f.place)}" if f.pg_name or f.pg_desc else "")
    network = ""
    warned = list(f.facts.get("network", []))
    if warned:
        w = warned[0]
        peer = f"{w.get('peer')}" + (f" ({w['peer_host']})" if w.get("peer_host") else "")
        network = f"; NCCL on {w.get('host')} reported a network error with its peer {peer}"
    also = "".join(
        f"; {who(list(a.get('ranks', [])))} waited as well in pg {a.get('pg')} seq {a.get('seq')}"
        ", equally waited on, and no log clock tells which began first"
        for a in f.facts.get("also_stuck", [])[:3]
    )
    return (
        f"{who(ranks)}, every rank these inputs name, waited in {what}"
        f"{' ' + how if how else ''}; none is seen missing from it: either the rank they wait "
        "for is in logs that were not given (give every node's logs or dumps), or the hang is "
        f"inside the collective (network, NCCL, a GPU){network}{also} (from the logs; "
        "undecidable)"
    )


def culprit_state(facts: dict[str, object]) -> str:
    """What the logs and stacks show of one absent rank, as a verb phrase."""
    state = facts.get("state")
    signal = str(facts.get("signal") or "")
    if state == "raised":
        return f"raised {facts.get('exception')}: {facts.get('message') or '-'}"
    if state == "killed":
        oom = " (no traceback: often the kernel's OOM killer)" if signal == "SIGKILL" else ""
        return f"was killed by {signal}{oom}"
    if state == "crashed":
        return f"exited with code {facts.get('exitcode')} and no traceback"
    if state == "stuck":
        waiting = f" (waiting in {facts['waiting_in']})" if facts.get("waiting_in") else ""
        return f"is stuck outside collectives, in {facts.get('function')}{waiting}"
    if state == "elsewhere":
        return f"waited in {facts.get('op') or 'another collective'} instead"
    torn = " (the agent ended it with SIGTERM afterwards)" if signal == "SIGTERM" else ""
    return f"logged no error and waited in no collective{torn}"


_DETAIL: dict[str, Callable[[Finding], str]] = {
    "never_issued": _never_issued,
    "minority_issued": _minority_issued,
    "extra_call": _extra_call,
    "stopped_early": _stopped_early,
    "awaited_elsewhere": _awaited_elsewhere,
    "not_launched": _not_launched,
    "even_split_missing": _even_split_missing,
    "still_running": _still_running,
    "failed_by_itself": _failed_by_itself,
    "store_lost": _store_lost,
    "minority_differs": _minority_differs,
    "history_changed": _history_changed,
    "even_split": _even_split,
    "numel": _numel,
    "not_started": _not_started,
    "sender_changed": _p2p_pair,
    "receiver_changed": _p2p_pair,
    "p2p_undecidable": _p2p_pair,
    "no_dump": _no_dump,
    "partial_groups": _partial_groups,
    "never_posted": _never_posted,
    "cycle": _cycle,
    "stuck": _stuck,
    "blocked_elsewhere": _blocked_elsewhere,
    "stopped_earlier": _stopped_earlier,
    "no_dump_elsewhere": _no_dump_elsewhere,
    "left_in_rooted": _left_in_rooted,
    "after_mismatch": _after_mismatch,
    "unreadable_elsewhere": _unreadable_elsewhere,
    "unrecorded_p2p": _unrecorded_p2p,
    "same_stall": _same_stall,
    "siblings_differ": _siblings_differ,
    "siblings_issued": _siblings_issued,
    "gone_in_mismatch": _gone_in_mismatch,
    "never_joined": _never_joined,
    "order_differs": _order_differs,
    "all_waiting": _all_waiting,
    "named_by_check": _named_by_check,
}


def decided_line(f: Finding) -> str:
    """What broke a two-sided tie, when a rank's history did: the stacks' call sites (JSON
    dumps of the same job have none, and may leave it undecided) or the op sequence."""
    told = f.facts.get("decided_by")
    if told == "stacks":
        return (
            "the call sites in the stacks (JSON dumps carry none: from them the same job may "
            "be undecidable)"
        )
    if told == "op_sequence":
        return "the sequence of ops (these dumps carry no stacks)"
    if told == "siblings":
        return (
            "the same collective in the sibling groups (the other groups of this kind, "
            f"{', '.join('pg ' + str(g) for g in f.facts.get('siblings', []))})"
        )
    return ""


def detail(f: Finding) -> str:
    """One paragraph saying what went wrong and why these ranks are blamed."""
    return _DETAIL[f.reason](f)


def detail_cut(f: Finding, items: int) -> str:
    """The paragraph with its list of waits cut to `items`, for a report that must stay
    short: what the culprit did is said whole, whatever the job size."""
    if f.reason == "cycle":
        return _cycle(f, items)
    return detail(f)


def _hop(h: Hop) -> str:
    """One hop: 'ranks 0-1 wait in ...', or '... may wait in ... (no states, members unseen)'."""
    if not h.maybe:
        return waits_in(h.ranks, h.place)
    return (
        f"{who(h.ranks)} may wait in {where(h.place)} (its other members are unseen and no "
        "states tell whether it completed)"
    )


def chain_lines(f: Finding) -> list[str]:
    """The wait chain, from the farthest waiting ranks down to the culprits."""
    if not f.chain:
        return []
    if f.chain_end == "cycle":
        return [f"{waits_in(h.ranks, h.place)} for {who(h.waits_for)}" for h in f.chain]
    lines = [f"{_hop(h)} for {who(h.waits_for)}" for h in f.chain[:-1]]
    last: Hop = f.chain[-1]
    if f.chain_end == "together":
        lines.append(
            f"{who(last.ranks)} {verb(last.ranks, 'is', 'are all')} in {where(last.place)}: "
            f"{f.kind}"
        )
        return lines
    lines.append(f"{_hop(last)} for {who(last.waits_for)}")
    if f.reason == "extra_call":
        lines.append(
            f"{who(last.waits_for)} {verb(last.waits_for, 'has', 'have')} nothing left to pair "
            f"with it: rank {f.culprit_ranks[0]}'s extra call at {_at(f, f.collective_seq_id)} "
            "shifted its collectives by one"
        )
        return lines
    if f.chain_end == "mismatch":
        lines.append(
            f"{who(last.waits_for)} never issued it: {verb(last.waits_for, 'its', 'their')} last "
            f"collective, {where(f.place)}, is where {verb(last.waits_for, 'it', 'they')} "
            f"disagreed with the others ({f.kind})"
        )
        return lines
    if f.chain_end == "nodump":
        unreadable = set(f.facts.get("unreadable", []))
        end = (
            "left no readable dump"
            if unreadable and unreadable >= set(last.waits_for)
            else "left no dump"
        )
    elif f.reason == "not_launched":
        end = (
            f"stopped while issuing it and {verb(last.waits_for, 'is', 'are')} not waiting in "
            "any collective"
        )
    elif f.reason == "left_in_rooted":
        end = (
            f"{verb(last.waits_for, 'is', 'are')} still inside {_at(f, (last.place.seq or 0) - 1)}"
        )
    else:
        end = (
            f"never issued it and {verb(last.waits_for, 'is', 'are')} not waiting in any collective"
        )
    lines.append(f"{who(last.waits_for)} {end}")
    return lines


STALLS = {
    "cpu_side": (
        "stuck on the CPU side: {it} never enqueued {the_op} (data loading, an exception, "
        "another code path)",
        "py-spy dump --pid <pid> on {their_host}; {its} logs for an exception",
    ),
    "gpu_not_started": (
        "stuck on the GPU: {it} enqueued {the_op} but {its} {gpu} never started it while peers "
        "run it (a kernel before it never finishes)",
        "nvidia-smi and the kernels queued on {their_gpu} (py-spy dump --native)",
    ),
    "inside_collective": (
        "stuck inside {the_op}: every member started it, none completes",
        "the network and NCCL (NCCL_DEBUG=INFO logs, link errors, a failed GPU or NIC)",
    ),
    "slow": (
        "slow, not hung: it completes, late",
        "the straggler's host: CPU load, thermal throttling, data loading",
    ),
}


def stall_lines(f: Finding) -> tuple[str, str] | None:
    """(where the culprit is stuck with the times that show it, what to look at next)."""
    stall = f.facts.get("stall")
    if stall not in STALLS:
        return None
    ranks = f.culprit_ranks
    words = {
        "it": verb(ranks, "it", "they"),
        "its": verb(ranks, "its", "their"),
        "gpu": verb(ranks, "GPU", "GPUs"),
        "their_host": verb(ranks, "that rank's host", "those ranks' hosts"),
        "their_gpu": verb(ranks, "that rank's GPU", "those ranks' GPUs"),
        # A send or recv the culprit never posted is named as such.
        "the_op": f"the {f.op}" if f.p2p_seq_id is not None and f.op else "the collective",
    }
    what, advice = (text.format(**words) for text in STALLS[str(stall)])
    times = []
    if f.facts.get("idle_ms") is not None:
        times.append(
            f"last call {f.facts['last_op']} {float(f.facts['idle_ms']) / 1e3:.1f} s "
            f"before {verb(ranks, 'its dump', 'their dumps')}"
        )
    if f.facts.get("in_flight_ms") is not None:
        times.append(f"in flight {float(f.facts['in_flight_ms']) / 1e3:.1f} s")
    if f.facts.get("timeout_ms"):
        times.append(f"timeout {int(f.facts['timeout_ms']) / 1e3:.0f} s")
    return what + (f" ({'; '.join(times)})" if times else ""), advice


def straggler_lines(late: object) -> list[str]:
    """One line per straggler, costliest first: what its lateness cost the others, where it
    shows, and its arrival lag statistics."""
    from frtrace.analysis.timing import StragglerReport  # see progress_lines

    if not isinstance(late, StragglerReport) or not late.top:
        return []
    how = "GPU durations" if late.method == "duration" else "enqueue times (host clocks)"
    lines = [
        f"stragglers (lateness that held the others up, from {how} over {late.collectives} "
        f"collectives; listed from {late.threshold_share:.0%} of the time a rank's calls cover):"
    ]
    for s in late.top:
        lines.append(
            f"rank {s.rank}: cost {s.cost_ms:g} ms of the {s.covered_ms:g} ms its calls cover "
            f"({s.cost_share:.0%}){_shows(s)}; last in {s.last_share:.0%} of {s.collectives} "
            f"collectives (lag median {s.median_lag_ms:g} ms, p95 {s.p95_lag_ms:g} ms)"
        )
    return lines


def _shows(s: object) -> str:
    """', at the first collective of each step in mesh_tp (pg 3): all_reduce at x.py:12 f'."""
    from frtrace.analysis.timing import Straggler  # see progress_lines

    w = s.where if isinstance(s, Straggler) else None
    if w is None:
        return ""
    group = where(Place(w.pg, w.pg_desc))
    call = w.op + (f" at {_short_site(w.site)}" if w.site else "")
    first = s.first_of_step_share if isinstance(s, Straggler) else None
    if w.step_index == 0 and first is not None and first >= 0.5:
        return f", at the first collective of each step in {group}: {call} ({first:.0%} of it)"
    if w.share < 0.5:
        return f", spread over its collectives in {group} (most at {call}: {w.share:.0%})"
    if w.step_index is not None and w.step_collectives is not None:
        nth = f"collective {w.step_index + 1} of {w.step_collectives} of each step"
        return f", at {nth} in {group}: {call} ({w.share:.0%} of it)"
    return f", mostly in {group} at {call} ({w.share:.0%} of it)"


def _short_site(site: str) -> str:
    """'/a/b/mappings.py:39 _reduce' -> 'mappings.py:39 _reduce'."""
    path, _, rest = site.rpartition(":")
    return path.replace("\\", "/").rsplit("/", 1)[-1] + (":" + rest if rest else "")


def progress_lines(progress: object) -> list[str]:
    """What moved since the older snapshot: stopped ranks first."""
    # On use: the CLI words its memory warning with this module before the parse workers
    # fork, and the analyzers' modules (numpy's) load while they parse.
    from frtrace.analysis.snapshots import SnapshotComparison

    if not isinstance(progress, SnapshotComparison):
        return []
    lines = [f"PROGRESS since {progress.since}"]
    if progress.all_stuck:
        lines.append(f"no rank advanced: {who(progress.stopped)} all stand where they stood")
    elif progress.stopped:
        lines.append(
            f"{who(progress.stopped)} did not advance while {len(progress.advanced)} other "
            f"{verb(progress.advanced, 'rank', 'ranks')} did: "
            f"{verb(progress.stopped, 'it is', 'they are')} stuck"
        )
    else:
        lines.append(f"every rank advanced ({len(progress.advanced)}): the job is moving")
    if progress.restarted:
        lines.append(f"{who(progress.restarted)} restarted in between (record ids went back)")
    if progress.only_before:
        lines.append(f"{who(progress.only_before)} left no dump in the newer snapshot")
    moved = [g for g in progress.groups if g.after > g.before]
    still = [g for g in progress.groups if g.after <= g.before]
    if still and moved:
        names = ", ".join(where(Place(g.pg_name, g.pg_desc)) for g in still[:6])
        lines.append(f"groups that completed nothing new: {names}")
    return lines


def note_text(note: Note) -> str:
    """A note for people."""
    f = note.facts
    if note.kind == "snapshot":
        return (
            f"snapshot of a live job: {f['ranks']} rank(s) have work in flight, the oldest for "
            f"{float(f['oldest_ms']):.0f} ms, under its timeout and under "
            f"{int(f['stuck_after_ms']) // 1000} s: not a hang"
        )
    if note.kind == "independent_causes":
        return (
            f"{f['count']} independent causes; the first holds up the most ranks "
            f"({f['waiting']} waiting ranks)"
        )
    return note.kind


def unseen_lines(unseen: object) -> list[str]:
    """What of the job the dumps do not show, one sentence each (engine.Unseen)."""
    lines = []
    gap = getattr(unseen, "logs", None)
    if gap is not None:
        return [logs_gap_line(gap)]
    if getattr(unseen, "unmatched", False):
        lines.append(
            "the dumps were written under TORCH_DISTRIBUTED_DEBUG=DETAIL, whose own checks "
            "gloo records beside the job's calls in groups of the same empty name: they cannot "
            "be matched across ranks, and no log given shows how the job ended (give the "
            "job's logs)"
        )
    size = int(getattr(unseen, "world_size", 0))
    if not getattr(unseen, "world_stated", True):
        lines.append(
            f"no dump states the job's world size (gloo writes it only before sub-groups "
            f"exist); ranks 0-{size - 1} are seen, and ranks past {size - 1} would have left "
            "nothing: pass --world-size N if the job had exactly N ranks"
            if size > 1
            else "no dump states the job's world size and only rank 0 is seen: pass "
            "--world-size N with the job's rank count"
        )
    no_file = list(getattr(unseen, "no_file", []))
    unreadable = list(getattr(unseen, "unreadable", []))
    if no_file:
        lines.append(
            f"{who(no_file)} left no dump file: what {verb(no_file, 'it', 'they')} did is unknown"
        )
    if unreadable:
        lines.append(
            f"the dump of {who(unreadable)} is unreadable (listed on stderr): what "
            f"{verb(unreadable, 'it', 'they')} did is unknown"
        )
    return lines


def logs_gap_line(gap: object) -> str:
    """Why logs alone do not show the job healthy (analysis.logs.EndingGap)."""
    cancelled = list(getattr(gap, "cancelled", ()))
    done = list(getattr(gap, "nodes_done", ()))
    nodes = getattr(gap, "nodes", None)
    if cancelled:
        why = f"{cancelled[0]} before it ended, and no rank is seen failing or stuck"
    elif done and nodes:
        why = f"the agents of {len(done)} of its {nodes} nodes logged that their workers finished"
    elif done:
        why = (
            f"the agents of {', '.join(done[:4])} logged that their workers finished, but no "
            "roster says how many nodes the job had"
        )
    else:
        why = (
            "no torchrun agent logged that its workers finished (it does with LOGLEVEL=INFO: "
            "`worker group successfully finished`), so nothing shows every rank ended cleanly"
        )
    return f"there is no dump, and the logs do not show the job ended: {why}"


def mixed_jobs(conflicts: dict[str, list[list[int]]], split: object) -> str:
    """Why a folder's dumps cannot be one job, and what to do."""
    parts = []
    for name, lists in list(conflicts.items())[:3]:
        options = " vs ".join(f"[{rank_ranges(m, 6)}]" for m in lists[:3])
        parts.append(f"pg {name} has different members in different dumps ({options})")
    early, late, gap_s = (getattr(split, k, None) for k in ("early", "late", "gap_s"))
    if early is not None and late is not None and gap_s is not None:
        parts.append(
            f"ranks {rank_ranges(early, 6)} stopped recording {float(gap_s) / 3600:.1f} h "
            f"before ranks {rank_ranges(late, 6)}"
        )
    return (
        "these dumps look like more than one job: "
        + "; ".join(parts)
        + ". Put each job's dumps in a folder of its own (or select one with --prefix)"
    )


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} bytes"


def memory_warning(short: Shortfall) -> str:
    """The local engine will likely not fit: said before the parse, not after an OOM kill."""
    return (
        f"these {_bytes(short.dump_bytes)} of dumps may not fit in the {_bytes(short.available)}"
        " of memory available: the local engine holds every entry (about "
        f"{short.held_per_dump_byte} byte per "
        "byte of dumps on the bench jobs); --engine dask keeps them on a cluster's workers"
    )
