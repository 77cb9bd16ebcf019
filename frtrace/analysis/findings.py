"""What analyzers conclude, as typed facts: findings, the places they are about, wait chains.

Analysis never words anything: `frtrace.report.wording` turns these records into sentences,
and nothing here is read back from a report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple


class _Named(str, Enum):
    """A str Enum that is its value wherever a report meets it: it compares and hashes as the
    str, json.dumps writes the value, and str() and f-strings give it too (Enum's own give
    "Kind.MISSING_RANKS" on Python 3.11). Python 3.10 has no StrEnum."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class Kind(_Named):
    """What a finding is about."""

    MISSING_RANKS = "missing_ranks"
    TYPE_MISMATCH = "type_mismatch"
    SIZE_MISMATCH = "size_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    STATE_MISMATCH = "state_mismatch"
    P2P_MISMATCH = "p2p_mismatch"
    MISSING_DUMP = "missing_dump"
    ORDER_CYCLE = "order_cycle"
    STUCK_COLLECTIVE = "stuck_collective"


# Members disagree on what a collective is (op, sizes or dtypes).
MISMATCH_KINDS = frozenset({Kind.TYPE_MISMATCH, Kind.SIZE_MISMATCH, Kind.DTYPE_MISMATCH})


class Reason(_Named):
    """Why the culprits are blamed (Finding.reason); `report.wording` has a sentence for each."""

    # most members issued it, the culprits did not
    NEVER_ISSUED = "never_issued"
    # a few members issued it, most did not
    MINORITY_ISSUED = "minority_issued"
    # a two-member tie broken by history: one rank inserted a call
    EXTRA_CALL = "extra_call"
    # a two-member tie broken by history: the call usually comes next
    STOPPED_EARLY = "stopped_early"
    # a two-member tie broken by other groups: ranks wait for it there too
    AWAITED_ELSEWHERE = "awaited_elsewhere"
    # the culprits recorded it (a block's first parts), never launched it
    NOT_LAUNCHED = "not_launched"
    # a tie no history breaks: both sides named
    EVEN_SPLIT_MISSING = "even_split_missing"
    # members disagree on the op; the minority differs
    MINORITY_DIFFERS = "minority_differs"
    # a tie broken by history: these ranks changed at this call site
    HISTORY_CHANGED = "history_changed"
    # a tie no history breaks
    EVEN_SPLIT = "even_split"
    # a tie (or a lone member beside ranks without a dump) broken by the sibling groups:
    # these ranks' call differs from what the other groups of this kind issued there
    SIBLINGS_DIFFER = "siblings_differ"
    # a tie broken by the sibling groups: all of their members issued it, these ranks did not
    SIBLINGS_ISSUED = "siblings_issued"
    # consequence: a rank without a dump was a member where the root cause's ranks disagreed
    GONE_IN_MISMATCH = "gone_in_mismatch"
    # all_gather / reduce_scatter sizes do not fit the group size
    NUMEL = "numel"
    # every member issued it, the culprits' GPU never started it
    NOT_STARTED = "not_started"
    # a send and its recv differ; the sender changed
    SENDER_CHANGED = "sender_changed"
    # a send and its recv differ; the receiver changed
    RECEIVER_CHANGED = "receiver_changed"
    # a send and its recv differ; no history tells which side changed
    P2P_UNDECIDABLE = "p2p_undecidable"
    # ranks others wait for left no dump
    NO_DUMP = "no_dump"
    # a member left no dump: its groups are partly analyzed
    PARTIAL_GROUPS = "partial_groups"
    # a rank never posted the send/recv its peer waits in
    NEVER_POSTED = "never_posted"
    # collectives issued in different orders: a deadlock
    CYCLE = "cycle"
    # every member inside the collective, none completes
    STUCK = "stuck"
    # consequence: the absent ranks are blocked in another op
    BLOCKED_ELSEWHERE = "blocked_elsewhere"
    # consequence: the absent ranks stopped before the root cause
    STOPPED_EARLIER = "stopped_earlier"
    # consequence: ranks wait here too for the root cause's dumpless rank
    NO_DUMP_ELSEWHERE = "no_dump_elsewhere"
    # consequence: the absent ranks stopped after a collective they disagreed on
    AFTER_MISMATCH = "after_mismatch"
    # ranks still inside a rooted collective the others completed and left
    LEFT_IN_ROOTED = "left_in_rooted"
    # consequence: ranks wait for an unreadable rank, held up elsewhere
    UNREADABLE_ELSEWHERE = "unreadable_elsewhere"
    # ranks stopped at the same point of parallel groups; no p2p recorded
    UNRECORDED_P2P = "unrecorded_p2p"
    # consequence: part of the root cause's stall (no p2p recorded between)
    SAME_STALL = "same_stall"
    # logs: the culprits never joined the collective the others waited in
    NEVER_JOINED = "never_joined"
    # logs: the culprits called the default group's collective before their own mesh
    # group's, which most ranks called first; each side waits for the other
    ORDER_DIFFERS = "order_differs"
    # logs: every rank they name waited in it: one missing from them, or inside
    ALL_WAITING = "all_waiting"
    # logs: a check of the job's own named them (DETAIL's fingerprints, a monitored barrier)
    NAMED_BY_CHECK = "named_by_check"
    # dumps split evenly; the logs show the ranks that never issued it still running
    # outside collectives until their agent ended them
    STILL_RUNNING = "still_running"
    # dumps split evenly; the logs show the ranks that never issued it failing by themselves
    # (an exception, a signal, an error exit, a live stack outside collectives)
    FAILED_BY_ITSELF = "failed_by_itself"
    # logs: a torchrun agent lost its rendezvous store; the ranks no input shows are named
    STORE_LOST = "store_lost"


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


