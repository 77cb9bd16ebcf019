"""What analyzers conclude, as typed facts: findings, the places they are about, wait chains.

Analysis never words anything: `frtrace.report.wording` turns these records into sentences,
and nothing here is read back from a report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

KINDS = (
    "missing_ranks",
    "type_mismatch",
    "size_mismatch",
    "dtype_mismatch",
    "state_mismatch",
    "p2p_mismatch",
    "missing_dump",
    "order_cycle",
    "stuck_collective",
)

# Members disagree on what a collective is (op, sizes or dtypes).
MISMATCH_KINDS = frozenset({"type_mismatch", "size_mismatch", "dtype_mismatch"})

# Why the culprits are blamed (Finding.reason); `report.wording` has a sentence for each.
REASONS = (
    "never_issued",  # most members issued it, the culprits did not
    "minority_issued",  # a few members issued it, most did not
    "extra_call",  # a two-member tie broken by history: one rank inserted a call
    "stopped_early",  # a two-member tie broken by history: the call usually comes next
    "awaited_elsewhere",  # a two-member tie broken by other groups: ranks wait for it there too
    "not_launched",  # the culprits recorded it (a block's first parts), never launched it
    "even_split_missing",  # a tie no history breaks: both sides named
    "minority_differs",  # members disagree on the op; the minority differs
    "history_changed",  # a tie broken by history: these ranks changed at this call site
    "even_split",  # a tie no history breaks
    "numel",  # all_gather / reduce_scatter sizes do not fit the group size
    "not_started",  # every member issued it, the culprits' GPU never started it
    "sender_changed",  # a send and its recv differ; the sender changed
    "receiver_changed",  # ... the receiver changed
    "p2p_undecidable",  # ... no history tells which side
    "no_dump",  # ranks others wait for left no dump
    "partial_groups",  # a member left no dump: its groups are partly analyzed
    "never_posted",  # a rank never posted the send/recv its peer waits in
    "cycle",  # collectives issued in different orders: a deadlock
    "stuck",  # every member inside the collective, none completes
    "blocked_elsewhere",  # consequence: the absent ranks are blocked in another op
    "stopped_earlier",  # consequence: the absent ranks stopped before the root cause
    "no_dump_elsewhere",  # consequence: ranks wait here too for the root cause's dumpless rank
    "after_mismatch",  # consequence: the absent ranks stopped after a collective they disagreed on
    "left_in_rooted",  # ranks still inside a rooted collective the others completed and left
    "unreadable_elsewhere",  # consequence: ranks wait for an unreadable rank, held up elsewhere
    "unrecorded_p2p",  # ranks stopped at the same point of parallel groups; no p2p recorded
    "same_stall",  # consequence: part of the root cause's stall (no p2p recorded between)
    "never_joined",  # logs: the culprits never joined the collective the others waited in
    "all_waiting",  # logs: every rank they name waited in it: one missing from them, or inside
)


# Work in flight this long is stuck even before its timeout (a dump taken on demand during a
# hang); healthy collectives take milliseconds to seconds.
STUCK_AFTER_MS = 60_000


class WaitNode(NamedTuple):
    """Where ranks block: a collective (`kind` "c": group code and seq) or a p2p channel
    (`kind` "p": group code, pairing slot, global src and dst)."""

    kind: str
    pg: int
    seq: int
    src: int
    dst: int

    @property
    def p2p(self) -> bool:
        return self.kind == "p"


@dataclass(frozen=True)
class Note:
    """Something a reader should know that is not a finding (`report.wording.note_text`):
    `snapshot` (work in flight, under its timeout: not a hang) or `independent_causes`."""

    kind: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Place:
    """A collective or p2p channel by name, as findings and chains refer to it."""

    pg_name: str
    pg_desc: str
    seq: int | None = None
    p2p: bool = False
    src: int = -1
    dst: int = -1


@dataclass(frozen=True)
class Hop:
    """One step of a wait chain: `ranks` wait at `place` for `waits_for`."""

    ranks: tuple[int, ...]
    place: Place
    waits_for: tuple[int, ...]
    maybe: bool = False  # no states and members unseen: they may have completed it instead


@dataclass
class Finding:
    """One problem: who is to blame, where, why (`reason`), and the evidence (`facts`).

    `facts` holds report-only details (sizes by rank, times); the fields analysis reasons
    with are typed attributes.
    """

    kind: str
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op: str | None
    culprit_ranks: list[int]
    waiting_ranks: list[int]
    expected_ranks: list[int]
    reason: str
    facts: dict[str, Any] = field(default_factory=dict)
    issued_by: list[int] = field(default_factory=list)
    not_issued_by: list[int] = field(default_factory=list)
    hang_seq: int | None = None  # where the hang shows, when it is not where the fault is
    last_seq: int | None = None  # the same members stay missing up to this seq
    undecidable: bool = False
    secondary: bool = False  # a consequence of another finding
    blocked_in: dict[int, Place] = field(default_factory=dict)
    chain: list[Hop] = field(default_factory=list)
    chain_end: str = ""  # how the chain ends: idle, nodump, together, cycle
    ranks_waiting_on_this: int = 0
    cycle: list[Place] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if self.reason not in REASONS:
            raise ValueError(f"unknown finding reason {self.reason!r}")

    @property
    def place(self) -> Place:
        p2p = self.collective_seq_id is None and self.p2p_seq_id is not None
        seq = self.p2p_seq_id if p2p else self.collective_seq_id
        return Place(self.pg_name, self.pg_desc, seq, p2p)

    def mark_consequence(self, culprits: list[int], reason: str) -> None:
        """Recast as a consequence of another finding: `culprits` did not issue it, the
        ranks that did are the ones waiting, and the verdict is no longer a tie to break."""
        self.culprit_ranks = sorted(culprits)
        self.waiting_ranks = sorted(set(self.issued_by or self.waiting_ranks) - set(culprits))
        self.undecidable = False
        self.secondary = True
        self.reason = reason
