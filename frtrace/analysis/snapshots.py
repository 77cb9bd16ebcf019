"""Two snapshots of one job: which ranks advanced between them, which stopped.

A rank advanced when it issued new work (its last record id grew). One that did not while
others did is stopped, however slow the job is (its queued work may still complete: that is
its GPU draining, not its program moving); when no rank advanced, the whole job is stuck.
Works with periodic dumps (torch's debug server can write one every N seconds) as well as
with two dumps taken by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from frtrace.analysis import facts as job_facts
from frtrace.tables.trace import Trace


@dataclass(frozen=True)
class GroupAdvance:
    """A group's last completed collective in each snapshot."""

    pg_name: str
    pg_desc: str
    before: int
    after: int


@dataclass
class SnapshotComparison:
    """What moved between an older and a newer snapshot."""

    since: str
    advanced: list[int]
    stopped: list[int]  # did not advance while others did
    restarted: list[int]  # record ids went back: the process restarted in between
    only_before: list[int] = field(default_factory=list)  # no dump in the newer snapshot
    only_after: list[int] = field(default_factory=list)
    groups: list[GroupAdvance] = field(default_factory=list)

    @property
    def all_stuck(self) -> bool:
        """Nothing moved anywhere: the job is hung (or both dumps are the same moment)."""
        return not self.advanced and bool(self.stopped)


def compare_snapshots(before: Trace, after: Trace) -> SnapshotComparison:
    """Per rank, whether it advanced from `before` to `after` (vectorized over entries)."""
    old, new = job_facts.of(before), job_facts.of(after)
    old_last, new_last = old.last_record, new.last_record  # ranks without entries: absent
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
    return SnapshotComparison(
        since=before.trace_dir,
        advanced=advanced,
        stopped=stopped,
        restarted=restarted,
        only_before=sorted(set(before.ranks) - set(after.ranks)),
        only_after=sorted(set(after.ranks) - set(before.ranks)),
        groups=_groups(old.last_completed, new.last_completed, after),
    )


def _groups(old: dict[str, int], new: dict[str, int], after: Trace) -> list[GroupAdvance]:
    """Each group's last completed collective before and after (Facts.last_completed)."""
    groups = after.group_table
    desc = dict(zip(groups["pg_name"], groups["pg_desc"], strict=True))
    return [
        GroupAdvance(name, str(desc.get(name, "")), old.get(name, -1), new.get(name, -1))
        for name in sorted(set(old) | set(new), key=lambda n: (len(n), n))
    ]
