"""The logs a simulated NCCL job's processes would have written, from the writers' own formats.

Given a `SyntheticJob` (its dumps: each rank's entries with their states, pg_config, pg_status),
this renders what torch's C++ logging, NCCL, the workers' Python runtime and torchrun's agent
print when such a job hangs (or runs healthy), one list of lines per worker and per agent.
Everything about the hang is derived from the dumps, never from the fault's ground truth: each
rank's oldest outstanding work per group (what its watchdog reports), its sequence number,
OpType, numel, enqueue time and Python stack, and the group status counters.

Every format is written down beside the code that renders it, with the function it comes from:
- torch's C++ lines: torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp of pytorch/pytorch (the
  watchdog and heartbeat-monitor classes, read in the search corpus), with the line prefix of
  c10/util/Logging.cpp (`MessageLogger::MessageLogger`, the non-glog build pip wheels ship);
- NCCL's lines: NVIDIA/nccl at tag v2.27.5-1 (the `comm_lib_version` the dumps carry);
- torchelastic's agent lines and summary: torch 2.13 as installed (its Python sources);
- the abort: gcc's libstdc++ `__verbose_terminate_handler` and CPython's faulthandler;
- srun's labels: SchedMD/slurm src/common/write_labelled_message.c (`_build_label`).

How the job comes down (ProcessGroupNCCL::Watchdog::runLoop, ::HeartbeatMonitor::runLoop): a
group's watchdog reports its oldest outstanding work once `Timeout(ms)` passed since it was
enqueued (polling every 100 ms), signals every rank through the TCPStore to dump, sleeps
(`getDumpTimeout() * 4`, 60 s by default), then rethrows and the process aborts (default
TORCH_NCCL_ASYNC_ERROR_HANDLING=3, SkipCleanUp). Every rank's PG-0 monitor sees the signal within
about a second and dumps; a rank whose watchdog never fires is ended by its monitor 480 s later
(`TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`) or, first, by its agent: torchrun SIGTERMs a node's other
workers as soon as one dies. `LogStyle.window_s` is when the rest of the job is torn down from
outside (the scheduler ending the step) after the first abort; only lines written before a
process died are kept.

Line numbers in the glog-style headers: the ProcessGroupNCCL.cpp numbers are those that
published logs of one torch build print (code-search corpus ids 60427248891, 60331145948: logs
of a python 3.13 venv, `Watchdog::run` at :2203), except `initialization options` (:905, a torch
2.5.1 log, id 69752868257; the build above published none); the agent's are torch 2.13's.

What is not rendered (no source, or too far from one): py-spy, the user's own prints, NCCL's
`Abort COMPLETE` and comm-destroy lines, the 2-rank communicators unbatched send/recv create
lazily, torch's INFO lines other than the options line, the agent's SignalException traceback
when the scheduler ends it, slurm's own messages, CPython's `Extension modules:` list after a
fatal error. A NET/IB completion error is rendered as the WARN line only, ahead of the timeouts
of its collective; in a real job NCCL would usually also hand torch an async error (`Collective
... raised the following async exception`), which is not rendered.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from math import prod
from string import Template
from typing import Any

from frtrace.synth.sim import SyntheticJob

Dump = dict[str, Any]
NS = 1_000_000_000
MS = 1_000_000
INF = float("inf")

# Where the job's Python and torch live: the simulator's stacks say python3.12 dist-packages.
SITE = "/usr/local/lib/python3.12/dist-packages"
PYTHON = "/usr/bin/python3"
SCRIPT = "pretrain_gpt.py"

# ProcessGroupNCCL.cpp line numbers of the published build (module docstring).
PG_FILE = "ProcessGroupNCCL.cpp"
# c10's SourceLocation prints __FILE__, which official builds compile as /pytorch/... (the
# published logs' `Exception raised from checkTimeout at /pytorch/torch/csrc/...`).
PG_SOURCE = "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
LINE = {
    "check_timeout": 757,  # WorkNCCL::checkTimeout: LOG(ERROR) << exceptionMsg
    "check_timeout_raise": 760,  # WorkNCCL::checkTimeout: C10_BUILD_ERROR(DistBackendError, ...)
    "traceback": 801,  # WorkNCCL::printTraceback
    "handle_exception": 818,  # WorkNCCL::handleException, first LOG(ERROR)
    "tear_down": 832,  # WorkNCCL::handleException, SHOULD_TEAR_DOWN
    "preparing_dump": 1700,  # ProcessGroupNCCL::dumpDebuggingInfo
    "terminate_process": 1725,  # ProcessGroupNCCL::terminateProcess (LOG(FATAL))
    "observed_signal": 1922,  # HeartbeatMonitor::runLoop, the TCPStore dump key seen
    "dump_signal": 1987,  # HeartbeatMonitor::runLoop, LOG(ERROR) << errorMsg
    "watchdog_terminated": 2197,  # Watchdog::run, catch (std::exception&)
    "watchdog_run_raise": 2203,  # Watchdog::run, C10_BUILD_ERROR(DistBackendError, exitMsg)
    "failure_detected": 2395,  # Watchdog::runLoop, work.exception()
    "first_pg": 2732,  # ProcessGroupNCCL::broadcastDumpSignal
    "init_options": 905,  # ProcessGroupNCCL::ProcessGroupNCCL (torch 2.5.1's number)
}
# torch 2.13's torchelastic (installed; paths relative to dist-packages as TorchLogsFormatter
# writes them: torch/_logging/_internal.py, make_module_path_relative).
AGENT_LINE = {
    "omp": ("torch/distributed/run.py", 874),  # run.config_from_args, logger.warning
    "closing": (
        "torch/distributed/elastic/multiprocessing/api.py",
        1029,
    ),  # SubprocessContext._close
    "failed": ("torch/distributed/elastic/multiprocessing/api.py", 1003),  # SubprocessContext._poll
    "death_signal": (
        "torch/distributed/elastic/agent/server/api.py",
        753,
    ),  # SimpleElasticAgent.run
}

# NCCL v2.27.5-1 sources: src/debug.cc ncclDebugLog prefixes; WARN() passes __FILE__ as NCCL's
# build compiles it (relative to src/), INFO() passes __func__ and prints no file.
NET_IB_WARN_AT = "transport/net_ib.cc:2451"

# operator<<(WorkNCCL) prints opTypeToString(opType_); the OpType each profiling name comes
# with (ProcessGroupNCCL.cpp): allreduce_impl ALLREDUCE (barrier() is allreduce_impl with
# "nccl:all_reduce_barrier"), allgather ALLGATHER, alltoall_base ALLTOALL_BASE, broadcast,
# reduce, gather, scatter, send and recv their own; endCoalescing(optype) names its work
# "nccl:" + opTypeToString(optype) + "_coalesced", or "nccl:coalesced" for OpType::COALESCED.
OP_TYPES = {
    "all_reduce": "ALLREDUCE",
    "all_reduce_barrier": "ALLREDUCE",
    "all_gather": "ALLGATHER",
    "all_to_all": "ALLTOALL_BASE",
    "broadcast": "BROADCAST",
    "reduce": "REDUCE",
    "gather": "GATHER",
    "scatter": "SCATTER",
    "send": "SEND",
    "recv": "RECV",
    "coalesced": "COALESCED",
}

HEARTBEAT_TIMEOUT_NS = 480 * NS  # HeartbeatMonitor: TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 8 min
MONITOR_POLL_NS = NS  # HeartbeatMonitor: TORCH_NCCL_COORD_CHECK_MILSEC, 1000
WATCHDOG_POLL_NS = 100 * MS  # kWatchdogThreadSleepMillis


# --- who runs where ------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    """One worker process."""

    rank: int
    node: int
    host: str
    local_rank: int
    pid: int


@dataclass
class Cluster:
    """The job's nodes and processes: node i runs ranks [i * per_node, (i + 1) * per_node)."""

    hosts: list[str]
    per_node: int
    agent_pids: list[int]
    procs: list[Proc]
    ips: list[str]

    @classmethod
    def build(cls, hosts: list[str], per_node: int, rng: random.Random) -> Cluster:
        agents, procs, ips = [], [], []
        for node, host in enumerate(hosts):
            agent = rng.randrange(2_000, 3_000_000)
            agents.append(agent)
            pid = agent + rng.randrange(15, 60)
            for local in range(per_node):
                procs.append(Proc(node * per_node + local, node, host, local, pid))
                pid += rng.choice((1, 1, 1, 2, 3))
            ips.append(
                f"10.{rng.randrange(1, 250)}.{rng.randrange(0, 250)}.{rng.randrange(2, 250)}"
            )
        return cls(hosts, per_node, agents, procs, ips)

    def short(self, node: int) -> str:
        """The host name NCCL prints: src/misc/utils.cc getHostName(hostname, 1024, '.') cuts
        the name at its first dot."""
        return self.hosts[node].split(".", 1)[0]


