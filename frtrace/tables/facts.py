"""The job's facts beyond its table: the types only, so a Trace can carry them.

A Dask load leaves most entries on the workers (frtrace.cluster.spread) and hands the client a
table without them plus these facts over every entry; a job loaded in one process has them
computed from its table. Both providers live in frtrace.analysis.facts: this module holds
only what a Trace must name, and imports nothing of the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from frtrace.tables.table import Table


@dataclass
class Lags:
    """Lateness statistics per rank over every collective all members completed (and every
    p2p pair both ends completed), before any threshold: what `stragglers` selects from
    (frtrace.analysis.timing computes them, on a whole job or through the workers' shuffle)."""

    method: str  # "duration", "enqueue", or "none" (nothing completed)
    collectives: int
    per_rank: dict[str, np.ndarray]  # rank, median, p95, last, n, cost, span: a row per rank
    groups: dict[int, list[int]]  # of the costliest ranks: their groups by cost (top 3)
    # of the costliest ranks: pos, own (ms) and pg (code) of each collective it held back
    details: dict[int, Table] = field(default_factory=dict)


class Facts(Protocol):
    """What the analysis knows of every entry of the job, whether or not its table holds
    them all. Group codes are those of the job's table (`pg_name`)."""

    @property
    def entries(self) -> int:
        """All entries of the job."""

    @property
    def left_out(self) -> int:
        """Entries not in the table (settled ones left on the workers)."""

    @property
    def backends(self) -> list[str]:
        """The backends the entries name, sorted."""

    @property
    def first_record(self) -> dict[int, int]:
        """Rank -> its lowest record_id (above 0: its ring buffer wrapped)."""

    @property
    def last_record(self) -> dict[int, int]:
        """Rank -> its highest record_id."""

    @property
    def latest_ns(self) -> dict[int, int]:
        """Rank -> the latest of its created / started / completed times."""

    @property
    def last_created_ns(self) -> dict[int, int]:
        """Rank -> its latest positive time_created_ns."""

    @property
    def lowest_seq(self) -> dict[tuple[int, int], int]:
        """(group code, rank) -> the lowest seq of the collective ops it issued."""

    @property
    def cut_lo(self) -> dict[int, int]:
        """Group code -> the seq after a coalescing block a wrapped ring buffer cut."""

    @property
    def timed(self) -> bool:
        """Some entry has a duration (start events were recorded)."""

    @property
    def max_timeout_ms(self) -> int:
        """The longest timeout an entry carries (0 without entries)."""

    @property
    def last_completed(self) -> dict[str, int]:
        """Group name -> the highest collective seq some rank completed (its raw state)."""

    @property
    def lags(self) -> Lags:
        """The arrival-lag statistics over every collective (read only for stragglers)."""

    def history(self, rank: int) -> Table:
        """The rank's every entry by position, in the table's codes."""

    def close(self) -> None:
        """Release what `history` needs (a cluster's partitions); nothing for a local job."""
