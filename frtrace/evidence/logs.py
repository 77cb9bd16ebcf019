"""Read one log file (a node's torchrun output, a slurm job log, a rank's own file) into typed
records, each with who wrote it as the line states it (frtrace.evidence.prefixes).

Nothing here decides which rank or host a speaker is: srun tasks, torchrun's local ranks and
role names are resolved for the whole job by frtrace.evidence.gather. What is read, each format
cited where its pattern is defined below:
- Python tracebacks (a worker's exception; a collective's timeout or lost peer in gloo, an
  NCCL error, a failed DETAIL check) and faulthandler's thread dumps;
- NCCL's watchdog (timeouts, errors, the group's status) and ProcessGroupNCCL's group prefix,
  which states the writer's rank within a group, and its initialization options;
- TORCH_DISTRIBUTED_DEBUG=DETAIL's collective fingerprint check and monitored barriers, which
  name the ranks that differ or never came;
- torchelastic: the failure summary, the agent's worker events and its rendezvous roster;
- slurm's own lines (a cancelled step or job, a task that exited or was killed);
- NCCL's INFO and WARN lines (`host:pid:tid`), and the job's own lines that pair a rank with
  a pid or a host.
Everything else is skipped. The file is streamed within budgets (frtrace.dumps.text).
"""

from __future__ import annotations

import os
import re
import signal as signals
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from frtrace.dumps.text import LineStats, read_lines
from frtrace.evidence.prefixes import Peeled, looks_labelled, peel
from frtrace.evidence.records import (
    COMM_ERROR,
    ENTERED_TAIL,
    MAX_FRAMES,
    PEER_LOST,
    TIMEOUT,
    Address,
    AgentEvent,
    Claim,
    Entered,
    Exited,
    GroupLine,
    InputFile,
    ProcessStack,
    PyFrame,
    Raised,
    Reported,
    Roster,
    SlurmEvent,
    Speaker,
    ThreadStack,
    Wait,
    Warned,
    Where,
)

_RANK_TAG = re.compile(r"\[rank(?P<rank>\d{1,7})\]:")
MAX_TEXT = 300  # characters kept of a message read from a log
MAX_RECORDS = 4096  # records of each kind kept per file (the last ones)
LAST_LINES = 6  # lines kept per speaker: what a culprit wrote last
LABEL_PROBE = 200  # lines read before deciding whether a file carries srun's labels

# Python's traceback (traceback.format_exception).
_TB_START = "Traceback (most recent call last):"
_TB_FRAME = re.compile(
    r'^\s{2}File "(?P<file>[^"]{0,1024})", line (?P<line>\d{1,9}), in (?P<fn>.{1,256})$'
)
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]{0,200}?)(?::\s?(?P<msg>.*))?$")

# faulthandler (CPython Python/traceback.c, _Py_DumpTracebackThreads and dump_frame): a
# `Fatal Python error: <reason>` or `Timeout (h:mm:ss)!` line, then per thread
# `Thread 0x<id> (most recent call first):` (`Current thread 0x<id> ...` for the one that
# dumps) and its frames `  File "<file>", line <n> in <function>`, innermost first. It walks
# the interpreter's threads from their head (PyInterpreterState_ThreadHead, the newest
# first) and writes an empty line before every thread but the first (`if (nthreads != 0)
# PUTS(fd, "\n")`), so a thread header straight after a frame, once the dump has shown its
# `Current thread` (a signal's main thread, the oldest, comes last), begins another
# process's dump: workers sharing one stderr (`torchrun` without `--tee`).
FAULT_THREAD = re.compile(
    r"^(?P<cur>Current thread|Thread) (?P<tid>0x[0-9a-fA-F]{1,16}) \(most recent call first\):"
)
FAULT_FRAME = re.compile(
    r'^\s{2}File "(?P<file>[^"]{0,1024})", line (?P<line>\d{1,9}) in (?P<fn>.{1,256})$'
)

# NCCL's watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp): WorkNCCL::checkTimeout
# logs `<WorkNCCL::logPrefix() = "[Rank <rank>] ">Watchdog caught collective operation
# timeout: <work> ran for <ms> milliseconds before timing out.`, where operator<<(WorkNCCL)
# writes `WorkNCCL(SeqNum=<seq>, OpType=<opTypeToString>, NumelIn=<n>, NumelOut=<n>,
# Timeout(ms)=<ms>)`, then ` ran for <ms> milliseconds before timing out.`: the time since
# workStartTime_ (set when the work was made, at enqueue), so with the c10 header's clock
# it tells when the work began. The `[Rank N]` there is fixed per process (a static in
# logPrefix): it is not reliably the rank in the group that timed out.
_WATCHDOG = re.compile(
    r"(?:\[Rank (?P<grank>\d{1,7})\] )?Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40}), NumelIn=(?P<nin>\d{1,20}), "
    r"NumelOut=(?P<nout>\d{1,20}), Timeout\(ms\)=(?P<timeout>\d{1,12})\)"
    r"(?: ran for (?P<ran>\d{1,12}) milliseconds)?"
)
# WorkNCCL::checkAndSetException, for an NCCL error rather than a timeout: `<logPrefix()>
# Collective <work> raised the following async exception: <message>`.
_ASYNC_ERROR = re.compile(
    r"Collective WorkNCCL\(SeqNum=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40}),.{0,200}?\) "
    r"raised the following async exception: (?P<msg>.*)"
)
# ProcessGroupNCCL::createLogPrefix: `[PG ID <local id> PG GUID <pg_uid>(<pg_desc>) Rank
# <rank in the group>] ` (without `(<desc>)` when the group has none), before the lines a
# group logs; Watchdog::runLoop: `<prefix> failure detected by watchdog at work sequence id:
# <seq> PG status: last enqueued work: <n>, last completed work: <n>`; the constructor logs
# `<prefix>ProcessGroupNCCL initialization options: size: <n>, global rank: <r>, ...`.
_PG_PREFIX = re.compile(
    r"\[PG ID (?P<pgid>\d{1,9}) PG GUID (?P<uid>[^\s()\[\]]{1,256})(?:\((?P<desc>[^()]{0,256})\))?"
    r" Rank (?P<grank>\d{1,7})\]"
)
_WATCHDOG_STATUS = re.compile(
    r"failure detected by watchdog at work sequence id: (?P<seq>\d{1,12}) PG status: last "
    r"enqueued work: (?P<enq>-?\d{1,12}), last completed work: (?P<done>-?\d{1,12})"
)
_PG_OPTIONS = re.compile(r"size: (?P<size>\d{1,9}), global rank: (?P<global>\d{1,9})")
# ProcessGroupNCCL::HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg: `<logPrefix()>Received a
# dump signal due to a collective timeout from <this local rank| rank N> and we will try our
# best to dump the debug info. Last enqueued NCCL work: <n>, last completed NCCL work: <n>.`
# (pgStatus_'s lastEnqueuedSeq and lastCompletedSeq of the group its prefix names), logged by
# every rank whose monitor sees the dump signal, its own watchdog fired or not.
_DUMP_SIGNAL = re.compile(
    r"Received a dump signal due to a collective timeout from .{0,40}? and we will try our "
    r"best to dump the debug info\. Last enqueued NCCL work: (?P<enq>-?\d{1,12}), last "
    r"completed NCCL work: (?P<done>-?\d{1,12})"
)
# gloo (third_party/gloo/gloo/transport/tcp/unbound_buffer.cc, UnboundBuffer::waitRecv and
# waitSend): `Timed out waiting <ms>ms for recv|send operation to complete`.
_GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d{1,12})ms for (?P<dir>recv|send) operation")
# gloo/transport/tcp/pair.cc, Pair::read: `Connection closed by peer <addr>` (EOF: the peer
# went away) and `Read error <addr>: <strerror>` (ECONNRESET when it died); <addr> is
# `[<ip>]:<port>`.
_GLOO_PEER = re.compile(
    r"(?:Connection closed by peer|Read error) (?P<addr>\[[0-9A-Fa-f.:]{1,64}\]:\d{1,5})"
    r"(?:\.|: Connection reset by peer|$)"
)
_COMM_TYPES = ("DistBackendError", "DistNetworkError", "DistStoreError")