@dataclass(frozen=True)
class ProcessRef:
    """A process the evidence names without its rank (no log or label ties its pid to one):
    the host it ran on and its pid, and where its stack was read (file, line): a stack with
    no pid (faulthandler's) is told from its host's others only by that."""

    host: str
    pid: int | None
    at: tuple[str, int] | None = None


@dataclass
class Finding:
    """One problem: who is to blame, where, why (`reason`), and the evidence (`facts`).

    `facts` holds report-only details (sizes by rank, times); the fields analysis reasons
    with are typed attributes.
    """

    kind: Kind
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op: str | None
    culprit_ranks: list[int]
    waiting_ranks: list[int]
    expected_ranks: list[int]
    reason: Reason
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
    # culprits the logs and stacks name only as processes: their rank is not stated anywhere
    culprit_processes: list[ProcessRef] = field(default_factory=list)

    def __post_init__(self) -> None:
        # A name given as a plain str (an API user's Finding) becomes its member; an unknown
        # one is refused here, not when a report looks its sentence up.
        try:
            self.kind = Kind(self.kind)
        except ValueError:
            raise ValueError(f"unknown finding kind {self.kind!r}") from None
        try:
            self.reason = Reason(self.reason)
        except ValueError:
            raise ValueError(f"unknown finding reason {self.reason!r}") from None

    @property
    def place(self) -> Place:
        p2p = self.collective_seq_id is None and self.p2p_seq_id is not None
        seq = self.p2p_seq_id if p2p else self.collective_seq_id
        return Place(self.pg_name, self.pg_desc, seq, p2p)

    def mark_consequence(self, culprits: list[int], reason: Reason) -> None:
        """Recast as a consequence of another finding: `culprits` did not issue it, the
        ranks that did are the ones waiting, and the verdict is no longer a tie to break."""
        self.culprit_ranks = sorted(culprits)
        self.waiting_ranks = sorted(set(self.issued_by or self.waiting_ranks) - set(culprits))
        self.undecidable = False
        self.secondary = True
        self.reason = reason