# --- what the dumps say ----------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    pg_id: int
    name: str
    desc: str
    ranks: tuple[int, ...]

    def rank_of(self, global_rank: int) -> int:
        # distributed_c10d._new_group_with_tag: `ranks = sorted(ranks)` then
        # `group_rank = ranks.index(global_rank)`.
        return sorted(self.ranks).index(global_rank)


@dataclass(frozen=True)
class Outstanding:
    """A rank's oldest work in one group that is enqueued and not completed: what the group's
    watchdog reports when it times out (Watchdog::runLoop walks workMetaList_ in order)."""

    rank: int
    group: Group
    seq: int
    op_type: str
    numel_in: int
    numel_out: int
    created_ns: int
    timeout_ms: int
    frames: tuple[tuple[str, str, int], ...]
    last_enqueued: int
    last_completed: int


def groups_of(dump: Dump) -> list[Group]:
    """The rank's groups in creation order. pg_config lists the groups this process created,
    in order; ProcessGroupNCCL numbers them with `local_id_(process_group_id++)`, a process-wide
    counter that a non-member never bumps (_new_process_group_helper returns
    NON_GROUP_MEMBER before creating a backend), so the n-th is PG ID n."""
    out = []
    for pg_id, (name, cfg) in enumerate(dump.get("pg_config", {}).items()):
        ranks = tuple(int(r) for r in ast.literal_eval(cfg.get("ranks", "[]")))
        out.append(Group(pg_id, str(name), str(cfg.get("desc", "")), ranks))
    for entry in dump.get("entries") or ():  # the entries' own pg_id must agree
        name, pg_id = entry["process_group"][0], entry["pg_id"]
        if any(g.name == name and g.pg_id != pg_id for g in out):
            raise ValueError(f"entry pg_id {pg_id} for group {name!r} disagrees with pg_config")
    return out


def _is_closer(entry: Dump) -> bool:
    """The entry endCoalescing records for a coalesced block: `nccl:coalesced` or
    `nccl:<OPTYPE>_coalesced`, without sizes."""
    return str(entry["profiling_name"]).endswith("coalesced") and not entry["input_sizes"]


def work_entries(entries: Iterable[Dump]) -> list[Dump]:
    """The entries that stand for an enqueued WorkNCCL: single ops and the closers of coalesced
    blocks. A block's parts share its sequence number (the collective's, or the p2p one for a
    batch) and are recorded without a work (FlightRecorder record() with null events); parts
    whose block never ended have no work at all."""
    by_key: dict[tuple[int, bool, int], list[Dump]] = {}
    for entry in entries:
        seq = entry["p2p_seq_id"] if entry["is_p2p"] else entry["collective_seq_id"]
        by_key.setdefault((entry["pg_id"], bool(entry["is_p2p"]), seq), []).append(entry)
    works = []
    for same in by_key.values():
        if len(same) == 1:
            works.append(same[0])
        else:
            works.extend(e for e in same if _is_closer(e))
    return sorted(works, key=lambda e: e["record_id"])


def _numel(sizes: Iterable[Iterable[int]]) -> int:
    return sum(prod(shape) for shape in sizes)


def outstanding(dump: Dump, rank: int) -> list[Outstanding]:
    """Each group's oldest enqueued, not completed work on this rank, oldest first."""
    groups = {g.pg_id: g for g in groups_of(dump)}
    status = dump.get("pg_status", {})
    seen: set[int] = set()
    out = []
    for entry in work_entries(dump.get("entries") or ()):
        pg_id = entry["pg_id"]
        if entry["state"] == "completed" or pg_id in seen:
            continue
        seen.add(pg_id)
        name = str(entry["profiling_name"]).split(":", 1)[-1]
        closer = _is_closer(entry)
        if closer:
            # endCoalescing(optype): "nccl:<OPTYPE>_coalesced" or "nccl:coalesced"; its
            # WorkNCCL never gets numelIn_/numelOut_ (published timeouts of coalesced works
            # print NumelIn=0, NumelOut=0).
            op_type = name[: -len("_coalesced")] if name.endswith("_coalesced") else "COALESCED"
            numel_in = numel_out = 0
        else:
            op_type = OP_TYPES.get(name.split(" ", 1)[0], name.upper())
            # collective(): numelIn_ += input.numel() over inputs (outputs alike);
            # pointToPoint(): numelIn_ = numelOut_ = tensor.numel().
            numel_in = _numel(entry["input_sizes"])
            numel_out = numel_in if entry["is_p2p"] else _numel(entry["output_sizes"])
        pg = status.get(str(pg_id), {})
        out.append(
            Outstanding(
                rank=rank,
                group=groups[pg_id],
                # initWork: `isP2P ? seqP2P_ : seqCollective_`: a p2p work reports its p2p seq.
                seq=entry["p2p_seq_id"] if entry["is_p2p"] else entry["collective_seq_id"],
                op_type=op_type,
                numel_in=numel_in,
                numel_out=numel_out,
                created_ns=entry["time_created_ns"],
                timeout_ms=int(entry.get("timeout_ms") or 600_000),
                frames=tuple((f["name"], f["filename"], f["line"]) for f in entry["frames"]),
                last_enqueued=int(pg.get("last_enqueued_collective", -1)),
                last_completed=int(pg.get("last_completed_collective", -1)),
            )
        )
    return out


