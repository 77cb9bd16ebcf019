"""What the logs and py-spy stacks say about each rank, as typed records.

The parsers (frtrace.evidence.logs, frtrace.evidence.pyspy) produce these; the matching
(frtrace.evidence.gather) files them under global ranks; the analysis
(frtrace.analysis.logs) reasons on them; the reports word them. Every string here was read
from an untrusted file: reports escape it before printing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How a rank left a collective it waited in (Wait.how).
TIMEOUT = "timeout"  # its timeout expired (gloo's wait, NCCL's watchdog)
PEER_LOST = "peer_lost"  # gloo: a peer closed or reset its connection (that peer died)
COMM_ERROR = "comm_error"  # another communication error (DistBackendError, NCCL error)

# Innermost Python frames kept per exception or thread.
MAX_FRAMES = 12
_NATIVE = re.compile(r"\.(?:so(?:\.[\w.]+)?|dylib|dll|exe)$|^\?\?$")


@dataclass(frozen=True)
class Where:
    """A line of an input file (`line` 0: in a part of a large file read without counting)."""

    file: str
    line: int = 0


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
    host: str  # as the agent printed it (its FQDN: often useless, 'localhost')
    root_cause: bool  # listed under "Root Cause (first observed failure)"
    where: Where


@dataclass(frozen=True)
class Warned:
    """An NCCL WARN line (NCCL's own debug output)."""

    host: str
    pid: int
    message: str
    where: Where


@dataclass(frozen=True)
class ThreadStack:
    """One thread of a py-spy dump: frames innermost first."""

    tid: str
    status: str  # idle, active, active+gil...
    name: str
    frames: tuple[PyFrame, ...]

    @property
    def python_frames(self) -> tuple[PyFrame, ...]:
        """The frames from the innermost Python one on (`--native` frames before it dropped)."""
        for i, frame in enumerate(self.frames):
            if not frame.native:
                return self.frames[i:]
        return self.frames


@dataclass(frozen=True)
class Label:
    """`# frtrace-collect rank=R local_rank=L host=H pid=P`, written before a py-spy block."""

    rank: int | None
    local_rank: int | None
    host: str
    pid: int | None


@dataclass(frozen=True)
class ProcessStack:
    """One process of a py-spy dump."""

    pid: int
    cmdline: str
    python: str
    threads: tuple[ThreadStack, ...]
    host: str  # the label's, else the file's
    where: Where
    label: Label | None = None

    @property
    def main(self) -> ThreadStack | None:
        """The main thread (py-spy names it MainThread), else the first thread listed."""
        for t in self.threads:
            if t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None

    @property
    def is_agent(self) -> bool:
        """torchrun's agent itself, not a worker."""
        return "torchrun" in self.cmdline or "torch.distributed.run" in self.cmdline


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
    stack: ProcessStack | None = None

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


@dataclass
class Evidence:
    """The logs' and stacks' account of the job, by global rank."""

    ranks: dict[int, RankEvidence] = field(default_factory=dict)
    files: list[InputFile] = field(default_factory=list)
    unmatched: list[ProcessStack] = field(default_factory=list)  # stacks no rank claimed
    notes: list[str] = field(default_factory=list)
    dump_files: int = 0
    # every worker process the logs show, as (node, local rank): a healthy job's logs may
    # name no global rank at all
    workers: set[tuple[str, int]] = field(default_factory=set)

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
        """Processes whose py-spy stacks were read (matched to a rank or not)."""
        return sum(1 for ev in self.ranks.values() if ev.stack is not None) + len(self.unmatched)
