"""What a job's settled entries contribute when they stay where they were parsed.

At tens of thousands of ranks most entries are collectives every member completed with the
same signature: they can name no culprit. The distributed plan leaves those "settled"
entries on the workers and sends the client the rest plus these facts, which are everything
the analysis reads from the settled ones: aggregates over all entries (per rank, per group
and rank), the arrival-lag statistics, and each rank's whole history on request (the few
ranks whose own habits decide a blame). With them the client's analysis gives the answer it
gives on the whole job (tests/test_settle.py checks that on every fixture and fault).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frtrace.analysis.timing import Lags
    from frtrace.tables.table import Table


@dataclass
class Settled:
    """Facts over every entry of a job whose settled entries are not in its table."""

    entries: int  # all entries, the settled ones included
    left_out: int  # settled entries not in the table
    backends: list[str]
    first_record: dict[int, int]  # rank -> lowest record_id
    last_record: dict[int, int]  # rank -> highest record_id
    latest_ns: dict[int, int]  # rank -> latest of its created / started / completed times
    last_created_ns: dict[int, int]  # rank -> latest positive time_created_ns
    lowest_seq: dict[tuple[int, int], int]  # (group code, rank) -> lowest collective seq
    cut_lo: dict[int, int]  # group code -> seq after a block its wrapped ring buffer cut
    timed: bool  # some entry has a duration (start events were recorded)
    max_timeout_ms: int
    last_completed: dict[str, int]  # group name -> highest collective seq completed
    lags: Lags  # lag statistics over every collective (groups of the 5 slowest ranks)
    history: Callable[[int], Table]  # a rank's every entry, in the job's codes, by position
    close: Callable[[], None] | None = None  # release what history needs (a cluster's data)
