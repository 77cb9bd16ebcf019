"""Log lines that need a GPU to be written for real, built from torch's own format strings.

NCCL's watchdog only runs with CUDA, so these lines cannot come from the CPU fixtures. They
are assembled exactly as torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp assembles them:
- WorkNCCL::checkTimeout: `c10::str(logPrefix(), "Watchdog caught collective operation
  timeout: ", *this, " ran for ", timeElapsed.count(), " milliseconds before timing out.")`
  with WorkNCCL::logPrefix() = `"[Rank " << rank_ << "] "` and operator<<(WorkNCCL) =
  `"WorkNCCL(SeqNum=" seq_ ", OpType=" opTypeToString(opType_) ", NumelIn=" numelIn_
  ", NumelOut=" numelOut_ ", Timeout(ms)=" opTimeout_.count() ")"`;
- ProcessGroupNCCL::Watchdog::runLoop: `c10::str(pg_->logPrefix(), " failure detected by
  watchdog at work sequence id: ", work.seq_, " PG status: last enqueued work: ",
  lastEnqueuedSeq, ", last completed work: ", lastCompletedSeq)` with createLogPrefix() =
  `"[PG ID " local_id_ " PG GUID " pg_uid_ "(" pg_desc_ ") Rank " rank_ "] "`.
LOG(ERROR) writes them with glog's `[E<MMDD> <time> <thread> <file>:<line>] ` header, and a
worker's lines carry `[rank<global>]:` (as in published NCCL timeout logs).
"""

from __future__ import annotations


def _glog(line: int, clock: str | None = "1127 10:00:00.123456789") -> str:
    """c10's glog-style header (c10/util/Logging.cpp); '' for a line that lost it."""
    return "" if clock is None else f"[E{clock} ProcessGroupNCCL.cpp:{line}] "


def nccl_watchdog_lines(
    rank: int,
    seq: int,
    *,
    group_rank: int | None = None,
    op: str = "ALLREDUCE",
    numel: int = 1024,
    timeout_ms: int = 600_000,
    pg_id: int = 0,
    pg_uid: str = "0",
    pg_desc: str = "default_pg",
    last_enqueued: int | None = None,
    last_completed: int | None = None,
    header: str = "",
    clock: str | None = "1127 10:00:00.123456789",
    ran_ms: int | None = None,
) -> list[str]:
    """The two lines one rank's watchdog writes when its collective `seq` times out, at
    `clock` (`MMDD hh:mm:ss.frac`; None: lines without c10's header), the work having run
    `ran_ms` (the timeout and a little more by default)."""
    grank = rank if group_rank is None else group_rank
    work = (
        f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
        f"Timeout(ms)={timeout_ms})"
    )
    timeout = (
        f"[Rank {grank}] Watchdog caught collective operation timeout: {work} ran for "
        f"{timeout_ms + 17 if ran_ms is None else ran_ms} milliseconds before timing out."
    )
    pg_prefix = f"[PG ID {pg_id} PG GUID {pg_uid}({pg_desc}) Rank {grank}] "
    status = (
        f"{pg_prefix} failure detected by watchdog at work sequence id: {seq} PG status: "
        f"last enqueued work: {seq if last_enqueued is None else last_enqueued}, last "
        f"completed work: {seq - 1 if last_completed is None else last_completed}"
    )
    tag = f"{header}[rank{rank}]:"
    return [tag + _glog(632, clock) + timeout, tag + _glog(2271, clock) + status]


def nccl_warn_line(host: str, pid: int, message: str, device: int = 0) -> str:
    """An NCCL WARN line as nccl's src/debug.cc (ncclDebugLog) writes it."""
    return f"{host}:{pid}:{pid + 7} [{device}] transport/net_ib.cc:1295 NCCL WARN {message}"


def nccl_async_error_lines(rank: int, seq: int, message: str, op: str = "ALLREDUCE") -> list[str]:
    """An NCCL error the watchdog found (not a timeout): WorkNCCL::checkAndSetException logs
    `logPrefix() << "Collective " << *this << " raised the following async exception: " <<
    message`, then Watchdog::runLoop its `failure detected` line."""
    work = f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000)"
    tag = f"[rank{rank}]:"
    error = f"[Rank {rank}] Collective {work} raised the following async exception: {message}"
    status = (
        f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work "
        f"sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq - 1}"
    )
    return [tag + _glog(690) + error, tag + _glog(2271) + status]


def nccl_dump_signal_line(rank: int, enqueued: int, completed: int, source: str = " rank 0") -> str:
    """The line a rank's heartbeat monitor logs on a dump signal
    (ProcessGroupNCCL::HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg): the default group's
    prefix, who timed out (`" rank N"` from the TCPStore, or "this local rank"), and the group's
    last enqueued and last completed work."""
    return (
        f"[rank{rank}]:[E1127 10:10:05.000000000 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
        f"0(default_pg) Rank {rank}] Received a dump signal due to a collective timeout from "
        f"{source} and we will try our best to dump the debug info. Last enqueued NCCL work: "
        f"{enqueued}, last completed NCCL work: {completed}.This is most likely caused by "
        "incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of "
        "collectives is not same for all ranks or the scheduled collective, for some reason, "
        "didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as "
        "network errors or bugs in the communications library (e.g. NCCL), etc. "
    )