# TORCH_DISTRIBUTED_DEBUG=DETAIL (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp,
# ProcessGroupWrapper::runCollectiveChecks, via checkCollectiveFingerprints / CollectiveFingerPrint:
# `Detected mismatch between collectives on ranks. Rank <me> is running collective:
# CollectiveFingerPrint(...), but Rank <other> is running collective: ...`), and
# ProcessGroupGloo::monitoredBarrier (ProcessGroupGloo.cpp): `[Rank 0]: Rank <r> failed to
# pass monitoredBarrier in <ms> ms`, `[Rank 0]: Ranks <r>, <r> failed to pass ...` with
# wait_all_ranks. Both were seen in real gloo runs of torch 2.13 here.
_FINGERPRINT = re.compile(
    r"Detected mismatch between collectives on ranks\. Rank (?P<me>\d{1,7}) is running "
    r"collective: CollectiveFingerPrint\((?P<mine>.{0,4000}?)\), but Rank (?P<other>\d{1,7}) is "
    r"running collective: CollectiveFingerPrint\((?P<theirs>[^)]{0,400})"
)
_FP_OP = re.compile(r"OpType=(?P<op>\w{1,40})")
# Every collective a rank enters under DETAIL, logged before the monitored barrier of its
# checks (ProcessGroupWrapper.cpp, runCollectiveChecks: `LOG(INFO) << "[Rank " << getRank()
# << "] " << "Running collective: " << finger_print`; CollectiveFingerPrint's `<<` writes
# `CollectiveFingerPrint(SequenceNumber=<n>, OpType=<op>, …`). getRank() is the rank in the
# wrapped group, the number the group's own sequence. Seen in real torch 2.13 gloo runs here.
_RUNNING = re.compile(
    r"\[Rank (?P<rank>\d{1,7})\] Running collective: CollectiveFingerPrint\("
    r"SequenceNumber=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40})"
)
# CollectiveFingerPrint's aspects, as `Collectives differ in the following aspects:` lists them
_FP_ASPECTS = ("Sequence number", "Op type", "Tensor shapes", "Tensor dtypes", "Tensor devices")
_MONITORED = re.compile(
    r"Ranks? (?P<ranks>\d{1,7}(?:, ?\d{1,7}){0,4096}) failed to pass monitoredBarrier in "
    r"(?P<ms>\d{1,12}) ms"
)
# The other ranks' side (same function): each sends to rank 0 and waits for its answer; only
# rank 0 times the barrier, so where rank 0 never answers, each raises `Rank <r> successfully
# reached monitoredBarrier, but received errors while waiting for send/recv from rank 0.
# Please check rank 0 logs for faulty rank.` (<r>: its rank in the barrier's group).
_REACHED = re.compile(
    r"Rank (?P<me>\d{1,7}) successfully reached monitoredBarrier, but received errors while "
    r"waiting for send/recv from rank 0"
)
# torch/csrc/distributed/c10d/debug.cpp, setDebugLevelFromEnvironment: `[c10d] The debug level
# is set to DETAIL.` (INFO): every group is then wrapped by ProcessGroupWrapper, whose checks
# run collectives of their own on a helper gloo group.
_DEBUG_LEVEL = re.compile(r"\[c10d\] The debug level is set to (?P<level>[A-Z]{1,10})\.")

# torchelastic's summary (torch/distributed/elastic/multiprocessing/errors/__init__.py,
# ChildFailedError.format_msg with _MSG_FORMAT_TEMPLATE and _FAILURE_FORMAT_TEMPLATE): a
# `Failures:` list and a `Root Cause (first observed failure):` block of entries
# `[<idx>]:` / `  host      : <host>` / `  rank      : <rank> (local_rank: <local>)` /
# `  exitcode  : <code> (pid: <pid>)` (newer: then ` (<SIGNAME>)` for a signal) /
# `  traceback : Signal <n> (<SIGNAME>) received by PID <pid>` for a signal.
_SUM_ENTRY = re.compile(r"^\[(?P<idx>\d{1,9})\]:\s*$")
_SUM_HOST = re.compile(r"^\s+host\s+:\s*(?P<host>\S{1,256})\s*$")
_SUM_RANK = re.compile(r"^\s+rank\s+:\s*(?P<rank>\d{1,9}) \(local_rank: (?P<local>\d{1,9})\)")
_SUM_EXIT = re.compile(
    r"^\s+exitcode\s+:\s*(?P<code>-?\d{1,9}) \(pid: (?P<pid>\d{1,12})\)"
    r"(?:\s*\((?P<sig>SIG\w{1,20})\))?"
)
_SUM_SIGNAL = re.compile(r"^\s+traceback\s+:\s*Signal \d{1,3} \((?P<sig>SIG\w{1,20})\)")
_SUM_ROOT = "Root Cause (first observed failure):"
# The agent (torch/distributed/elastic/multiprocessing/api.py): `failed (exitcode: <code>)
# local_rank: <local> (pid: <pid>) of binary: <binary>` (MultiprocessContext._poll and
# SubprocessContext._poll) and `Sending process <pid> closing signal <SIG>`
# (SubprocessContext._close / MultiprocessContext._close); torch/distributed/elastic/agent/
# server/api.py, SimpleElasticAgent._invoke_run: `[<role>] worker group successfully
# finished.` and _rendezvous: `[<role>] Rendezvous complete for workers. Result:` then
# `  <key>=<value>` lines (both at INFO).
_AGENT_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d{1,9})\) local_rank: (?P<local>\d{1,7}) "
    r"\(pid: (?P<pid>\d{1,12})\) of binary"
)
_AGENT_CLOSING = re.compile(
    r"Sending process (?P<pid>\d{1,12}) closing signal (?P<sig>SIG\w{1,20})"
)
# SimpleElasticAgent.run, when the agent itself is signalled (a cancel, a time limit):
# `Received <signal> death signal, shutting down workers` (<signal> is the Signals member,
# printed as `15` or `Signals.SIGTERM` by Python version).
_AGENT_SIGNALLED = re.compile(r"Received (?P<sig>\S{1,40}) death signal, shutting down workers")
_AGENT_DONE = re.compile(r"\[(?P<role>[^\]]{0,256})\] worker group successfully finished")
_ROSTER_START = "Rendezvous complete for workers. Result:"
_ROSTER_FIELD = re.compile(
    r"^\s+(?P<key>group_rank|group_world_size|local_ranks|global_ranks|global_world_sizes)="
    r"(?P<value>.{0,100000})$"
)