# --- line formats ----------------------------------------------------------------------------


def _utc(t_ns: int) -> datetime:
    return datetime.fromtimestamp(t_ns // NS, tz=timezone.utc)


def c10_prefix(severity: str, t_ns: int, mono_ns: int, line: int, rank: int | None) -> str:
    """The prefix c10's MessageLogger (c10/util/Logging.cpp, the non-glog build) puts before a
    LOG(...) message: `[rank<GLOBAL_RANK>]:` once distributed_c10d._update_default_pg called
    `_set_global_rank`, then `[<FEWIV>` `(tm_mon + 1) * 100 + tm_mday` (no zero padding),
    ` %02d:%02d:%02d.` and the CLOCK_MONOTONIC tv_nsec as `%09ld`, ` <file>:<line>] `."""
    when = _utc(t_ns)
    tag = "" if rank is None else f"[rank{rank}]:"
    mmdd = when.month * 100 + when.day
    nsec = (t_ns + mono_ns) % NS
    return f"{tag}[{severity}{mmdd} {when:%H:%M:%S}.{nsec:09d} {PG_FILE}:{line}] "


def pg_prefix(group: Group, group_rank: int, with_desc: bool = True) -> str:
    """ProcessGroupNCCL::createLogPrefix: `[PG ID <local_id_> PG GUID <pg_uid_>(<pg_desc_>)
    Rank <rank_>] `, without `(<desc>)` while the desc is empty or "undefined" (the constructor
    runs before _new_process_group_helper calls `pg._set_group_desc`)."""
    if with_desc and group.desc and group.desc != "undefined":
        return f"[PG ID {group.pg_id} PG GUID {group.name}({group.desc}) Rank {group_rank}] "
    return f"[PG ID {group.pg_id} PG GUID {group.name} Rank {group_rank}] "


def work_repr(w: Outstanding) -> str:
    """operator<<(std::ostream&, const ProcessGroupNCCL::WorkNCCL&)."""
    return (
        f"WorkNCCL(SeqNum={w.seq}, OpType={w.op_type}, NumelIn={w.numel_in}, "
        f"NumelOut={w.numel_out}, Timeout(ms)={w.timeout_ms})"
    )


def timeout_message(static_rank: int, w: Outstanding, ran_ms: int) -> str:
    """WorkNCCL::checkTimeout: `logPrefix(), "Watchdog caught collective operation timeout: ",
    *this, " ran for ", timeElapsed.count(), " milliseconds before timing out."`, where
    WorkNCCL::logPrefix() is `static std::string prefix = c10::str("[Rank ", rank_, "] ")`:
    a function static, so every WorkNCCL of the process prints the group rank of the first
    work that logged (here: the process's first timeout)."""
    return (
        f"[Rank {static_rank}] Watchdog caught collective operation timeout: {work_repr(w)} "
        f"ran for {ran_ms} milliseconds before timing out."
    )


def failure_message(w: Outstanding, group_rank: int) -> str:
    """Watchdog::runLoop: `pg_->logPrefix(), " failure detected by watchdog at work sequence id:
    ", work.seq_, " PG status: last enqueued work: ", lastEnqueuedSeq, ", last completed work: ",
    lastCompletedSeq` (the prefix ends with a space: two spaces before `failure`)."""
    return (
        f"{pg_prefix(w.group, group_rank)} failure detected by watchdog at work sequence id: "
        f"{w.seq} PG status: last enqueued work: {w.last_enqueued}, last completed work: "
        f"{w.last_completed}"
    )


def traceback_lines(frames: Iterable[tuple[str, str, int]]) -> list[str]:
    """WorkNCCL::printTraceback: `"Stack trace of the failed collective: \\n" << tracebackStr`,
    FlightRecorder<EventType>::Entry::getTraceback (FlightRecorderDetail.hpp): one
    `#<idx> <funcname> from <filename>:<lineno>\\n` per frame, innermost first; LOG's own newline
    leaves a blank line after."""
    return [
        "Stack trace of the failed collective: ",
        *(f"#{i} {name} from {path}:{line}" for i, (name, path, line) in enumerate(frames)),
        "",
    ]


_DUMP_SIGNAL_TAIL = (
    "This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used "
    "across ranks, the order of collectives is not same for all ranks or the scheduled "
    "collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock "
    "or other reasons such as network errors or bugs in the communications library (e.g. NCCL), "
    "etc. "
)


def dump_signal_message(prefix: str, source: str, enqueued: int, completed: int) -> str:
    """HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg(extraMsg): `pg_->logPrefix(), "Received
    a dump signal due to a collective timeout from ", extraMsg, " and we will try our best to
    dump the debug info. ", "Last enqueued NCCL work: ", ..., ", last completed NCCL work: ",
    ..., ".", <the advice>`; extraMsg is "this local rank", or `c10::str(" rank ", timeOutRank)`
    for a signal read from the TCPStore (hence `from  rank 3`)."""
    return (
        f"{prefix}Received a dump signal due to a collective timeout from {source} and we will "
        f"try our best to dump the debug info. Last enqueued NCCL work: {enqueued}, last "
        f"completed NCCL work: {completed}.{_DUMP_SIGNAL_TAIL}"
    )


# c10::Error::Error(SourceLocation, msg) (c10/util/Logging.cpp) appends `"Exception raised
# from ", source_location, " (most recent call first):\n"` and c10::get_backtrace
# (c10/util/Backtrace.cpp), `frame #<n>: <function> + <offset> (<address> in <object>)` per
# frame; SourceLocation prints `<function> at <file>:<line>`. The frames and in-library offsets
# are those of the published build's logs; only the libraries' load addresses vary by process.
_ERROR_CTOR = (
    "c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, "
    "std::char_traits<char>, std::allocator<char> >)"
)
_CHECK_TIMEOUT_FN = (
    "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
    "std::ratio<1l, 1000l> > >)"
)
# (function, offset into it, library, offset of the return address in the library)
_CHECK_TIMEOUT_FRAMES = (
    (_ERROR_CTOR, 0x9D, "c10", 0x6AFAD),
    (_CHECK_TIMEOUT_FN, 0x2B1, "cuda", 0xF09611),
    ("c10d::ProcessGroupNCCL::Watchdog::runLoop()", 0x14F1, "cuda", 0xF153B1),
    ("c10d::ProcessGroupNCCL::Watchdog::run()", 0x157, "cuda", 0xF16847),
    ("<unknown function>", 0xECDB4, "stdcxx", 0xECDB4),
    ("<unknown function>", 0x9CAA4, "libc", 0x9CAA4),
    ("<unknown function>", 0x129C6C, "libc", 0x129C6C),
)
_RUN_FRAMES = (
    (_ERROR_CTOR, 0x9D, "c10", 0x6AFAD),
    ("<unknown function>", 0x6915EB, "cuda", 0x6915EB),
    ("<unknown function>", 0xECDB4, "stdcxx", 0xECDB4),
    ("<unknown function>", 0x9CAA4, "libc", 0x9CAA4),
    ("<unknown function>", 0x129C6C, "libc", 0x129C6C),
)
_LIBS = {
    "c10": f"{SITE}/torch/lib/libc10.so",
    "cuda": f"{SITE}/torch/lib/libtorch_cuda.so",
    "stdcxx": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "libc": "/usr/lib/x86_64-linux-gnu/libc.so.6",
}


def backtrace(function: str, line: int, frames: Any, bases: dict[str, int]) -> list[str]:
    out = [f"Exception raised from {function} at {PG_SOURCE}:{line} (most recent call first):"]
    for i, (fn, off, lib, addr) in enumerate(frames):
        out.append(f"frame #{i}: {fn} + {off:#x} ({bases[lib] + addr:#x} in {_LIBS[lib]})")
    return out


# --- torchelastic ----------------------------------------------------------------------------


def agent_prefix(level: str, t_ns: int, pid: int, site: tuple[str, int]) -> str:
    """torch/_logging/_internal.py TorchLogsFormatter.format: `<I|W|E><%m%d %H:%M:%S>.`
    `int(record.msecs * 1000):06d` (msecs is whole milliseconds), ` <pid> <path>:<lineno>] `;
    the agent process has no process group, so no `[rank<N>]:`."""
    when = _utc(t_ns)
    ms = (t_ns // MS) % 1000
    return f"{level}{when:%m%d %H:%M:%S}.{ms * 1000:06d} {pid} {site[0]}:{site[1]}] "


# torch/distributed/elastic/multiprocessing/errors/__init__.py (torch 2.13).
_FAILURE_FORMAT_TEMPLATE = """[${idx}]:
  time      : ${time}
  host      : ${hostname}
  rank      : ${rank} (local_rank: ${local_rank})
  exitcode  : ${exitcode} (pid: ${pid}) ${signal_name}
  error_file: ${error_file}
  traceback : ${message}"""
_MSG_FORMAT_TEMPLATE = """
${boarder}
${title}
${section}
Failures:
${other_failures}
${section}
Root Cause (first observed failure):
${root_failure}
${boarder}"""
_SIGNALS = {-6: "SIGABRT", -15: "SIGTERM", -9: "SIGKILL"}


@dataclass(frozen=True)
class Failure:
    rank: int
    local_rank: int
    pid: int
    exitcode: int
    timestamp: int  # whole seconds: ProcessFailure._set_no_reply_file, int(time.time())


def child_failed_message(name: str, failures: list[Failure], hostname: str) -> str:
    """ChildFailedError.format_msg / _format_failure (no error file: the message of a signal is
    `Signal <n> (<NAME>) received by PID <pid>`, the exit code gets ` (<NAME>)`); the root is
    get_first_failure, the earliest timestamp, the first inserted on a tie."""
    title = f"{name} FAILED"
    root = min(failures, key=lambda f: f.timestamp)
    width = len(title)
    root_fmt, others = "", []
    for idx, f in enumerate(failures):
        sig = _SIGNALS.get(f.exitcode, "")
        fmt = Template(_FAILURE_FORMAT_TEMPLATE).substitute(
            idx=idx,
            time=_utc(f.timestamp * NS).strftime("%Y-%m-%d_%H:%M:%S"),
            hostname=hostname,
            rank=f.rank,
            local_rank=f.local_rank,
            exitcode=f.exitcode,
            pid=f.pid,
            signal_name=f" ({sig})" if sig else "",
            error_file="<N/A>",
            message=(
                f"Signal {-f.exitcode} ({sig}) received by PID {f.pid}"
                if f.exitcode < 0
                else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
            ),
        )
        width = max(width, *(len(line) for line in fmt.split("\n")))
        if f is root:
            root_fmt = fmt
        else:
            others.append(fmt)
    width = min(width, 60)
    return Template(_MSG_FORMAT_TEMPLATE).substitute(
        boarder="=" * width,
        title=title,
        section="-" * width,
        root_failure=root_fmt,
        other_failures="\n".join(others or ["  <NO_OTHER_FAILURES>"]),
    )


# torchrun's uncaught ChildFailedError as CPython 3.12's traceback module prints it
# (Lib/traceback.py, StackSummary.format_frame_summary: the source line, and `^` under the
# failing call unless it spans the whole line or more than one line). The frames and their
# positions are those of torch 2.13's sources (run.main is @record, errors/__init__.py
# wrapper; launcher/api.py elastic_launch.__call__ and launch_agent) and of pip's torchrun
# console script; printed by CPython 3.12.1 from FrameSummary positions taken with ast.
_TORCHRUN_TRACEBACK = """Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "$site/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "$site/torch/distributed/run.py", line 1028, in main
    run(args)
  File "$site/torch/distributed/run.py", line 1019, in run
    elastic_launch(
  File "$site/torch/distributed/launcher/api.py", line 194, in __call__
    return launch_agent(
           ^^^^^^^^^^^^^
  File "$site/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: """


# --- the rendering ---------------------------------------------------------------------------


@dataclass
class LogStyle:
    """What the job's environment makes its processes print (axes a scenario draws)."""

    torch_info: bool = False  # TORCH_CPP_LOG_LEVEL=INFO
    nccl_debug: str | None = None  # NCCL_DEBUG: None, "WARN" or "INFO"
    faulthandler: bool = False  # the worker enabled faulthandler (e.g. @record on its main)
    omp_warning: bool = True  # torchrun warns that it set OMP_NUM_THREADS
    net_warn: bool = False  # a NET/IB completion error on a member of the stuck collective
    window_s: float = 120.0  # when the scheduler ends the job after the first abort
    # TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (HeartbeatMonitor's constructor, default 15 s): a
    # watchdog that found a failure sleeps `getDumpTimeout() * 4` before it rethrows.
    dump_wait_ms: int = 15_000
    summary_host: str = "host"  # socket.getfqdn() in the summary: "host" or "localhost"
    iface: str = "eth0"  # NCCL's bootstrap interface


Line = tuple[int, int, str]  # (time ns, order of writing, text without newline)


@dataclass
class Rendered:
    """Per-process lines, and what happened to each process."""

    worker: dict[int, list[Line]] = field(default_factory=dict)  # by global rank
    agent: dict[int, list[Line]] = field(default_factory=dict)  # by node
    waiting_ranks: list[int] = field(default_factory=list)  # ranks with outstanding work
    logged_ranks: list[int] = field(default_factory=list)  # ranks with a timeout in the logs
    first_rank: int | None = None  # whose watchdog fired first
    exit_codes: dict[int, int] = field(default_factory=dict)  # by rank (hung jobs)
    summary_nodes: list[int] = field(default_factory=list)  # nodes whose agent wrote a summary
    net_warn: dict[str, Any] | None = None


class _Writer:
    def __init__(self) -> None:
        self.n = 0

    def add(self, lines: list[Line], t: int, *texts: str) -> None:
        for text in texts:
            for part in text.split("\n"):
                lines.append((t, self.n, part))
                self.n += 1


@dataclass
class _ProcState:
    mono: int
    tid_init: int
    tid_proxy: int
    main_thread: int
    bases: dict[str, int]
    comm: int
    monitor_phase: int


def render(job: SyntheticJob, cluster: Cluster, style: LogStyle, seed: int) -> Rendered:
    """Render every process's lines for `job` (hung or healthy) under `style`."""
    rng = random.Random(seed)
    world = len(cluster.procs)
    dumps = {r: job.dumps.peek(r) for r in range(world) if r not in job.omit_ranks}
    groups = {r: groups_of(d) for r, d in dumps.items()}
    waits = {r: outstanding(d, r) for r, d in dumps.items()}
    w = _Writer()
    out = Rendered(
        worker={r: [] for r in range(world)}, agent={n: [] for n in range(len(cluster.hosts))}
    )
    mono = [rng.randrange(10**6 * NS) for _ in cluster.hosts]
    procs: dict[int, _ProcState] = {}
    for p in cluster.procs:
        procs[p.rank] = _ProcState(
            mono=mono[p.node],
            tid_init=p.pid + rng.randrange(200, 3000),
            tid_proxy=p.pid + rng.randrange(3000, 6000),
            main_thread=0x7F0000000000 + rng.randrange(0x10000000) * 0x1000 + 0x740,
            bases={lib: 0x7F0000000000 + rng.randrange(0xFFFF000) * 0x1000 for lib in _LIBS},
            comm=0x55D000000000 + rng.randrange(0xFFFFFFF) * 0x10,
            monitor_phase=rng.randrange(MONITOR_POLL_NS),
        )
    out.waiting_ranks = sorted(r for r, ws in waits.items() if ws)
    created = [e["time_created_ns"] for d in dumps.values() for e in d.get("entries") or ()]
    t_start = (min(created) if created else 0) - rng.randrange(60, 600) * NS

    _render_start(out, w, cluster, groups, procs, style, t_start, rng)
    fires = sorted(
        (o.created_ns + o.timeout_ms * MS + rng.randrange(1, WATCHDOG_POLL_NS), o.rank, i)
        for r, ws in waits.items()
        for i, o in enumerate(ws)
    )
    if fires:
        status0 = {r: pg0_status(d) for r, d in dumps.items()}
        _render_hang(out, w, cluster, groups, waits, fires, procs, status0, style, rng)
    for lines in (*out.worker.values(), *out.agent.values()):
        lines.sort(key=lambda line: (line[0], line[1]))
    return out


def _render_start(
    out: Rendered,
    w: _Writer,
    cluster: Cluster,
    groups: dict[int, list[Group]],
    procs: dict[int, _ProcState],
    style: LogStyle,
    t_start: int,
    rng: random.Random,
) -> None:
    """What processes print while the job starts: torchrun's OMP warning, and with the INFO
    levels on, each process group's options (torch) and communicator set-up (NCCL)."""
    if style.omp_warning:
        for node, pid in enumerate(cluster.agent_pids):
            t = t_start + rng.randrange(0, 3 * NS)
            prefix = agent_prefix("W", t, pid, AGENT_LINE["omp"])
            # run.config_from_args: logger.warning("\n*****...\nSetting OMP_NUM_THREADS
            # environment variable for each process to be %s in default, ... as needed. \n
            # *****..."); TorchLogsFormatter prefixes every line of the message.
            message = (
                "\n*****************************************\n"
                "Setting OMP_NUM_THREADS environment variable for each process to be 1 in "
                "default, to avoid your system being overloaded, please further tune the "
                "variable for optimal performance in your application as needed. \n"
                "*****************************************"
            )
            w.add(out.agent[node], t, *(prefix + part for part in message.split("\n")))
    bus_ids = (0x18000, 0x2A000, 0x3A000, 0x5D000, 0x9A000, 0xAB000, 0xBA000, 0xDB000)
    comm_ids: dict[str, int] = {}
    for p in cluster.procs:
        st = procs[p.rank]
        lines = out.worker[p.rank]
        t = t_start + 5 * NS + rng.randrange(0, 4 * NS)
        for g in groups.get(p.rank, []):
            t += rng.randrange(2 * MS, 80 * MS)
            if style.torch_info:
                # ProcessGroupNCCL::ProcessGroupNCCL: LOG(INFO) << logPrefix() << "ProcessGroupNCCL
                # initialization options: " << "size: " << size << ", global rank: " <<
                # globalRank() << ", TIMEOUT(ms): " << options_->timeout.count() << ...
                # The default group's constructor runs before _update_default_pg sets the
                # global rank, so its line has no `[rank<N>]:`.
                grank = g.rank_of(p.rank)
                text = (
                    f"{pg_prefix(g, grank, with_desc=False)}ProcessGroupNCCL initialization "
                    f"options: size: {len(g.ranks)}, global rank: {p.rank}, TIMEOUT(ms): 600000, "
                    f"USE_HIGH_PRIORITY_STREAM: 0, SPLIT_FROM: 0, SPLIT_COLOR: 0, PG Name: {g.name}"
                )
                rank_tag = None if g.pg_id == 0 else p.rank
                w.add(lines, t, c10_prefix("I", t, st.mono, LINE["init_options"], rank_tag) + text)
        if style.nccl_debug != "INFO":
            continue
        # Communicators are created lazily, at each group's first collective.
        t_comm = t + rng.randrange(10 * NS, 40 * NS)
        head = f"{cluster.short(p.node)}:{p.pid}:{st.tid_init} [{p.local_rank}] NCCL INFO "
        # src/bootstrap.cc bootstrapNetInit (once per process): INFO(NCCL_BOOTSTRAP,
        # "Bootstrap: Using%s", line) with line = " <ifname>:" + ncclSocketToString(addr),
        # which prints "<host><<port>>" (src/misc/socket.cc).
        w.add(lines, t_comm, f"{head}Bootstrap: Using {style.iface}:{cluster.ips[p.node]}<0>")
        for g in groups.get(p.rank, []):
            t_comm += rng.randrange(50 * MS, 900 * MS)
            cid = comm_ids.setdefault(g.name, rng.randrange(1, 2**64))
            # src/init.cc ncclCommInitRankFunc: INFO(NCCL_INIT, "%s comm %p rank %d nranks %d
            # cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE", job->funcName,
            # ...); funcName is the API called, ncclCommInitRankConfig for ProcessGroupNCCL.
            w.add(
                lines,
                t_comm,
                f"{head}ncclCommInitRankConfig comm {st.comm + 0x1000 * g.pg_id:#x} rank "
                f"{g.rank_of(p.rank)} nranks {len(g.ranks)} cudaDev {p.local_rank} nvmlDev "
                f"{p.local_rank} busId {bus_ids[p.local_rank % 8]:x} commId {cid:#x} - Init "
                "COMPLETE",
            )


def _render_hang(
    out: Rendered,
    w: _Writer,
    cluster: Cluster,
    groups: dict[int, list[Group]],
    waits: dict[int, list[Outstanding]],
    fires: list[tuple[int, int, int]],
    procs: dict[int, _ProcState],
    status0: dict[int, tuple[int, int]],
    style: LogStyle,
    rng: random.Random,
) -> None:
    world = len(cluster.procs)
    by_rank: dict[int, list[tuple[int, Outstanding]]] = {r: [] for r in range(world)}
    for t, r, i in fires:
        by_rank[r].append((t, waits[r][i]))
    out.first_rank = fires[0][1]
    # Each failure detected broadcasts the dump signal: the TCPStore key then holds its rank.
    broadcasts = sorted((t + 200_000, r) for t, r, _ in fires)

    # When each rank's PG-0 monitor acts: at its first poll after its own watchdog fired or
    # after the store holds the dump key, whichever comes first.
    first_fire = {r: (ws[0][0] if ws else INF) for r, ws in by_rank.items()}
    poll: dict[int, tuple[int, bool]] = {}  # rank -> (time, local)
    for r in range(world):
        trigger = min(first_fire[r], broadcasts[0][0])
        phase = procs[r].monitor_phase
        p = trigger + (phase - trigger) % MONITOR_POLL_NS
        poll[r] = (int(p), first_fire[r] <= p)
    # How each process would end on its own: its watchdog's rethrow `getDumpTimeout() * 4`
    # after its first timeout, else its monitor's LOG(FATAL) 480 s after it dumped.
    own_end: dict[int, tuple[int, str]] = {}
    for r in range(world):
        dump_done = poll[r][0] + rng.randrange(200 * MS, 3 * NS)
        fatal = dump_done + HEARTBEAT_TIMEOUT_NS
        if first_fire[r] < INF:
            sleep = 4 * style.dump_wait_ms * MS
            abort = int(first_fire[r]) + sleep + rng.randrange(1 * MS, 30 * MS)
            own_end[r] = (abort, "watchdog") if abort < fatal else (fatal, "monitor")
        else:
            own_end[r] = (fatal, "monitor")
    t_first_end = min(t for t, _ in own_end.values())
    t_outside = t_first_end + int(style.window_s * NS)
    # A node's agent SIGTERMs its other workers at its next poll (--monitor-interval 0.1 s)
    # after one died; the scheduler ends the job at t_outside.
    death: dict[int, tuple[int, int]] = {}  # rank -> (time, exit code)
    node_end: dict[int, tuple[int, str]] = {}
    for node in range(len(cluster.hosts)):
        ranks = [p.rank for p in cluster.procs if p.node == node]
        first = min(own_end[r][0] for r in ranks)
        t_agent = first + rng.randrange(1 * MS, 100 * MS) + rng.randrange(0, 500 * MS)
        if t_agent <= t_outside:
            node_end[node] = (t_agent, "local")
        else:
            node_end[node] = (t_outside + rng.randrange(0, 2 * NS), "outside")
        t_kill = node_end[node][0]
        for r in ranks:
            if own_end[r][0] <= t_kill:
                death[r] = (own_end[r][0], -6)
            else:
                death[r] = (t_kill + rng.randrange(5 * MS, 400 * MS), -15)
    out.exit_codes = {r: code for r, (_, code) in death.items()}

    net = _render_net_warn(out, w, cluster, waits, procs, style, rng)
    out.net_warn = net
    for r in range(world):
        _render_rank(
            out,
            w,
            cluster,
            groups.get(r, []),
            by_rank[r],
            r,
            procs[r],
            poll[r],
            broadcasts,
            own_end[r],
            death[r],
            waits,
            status0.get(r, (-1, -1)),
            style,
        )
    for node in range(len(cluster.hosts)):
        _render_agent(out, w, cluster, node, node_end[node], death, style, rng)
    # The ranks whose timeout made it into the logs (a checkTimeout line was kept).
    out.logged_ranks = [
        r for r in range(world) if any(_is_timeout(text) for _, _, text in out.worker[r])
    ]


def _is_timeout(text: str) -> bool:
    return f"{PG_FILE}:{LINE['check_timeout']}] " in text and "Watchdog caught" in text


def _render_net_warn(
    out: Rendered,
    w: _Writer,
    cluster: Cluster,
    waits: dict[int, list[Outstanding]],
    procs: dict[int, _ProcState],
    style: LogStyle,
    rng: random.Random,
) -> dict[str, Any] | None:
    """A NET/IB completion error on one member of a group whose members all wait in the same
    collective, naming a member on another host (only for groups spanning hosts)."""
    if not style.net_warn or style.nccl_debug not in ("WARN", "INFO"):
        return None
    by_group: dict[tuple[str, int], list[Outstanding]] = {}
    for ws in waits.values():
        for o in ws:
            by_group.setdefault((o.group.name, o.seq), []).append(o)
    for (_, _), members in sorted(by_group.items(), key=lambda kv: kv[0]):
        ranks = {o.rank for o in members}
        if ranks != set(members[0].group.ranks):
            continue  # someone is missing: not a hang inside the collective
        nodes = sorted({cluster.procs[r].node for r in ranks})
        if len(nodes) < 2:
            continue
        me = rng.choice(sorted(ranks))
        peer_node = rng.choice([n for n in nodes if n != cluster.procs[me].node])
        p = cluster.procs[me]
        o = next(o for o in members if o.rank == me)
        t = o.created_ns + rng.randrange(1 * NS, 30 * NS)
        port = rng.randrange(32768, 61000)
        hca = f"mlx5_{rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11))}"
        stamp = _utc(t).strftime("[%Y-%m-%d %H:%M:%S] ")
        # src/debug.cc ncclDebugLog: a WARN starts with "\n", then (NCCL_DEBUG_TIMESTAMP_LEVELS
        # defaults to WARN) strftime("[%F %T] "), "%s:%d:%d " host, pid, tid, then
        # "[%d] %s:%d NCCL WARN " cudaDev, __FILE__, __LINE__; src/transport/net_ib.cc
        # ncclIbTest: WARN("NET/IB: Got completion from peer %s with status=%d opcode=%d
        # len=%u vendor err %u (%s)%s%s%s%s hca %s", ...): on an InfiniBand link the GID
        # strings are empty; status 12 is IBV_WC_RETRY_EXC_ERR; reqTypeStr[] "Send".
        text = (
            f"{stamp}{cluster.short(p.node)}:{p.pid}:{procs[me].tid_proxy} [{p.local_rank}] "
            f"{NET_IB_WARN_AT} NCCL WARN NET/IB: Got completion from peer "
            f"{cluster.ips[peer_node]}<{port}> with status=12 opcode=0 len=0 vendor err 129 "
            f"(Send) hca {hca}"
        )
        w.add(out.worker[me], t, "", text)
        return {
            "rank": me,
            "host": p.host,
            "peer_host": cluster.hosts[peer_node],
            "peer_ip": cluster.ips[peer_node],
        }
    return None


def _render_rank(
    out: Rendered,
    w: _Writer,
    cluster: Cluster,
    groups: list[Group],
    fires: list[tuple[int, Outstanding]],
    rank: int,
    st: _ProcState,
    poll: tuple[int, bool],
    broadcasts: list[tuple[int, int]],
    own_end: tuple[int, str],
    death: tuple[int, int],
    waits: dict[int, list[Outstanding]],
    status0: tuple[int, int],
    style: LogStyle,
) -> None:
    lines: list[Line] = []
    t_poll, local = poll
    static_rank = fires[0][1].group.rank_of(rank) if fires else None
    pg0 = next((g for g in groups if g.pg_id == 0), None)
    for n, (t, o) in enumerate(fires):
        grank = o.group.rank_of(rank)
        assert static_rank is not None
        ran_ms = (t - o.created_ns) // MS
        w.add(
            lines,
            t,
            c10_prefix("E", t, st.mono, LINE["check_timeout"], rank)
            + timeout_message(static_rank, o, ran_ms),
        )
        t1 = t + 120_000
        w.add(
            lines,
            t1,
            c10_prefix("E", t1, st.mono, LINE["failure_detected"], rank)
            + failure_message(o, grank),
        )
        if o.frames:
            t2 = t1 + 900_000
            tb = traceback_lines(o.frames)
            w.add(lines, t2, c10_prefix("E", t2, st.mono, LINE["traceback"], rank) + tb[0], *tb[1:])
        if n == 0 and (local or t < t_poll):
            # broadcastDumpSignal: LOG(ERROR) << logPrefix() << "First PG on this rank to
            # signal dumping." while shouldDump_ is still false.
            t3 = t1 + 1_200_000
            w.add(
                lines,
                t3,
                c10_prefix("E", t3, st.mono, LINE["first_pg"], rank)
                + f"{pg_prefix(o.group, grank)}First PG on this rank to signal dumping.",
            )
    if pg0 is not None:
        prefix0 = pg_prefix(pg0, pg0.rank_of(rank))
        enq, done = status0
        if local:
            source = "this local rank"
        else:
            source = f" rank {_last_before(broadcasts, t_poll)}"
            # HeartbeatMonitor::runLoop, the dump key found on the TCPStore while shouldDump_
            # is false: "Observed flight recorder dump signal from another rank via TCPStore."
            w.add(
                lines,
                t_poll,
                c10_prefix("E", t_poll, st.mono, LINE["observed_signal"], rank)
                + f"{prefix0}Observed flight recorder dump signal from another rank via "
                "TCPStore.",
            )
        t4 = t_poll + 150_000
        w.add(
            lines,
            t4,
            c10_prefix("E", t4, st.mono, LINE["dump_signal"], rank)
            + dump_signal_message(prefix0, source, enq, done),
        )
        t5 = t4 + 300_000
        # ProcessGroupNCCL::dumpDebuggingInfo: LOG(ERROR) << logPrefix() << "ProcessGroupNCCL
        # preparing to dump debug info. Include stack trace: " << includeStackTrace << ", only
        # active collectives: " << onlyActive.
        w.add(
            lines,
            t5,
            c10_prefix("E", t5, st.mono, LINE["preparing_dump"], rank)
            + f"{prefix0}ProcessGroupNCCL preparing to dump debug info. Include stack trace: "
            "1, only active collectives: 0",
        )
    t_end, how = own_end
    if death[1] == -6 and death[0] == t_end:
        if how == "watchdog":
            _render_watchdog_abort(
                lines, w, fires[0], rank, st, static_rank or 0, 4 * style.dump_wait_ms * MS
            )
        elif pg0 is not None:
            prefix0 = pg_prefix(pg0, pg0.rank_of(rank))
            # HeartbeatMonitor::runLoop after its sleep: pg_->terminateProcess(
            # getNCCLWatchdogTimeoutExitMsg(exitReason)), i.e. LOG(FATAL) << logPrefix() <<
            # errMsg, errMsg itself starting with the prefix; FATAL aborts (MessageLogger).
            w.add(
                lines,
                t_end,
                c10_prefix("F", t_end, st.mono, LINE["terminate_process"], rank)
                + f"{prefix0}{prefix0}Terminating the process after attempting to dump debug "
                "info, due to collective timeout or exception.",
            )
        if style.faulthandler:
            _render_faulthandler(lines, w, t_end + 2 * MS, st, waits.get(rank, []))
    # A SIGTERM ends the process at once; an abort lets its own last words out first.
    until = death[0] + (50 * MS if death[1] == -6 else 0)
    out.worker[rank].extend(line for line in lines if line[0] < until)


def pg0_status(dump: Dump) -> tuple[int, int]:
    """The default group's (last enqueued, last completed) work: the HeartbeatMonitor of PG 0
    prints `pg_->pgStatus_` (the dump's pg_status["0"] at the same moment)."""
    status = dump.get("pg_status", {}).get("0", {})
    return (
        int(status.get("last_enqueued_collective", -1)),
        int(status.get("last_completed_collective", -1)),
    )


def _last_before(broadcasts: list[tuple[int, int]], t: int) -> int:
    rank = broadcasts[0][1]
    for when, who in broadcasts:
        if when > t:
            break
        rank = who
    return rank


def _render_watchdog_abort(
    lines: list[Line],
    w: _Writer,
    first: tuple[int, Outstanding],
    rank: int,
    st: _ProcState,
    static_rank: int,
    sleep_ns: int,
) -> None:
    """What the first group to time out prints after its sleep, and the abort that follows."""
    t0, o = first
    t = t0 + sleep_ns + 5 * MS
    ran_ms = (t0 - o.created_ns) // MS
    # WorkNCCL::handleException: LOG(ERROR) << logPrefix() << "Some NCCL operations have failed
    # or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations
    # might run on corrupted/incomplete data."; then, SHOULD_TEAR_DOWN(errorHandling),
    # LOG(ERROR) << logPrefix() << "To avoid data inconsistency, we are taking the entire
    # process down." and std::rethrow_exception.
    w.add(
        lines,
        t,
        c10_prefix("E", t, st.mono, LINE["handle_exception"], rank)
        + f"[Rank {static_rank}] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.",
    )
    w.add(
        lines,
        t + 20_000,
        c10_prefix("E", t + 20_000, st.mono, LINE["tear_down"], rank)
        + f"[Rank {static_rank}] To avoid data inconsistency, we are taking the entire "
        "process down.",
    )
    inner = [
        timeout_message(static_rank, o, ran_ms),
        *backtrace("checkTimeout", LINE["check_timeout_raise"], _CHECK_TIMEOUT_FRAMES, st.bases),
        "",
    ]
    # Watchdog::run, catch (std::exception& e): exitMsg = c10::str(pg_->logPrefix(), "Process
    # group watchdog thread terminated with exception: ", e.what()); LOG(ERROR) << exitMsg;
    # then rethrows C10_BUILD_ERROR(DistBackendError, exitMsg). what() of a c10::Error is its
    # message, "\n" and the backtrace (which ends with a newline).
    exit_msg = [
        f"{pg_prefix(o.group, o.group.rank_of(rank))}Process group watchdog thread terminated "
        f"with exception: {inner[0]}",
        *inner[1:],
    ]
    t2 = t + 600_000
    w.add(
        lines,
        t2,
        c10_prefix("E", t2, st.mono, LINE["watchdog_terminated"], rank) + exit_msg[0],
        *exit_msg[1:],
    )
    # The exception leaves the thread: std::terminate, libstdc++'s __verbose_terminate_handler
    # (libsupc++/vterminate.cc): "terminate called after throwing an instance of '<demangled
    # type>'\n", "  what():  " << what() << "\n", then abort().
    what = [
        *exit_msg,
        *backtrace("run", LINE["watchdog_run_raise"], _RUN_FRAMES, st.bases),
        "",
    ]
    w.add(
        lines,
        t2 + 300_000,
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "  what():  " + what[0],
        *what[1:],
    )


def _render_faulthandler(
    lines: list[Line],
    w: _Writer,
    t: int,
    st: _ProcState,
    waits: list[Outstanding],
) -> None:
    """CPython's faulthandler on SIGABRT (Modules/faulthandler.c, faulthandler_fatal_error):
    "Fatal Python error: " + the handler's name ("Aborted") + "\\n\\n", then each Python
    thread (Python/traceback.c: "Thread 0x%016lx (most recent call first):\\n" and per frame
    `  File "<file>", line <n> in <name>`). The abort comes from a C++ thread, so no thread is
    "Current thread". Shown: the main thread only, at the stack of its latest collective call
    (where its CPU last entered torch.distributed; an approximation)."""
    frames: tuple[tuple[str, str, int], ...] = ()
    candidates = [o for o in waits if o.frames]
    if candidates:
        frames = max(candidates, key=lambda o: o.created_ns).frames
    text = [
        "Fatal Python error: Aborted",
        "",
        f"Thread {st.main_thread:#018x} (most recent call first):",
    ]
    text += [f'  File "{path}", line {line} in {name}' for name, path, line in frames]
    w.add(lines, t, *text)


def _render_agent(
    out: Rendered,
    w: _Writer,
    cluster: Cluster,
    node: int,
    end: tuple[int, str],
    death: dict[int, tuple[int, int]],
    style: LogStyle,
    rng: random.Random,
) -> None:
    t_detect, how = end
    t = t_detect
    pid = cluster.agent_pids[node]
    lines = out.agent[node]
    local = [p for p in cluster.procs if p.node == node]
    alive = [p for p in local if death[p.rank][0] > t_detect]
    if how == "outside":
        # SimpleElasticAgent.run: logger.warning("Received %s death signal, shutting down
        # workers", e.sigval); on python >= 3.11 an IntEnum prints as its number.
        w.add(
            lines,
            t,
            agent_prefix("W", t, pid, AGENT_LINE["death_signal"])
            + "Received 15 death signal, shutting down workers",
        )
    for p in alive:
        # SubprocessContext._close: logger.warning("Sending process %s closing signal %s",
        # handler.proc.pid, death_sig.name) for each worker still running.
        t += rng.randrange(100_000, 900_000)
        w.add(
            lines,
            t,
            agent_prefix("W", t, pid, AGENT_LINE["closing"])
            + f"Sending process {p.pid} closing signal SIGTERM",
        )
    if how == "outside":
        return
    out.summary_nodes.append(node)
    # SubprocessContext._poll: failures captured first (processes already gone), then after
    # close() the rest (their SIGTERM exit codes, "for bookkeeping purposes").
    t_close = max((death[p.rank][0] for p in local), default=t) + rng.randrange(50 * MS, 900 * MS)
    first = [p for p in local if p not in alive]
    failures = [
        Failure(p.rank, p.local_rank, p.pid, death[p.rank][1], t_detect // NS) for p in first
    ]
    failures += [
        Failure(p.rank, p.local_rank, p.pid, death[p.rank][1], t_close // NS) for p in alive
    ]
    root = min(failures, key=lambda f: f.timestamp)
    w.add(
        lines,
        t_close,
        agent_prefix("E", t_close, pid, AGENT_LINE["failed"])
        + f"failed (exitcode: {root.exitcode}) local_rank: {root.local_rank} (pid: {root.pid}) "
        f"of binary: {PYTHON}",
    )
    host = cluster.hosts[node] if style.summary_host == "host" else "localhost"
    message = child_failed_message(SCRIPT, failures, host)
    tb = Template(_TORCHRUN_TRACEBACK).substitute(site=SITE)
    w.add(lines, t_close + 2 * MS, tb + message)
