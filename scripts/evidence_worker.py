"""One rank of an evidence job: the training program that scripts/evidence_jobs.py runs.

The generator does not run this file as it is: it copies it into the job's private work folder
under a trainer's name (``train.py``, ``pretrain.py``, ...) with some function names replaced by
the job's draw (``slow_data_loader`` may become ``read_shard``), so that the culprit's own
function is a different name from job to job, as in real programs. torchrun then starts that
copy on every node. What the job does comes from the JSON file named by ``EVJOB_SPEC``:

- a few steps of collectives on the default group (and, in some jobs, on a sub-group made with
  ``new_group``), gloo on CPU, with a short process-group timeout;
- the culprit rank carries the fault at one step (in ``train``);
- each rank writes its truth (rank, local rank, ``socket.gethostname()``, pid) and its progress
  markers into the private work folder, never into the evidence.

Every function name listed in ``RENAMED`` (evidence_jobs.py) appears here once as a ``def``; the
copy replaces the identifiers, whole words only.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

SPEC: dict[str, Any] = json.loads(Path(os.environ["EVJOB_SPEC"]).read_text())
WORK = Path(SPEC["work"])
EXCEPTIONS: dict[str, type[BaseException]] = {
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "KeyError": KeyError,
    "AssertionError": AssertionError,
    "FileNotFoundError": FileNotFoundError,
}


class TokenShards:
    """A map-style dataset whose DataLoader workers (forked, as on Linux) stay alive beside
    the rank, as a trainer's do: `py-spy dump` of every python process shows them too."""

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, index: int) -> int:
        return index


class Job:
    """Who this process is, as the launcher said."""

    def __init__(self, rank: int, local_rank: int) -> None:
        self.rank = rank
        self.local_rank = local_rank
        self.world = int(os.environ["WORLD_SIZE"])
        self.host = socket.gethostname()
        self.pid = os.getpid()

    @classmethod
    def from_env(cls) -> Job:
        return cls(int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]))


# --- the culprit's own code (names replaced per job) ---------------------------------------


def slow_data_loader(marker: Path) -> None:
    """stuck_loader: waits on a data source that never answers."""
    marker.touch()
    time.sleep(3600)


def prefetch_worker(source: str) -> None:
    """blocked_queue: the producer thread, itself stuck (on a slow file system, say)."""
    time.sleep(3600)


def next_batch(batches: queue.Queue[Any], marker: Path) -> Any:
    """blocked_queue: the main thread waits for a batch the producer never puts."""
    marker.touch()
    return batches.get()


def validate_batch(step: int) -> None:
    """exception: the batch is refused."""
    kind = EXCEPTIONS[SPEC["exception"]]
    raise kind(SPEC["exception_message"].format(step=step))


def forward_backward(go: Path, marker: Path) -> None:
    """healthy with stacks: every rank computes (here: waits) while someone looks."""
    marker.touch()
    while not go.exists():
        time.sleep(0.1)


# --- what every rank does ------------------------------------------------------------------


def _say(job: Job, log: logging.Logger | None, text: str) -> None:
    if log is not None:
        log.info(text)
    else:
        print(text, flush=True)


def _identity(job: Job) -> str | None:
    fmt = SPEC["trainer_lines"]
    if fmt == "plain":
        return f"rank {job.rank} pid {job.pid} on {job.host}"
    if fmt == "bracket":
        return f"[RANK={job.rank}] host={job.host} pid={job.pid} starting"
    if fmt == "logging":
        return f"rank={job.rank} pid={job.pid} host={job.host} starting training"
    if fmt == "pid_only":
        return f"worker started: rank={job.rank} world_size={job.world} pid={job.pid}"
    if fmt == "host_only":
        return f"Initializing rank {job.rank}/{job.world} on {job.host}"
    return None


def _progress_from(job: Job) -> bool:
    who = SPEC["progress"]
    return (
        who == "all"
        or (who == "rank0" and job.rank == 0)
        or (who == "local0" and job.local_rank == 0)
    )


def _dump(path: str | None) -> None:
    if path is None:
        return
    from frtrace.capture import dump_flight_recorder

    dump_flight_recorder(path)


def _dump_listener(path: str, job: Job) -> None:
    """Dump on request (the on-call asks every rank for its buffer before cancelling)."""
    request = WORK / "dump_now"
    while not request.exists():
        time.sleep(0.2)
    _dump(path)
    (WORK / f"dumped_{job.rank}").touch()