# slurm's own lines. slurmstepd (src/slurmd/slurmstepd/req.c, _handle_signal_container):
# `*** <JOB id|STEP id.step> ON <node> CANCELLED AT <time> ***`, with ` DUE TO TIME LIMIT`,
# ` DUE TO PREEMPTION`, ` DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS` or (25.05 on)
# ` DUE to SIGNAL <name>` before the stars, written through src/common/log.c as `slurmstepd:
# error: ...` (24.11) or `[<ISO time>] error: ...` (25.05); srun (src/srun/launch.c,
# _task_finish): `srun: error: <node>: task <ids>: Exited with exit code <n>`, or the
# signal's strsignal() (`Killed`, `Terminated`) for a task a signal ended.
_SLURM_CANCEL = re.compile(
    r"(?:slurmstepd(?:-\S{1,64})?: |\[[^\]]{1,40}\] )error: \*\*\* (?:JOB|STEP) \S{1,64} ON "
    r"(?P<node>\S{1,256}) CANCELLED AT \S{1,64}"
    r"(?: DUE (?:TO|to) (?P<why>[A-Za-z ,]{1,80}?))? \*\*\*"
)
_SRUN_TASK = re.compile(
    r"srun: error: (?P<node>[^\s:]{1,256}): tasks? (?P<tasks>[\d,\-]{1,4096}): (?P<what>.{1,200})$"
)
_SRUN_EXIT = re.compile(r"Exited with exit code (?P<code>\d{1,5})")
_SRUN_SIGNALS = {"Killed": "SIGKILL", "Terminated": "SIGTERM", "Aborted": "SIGABRT"}

# NCCL's own output (nccl src/debug.cc, ncclDebugLog): `<host>:<pid>:<tid> [<dev>]
# NCCL INFO|WARN <message>` (WARN lines add `<file>:<line> ` before NCCL). Its bootstrap logs
# the address each process uses (src/bootstrap.cc, bootstrapNetInit: `Bootstrap : Using
# <ifname>:<address><port>`); WARNs about a peer name its address as `<ip><<port>>`.
_NCCL_LINE = re.compile(
    r"(?P<host>[\w.\-]{1,256}):(?P<pid>\d{1,12}):\d{1,12} \[[\w.\-]{1,12}\] (?:\S{1,300} )?"
    r"NCCL (?P<level>INFO|WARN) (?P<msg>.*)"
)
_NCCL_BOOTSTRAP = re.compile(
    r"Bootstrap ?: Using (?:\[\d{1,3}\])?[\w.\-]{1,64}:(?P<addr>[0-9A-Fa-f.:]{3,64})<"
)
# src/init.cc, ncclCommInitRankFunc: `<func> comm <ptr> rank <r> nranks <n> cudaDev <d> ...
# - Init COMPLETE`: the process's rank in one communicator of n ranks. A communicator made
# from a unique id (not split from a parent) ends `commId 0x<hashUniqueId(commId)> - Init
# COMPLETE`: the same for every member, so it tells who shares the communicator.
_NCCL_COMM = re.compile(
    r"comm 0x[0-9a-fA-F]{1,16} rank (?P<rank>\d{1,7}) nranks (?P<n>\d{1,7}) .{0,200}Init COMPLETE"
)
_NCCL_COMM_ID = re.compile(r"commId 0x(?P<id>[0-9a-fA-F]{1,16}) - Init COMPLETE")
_NCCL_PEER = re.compile(r"(?P<addr>\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]{3,64})<(?P<port>\d{1,5})>")

# The job's own lines that pair its rank with a pid or a host (`rank 3 pid 1234 on node17`,
# `[RANK=3] host=node17 pid=1234`, `rank=3 pid=1234`): words the job chose, so only a line
# that names a rank and a pid or a host is taken, never torch's own lines (read above).
_CLAIM_RANK = re.compile(
    r"(?<![A-Za-z_.])(?:global[_ ]rank|rank)\s{0,3}[=:]?\s{0,3}(?P<v>\d{1,7})\b", re.I
)
_CLAIM_LOCAL = re.compile(r"(?<![\w.])local[_ ]rank\s{0,3}[=:]?\s{0,3}(?P<v>\d{1,7})\b", re.I)
_CLAIM_PID = re.compile(r"(?<![\w.])pid\s{0,3}[=:]?\s{0,3}(?P<v>\d{1,10})\b", re.I)
_CLAIM_HOST = re.compile(
    r"(?<![\w.])(?:hostname|host|node)\s{0,3}[=:]\s{0,3}(?P<v>[A-Za-z][\w.\-]{0,253})"
    r"|\bon (?:host |node )?(?P<on>[A-Za-z][\w\-]{0,62}(?:\.[\w\-]{1,62}){0,6})\b",
    re.I,
)

# Per-rank files: `rank3.log`, `worker_rank-3.out`.
_RANK_FILE = re.compile(r"(?:^|[_\-.])rank[_\-]?(?P<rank>\d{1,7})$", re.IGNORECASE)
_LOG_SUFFIXES = (".gz", ".log", ".out", ".err", ".txt", ".stdout", ".stderr", ".pyspy")
# Words around a node's name in the files people collect (`trace-%N.out`, `pyspy_<host>.txt`,
# `<host>.pyspy.txt`, `node-<host>.log`): not part of the name.
_NAME_WORDS = frozenset(
    [
        "pyspy",
        "spy",
        "py",
        "trace",
        "traces",
        "stack",
        "stacks",
        "dump",
        "dumps",
        "log",
        "logs",
        "out",
        "err",
        "stdout",
        "stderr",
        "slurm",
    ]
)
# torchrun --redirects: `<log_dir>/<run_id>_<suffix>/attempt_<n>/<local_rank>/stdout.log`
# (torch/distributed/elastic/multiprocessing/api.py, DefaultLogsSpecs.reify).
_ATTEMPT = re.compile(r"attempt_\d{1,6}")
_REDIRECT_FILE = re.compile(r"(?:stdout|stderr)(?:\.log)?")

# NCCL's OpType names (torch/csrc/distributed/c10d/ProcessGroup.cpp, opTypeToString) as the
# Python calls that issue them.
OP_NAMES = {
    "BROADCAST": "broadcast",
    "ALLREDUCE": "all_reduce",
    "ALLREDUCE_COALESCED": "all_reduce_coalesced",
    "REDUCE": "reduce",
    "ALLGATHER": "all_gather",
    "_ALLGATHER_BASE": "_allgather_base",
    "ALLGATHER_COALESCED": "all_gather_coalesced",
    "GATHER": "gather",
    "SCATTER": "scatter",
    "REDUCE_SCATTER": "reduce_scatter",
    "_REDUCE_SCATTER_BASE": "_reduce_scatter_base",
    "ALLTOALL_BASE": "all_to_all_single",
    "ALLTOALL": "all_to_all",
    "SEND": "send",
    "RECV": "recv",
    "RECVANYSOURCE": "recv_any_source",
    "BARRIER": "barrier",
    "COALESCED": "coalesced",
}


