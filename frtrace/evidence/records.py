"""What the logs and py-spy stacks say, as typed records, and the joined account by rank.

The readers (frtrace.evidence.logs, frtrace.evidence.pyspy) turn one file into records, each
with who wrote it as the file states it (a `Speaker`: launcher prefixes, a rank tag); the
joining step (frtrace.evidence.gather) resolves speakers to global ranks, hosts and pids and
files the records under them (`Evidence`); the analysis (frtrace.analysis.logs) reasons on
that; the reports word it. Every string here was read from an untrusted file: reports escape
it before printing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import NamedTuple

# How a rank left a collective it waited in (Wait.how).
TIMEOUT = "timeout"  # its timeout expired (gloo's wait, NCCL's watchdog)
PEER_LOST = "peer_lost"  # gloo: a peer closed or reset its connection (that peer died)
COMM_ERROR = "comm_error"  # another communication error (DistBackendError, NCCL error)
PENDING = "pending"  # enqueued and not completed, as its group's heartbeat monitor logged

# Innermost Python frames kept per exception or thread.
MAX_FRAMES = 12
_NATIVE = re.compile(r"\.(?:so(?:\.[\w.]+)?|dylib|dll|exe)$|^\?\?$")
# The standard library's modules a thread waits in (py-spy prints their base names, tracebacks
# their paths): a frame of theirs is how a thread waits, not where the job is.
_WAITING_MODULES = re.compile(
    r"(?:^|/)(?:threading|queue|selectors|socket|subprocess|ssl|contextlib|_base|"
    r"connection|synchronize|popen_fork|popen_spawn_posix|pool|tasks|base_events|events|"
    r"runners|locks|queues)\.py$"
)


_ROLE_ENDS = ":-_@/"
# How far a c10 log header's clock may be behind the wall clock: it states whole seconds
# (its fraction is CLOCK_MONOTONIC's, c10/util/Logging.cpp MessageLogger::MessageLogger)
CLOCK_SLACK = 1.0
# How many of a rank's last DETAIL `Running collective` lines are kept: enough to follow the
# world's group between a few subgroups' collectives
ENTERED_TAIL = 8


@dataclass(frozen=True)
class Where:
    """A line of an input file (`line` 0: in a part of a large file read without counting)."""

    file: str
    line: int = 0


class Speaker(NamedTuple):
    """Who wrote a line, as the line itself says: srun's task label, torchrun's header (its
    role and number: the local rank, or the global rank where a prefix template says so) and
    a global rank tag (`[rank3]:`). The joining step resolves it to a rank and a host."""

    task: int | None = None
    role: str = ""
    number: int | None = None
    rank: int | None = None

    @property
    def anonymous(self) -> bool:
        return self.task is None and self.number is None and self.rank is None and not self.role

    @property
    def node_role(self) -> str:
        """The node a torchrun role names, '' where it names none. `--role nodeB:` gives
        `[nodeB:1]:`; a prefix template gives `[nodeB-1]:` or, with `--role nodeB:`,
        `[nodeB:-1]:`: the role ends at a separator before the number. torchrun's default role
        (`default`, torch/distributed/run.py `--role`) names no node, nor does a role with
        no separator before its number (`[default1]:`: where the role ends is unknown)."""
        if not self.role or self.role[-1] not in _ROLE_ENDS:
            return ""
        name = self.role.rstrip(_ROLE_ENDS)
        return "" if name in ("", "default") else name


@dataclass(frozen=True)
class PyFrame:
    """One Python frame: function, file, line."""

    function: str
    file: str
    line: int

    def text(self) -> str:
        return f"{self.function} ({self.file}{f':{self.line}' if self.line else ''})"

    @property
    def native(self) -> bool:
        """A C/C++ frame of `py-spy dump --native` (`clock_nanosleep (libc.so.6)`)."""
        return bool(_NATIVE.search(self.file)) or self.function.startswith("0x")


@dataclass(frozen=True)
class Wait:
    """A rank waited in a collective and gave up (or lost a peer there)."""

    how: str
    op: str  # all_reduce, barrier...; '' when the logs do not say
    where: Where
    pg_name: str = ""
    pg_desc: str = ""
    seq: int | None = None
    timeout_ms: int | None = None
    group_rank: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    call_site: PyFrame | None = None  # the job's own frame that called the collective
    detail: str = ""  # the error's words, cut
    numel: int | None = None  # NCCL's NumelIn of the work that timed out
    peer: str = ""  # the address of the peer gloo lost (`[10.0.0.5]:41235`), when named
    # when the work began, at the earliest: its line's clock less the time the watchdog says
    # it ran, in prefixes.clock_seconds's scale (a c10 header's clock is whole seconds: the
    # work began then or up to CLOCK_SLACK later); None without a clock or a running time
    started: float | None = None
    ran_ms: int | None = None  # how long the watchdog says the work ran
    mono: float | None = None  # its line's CLOCK_MONOTONIC fraction (prefixes.Peeled.mono)


@dataclass(frozen=True)
class Raised:
    """A Python exception that is not a collective's: the rank failed by itself."""

    type: str
    message: str
    frames: tuple[PyFrame, ...]  # innermost first
    where: Where


