"""Two snapshots of one job: which ranks advanced between them, which stopped.

A rank advanced when it issued new work (its last record id grew). One that did not while
others did is stopped, however slow the job is (its queued work may still complete: that is
its GPU draining, not its program moving); when no rank advanced, the whole job is stuck.
Works with periodic dumps (torch's debug server can write one every N seconds) as well as
with two dumps taken by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from frtrace.analysis.ops import raw_state_codes
from frtrace.tables.table import group_max
from frtrace.tables.trace import Trace


@dataclass(frozen=True)
class GroupProgress:
    """A group's last completed collective in each snapshot."""

    pg_name: str
    pg_desc: str
    before: int
    after: int


@dataclass
class Progress:
    """What moved between an older and a newer snapshot."""

    since: str
    advanced: list[int]
    stopped: list[int]  # did not advance while others did
    restarted: list[int]  # record ids went back: the process restarted in between
    only_before: list[int] = field(default_factory=list)  # no dump in the newer snapshot
    only_after: list[int] = field(default_factory=list)
    groups: list[GroupProgress] = field(default_factory=list)

    @property
    def all_stuck(self) -> bool:
        """Nothing moved anywhere: the job is hung (or both dumps are the same moment)."""
        return not self.advanced and bool(self.stopped)


def _last_record(trace: Trace) -> dict[int, int]:
    """Each rank's newest record id (ranks without entries are absent)."""
    if trace.settled is not None:
        return trace.settled.last_record
    e = trace.table
    return group_max(e["rank"], e["record_id"])


def compare(before: Trace, after: Trace) -> Progress:
    """Per rank, whether it advanced from `before` to `after` (vectorized over entries)."""
    old_last, new_last = _last_record(before), _last_record(after)
    both = sorted(set(before.ranks) & set(after.ranks))
    advanced, stopped, restarted = [], [], []
    for rank in both:
        o = int(old_last.get(rank, -1))
        n = int(new_last.get(rank, -1))
        if n < o:
            restarted.append(rank)
        elif n > o:
            advanced.append(rank)
        else:
            stopped.append(rank)
    return Progress(
        since=before.trace_dir,
        advanced=advanced,
        stopped=stopped,
        restarted=restarted,
        only_before=sorted(set(before.ranks) - set(after.ranks)),
        only_after=sorted(set(after.ranks) - set(before.ranks)),
        groups=_groups(before, after),
    )


def last_completed(trace: Trace) -> dict[str, int]:
    """Per group, the highest collective seq some rank completed (by its own state)."""
    if trace.settled is not None:
        return trace.settled.last_completed
    e = trace.table
    done = (raw_state_codes(e) == 2) & ~e["is_p2p"]
    if not done.any():
        return {}
    top = group_max(e["pg_name"][done], e["collective_seq_id"][done])
    return {str(e.label("pg_name", k)): int(v) for k, v in top.items()}


def _groups(before: Trace, after: Trace) -> list[GroupProgress]:
    old, new = last_completed(before), last_completed(after)
    groups = after.group_table
    desc = dict(zip(groups["pg_name"], groups["pg_desc"], strict=True))
    return [
        GroupProgress(name, str(desc.get(name, "")), old.get(name, -1), new.get(name, -1))
        for name in sorted(set(old) | set(new), key=lambda n: (len(n), n))
    ]