def _maybe(rest: str) -> bool:
    """Whether a line's message may say more than who wrote it; the others are only noted
    under their writer. Substring tests, faster than one regex of alternatives on the
    millions of lines of a large log."""
    return (
        "Traceback" in rest
        or "atchdog" in rest
        or "exception" in rest
        or "NCCL " in rest
        or "Root Cause" in rest
        or "PG ID" in rest
        or "monitoredBarrier" in rest
        or "mismatch between collectives" in rest
        or "Running collective" in rest
        or "local_rank" in rest
        or "closing signal" in rest
        or "successfully finished" in rest
        or "death signal" in rest
        or "debug level" in rest
        or "Rendezvous complete" in rest
        or "srun" in rest
        or "slurmstepd" in rest
        or "CANCELLED AT" in rest  # slurmstepd's from 25.05 carry no `slurmstepd:`
        or "most recent call first" in rest
        or "Fatal Python error" in rest
        or "pid" in rest
        or "ank" in rest
        or "ANK" in rest
        or (rest[:1] == "[" and rest.rstrip().endswith("]:"))  # a summary's `[0]:`
    )


def _bounded() -> deque[Any]:
    return deque(maxlen=MAX_RECORDS)


@dataclass
class ParsedLog:
    """One log file's records, each with who wrote it, and what the file's place says."""

    input: InputFile
    host: str  # the node the file's place names (its folder, its name), '' when none
    labelled: bool = False  # lines carry srun's task labels
    waits: deque[tuple[Speaker, Wait]] = field(default_factory=_bounded)
    raised: deque[tuple[Speaker, Raised]] = field(default_factory=_bounded)
    exits: deque[tuple[Speaker, Exited]] = field(default_factory=_bounded)
    warnings: deque[tuple[Speaker, Warned]] = field(default_factory=_bounded)
    claims: deque[tuple[Speaker, Claim]] = field(default_factory=_bounded)
    rosters: deque[tuple[Speaker, Roster]] = field(default_factory=_bounded)
    agent: deque[tuple[Speaker, AgentEvent]] = field(default_factory=_bounded)
    agent_pids: set[int] = field(default_factory=set)  # torchrun agents that wrote here
    # (nranks, the rank in it, its commId or ''), per NCCL communicator a process joined
    comms: deque[tuple[int, Claim, str]] = field(default_factory=_bounded)
    debug_level: str = ""  # TORCH_DISTRIBUTED_DEBUG as torch logged it
    slurm: deque[SlurmEvent] = field(default_factory=_bounded)
    reports: deque[tuple[Speaker, Reported]] = field(default_factory=_bounded)
    groups: deque[tuple[Speaker, GroupLine]] = field(default_factory=_bounded)
    addresses: deque[Address] = field(default_factory=_bounded)
    stacks: deque[tuple[Speaker, ProcessStack]] = field(default_factory=_bounded)
    # each one's last ENTERED_TAIL, in the order logged
    entered: dict[Speaker, deque[Entered]] = field(default_factory=dict)
    # every worker speaker seen, in the order the file shows them (a dict: a set's order
    # would follow the hash seed, and with it which rank the joining step files first)
    speakers: dict[Speaker, None] = field(default_factory=dict)
    last_lines: dict[Speaker, deque[tuple[int, str]]] = field(default_factory=dict)
    file_rank: int | None = None  # a per-rank file: the rank in its name
    file_local: int | None = None  # torchrun --redirects: the local rank its folder names


# torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py, C10dRendezvousBackend.
# _call_store: a store operation that fails raises RendezvousConnectionError("The connection
# to the C10d store has failed. ..."), which ends torchrun's agent (the class is in
# torch/distributed/elastic/rendezvous/api.py)
_STORE_LOST = "RendezvousConnectionError"


def host_from_path(path: Path, root: Path | None, shared: frozenset[str] = frozenset()) -> str:
    """The node a file's place names: its sub-folder of `root` (`folder_host`), else its
    name without the usual suffixes and words (`nodeB.log`, `trace-nodeB.out`,
    `pyspy_nodeB.txt` -> nodeB); '' when what is left is no name (`slurm-1234.out`,
    `stdout.log`)."""
    return folder_host(path, root, shared) or _name_host(path)


def _name_host(path: Path) -> str:
    """The node a file's own name names, without the usual suffixes and words; ''."""
    name = _strip_suffixes(path.name)
    return "" if _RANK_FILE.search(name) else _strip_words(name)  # `rank3.log`: no node


def folder_host(path: Path, root: Path | None, shared: frozenset[str] = frozenset()) -> str:
    """The node a file's sub-folder of `root` names (one folder per node; the folder above
    torchrun's `--redirects` layout); '' for none: collecting words (`logs/`, `dumps/`) and
    folders in `shared` (relative to `root`, see `shared_folders`: they collect several
    nodes' files) name no node."""
    if root is None or same_folder(path.parent, root):
        return ""
    try:
        parts = Path(os.path.relpath(path.parent, root)).parts
    except ValueError:
        return ""
    if not parts or parts[0] in ("..", "."):
        return ""
    for i, part in enumerate(parts):
        if _ATTEMPT.fullmatch(part) or _collects(part, os.path.join(*parts[: i + 1]), shared):
            continue
        if any(_ATTEMPT.fullmatch(p) for p in parts) and part == parts[-1]:
            break  # the local rank's folder of a --redirects layout
        return _strip_words(part) or part
    return ""


def collecting_folder(folder: Path, root: Path, shared: frozenset[str] = frozenset()) -> bool:
    """Whether a folder below `root` collects files rather than holding one node's: named
    by a collecting word (`dumps/`, `logs/`), or in `shared` (see `shared_folders`)."""
    try:
        rel = os.path.relpath(folder, root)
    except ValueError:
        return False
    return _collects(folder.name, rel, shared)


def _collects(name: str, rel: str, shared: frozenset[str]) -> bool:
    """A folder (its name, its path relative to the root) named by a collecting word, or
    holding several nodes' files."""
    return name.lower() in _NAME_WORDS or rel in shared


def short_host(name: str) -> str:
    """A host's name as compared: lower case, its first DNS label (not for an address:
    `10.0.0.5` and `10.0.0.6` are two hosts)."""
    name = name.strip().lower()
    if re.fullmatch(r"[\d.]+|[0-9a-f:]+", name):
        return name
    return name.split(".", 1)[0]