@dataclass(frozen=True)
class Exited:
    """An entry of torchelastic's failure summary: how a worker process ended."""

    exitcode: int
    signal: str  # 'SIGKILL'..., '' for a normal exit code
    pid: int | None
    host: str  # as the agent printed it (its FQDN; 'localhost' on some machines)
    root_cause: bool  # listed under "Root Cause (first observed failure)"
    where: Where
    rank: int | None = None
    local_rank: int | None = None


@dataclass(frozen=True)
class Warned:
    """An NCCL WARN line (NCCL's own debug output)."""

    host: str
    pid: int
    message: str
    where: Where
    peer: str = ""  # an address the message names (`10.2.0.5<33092>`): the peer


@dataclass(frozen=True)
class Claim:
    """A line that states who its writer is: a global or local rank with a pid or a host
    (the job's own lines, torch's Python logging, NCCL's `host:pid:tid` lines, py-spy's
    `--locals`, frtrace collect's labels). `source` says which; `job-on` is the job's line
    naming a host only after `on` (`rank 3 on node17`), which counts only where it is the
    writer's own node."""

    source: str
    where: Where
    rank: int | None = None
    local_rank: int | None = None
    pid: int | None = None
    host: str = ""


@dataclass(frozen=True)
class Roster:
    """torchelastic's agent after its rendezvous: which global ranks its node runs, by local
    rank (`Rendezvous complete for workers. Result:`, logged at INFO)."""

    role: str
    group_rank: int | None  # the node's rank among the agents
    local_ranks: tuple[int, ...]
    global_ranks: tuple[int, ...]
    world_size: int | None
    where: Where
    nodes: int | None = None  # group_world_size: how many agents (nodes) the job has


@dataclass(frozen=True)
class AgentEvent:
    """torchelastic's agent on its node: a worker failed (`failed (exitcode: ...) local_rank:
    L (pid: P)`), was sent a closing signal, or the whole group finished (`succeeded`)."""

    event: str  # failed | closing | succeeded | signalled (the agent itself) | store_lost
    where: Where
    pid: int | None = None  # the worker's
    local_rank: int | None = None
    exitcode: int | None = None
    signal: str = ""
    agent_pid: int | None = None


@dataclass(frozen=True)
class SlurmEvent:
    """A line slurm itself writes into the job's output: a step or job cancelled, a task that
    exited or was killed."""

    event: str  # cancelled | time_limit | task_exit | task_signal | aborted
    where: Where
    node: str = ""
    tasks: tuple[int, ...] = ()
    exitcode: int | None = None
    signal: str = ""


@dataclass(frozen=True)
class Reported:
    """One rank naming others: a monitored barrier's ranks that failed to pass, or the
    collective fingerprint check of TORCH_DISTRIBUTED_DEBUG=DETAIL naming the ranks whose
    call differs; or a rank saying it reached a monitored barrier that rank 0 never
    answered (`reached`: `ranks` holds the group rank it states of itself)."""

    how: str  # monitored_barrier | fingerprint | reached
    ranks: tuple[int, ...]  # the ranks named as failing or differing
    where: Where
    detail: str = ""
    timeout_ms: int | None = None
    against: tuple[int, ...] = ()  # fingerprint: the ranks whose call the named ones differ from
    by: int | None = None  # the global rank that wrote it, where the joining step knows it


def every_rank(ranks: Collection[int], world: int) -> bool:
    """Whether `ranks` are every rank of a world of `world` ranks, 0 to world - 1: counted,
    not listed (a world size comes from untrusted lines)."""
    if len(ranks) != world:
        return False
    return world == 0 or (min(ranks) >= 0 and max(ranks) == world - 1)


