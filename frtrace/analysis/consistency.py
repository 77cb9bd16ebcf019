"""Refuse to analyze a folder that mixes the dumps of different jobs.

A confident answer about two jobs' dumps taken as one is wrong in ways nobody can see: groups
seem to miss members and every collective seems desynchronized. Two signs are unambiguous:
dumps that give one process group different members, and ranks whose recordings end hours
apart (one job's ranks all dump within a timeout of each other).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frtrace.analysis import facts as job_facts
from frtrace.errors import FrtraceError
from frtrace.tables.trace import Trace

MIN_GAP_NS = 30 * 60 * 1_000_000_000  # at least 30 minutes between two jobs' last records


@dataclass(frozen=True)
class TimeSplit:
    """Ranks whose last records end long before the others'."""

    early: list[int]
    late: list[int]
    gap_s: float


class MixedJobsError(FrtraceError):
    """The dumps in the folder come from more than one job (exit status 2); the report words
    the evidence (`frtrace.report.wording.mixed_jobs`)."""

    def __init__(self, conflicts: dict[str, list[list[int]]], split: TimeSplit | None) -> None:
        self.conflicts = conflicts
        self.split = split
        groups = ", ".join(f"pg {name}" for name in list(conflicts)[:3])
        super().__init__(
            "these dumps look like more than one job"
            + (f" (different members of {groups})" if groups else "")
            + (" (recordings hours apart)" if split is not None else "")
        )


def time_split(trace: Trace) -> TimeSplit | None:
    """The largest gap between ranks' last recorded times, when it is longer than any
    timeout the dumps carry allows (and at least `MIN_GAP_NS`)."""
    facts = job_facts.of(trace)
    last = facts.last_created_ns
    if len(last) < 2:
        return None
    by_rank = np.array(list(last.values()), dtype=np.int64)
    order = np.argsort(by_rank, kind="stable")
    times = by_rank[order]
    gaps = np.diff(times)
    k = int(np.argmax(gaps))
    timeout_ns = facts.max_timeout_ms * 1_000_000
    if gaps[k] <= max(MIN_GAP_NS, 2 * timeout_ns):
        return None
    ranks = np.array(list(last), dtype=np.int64)[order]
    return TimeSplit(
        sorted(int(r) for r in ranks[: k + 1]),
        sorted(int(r) for r in ranks[k + 1 :]),
        float(gaps[k]) / 1e9,
    )


def check_one_job(trace: Trace) -> None:
    """Raise MixedJobsError when the dumps cannot all come from one job."""
    conflicts = trace.membership_conflicts
    split = time_split(trace)
    if conflicts or split is not None:
        raise MixedJobsError(conflicts, split)