def shared_folders(paths: Iterable[Path], root: Path | None) -> frozenset[str]:
    """The folders below `root` (and their parents) holding files whose own names name two
    nodes or more (`evidence/pyspy_nodeA.txt`, `evidence/pyspy_nodeB.txt`): a folder that
    collects several nodes' files is no node's folder."""
    if root is None:
        return frozenset()
    named: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        host = _name_host(path)
        try:
            folder = os.path.relpath(path.parent, root)
        except ValueError:
            continue
        if host and folder not in (".", "") and not folder.startswith(".."):
            named[folder].add(short_host(host))
    out: set[str] = set()
    for folder, hosts in named.items():
        if len(hosts) >= 2:
            parts = Path(folder).parts
            out.update(os.path.join(*parts[: i + 1]) for i in range(len(parts)))
    return frozenset(out)


def _strip_suffixes(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for suffix in _LOG_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def _strip_words(name: str) -> str:
    """`trace-node17` -> node17, `pyspy_node17` -> node17, `slurm-1234` -> '' (a job id);
    `node-gpu005` -> gpu005 (slurm's `--output=node-%N.out`), where what is left holds a
    letter before its first dot (`node-17` and `node-214.hpc.example.edu` are names)."""
    pieces = re.split(r"([_\-.])", name)
    words = pieces[::2]
    start, end = 0, len(words)
    while start < end and words[start].lower() in _NAME_WORDS:
        start += 1
    rest = "".join(pieces[2 * start + 2 :])
    label = rest.split(".", 1)[0]
    if start < end - 1 and words[start].lower() == "node" and re.search("[A-Za-z]", label):
        start += 1
    while end > start and words[end - 1].lower() in _NAME_WORDS:
        end -= 1
    if start == 0 and end == len(words):
        return name
    kept = "".join(pieces[2 * start : 2 * end - 1])
    return "" if not kept or kept.isdigit() else kept


def same_folder(a: Path, b: Path) -> bool:
    """The same folder, however each path was spelled (relative or not)."""
    return os.path.abspath(a) == os.path.abspath(b)


def rank_from_log_name(path: Path) -> int | None:
    """The rank of a per-rank log file named like `rank3.log`, else None."""
    m = _RANK_FILE.search(_strip_suffixes(path.name))
    return int(m.group("rank")) if m else None


def local_from_layout(path: Path) -> int | None:
    """The local rank of a file of torchrun's `--redirects` layout
    (`.../attempt_0/3/stdout.log` -> 3), else None."""
    parent = path.parent
    if (
        _REDIRECT_FILE.fullmatch(path.name)
        and parent.name.isdigit()
        and len(parent.name) <= 6
        and _ATTEMPT.fullmatch(parent.parent.name)
    ):
        return int(parent.name)
    return None


def cut(text: str, limit: int = MAX_TEXT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _signal_name(code: int) -> str:
    if code >= 0:
        return ""
    try:
        return signals.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


@dataclass
class _Traceback:
    frames: list[PyFrame] = field(default_factory=list)
    start: int = 0


@dataclass
class _Faults:
    """faulthandler's dump being read: its threads, the one being read."""

    start: int
    threads: list[ThreadStack] = field(default_factory=list)
    tid: str = ""
    current: bool = False
    had_current: bool = False  # a `Current thread` was read
    blank: bool = False  # the dump's last line was empty (CPython's between two threads)
    frames: list[PyFrame] = field(default_factory=list)

    def close_thread(self) -> None:
        if self.tid and len(self.threads) < 256:
            name = "MainThread" if self.current else ""
            self.threads.append(ThreadStack(self.tid, "", name, tuple(self.frames[:MAX_FRAMES])))
        self.tid, self.frames, self.current = "", [], False


@dataclass
class _Summary:
    """torchelastic's summary entry being read."""

    root: bool = False
    host: str = ""
    rank: int | None = None
    local: int | None = None
    code: int | None = None
    pid: int | None = None
    sig: str = ""
    line: int = 0


@dataclass
class _Roster:
    role: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"-?\d{1,9}", text)[:100_000])