@dataclass(frozen=True)
class Entered:
    """A collective a rank entered, as TORCH_DISTRIBUTED_DEBUG=DETAIL logs it before its
    checks: the rank in its group, the group's sequence number, the op (OpType's name)."""

    group_rank: int
    seq: int
    op: str
    where: Where


@dataclass(frozen=True)
class GroupLine:
    """ProcessGroupNCCL's log prefix `[PG ID <id> PG GUID <name>(<desc>) Rank <group rank>]`
    on a line, with the group's size and the writer's global rank when its initialization
    options are logged."""

    pg_id: int
    pg_name: str
    pg_desc: str
    group_rank: int
    where: Where
    size: int | None = None
    global_rank: int | None = None
    # the group's progress its heartbeat monitor logged with a dump signal: the seq of the last
    # work enqueued and of the last completed (None where the line states none)
    enqueued: int | None = None
    completed: int | None = None


@dataclass(frozen=True)
class Address:
    """A host's own network address, as NCCL's bootstrap logs it."""

    host: str
    pid: int
    address: str
    where: Where


@dataclass(frozen=True)
class ThreadStack:
    """One thread of a py-spy dump or a faulthandler traceback: frames innermost first."""

    tid: str
    status: str  # idle, active, active+gil... ('' from faulthandler)
    name: str
    frames: tuple[PyFrame, ...]

    @property
    def python_frames(self) -> tuple[PyFrame, ...]:
        """The frames from the innermost Python one on (`--native` frames before it dropped)."""
        for i, frame in enumerate(self.frames):
            if not frame.native:
                return self.frames[i:]
        return self.frames

    @property
    def own_frames(self) -> tuple[PyFrame, ...]:
        """The frames from the innermost one of the job's own code on: the standard
        library's waiting calls (a queue's get, a lock, a select) say how it waits, the
        frame that called them says where."""
        frames = self.python_frames
        for i, frame in enumerate(frames):
            if not _WAITING_MODULES.search(frame.file.replace("\\", "/")):
                return frames[i:]
        return frames


@dataclass(frozen=True)
class Label:
    """`# frtrace-collect rank=R local_rank=L host=H pid=P`, written before a stacks block."""

    rank: int | None
    local_rank: int | None
    host: str
    pid: int | None


# torchrun's agent: `torchrun` (its console script) -> torch/distributed/run.py `main` ->
# torch/distributed/elastic/agent/server/api.py `run`, where it waits on its workers
_AGENT_FILES = re.compile(r"(?:^|/)torchrun$|torch/distributed/(?:run\.py|elastic/agent/)")


@dataclass(frozen=True)
class ProcessStack:
    """One process of a py-spy dump (or a faulthandler dump a log or a label ties to one)."""

    pid: int | None  # None: a faulthandler dump whose process the file does not name
    cmdline: str
    python: str
    threads: tuple[ThreadStack, ...]
    host: str  # the label's, else the file's (resolved by the joining step)
    where: Where
    label: Label | None = None
    # `py-spy dump --locals`: the ints the main thread's frames hold in the names
    # RANK/LOCAL_RANK/rank/local_rank/global_rank (outermost frame's value first)
    locals: tuple[tuple[str, int], ...] = ()
    source: str = "py-spy"  # or "faulthandler"

    @property
    def main(self) -> ThreadStack | None:
        """The main thread (py-spy names it MainThread; faulthandler marks the current
        thread), else the first thread listed."""
        for t in self.threads:
            if t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None

    @property
    def at(self) -> str:
        """Where its stack is, by file name and line (`slurm-77.out:14`): what tells apart
        faulthandler dumps that name no pid."""
        return f"{PurePath(self.where.file).name}:{self.where.line}"

    @functools.cached_property
    def is_agent(self) -> bool:
        """torchrun's agent itself, not a worker: by its command line (py-spy's) or, where
        none is known (faulthandler), by its main thread running the agent's code (read
        once: the joining step asks for every untied process several times)."""
        if "torchrun" in self.cmdline or "torch.distributed.run" in self.cmdline:
            return True
        main = self.main
        return main is not None and any(
            _AGENT_FILES.search(f.file.replace("\\", "/")) for f in main.python_frames
        )