def communicate(op: str, x: Any, sub: Any, step: int) -> None:
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    if op == "all_reduce":
        dist.all_reduce(x)
    elif op == "broadcast":
        y = torch.full((3,), float(step))
        dist.broadcast(y, src=step % world)
    elif op == "all_gather":
        z = torch.ones(5)
        dist.all_gather([torch.zeros(5) for _ in range(world)], z)
    elif op == "barrier":
        dist.barrier()
    elif op == "sub_all_reduce":
        if sub is not None:
            dist.all_reduce(torch.ones(2), group=sub)
    else:
        raise AssertionError(op)


def train(job: Job) -> None:
    """The job's steps; the culprit carries the fault."""
    (WORK / f"truth_{job.rank}.json").write_text(
        json.dumps(
            {"rank": job.rank, "local_rank": job.local_rank, "host": job.host, "pid": job.pid}
        )
    )
    log = None
    if SPEC["trainer_lines"] == "logging":
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout
        )
        log = logging.getLogger("train")
    if SPEC["faulthandler"]:  # the on-call's `kill -USR1` prints every thread's stack
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    line = _identity(job)
    if line is not None:
        _say(job, log, line)
    dump_path = None
    if SPEC["dumps"]:
        from frtrace.capture import enable_flight_recorder

        enable_flight_recorder(buffer_size=2000, dump_on_timeout=False)
        dump_path = SPEC["dump_pattern"].format(host=job.host, rank=job.rank)
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=SPEC["timeout_s"]))
    sub = None
    if SPEC["subgroup"]:
        members = SPEC["subgroup"]
        sub = dist.new_group(members)
        if job.rank not in members:
            sub = None
    batches_in = None
    if SPEC.get("loader_workers"):  # forked workers, kept alive for the whole run
        from torch.utils.data import DataLoader

        shards: Any = TokenShards()  # map-style: __len__ and __getitem__ are all it needs
        batches_in = iter(
            DataLoader(shards, num_workers=SPEC["loader_workers"], persistent_workers=True)
        )
        next(batches_in)
    if dump_path is not None and SPEC["dump_on_request"]:
        threading.Thread(
            target=_dump_listener, args=(dump_path, job), name="fr-dump", daemon=True
        ).start()
    x = torch.ones(8)
    try:
        for step, ops in enumerate(SPEC["ops"]):
            skip = False
            if step == SPEC["fault_step"]:
                # the fault, called from here so that the culprit's stack reads as a
                # trainer's; nothing keeps the fault or the culprit in a local variable
                # (`py-spy dump --locals` would show it)
                marker = WORK / f"ready_{job.rank}"
                if SPEC["fault"] == "healthy" or job.rank != SPEC["culprit"]:
                    if SPEC["hold"]:
                        forward_backward(WORK / "go", marker)
                    else:
                        marker.touch()
                elif SPEC["fault"] == "stuck_loader":
                    _dump(dump_path)
                    slow_data_loader(marker)
                elif SPEC["fault"] == "blocked_queue":
                    _dump(dump_path)
                    batches: queue.Queue[Any] = queue.Queue(maxsize=2)
                    threading.Thread(
                        target=prefetch_worker,
                        args=(SPEC["shard"],),
                        name=SPEC["producer_thread"],
                        daemon=True,
                    ).start()
                    next_batch(batches, marker)
                elif SPEC["fault"] == "exception":
                    _dump(dump_path)
                    (WORK / f"raised_{job.rank}").touch()
                    validate_batch(step)
                elif SPEC["fault"] == "sigkill":
                    (WORK / f"killed_{job.rank}").touch()
                    os.kill(os.getpid(), signal.SIGKILL)
                else:  # skipped_collective: on to the step's next collective
                    marker.touch()
                    skip = True
            for i, op in enumerate(ops):
                if skip and i == 0:
                    continue
                communicate(op, x, sub, step)
            if _progress_from(job):
                loss = 2.0 / (step + 2) + job.rank * 1e-3
                _say(job, log, SPEC["progress_format"].format(step=step, loss=loss))
    except RuntimeError:
        (WORK / f"failed_{job.rank}").write_text(str(time.time()))
        _dump(dump_path)
        raise
    _dump(dump_path)
    (WORK / f"done_{job.rank}").touch()
    dist.destroy_process_group()


def main_lower() -> None:
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    train(Job(rank, local_rank))


def main_upper() -> None:
    RANK = int(os.environ["RANK"])
    LOCAL_RANK = int(os.environ["LOCAL_RANK"])
    train(Job(RANK, LOCAL_RANK))


def main_env() -> None:
    train(Job.from_env())


if __name__ == "__main__":
    # the copy calls the job's main function directly (evidence_jobs.worker_source)
    {"lower": main_lower, "upper": main_upper, "env": main_env}[SPEC["rank_locals"]]()