class _Parser:
    def __init__(self, path: Path, root: Path | None, shared: frozenset[str]) -> None:
        self.path = str(path)
        self.out = ParsedLog(InputFile(self.path, "log", "", 0), host_from_path(path, root, shared))
        self.out.file_local = local_from_layout(path)
        self.tracebacks: dict[Speaker, _Traceback] = {}
        self.faults: dict[Speaker, _Faults] = {}
        self.summaries: dict[int | None, _Summary] = {}  # per srun task: nodes interleave
        self.root_next: dict[int | None, bool] = {}
        self.rosters: dict[int | None, _Roster] = {}
        self.probe: list[tuple[int, str]] | None = []  # lines held until labels are decided
        self.labelled = False
        self.clock: float | None = None  # the clock of the line being read
        self.mono: float | None = None  # and its CLOCK_MONOTONIC fraction

    # --- reading -------------------------------------------------------------------------

    def feed(self, number: int, line: str) -> None:
        if self.probe is not None:
            self.probe.append((number, line))
            if len(self.probe) >= LABEL_PROBE:
                self.flush()
            return
        self.line(number, line)

    def flush(self) -> None:
        """Decide whether the file carries srun labels, then read the lines held so far."""
        if self.probe is None:
            return
        held, self.probe = self.probe, None
        self.labelled = self.out.labelled = looks_labelled([text for _n, text in held])
        for number, text in held:
            self.line(number, text)

    def line(self, number: int, line: str) -> None:
        if "\r" in line:  # a progress bar's updates: read on as one line
            line = line.replace("\r", " ")
        peeled = peel(line, self.labelled)
        speaker, rest = peeled.speaker, peeled.rest
        self.clock, self.mono = peeled.clock, peeled.mono
        if not speaker.anonymous and (speaker.number is not None or speaker.rank is not None):
            self.out.speakers[speaker] = None
        if rest.strip() and not peeled.logged and not speaker.anonymous:  # the job's own
            last = self.out.last_lines.get(speaker)
            if last is None:
                last = self.out.last_lines[speaker] = deque(maxlen=LAST_LINES)
            last.append((number, cut(rest, 200)))
        where = Where(self.path, number)
        if peeled.pid is not None:
            self._pid_line(speaker, peeled, where)
        busy = self.tracebacks or self.faults or self.summaries or self.rosters
        if not busy and not _maybe(rest):
            return
        self._message(speaker, rest, where, peeled.pid if peeled.agent else None)

    def _message(self, speaker: Speaker, rest: str, where: Where, agent: int | None) -> None:
        """Read what one line's message says (`agent`: the pid of torchrun's agent that
        logged it, None for a worker's line)."""
        task = speaker.task
        if speaker.number is None and speaker.rank is None:
            if self._roster_line(task, rest, where):
                return
            if self._summary_line(task, rest, where):
                return
        faulthandler = speaker in self.faults or "most recent call first" in rest
        if (faulthandler or rest.startswith("Fatal Python error")) and self._faulthandler(
            speaker, rest, where
        ):
            return
        if "atchdog" in rest or "async exception" in rest or "PG ID" in rest:
            self._nccl_group(speaker, rest, where)
        if "monitoredBarrier" in rest or "mismatch between collectives" in rest:
            self._reports(speaker, rest, where)
        if "Running collective" in rest and (e := _RUNNING.search(rest)) is not None:
            entered = Entered(int(e.group("rank")), int(e.group("seq")), e.group("op"), where)
            self.out.entered.setdefault(speaker, deque(maxlen=ENTERED_TAIL)).append(entered)
            return
        if "debug level" in rest and (d := _DEBUG_LEVEL.search(rest)) is not None:
            self.out.debug_level = d.group("level")
            return
        if speaker in self.tracebacks or rest.startswith(_TB_START):
            self._traceback(speaker, rest, where)
            return
        if "NCCL " in rest:
            self._nccl(speaker, rest, where)
            return
        agent_line = agent is not None or "closing signal" in rest or "of binary" in rest
        if agent_line and self._agent(speaker, rest, where, agent):
            return
        slurm = "srun" in rest or "slurmstepd" in rest or "CANCELLED AT" in rest
        if slurm and self._slurm(speaker, rest, where):
            return
        if agent is None:
            self._claim(speaker, rest, where)

    # --- who is who ----------------------------------------------------------------------

    def _pid_line(self, speaker: Speaker, peeled: Peeled, where: Where) -> None:
        """torch's Python logging states the writing process's pid: a worker's when the line
        carries its rank tag, torchrun's agent's when logged from torchrun's modules."""
        if peeled.agent:
            if len(self.out.agent_pids) < MAX_RECORDS and peeled.pid is not None:
                self.out.agent_pids.add(peeled.pid)
        elif speaker.rank is not None or speaker.number is not None:
            claim = Claim("torch-logging", where, rank=speaker.rank, pid=peeled.pid)
            self.out.claims.append((speaker, claim))

    def _claim(self, speaker: Speaker, rest: str, where: Where) -> None:
        ranks = [
            m
            for m in _CLAIM_RANK.finditer(rest)
            if not rest[: m.start()].lower().endswith("local ")
        ]
        if not ranks:
            return
        # two processes writing one file at once, with no launcher prefix between them, glue
        # their lines (`rank 3 pid 6379 on gpu051rank 5 pid 6381 on gpu051`): each rank
        # named claims what follows it, up to the next
        cuts = [0, *(m.start() for m in ranks[1:]), len(rest)]
        for rank, lo, hi in zip(ranks, cuts[:-1], cuts[1:], strict=True):
            self._one_claim(speaker, rest[lo:hi], rank, where)

    def _one_claim(self, speaker: Speaker, rest: str, rank: re.Match[str], where: Where) -> None:
        pid = _CLAIM_PID.search(rest)
        host = _CLAIM_HOST.search(rest)
        name = (host.group("v") or host.group("on")) if host is not None else ""
        # `... on X` alone is loose (`on cpu`): it counts only where X is the writer's node
        loose = host is not None and bool(host.group("on")) and pid is None
        if pid is None and not name:
            return
        local = _CLAIM_LOCAL.search(rest)
        claim = Claim(
            "job-on" if loose else "job",
            where,
            rank=int(rank.group("v")),
            local_rank=int(local.group("v")) if local else None,
            pid=int(pid.group("v")) if pid else None,
            host=cut(name, 253),
        )
        self.out.claims.append((speaker, claim))

    # --- NCCL ----------------------------------------------------------------------------

    def _nccl_group(self, speaker: Speaker, text: str, where: Where) -> None:
        """NCCL's watchdog lines and ProcessGroupNCCL's group prefix."""
        if speaker.rank is None:  # a rank tag after a progress bar, mid-line
            tags = list(_RANK_TAG.finditer(text))
            if tags:
                speaker = speaker._replace(rank=int(tags[-1].group("rank")))
                self.out.speakers[speaker] = None
        g = _PG_PREFIX.search(text)
        if g is not None:
            options = _PG_OPTIONS.search(text, g.end())
            status = _DUMP_SIGNAL.search(text, g.end())
            line = GroupLine(
                int(g.group("pgid")),
                g.group("uid"),
                g.group("desc") or "",
                int(g.group("grank")),
                where,
                size=int(options.group("size")) if options else None,
                global_rank=int(options.group("global")) if options else None,
                enqueued=int(status.group("enq")) if status else None,
                completed=int(status.group("done")) if status else None,
            )
            self.out.groups.append((speaker, line))
        m = _WATCHDOG.search(text)
        if m:
            op = m.group("op")
            wait = Wait(
                TIMEOUT,
                OP_NAMES.get(op, op.lower()),
                where,
                pg_name=g.group("uid") if g else "",
                pg_desc=(g.group("desc") or "") if g else "",
                seq=int(m.group("seq")),
                timeout_ms=int(m.group("timeout")),
                group_rank=int(g.group("grank")) if g else None,
                detail=cut(text[m.start() :]),
                numel=int(m.group("nin")),
                started=(
                    self.clock - int(m.group("ran")) / 1000
                    if self.clock is not None and m.group("ran")
                    else None
                ),
                ran_ms=int(m.group("ran")) if m.group("ran") else None,
                mono=self.mono,
            )
            self._add_wait(speaker, wait)
            return
        a = _ASYNC_ERROR.search(text)
        if a:
            op = a.group("op")
            error = Wait(
                COMM_ERROR,
                OP_NAMES.get(op, op.lower()),
                where,
                pg_name=g.group("uid") if g else "",
                pg_desc=(g.group("desc") or "") if g else "",
                seq=int(a.group("seq")),
                group_rank=int(g.group("grank")) if g else None,
                detail=cut(a.group("msg")),
            )
            self._add_wait(speaker, error)
            return
        s = _WATCHDOG_STATUS.search(text)
        if s is None or g is None:
            return
        seq = int(s.group("seq"))
        found = Wait(COMM_ERROR, "", where, seq=seq)  # no timeout line before it: an error
        index = None
        for i in range(len(self.out.waits) - 1, -1, -1):  # the timeout line just before
            who, wait = self.out.waits[i]
            if (
                who == speaker
                and wait.seq == seq
                and (not wait.pg_name or wait.last_enqueued is None)
            ):
                found, index = wait, i
                break
        found = replace(
            found,
            pg_name=g.group("uid"),
            pg_desc=g.group("desc") or "",
            group_rank=int(g.group("grank")),
            last_enqueued=int(s.group("enq")),
            last_completed=int(s.group("done")),
        )
        if index is None:
            self.out.waits.append((speaker, found))
        else:
            self.out.waits[index] = (speaker, found)

    def _add_wait(self, speaker: Speaker, wait: Wait) -> None:
        """A wait, unless the same speaker already reported it (the watchdog's abort repeats
        its timeout in the exception it throws)."""
        for who, seen in list(self.out.waits)[-8:]:
            if (
                who == speaker
                and seen.seq == wait.seq
                and seen.op == wait.op
                and seen.how == wait.how
            ):
                if wait.pg_name and not seen.pg_name:
                    self.out.waits.remove((who, seen))
                    if seen.started is not None:  # a repeat's clock is later than the first's
                        wait = replace(
                            wait,
                            started=seen.started,
                            ran_ms=seen.ran_ms,
                            mono=seen.mono,
                            where=seen.where,
                        )
                    break
                return
        self.out.waits.append((speaker, wait))

    def _nccl(self, speaker: Speaker, text: str, where: Where) -> None:
        m = _NCCL_LINE.search(text)
        if m is None:
            return
        host, pid, msg = m.group("host"), int(m.group("pid")), m.group("msg")
        if speaker.rank is not None or speaker.number is not None:
            self.out.claims.append(
                (speaker, Claim("nccl", where, rank=speaker.rank, pid=pid, host=host))
            )
        if m.group("level") == "WARN":
            peer = _NCCL_PEER.search(msg)
            warned = Warned(host, pid, cut(msg), where, peer=peer.group("addr") if peer else "")
            self.out.warnings.append((speaker, warned))
            return
        b = _NCCL_BOOTSTRAP.search(msg)
        if b is not None:
            self.out.addresses.append(Address(host, pid, b.group("addr"), where))
            return
        c = _NCCL_COMM.search(msg)
        if c is not None:
            comm = Claim("nccl-comm", where, rank=int(c.group("rank")), pid=pid, host=host)
            cid = _NCCL_COMM_ID.search(msg, c.start())
            self.out.comms.append((int(c.group("n")), comm, cid.group("id") if cid else ""))

    # --- DETAIL --------------------------------------------------------------------------

    def _reports(self, speaker: Speaker, text: str, where: Where) -> None:
        """DETAIL's checks: the ranks a fingerprint check or a monitored barrier names."""
        f = _FINGERPRINT.search(text)
        if f is not None:
            mine = _FP_OP.search(f.group("mine"))
            theirs = _FP_OP.search(f.group("theirs"))
            ops = f"{mine.group('op') if mine else '?'} vs {theirs.group('op') if theirs else '?'}"
            differ = text[f.end() :]
            aspects = [a for a in _FP_ASPECTS if a in differ]
            report = Reported(
                "fingerprint",
                (int(f.group("other")),),
                where,
                detail=f"{ops}; differ in: {', '.join(aspects) or '?'}",
                against=(int(f.group("me")),),
            )
            self._add_report(speaker, report)
        m = _MONITORED.search(text)
        if m is not None:
            ranks = _ints(m.group("ranks"))
            self._add_report(
                speaker, Reported("monitored_barrier", ranks, where, timeout_ms=int(m.group("ms")))
            )
        r = _REACHED.search(text)
        if r is not None:
            self._add_report(speaker, Reported("reached", (int(r.group("me")),), where))

    def _add_report(self, speaker: Speaker, report: Reported) -> None:
        for who, seen in list(self.out.reports)[-16:]:
            if who == speaker and (seen.how, seen.ranks, seen.against) == (
                report.how,
                report.ranks,
                report.against,
            ):
                return
        self.out.reports.append((speaker, report))

    # --- Python tracebacks and faulthandler -----------------------------------------------

    def _traceback(self, speaker: Speaker, text: str, where: Where) -> None:
        if text.startswith(_TB_START):
            self.tracebacks[speaker] = _Traceback(start=where.line)
            return
        tb = self.tracebacks.get(speaker)
        if tb is None:
            return
        f = _TB_FRAME.match(text)
        if f:
            frame = PyFrame(f.group("fn").strip(), f.group("file"), int(f.group("line")))
            tb.frames.append(frame)
            if len(tb.frames) > 4 * MAX_FRAMES:  # keep the innermost ones
                del tb.frames[:MAX_FRAMES]
            return
        if not text.strip() or text.startswith(" "):
            return  # a source line, carets, a blank line
        e = _EXC_LINE.match(text.rstrip())
        del self.tracebacks[speaker]
        if e is None:
            return
        self._exception(e.group("type"), e.group("msg") or "", tb, speaker, where)

    def _exception(
        self, kind: str, message: str, tb: _Traceback, speaker: Speaker, where: Where
    ) -> None:
        frames = tuple(reversed(tb.frames))  # innermost first
        at = Where(where.file, tb.start or where.line)
        timeout = _GLOO_TIMEOUT.search(message)
        peer = _GLOO_PEER.search(message)
        how = ""
        if timeout or "Watchdog caught collective operation timeout" in message:
            how = TIMEOUT
        elif peer is not None:
            how = PEER_LOST
        elif kind.rsplit(".", 1)[-1] in _COMM_TYPES:
            how = COMM_ERROR
        elif (
            "mismatch between collectives" in message or "monitoredBarrier" in message
        ):  # a DETAIL check failed: the collective's, not this rank's own failure
            how = COMM_ERROR
        if kind.endswith(_STORE_LOST) and speaker.rank is None and speaker.number is None:
            # torchrun's agent itself died of it: its rendezvous store (hosted by one of the
            # job's agents) went away
            self.out.agent.append((Speaker(speaker.task), AgentEvent("store_lost", at)))
            return
        if not how:
            raised = Raised(kind, cut(message), frames[:MAX_FRAMES], at)
            self.out.raised.append((speaker, raised))
            return
        op, call_site = collective_of(frames)
        wait = Wait(
            how,
            op,
            at,
            timeout_ms=int(timeout.group("ms")) if timeout else None,
            call_site=call_site,
            detail=cut(f"{kind}: {message}"),
            peer=peer.group("addr") if peer else "",
        )
        self.out.waits.append((speaker, wait))

    def _faulthandler(self, speaker: Speaker, text: str, where: Where) -> bool:
        dump = self.faults.get(speaker)
        t = FAULT_THREAD.match(text)
        if t is not None:
            if dump is not None and dump.had_current and not dump.blank:  # another process's
                self._close_faults(speaker)
                dump = None
            if dump is None:
                dump = self.faults[speaker] = _Faults(where.line)
            dump.close_thread()
            dump.tid, dump.current = t.group("tid"), t.group("cur") == "Current thread"
            dump.had_current = dump.had_current or dump.current
            dump.blank = False
            return True
        if dump is None:
            if text.startswith("Fatal Python error"):
                self.faults[speaker] = _Faults(where.line)
                return True
            return False
        f = FAULT_FRAME.match(text)
        if f is not None and dump.tid:
            dump.blank = False
            if len(dump.frames) < MAX_FRAMES:
                dump.frames.append(
                    PyFrame(f.group("fn").strip(), f.group("file"), int(f.group("line")))
                )
            return True
        if not text.strip() or text.startswith(("Python runtime state", "Extension modules")):
            dump.blank = not text.strip()
            return True
        self._close_faults(speaker)
        return False

    def _close_faults(self, speaker: Speaker) -> None:
        dump = self.faults.pop(speaker, None)
        if dump is None:
            return
        dump.close_thread()
        if dump.threads:
            stack = ProcessStack(
                None,
                "",
                "",
                tuple(dump.threads),
                "",
                Where(self.path, dump.start),
                source="faulthandler",
            )
            self.out.stacks.append((speaker, stack))

    # --- torchelastic ---------------------------------------------------------------------

    def _summary_line(self, task: int | None, text: str, where: Where) -> bool:
        if text.startswith(_SUM_ROOT):
            self._close_summary(task)
            self.root_next[task] = True
            return True
        if _SUM_ENTRY.match(text):
            self._close_summary(task)
            self.summaries[task] = _Summary(root=self.root_next.pop(task, False), line=where.line)
            return True
        s = self.summaries.get(task)
        if s is None:
            return False
        if text.startswith(("---", "===")) or not text.startswith(" "):
            self._close_summary(task)
            return text.startswith(("---", "==="))
        if (m := _SUM_HOST.match(text)) is not None:
            s.host = m.group("host")
        elif (m := _SUM_RANK.match(text)) is not None:
            s.rank, s.local = int(m.group("rank")), int(m.group("local"))
        elif (m := _SUM_EXIT.match(text)) is not None:
            s.code, s.pid = int(m.group("code")), int(m.group("pid"))
            s.sig = m.group("sig") or s.sig
        elif (m := _SUM_SIGNAL.match(text)) is not None:
            s.sig = s.sig or m.group("sig")
        return True

    def _close_summary(self, task: int | None) -> None:
        s = self.summaries.pop(task, None)
        if s is None or s.rank is None or s.code is None:
            return
        sig = s.sig or _signal_name(s.code)
        where = Where(self.path, s.line)
        exited = Exited(s.code, sig, s.pid, s.host, s.root, where, s.rank, s.local)
        self.out.exits.append((Speaker(task), exited))

    def _roster_line(self, task: int | None, text: str, where: Where) -> bool:
        building = self.rosters.get(task)
        if building is not None:
            f = _ROSTER_FIELD.match(text)
            if f is not None:
                building.fields[f.group("key")] = f.group("value")
                return True
            if text.startswith("  ") and "=" in text:
                return True
            self._close_roster(task)
            return False
        if _ROSTER_START in text:
            role = text[1 : text.index("]")] if text.startswith("[") and "]" in text else ""
            self.rosters[task] = _Roster(role, where.line)
            return True
        return False

    def _close_roster(self, task: int | None) -> None:
        r = self.rosters.pop(task, None)
        if r is None:
            return
        local, ranks = (
            _ints(r.fields.get("local_ranks", "")),
            _ints(r.fields.get("global_ranks", "")),
        )
        if not local or len(local) != len(ranks):
            return
        group = _ints(r.fields.get("group_rank", ""))
        worlds = _ints(r.fields.get("global_world_sizes", ""))
        nodes = _ints(r.fields.get("group_world_size", ""))
        roster = Roster(
            r.role,
            group[0] if group else None,
            local,
            ranks,
            worlds[0] if worlds else None,
            Where(self.path, r.line),
            nodes[0] if nodes else None,
        )
        self.out.rosters.append((Speaker(task), roster))

    def _agent(self, speaker: Speaker, text: str, where: Where, agent: int | None) -> bool:
        if (m := _AGENT_FAILED.search(text)) is not None:
            code = int(m.group("code"))
            event = AgentEvent(
                "failed",
                where,
                pid=int(m.group("pid")),
                local_rank=int(m.group("local")),
                exitcode=code,
                signal=_signal_name(code),
                agent_pid=agent,
            )
        elif (m := _AGENT_CLOSING.search(text)) is not None:
            pid, sig = int(m.group("pid")), m.group("sig")
            event = AgentEvent("closing", where, pid=pid, signal=sig, agent_pid=agent)
        elif _AGENT_DONE.search(text) is not None:
            event = AgentEvent("succeeded", where, agent_pid=agent)
        elif (m := _AGENT_SIGNALLED.search(text)) is not None:
            sig = m.group("sig").rsplit(".", 1)[-1]
            if sig.isdigit():
                sig = _signal_name(-int(sig)) or sig
            event = AgentEvent("signalled", where, signal=sig, agent_pid=agent)
        else:
            return False
        self.out.agent.append((Speaker(speaker.task), event))
        return True

    # --- slurm ---------------------------------------------------------------------------

    def _slurm(self, speaker: Speaker, text: str, where: Where) -> bool:
        if (m := _SLURM_CANCEL.search(text)) is not None:
            why = m.group("why") or ""
            kind = {"TIME LIMIT": "time_limit", "NODE FAILURE": "node_failure"}.get(
                why.split(",")[0], "cancelled"
            )
            # slurmstepd names its own node (`job->node_name`) and writes into its first
            # task's stderr (mgr.c, _slurmd_job_log_init): a task label on the line is a task
            # of that node
            labelled: tuple[int, ...] = (speaker.task,) if speaker.task is not None else ()
            self.out.slurm.append(SlurmEvent(kind, where, node=m.group("node"), tasks=labelled))
            return True
        if (m := _SRUN_TASK.search(text)) is not None:
            tasks = _task_ids(m.group("tasks"))
            what = m.group("what")
            code = _SRUN_EXIT.search(what)
            if code is not None:
                event = SlurmEvent(
                    "task_exit", where, m.group("node"), tasks, int(code.group("code"))
                )
            else:
                sig = next((s for w, s in _SRUN_SIGNALS.items() if what.startswith(w)), "")
                if not sig:
                    return False
                event = SlurmEvent("task_signal", where, m.group("node"), tasks, signal=sig)
            self.out.slurm.append(event)
            return True
        return False

    def finish(self, stats: LineStats) -> ParsedLog:
        self.flush()
        for task in list(self.summaries):
            self._close_summary(task)
        for task in list(self.rosters):
            self._close_roster(task)
        for speaker in list(self.faults):
            self._close_faults(speaker)
        out = self.out
        if not out.labelled:
            out.file_rank = rank_from_log_name(Path(self.path))
        out.input = InputFile(
            self.path, "log", out.host, stats.lines, stats.truncated, stats.binary, stats.cut
        )
        return out