@dataclass
class RankEvidence:
    """Everything the inputs say about one global rank."""

    rank: int
    host: str = ""
    local_rank: int | None = None
    pid: int | None = None
    files: list[str] = field(default_factory=list)  # dumps, logs, stacks that speak of it
    waits: list[Wait] = field(default_factory=list)
    raised: list[Raised] = field(default_factory=list)
    exits: list[Exited] = field(default_factory=list)
    warnings: list[Warned] = field(default_factory=list)
    groups: list[GroupLine] = field(default_factory=list)
    entered: list[Entered] = field(default_factory=list)  # its last DETAIL lines, as logged
    stack: ProcessStack | None = None
    last_lines: list[tuple[Where, str]] = field(default_factory=list)  # what it wrote last
    closed: str = ""  # the signal its agent sent it while tearing the job down (alive then)

    def add_file(self, path: str) -> None:
        if path not in self.files:
            self.files.append(path)

    @property
    def exit(self) -> Exited | None:
        return self.exits[-1] if self.exits else None


@dataclass(frozen=True)
class InputFile:
    """A log or py-spy file that was read, and how much of it."""

    path: str
    kind: str  # "log" or "stacks"
    host: str
    lines: int
    truncated: bool = False  # larger than the budget: its head and tail were read
    binary_lines: int = 0  # lines skipped as binary
    cut_lines: int = 0  # lines longer than the budget, cut


@dataclass(frozen=True)
class Ending:
    """How the job ended as far as the logs tell: each node's agent that said its workers
    all succeeded, and what stopped it otherwise (a cancel, a failure summary)."""

    succeeded_nodes: tuple[str, ...] = ()  # hosts whose agent logged success
    cancelled: tuple[SlurmEvent, ...] = ()
    failed_nodes: tuple[str, ...] = ()  # hosts with a failure summary or a failed worker
    nodes: int | None = None  # how many nodes the job has, as its agents' rosters say
    signalled: tuple[str, ...] = ()  # signals torchrun's agents received (a cancel)
    # hosts whose torchrun agent lost its rendezvous store (RendezvousConnectionError)
    store_lost: tuple[str, ...] = ()


@dataclass
class Communicator:
    """An NCCL communicator as NCCL's INFO lines show it: its size and its members, by
    global rank, with each one's rank in it."""

    comm_id: str
    nranks: int
    members: dict[int, int] = field(default_factory=dict)


@dataclass
class Evidence:
    """The logs' and stacks' account of the job, by global rank."""

    ranks: dict[int, RankEvidence] = field(default_factory=dict)
    files: list[InputFile] = field(default_factory=list)
    unmatched: list[ProcessStack] = field(default_factory=list)  # worker stacks no rank claimed
    notes: list[str] = field(default_factory=list)
    dump_files: int = 0
    # every worker process the logs show, as (node, local rank): a healthy job's logs may
    # name no global rank at all
    workers: set[tuple[str, int]] = field(default_factory=set)
    reports: list[Reported] = field(default_factory=list)  # ranks naming others
    ending: Ending = field(default_factory=Ending)
    world_size: int | None = None  # as torchelastic's roster or the logs state it
    # worker processes an agent names (`Sending process P closing signal`) that are no rank
    # the inputs show, nor could be one: (host, pid); each is a rank no input shows
    agent_workers: list[tuple[str, int]] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)  # network address -> host
    job_seen: bool = False  # the logs or stacks show a distributed job at all
    debug_detail: bool = False  # the job ran with TORCH_DISTRIBUTED_DEBUG=DETAIL
    communicators: dict[str, Communicator] = field(default_factory=dict)  # by NCCL commId

    def rank(self, rank: int) -> RankEvidence:
        got = self.ranks.get(rank)
        if got is None:
            got = self.ranks[rank] = RankEvidence(rank)
        return got

    def hosts(self, ranks: list[int]) -> list[str]:
        """The hosts of these ranks, as far as the inputs tell, in rank order."""
        out: list[str] = []
        for r in ranks:
            ev = self.ranks.get(r)
            if ev is not None and ev.host and ev.host not in out:
                out.append(ev.host)
        return out

    @property
    def logs(self) -> list[InputFile]:
        return [f for f in self.files if f.kind == "log"]

    @property
    def stack_files(self) -> list[InputFile]:
        return [f for f in self.files if f.kind == "stacks"]

    @property
    def stacks(self) -> int:
        """Processes whose stacks were read (matched to a rank or not)."""
        return sum(1 for ev in self.ranks.values() if ev.stack is not None) + len(self.unmatched)