def _task_ids(text: str) -> tuple[int, ...]:
    """srun's task list (`0`, `0-3`, `1,4-5`), bounded."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        first, last = int(lo), int(hi) if hi else int(lo)
        out.extend(range(first, min(last, first + 4096) + 1))
        if len(out) > 100_000:
            break
    return tuple(out)


def collective_of(frames: tuple[PyFrame, ...]) -> tuple[str, PyFrame | None]:
    """(the collective a stack is in, the job's frame that called it), from frames innermost
    first: the innermost function of torch/distributed/distributed_c10d.py is the op."""
    op = ""
    seen_torch = False
    for frame in frames:
        path = frame.file.replace("\\", "/")
        if "torch/distributed/" in path:
            seen_torch = True
            if not op and path.endswith("distributed_c10d.py"):
                op = frame.function.rsplit(".", 1)[-1]
            continue
        if seen_torch and "/torch/" not in path and not path.startswith("torch/"):
            return op, frame
        if not seen_torch and frame.file.endswith(".py"):
            return "", None  # innermost Python frame outside torch.distributed
    return op, None


def parse_log(
    path: Path, root: Path | None = None, shared: frozenset[str] = frozenset()
) -> ParsedLog:
    """Every record of one log file, within the budgets (an unreadable file reads as empty)."""
    parser = _Parser(path, root, shared)
    stats = LineStats()
    try:
        for number, line in read_lines(path, stats):
            parser.feed(number, line)
    except OSError as exc:
        raise LogReadError(f"cannot read ({exc.strerror or exc})") from exc
    return parser.finish(stats)


class LogReadError(Exception):
    """A log or stacks file could not be read (its reason is the message)."""
