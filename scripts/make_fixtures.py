"""Regenerate frtrace's real Flight Recorder fixtures by running small gloo jobs on CPU.

Usage: ``python scripts/make_fixtures.py [--out fixtures] [--only FOLDER...]``

The synthetic dumps in frtrace.synth say what we *think* torch writes; these say what it
really writes (e.g. gloo never moves ``state`` past "scheduled" and keys ``pg_config`` by
``''``), so the loader is tested against both. The capture functions are importable so the
test-suite can re-capture with the installed torch instead of trusting committed bytes.
Workers are top-level functions because ranks are started with the ``spawn`` method, and
torch is imported only inside them so that ``--help`` and imports work without torch.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import pickle
import platform
import socket
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from frtrace.capture import dump_flight_recorder, enable_flight_recorder

#: Seconds a rank may take before the whole capture is declared stuck (four ranks importing
#: torch at once on a busy 2-core machine take most of a minute before their first collective).
_CAPTURE_DEADLINE_S = 180.0
#: The process-group timeout that turns the tutorial's missing collective into an error.
TUTORIAL_TIMEOUT_S = 2.0


def _free_port() -> int:
    """Ask the OS for an unused localhost port, so parallel captures do not collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_ranks(
    target: Callable[..., None],
    world: int,
    args: tuple[Any, ...],
    exits: dict[int, int] | None = None,
) -> None:
    """Run ``target(rank, world, port, *args)`` in ``world`` spawned processes and wait.

    Raises if any rank exits otherwise than ``exits`` says (default: every rank exits 0) or
    the job outlives the deadline (stragglers are killed), so a broken capture never leaves
    half-written fixtures looking valid.
    """
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=target, args=(r, world, port, *args)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + _CAPTURE_DEADLINE_S
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    stuck = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in stuck:
        procs[r].kill()
        procs[r].join()
    expected = {r: (exits or {}).get(r, 0) for r in range(world)}
    failed = {r: p.exitcode for r, p in enumerate(procs) if p.exitcode != expected[r]}
    if stuck or failed:
        raise RuntimeError(
            f"capture failed: stuck ranks {stuck}, exit codes {failed} (expected {expected})"
        )


def _init_gloo(rank: int, world: int, port: int, timeout_s: float | None = None) -> None:
    """Turn on the recorder, then join a gloo job on localhost.

    The rendezvous gets a generous timeout (slow spawns on a busy machine must not fail it);
    a short collective timeout, if asked for, is applied only afterwards.
    """
    enable_flight_recorder(buffer_size=2000, dump_on_timeout=False)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    set_timeout = getattr(distributed_c10d, "_set_pg_timeout", None)
    init_timeout = 60.0 if (timeout_s is None or set_timeout is not None) else timeout_s
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=init_timeout)
    )
    if timeout_s is not None and set_timeout is not None:
        set_timeout(timedelta(seconds=timeout_s))


def _dump(rank: int, pickle_dir: Path, json_dir: Path | None) -> None:
    """Write this rank's dump as ``trace_<rank>`` (and ``trace_<rank>.json``)."""
    dump_flight_recorder(pickle_dir / f"trace_{rank}", fmt="pickle")
    if json_dir is not None:
        dump_flight_recorder(json_dir / f"trace_{rank}.json", fmt="json")


def tutorial_worker(
    rank: int, world: int, port: int, pickle_dir: Path, json_dir: Path | None, timeout_s: float
) -> None:
    """One rank of the tutorial job: rank 0 issues one all_reduce that rank 1 forgot.

    Shapes are equal on purpose: gloo aborts the process on a size mismatch, while an
    unmatched collective of the same shape silently pairs with the peer's next one, so
    rank 0 ends one collective ahead and its last all_reduce times out.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    a = torch.ones(3, 4) * (rank + 1)
    b = torch.full((3, 4), 7.0)
    for _ in range(2):
        dist.all_reduce(a)
    if rank == 0:
        dist.all_reduce(b)  # the collective rank 1 never issues
    try:
        for _ in range(2):
            dist.all_reduce(a)
    except RuntimeError:
        pass  # rank 0's last all_reduce has no partner: the "hang", cut short by the timeout
    _dump(rank, pickle_dir, json_dir)
    # Rank 1 must stay alive until rank 0 has timed out and dumped (a dead peer would turn
    # the timeout into a connection error); the store still works after the PG gave up.
    if rank == 0:
        store.set("frtrace/rank0_dumped", "1")
        store.wait(["frtrace/rank1_done"], timedelta(seconds=30))
    else:
        store.wait(["frtrace/rank0_dumped"], timedelta(seconds=30))
        store.set("frtrace/rank1_done", "1")


def healthy_worker(rank: int, world: int, port: int, out_dir: Path) -> None:
    """One rank of a healthy 4-rank job using the default group and two pair sub-groups."""
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port)
    pair01 = dist.new_group([0, 1], group_desc="pair01")
    pair23 = dist.new_group([2, 3], group_desc="pair23")
    mine, first = (pair01, 0) if rank < 2 else (pair23, 2)

    x = torch.arange(4, dtype=torch.float32) + rank
    dist.all_reduce(x)
    dist.broadcast(x, src=0)
    dist.all_gather([torch.empty(4) for _ in range(world)], x)
    # gloo has no native reduce-scatter: torch records it as an all_reduce of the input.
    dist.reduce_scatter_tensor(torch.empty(2), torch.ones(2 * world))

    y = torch.full((2, 3), float(rank))
    dist.all_reduce(y, group=mine)
    dist.all_gather([torch.empty(2, 3) for _ in range(2)], y, group=mine)
    dist.broadcast(y, src=first, group=mine)

    dist.barrier()  # every rank's collectives are complete before anyone dumps
    _dump(rank, out_dir, None)
    dist.barrier()
    dist.destroy_process_group()


def cascade_worker(rank: int, world: int, port: int, out_dir: Path, timeout_s: float) -> None:
    """One rank of a hang that cascades across groups.

    Each step every rank all_reduces in its pair group, then in the default group. In step 3
    rank 3 stalls outside collectives (think data loading) before its pair all_reduce: rank 2
    waits for it in `pair23`, and ranks 0 and 1 then wait in the default group for rank 2.
    The rank to blame is 3, at the end of that chain, not 2 where ranks 0-1 wait.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    short = timedelta(seconds=timeout_s)  # sub-groups would otherwise wait 30 minutes
    pair01 = dist.new_group([0, 1], timeout=short, group_desc="pair01")
    pair23 = dist.new_group([2, 3], timeout=short, group_desc="pair23")
    mine = pair01 if rank < 2 else pair23
    x = torch.ones(6) * (rank + 1)
    try:
        for step in range(3):
            if rank == 3 and step == 2:
                break  # the stall: rank 3 never reaches its next collective
            dist.all_reduce(x, group=mine)
            dist.all_reduce(x)
    except RuntimeError:
        pass  # the hang, cut short by the process-group timeout
    others = [f"frtrace/dumped_{r}" for r in range(world) if r != 3]
    if rank == 3:  # stay silent until every waiting rank has timed out and dumped
        store.wait(others, timedelta(seconds=60))
    _dump(rank, out_dir, None)
    store.set(f"frtrace/dumped_{rank}", "1")
    store.wait([f"frtrace/dumped_{r}" for r in range(world)], timedelta(seconds=60))
    store.set(f"frtrace/bye_{rank}", "1")
    if rank == 0:  # rank 0 hosts the store: leave last
        store.wait([f"frtrace/bye_{r}" for r in range(world)], timedelta(seconds=60))


def _dump_and_leave(
    rank: int,
    world: int,
    store: Any,
    out_dir: Path,
    json_dir: Path | None = None,
    alive: Sequence[int] | None = None,
) -> None:
    """Dump, then keep this rank alive until every rank in ``alive`` (default all) has dumped.

    A rank that exits early would turn its peers' timeouts into connection errors; the
    store still works after a process group gave up. Rank 0 hosts the store, so it leaves last.
    """
    ranks = list(range(world)) if alive is None else list(alive)
    _dump(rank, out_dir, json_dir)
    store.set(f"frtrace/dumped_{rank}", "1")
    store.wait([f"frtrace/dumped_{r}" for r in ranks], timedelta(seconds=60))
    store.set(f"frtrace/bye_{rank}", "1")
    if rank == 0:
        store.wait([f"frtrace/bye_{r}" for r in ranks], timedelta(seconds=60))


def order_inversion_worker(
    rank: int, world: int, port: int, out_dir: Path, timeout_s: float
) -> None:
    """One rank of a deadlock from collectives issued in different orders.

    Groups `left` = ranks 0-2 and `right` = ranks 1-3 share ranks 1 and 2. Each step every
    member all_reduces in `left`, then in `right`. In step 3 rank 1 calls `right` first: it
    waits there for rank 2, which waits in `left` for rank 1. Rank 0 (in `left`) and rank 3
    (in `right`) wait behind the cycle. Nobody gets to its second call before the timeout.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    short = timedelta(seconds=timeout_s)
    left = dist.new_group([0, 1, 2], timeout=short, group_desc="left")
    right = dist.new_group([1, 2, 3], timeout=short, group_desc="right")
    mine = [(left, torch.ones(4))] if rank != 3 else []
    mine += [(right, torch.ones(2, 2))] if rank != 0 else []
    try:
        for step in range(3):
            order = mine[::-1] if (rank == 1 and step == 2) else mine
            for group, tensor in order:
                dist.all_reduce(tensor, group=group)
    except RuntimeError:
        pass  # the deadlock, cut short by the process-group timeout
    _dump_and_leave(rank, world, store, out_dir)


def broadcast_root_worker(
    rank: int, world: int, port: int, out_dir: Path, timeout_s: float
) -> None:
    """One rank of a job whose ranks disagree on a broadcast's root.

    After broadcasts from roots 0, 1, 2 and an all_reduce, ranks 0-2 broadcast from rank 0
    while rank 3 broadcasts from itself. With gloo's tree broadcast ranks 0 and 2 get through
    and wait in the next all_reduce; ranks 1 and 3 time out in the broadcast.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    x = torch.arange(4, dtype=torch.float32)
    for src in range(3):
        dist.broadcast(x, src=src)
    dist.all_reduce(x)
    try:
        dist.broadcast(x, src=3 if rank == 3 else 0)  # rank 3 names the wrong root
        dist.all_reduce(x)
    except RuntimeError:
        pass  # the hang, cut short by the process-group timeout
    _dump_and_leave(rank, world, store, out_dir)


def size_worker(rank: int, world: int, port: int, out_dir: Path, timeout_s: float) -> None:
    """One rank of a 3-rank job where rank 2 all_reduces 4 elements and its peers 6.

    Two healthy all_reduces come first. The odd rank's tensor is the smaller one on purpose:
    with a larger one gloo aborts a peer process (no dump); with a smaller one rank 2's call
    returns (with garbage) while ranks 0 and 1 wait for the rest and time out.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    for _ in range(2):
        dist.all_reduce(torch.ones(6))
    # Ranks 0 and 1 wait for bytes rank 2 never sends, until the timeout.
    with contextlib.suppress(RuntimeError):
        dist.all_reduce(torch.ones(4 if rank == 2 else 6))
    _dump_and_leave(rank, world, store, out_dir)


def alltoall_split(src: int, dst: int) -> int:
    """Rows rank ``src`` sends rank ``dst`` in the all_to_all fixture: uneven, MoE-like."""
    return (src + 2 * dst) % 3 + 1


def alltoall_worker(rank: int, world: int, port: int, out_dir: Path) -> None:
    """One rank of a healthy job doing uneven `all_to_all_single` exchanges (MoE token routing).

    Rank ``r`` sends ``alltoall_split(r, j)`` rows of 2 to rank ``j``; three steps, each with
    the splits shifted by one rank, then a barrier before dumping.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port)
    for step in range(3):
        send = [alltoall_split((rank + step) % world, j) for j in range(world)]
        recv = [alltoall_split((j + step) % world, rank) for j in range(world)]
        inp = torch.full((sum(send), 2), float(rank))
        out = torch.empty(sum(recv), 2)
        dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)
    dist.barrier()
    _dump(rank, out_dir, None)
    dist.barrier()
    dist.destroy_process_group()


def gather_scatter_worker(rank: int, world: int, port: int, out_dir: Path) -> None:
    """One rank of a healthy job using rooted collectives with various roots, then a barrier."""
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port)
    x = torch.full((3,), float(rank))
    dist.gather(x, [torch.empty(3) for _ in range(world)] if rank == 0 else None, dst=0)
    dist.scatter(x, [torch.ones(3) * r for r in range(world)] if rank == 1 else None, src=1)
    dist.reduce(x, dst=2)
    dist.broadcast(x, src=3)
    dist.gather(x, [torch.empty(3) for _ in range(world)] if rank == 3 else None, dst=3)
    dist.reduce(x, dst=0)
    dist.barrier()
    _dump(rank, out_dir, None)
    dist.barrier()
    dist.destroy_process_group()


# --- jobs where the evidence is thin: pipelines, dead ranks, a truncated dump, ties ---------

#: The step (counted from 0) in which the pipeline jobs' stage-0 rank 1 stalls or fails.
PIPELINE_FAULT_STEP = 2


def _caught(rank: int, exc: BaseException) -> None:
    """Say on stderr which error ended this rank's collectives (what the README reports)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    first = first.split("] ", 1)[-1] if first.startswith("[") else first  # drop "[file:line] "
    print(f"rank {rank}: {type(exc).__name__}: {first[:120]}", file=sys.stderr, flush=True)


def _mse(out: Any, target: Any) -> Any:
    """The pipeline's loss (a plain function: the schedule calls it on the last stage)."""
    return ((out - target) ** 2).mean()


def _pipeline(rank: int, world: int, port: int, timeout_s: float) -> tuple[Any, Any, int, Any]:
    """Join a 2-stage x 2-replica pipeline; return (schedule, stage module, stage, dp group).

    ``init_device_mesh("cpu", (2, 2), ("pp", "dp"))``: ranks 0-1 are stage 0 and ranks 2-3
    stage 1; the ``dp`` groups are {0, 1} and {2, 3}, the ``pp`` groups {0, 2} and {1, 3}.
    Each stage is one ``Linear(4, 4)`` run by ``torch.distributed.pipelining``'s GPipe
    schedule over 2 microbatches, whose activations and gradients go by send/recv.
    """
    import torch
    from torch.distributed import ProcessGroupGloo
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    _init_gloo(rank, world, port, timeout_s)
    # Mesh groups would otherwise wait 30 minutes. The timeout is given at creation: seen with
    # torch 2.13, `_set_pg_timeout` on a mesh group afterwards made its collectives time out
    # after 2 s, but a pipeline recv on it still waited more than 60 s.
    gloo: Any = ProcessGroupGloo  # its options type is not in torch's stubs
    short = gloo._Options()
    short._timeout = timedelta(seconds=timeout_s)
    mesh = init_device_mesh(
        "cpu",
        (2, 2),
        mesh_dim_names=("pp", "dp"),
        backend_override={"pp": ("gloo", short), "dp": ("gloo", short)},
    )
    stage_index = mesh["pp"].get_local_rank()
    torch.manual_seed(stage_index)
    module = torch.nn.Linear(4, 4)
    pp = mesh["pp"].get_group()
    stage = PipelineStage(module, stage_index, 2, torch.device("cpu"), group=pp)
    schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=_mse)
    return schedule, module, stage_index, mesh["dp"].get_group()


def _pipeline_step(schedule: Any, module: Any, stage_index: int, dp: Any, batch: Any) -> None:
    """One training step: GPipe forward and backward, then the dp all_reduce of each gradient."""
    import torch
    import torch.distributed as dist

    if stage_index == 0:
        schedule.step(batch)
    else:
        schedule.step(target=torch.zeros(4, 4))
    for param in module.parameters():  # weight [4, 4], then bias [4]
        dist.all_reduce(param.grad, group=dp)
    module.zero_grad()


def pipeline_stall_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of the 2x2 pipeline whose stage-0 rank 1 stalls in its data loader.

    In step 3 (``PIPELINE_FAULT_STEP``) rank 1's loader blocks outside any collective. Rank 3
    (stage 1, same replica) times out in the recv of rank 1's activations, which gloo does
    not record; rank 0 and rank 2 finish their pipeline step together and time out in the
    step's first dp all_reduce, waiting for rank 1 and rank 3. The stall outlasts their
    dumps; rank 1 is dumped while still stalled, on demand, then every rank leaves.
    """
    import torch
    import torch.distributed as dist

    schedule, module, stage_index, dp = _pipeline(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()

    def slow_data_loader(step: int) -> Any:
        if rank == 1 and step == PIPELINE_FAULT_STEP:
            others = [f"frtrace/dumped_{r}" for r in range(world) if r != 1]
            store.wait(others, timedelta(seconds=60))  # the stall, longer than any timeout
            return None  # an on-demand dump of this rank is taken next, still mid-stall
        return torch.ones(4, 4)

    try:
        for step in range(PIPELINE_FAULT_STEP + 1):
            batch = slow_data_loader(step) if stage_index == 0 else None
            if stage_index == 0 and batch is None:
                break
            _pipeline_step(schedule, module, stage_index, dp, batch)
    except RuntimeError as exc:
        _caught(rank, exc)  # the hang, cut short by the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir)


class CorruptSampleError(ValueError):
    """What the pipeline_raise job's data loader raises on rank 1."""


def pipeline_raise_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of the 2x2 pipeline whose stage-0 rank 1 raises in its data loader.

    In step 3 rank 1's loader raises; nothing catches it, so rank 1 exits with status 1 and
    writes no dump. Rank 3 fails in the recv of rank 1's activations (not recorded), rank 0
    in the dp all_reduce it shares with rank 1; rank 2, done with its pipeline step, times
    out in the dp all_reduce it shares with rank 3. Those three dump.
    """
    import torch
    import torch.distributed as dist

    schedule, module, stage_index, dp = _pipeline(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()

    def data_loader(step: int) -> Any:
        if rank == 1 and step == PIPELINE_FAULT_STEP:
            raise CorruptSampleError(f"rank {rank}: corrupt sample in step {step}")
        return torch.ones(4, 4)

    try:
        for step in range(PIPELINE_FAULT_STEP + 1):
            batch = data_loader(step) if stage_index == 0 else None
            _pipeline_step(schedule, module, stage_index, dp, batch)
    except RuntimeError as exc:
        _caught(rank, exc)  # rank 1 is gone: a connection error or the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir, alive=(0, 2, 3))


def uneven_data_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a 4-rank job whose rank 3 runs out of data one step early.

    Each step all_reduces a gradient (2, 3) then a loss (1); ranks 0-2 have 3 batches,
    rank 3 has 2, so it leaves the loop after step 2 while ranks 0-2 time out in step 3's
    gradient all_reduce. Rank 3 dumps first, having nothing to wait for.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    batches = 2 if rank == 3 else 3  # the uneven inputs
    try:
        for _ in range(batches):
            dist.all_reduce(torch.ones(2, 3))
            dist.all_reduce(torch.ones(1))
    except RuntimeError as exc:
        _caught(rank, exc)  # the hang, cut short by the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir)


def fsdp2_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of an FSDP2 job (``fully_shard``) whose rank 3 dies in its second step.

    A Linear(8, 8) - ReLU - Linear(8, 4) model, each Linear and the root sharded over the
    4 ranks of a 1-D mesh (the default group). A step is 2 forward all_gathers, 2 backward
    all_gathers and 2 gradient reduce-scatters (recorded as all_reduce on gloo). In step 2
    rank 3 ends with ``os._exit(1)`` between forward and backward: no dump. Ranks 0-2 fail
    in the first backward all_gather and dump.
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        for step in range(2):
            loss = model(torch.ones(2, 8)).sum()
            if rank == 3 and step == 1:
                os._exit(1)  # the crash: gone between forward and backward, no dump
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    except RuntimeError as exc:
        _caught(rank, exc)  # rank 3 is gone: a connection error or the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir, alive=(0, 1, 2))


def mismatch_kills_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a 3-rank job where rank 2 all_reduces 5 elements and its peers 4.

    Two healthy all_reduces of 4 come first. In the third, ranks 0 and 1 get their 4
    elements and return; rank 2 waits for its fifth and times out. Ranks 0-1 go on to the
    next all_reduce and time out there. Rank 2's error handler dumps and re-raises, so rank
    2 exits with status 1; ranks 0-1 dump after it.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    for _ in range(2):
        dist.all_reduce(torch.ones(4))
    try:
        dist.all_reduce(torch.ones(5 if rank == 2 else 4))  # rank 2's odd size
        dist.all_reduce(torch.ones(4))
    except RuntimeError as exc:
        _caught(rank, exc)
        if rank == 2:  # a job's own handler: dump the recorder, then let the error end it
            _dump(rank, out_dir, json_dir)
            store.set(f"frtrace/dumped_{rank}", "1")
            raise
    store.wait(["frtrace/dumped_2"], timedelta(seconds=60))
    _dump_and_leave(rank, world, store, out_dir, json_dir, alive=(0, 1))


def broadcast_2v2_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a 4-rank job that broadcasts weights from rank 0, then all_reduces, each step.

    In step 3 rank 3 names itself as the broadcast's root. Ranks 0 and 2 get through that
    broadcast and time out in the step's all_reduce; ranks 1 and 3 time out in the broadcast.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    weights, grad = torch.zeros(4), torch.ones(4)
    try:
        for step in range(3):
            dist.broadcast(weights, src=3 if (rank == 3 and step == 2) else 0)
            dist.all_reduce(grad)
    except RuntimeError as exc:
        _caught(rank, exc)  # the hang, cut short by the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir)


def extra_call_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a 2-rank job where, after training, rank 0 alone all_reduces its metrics.

    Each of 3 steps broadcasts the weights from rank 0, all_gathers embeddings, all_reduces
    the gradient, then all_reduces the loss. After the loop only rank 0 (the logging rank)
    all_reduces a metrics vector, from its own line, and times out; rank 1 has finished and
    waits (outside any collective) for rank 0 to dump, then dumps.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()
    weights, embedding, grad, loss = torch.zeros(4), torch.ones(2), torch.ones(4), torch.ones(1)
    for _ in range(3):
        dist.broadcast(weights, src=0)
        dist.all_gather([torch.empty(2) for _ in range(world)], embedding)
        dist.all_reduce(grad)
        dist.all_reduce(loss)
    if rank == 0:
        try:
            dist.all_reduce(torch.zeros(3))  # the logging call rank 1 never makes
        except RuntimeError as exc:
            _caught(rank, exc)  # the hang, cut short by the process-group timeout
    else:
        store.wait(["frtrace/dumped_0"], timedelta(seconds=60))
    _dump_and_leave(rank, world, store, out_dir, json_dir)


def _mesh(rank: int, world: int, port: int, timeout_s: float, dp: int, tp: int) -> tuple[Any, Any]:
    """Join a gloo job and a ``dp`` x ``tp`` DeviceMesh; return its (tp group, dp group).

    ``init_device_mesh("cpu", (dp, tp), ("dp", "tp"))``: the tp groups are rows of ``tp``
    consecutive ranks, the dp groups columns. Its groups get the short timeout at creation
    (see ``_pipeline``).
    """
    from torch.distributed import ProcessGroupGloo
    from torch.distributed.device_mesh import init_device_mesh

    _init_gloo(rank, world, port, timeout_s)
    gloo: Any = ProcessGroupGloo  # its options type is not in torch's stubs
    short = gloo._Options()
    short._timeout = timedelta(seconds=timeout_s)
    mesh = init_device_mesh(
        "cpu",
        (dp, tp),
        mesh_dim_names=("dp", "tp"),
        backend_override={"dp": ("gloo", short), "tp": ("gloo", short)},
    )
    return mesh["tp"].get_group(), mesh["dp"].get_group()


#: The rank of ``mesh_size_dies_4rank`` that all_reduces [5, 8] in its tp group's sixth call.
MESH_ODD_RANK = 3


def mesh_size_dies_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a tp 2 x dp 2 DeviceMesh job whose rank 3 all_reduces a wrong shape.

    Each of 3 steps all_reduces two activations ``[4, 8]`` in the rank's tp group (rows
    {0, 1}, {2, 3}), then a gradient ``[6]`` in its dp group (columns {0, 2}, {1, 3}). In step
    3 rank 3's second tp all_reduce (``mesh_tp`` seq 6) is ``[5, 8]``: its tp peer, rank 2,
    receives more than it expects and gloo aborts its process (no dump). Rank 3's call fails
    once rank 2 is gone; rank 0's dp all_reduce fails against the dead rank 2, rank 1's times
    out waiting for rank 3. Ranks 0, 1 and 3 dump.
    """
    import torch
    import torch.distributed as dist

    tp, dp = _mesh(rank, world, port, timeout_s, 2, 2)
    store = dist.distributed_c10d._get_default_store()
    try:
        for step in range(3):
            for layer in range(2):
                odd = rank == MESH_ODD_RANK and step == 2 and layer == 1
                dist.all_reduce(torch.ones(5 if odd else 4, 8), group=tp)
            dist.all_reduce(torch.ones(6), group=dp)
    except RuntimeError as exc:
        _caught(rank, exc)  # rank 2 is gone: a connection error or the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir, alive=(0, 1, 3))


def helper_extra_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a 2-rank job whose rank 0 all_reduces one tensor too many in a shared helper.

    Both ranks reduce every tensor through one helper, called from one line: per step a
    gradient ``[4]`` and a loss ``[1]``. In step 3 rank 0 passes its gradient once more (to log
    its norm), so the helper issues an extra ``[4]`` at seq 7 while rank 1, done training,
    all_reduces its 3 metrics from another line. gloo lets rank 1 (3 elements) return; rank 0
    waits for a fourth element and times out. Rank 1 waits (outside any collective) for rank 0
    to dump, then dumps.
    """
    import torch
    import torch.distributed as dist

    _init_gloo(rank, world, port, timeout_s)
    store = dist.distributed_c10d._get_default_store()

    def sync(tensors: list[Any]) -> None:  # the helper every collective goes through
        for tensor in tensors:
            dist.all_reduce(tensor)

    grad, loss = torch.ones(4), torch.ones(1)
    try:
        for step in range(3):
            extra = [grad] if (rank == 0 and step == 2) else []
            sync([grad, loss, *extra])
        if rank == 1:
            sync([torch.zeros(3)])  # the metrics, from a line of their own
    except RuntimeError as exc:
        _caught(rank, exc)  # the hang, cut short by the process-group timeout
    if rank == 1:
        store.wait(["frtrace/dumped_0"], timedelta(seconds=60))
    _dump_and_leave(rank, world, store, out_dir, json_dir)


#: The ranks of ``two_stalls_8rank`` that stall, one in each tp group, before its sixth call.
TWO_STALLS = (1, 6)


def two_stalls_worker(
    rank: int, world: int, port: int, out_dir: Path, json_dir: Path, timeout_s: float
) -> None:
    """One rank of a tp 4 x dp 2 DeviceMesh job (no pipeline) where two ranks stall apart.

    Each of 3 steps all_reduces two activations ``[2, 4]`` in the rank's tp group ({0-3},
    {4-7}), then a gradient ``[3]`` in its dp group ({0, 4}, {1, 5}, {2, 6}, {3, 7}). In step
    3, between its two tp calls, rank 1 stalls (its host blocks, say on a file system) and so,
    independently, does rank 6: ranks 0, 2, 3 time out in ``mesh_tp`` seq 6 of the first tp
    group, ranks 4, 5, 7 in seq 6 of the second. The stalled ranks are dumped on demand once
    the others have dumped, still mid-stall.
    """
    import torch
    import torch.distributed as dist

    tp, dp = _mesh(rank, world, port, timeout_s, 2, 4)
    store = dist.distributed_c10d._get_default_store()
    try:
        for step in range(3):
            for layer in range(2):
                if rank in TWO_STALLS and step == 2 and layer == 1:
                    others = [f"frtrace/dumped_{r}" for r in range(world) if r not in TWO_STALLS]
                    store.wait(others, timedelta(seconds=90))  # the stall, past every timeout
                    raise _Stalled
                dist.all_reduce(torch.ones(2, 4), group=tp)
            dist.all_reduce(torch.ones(3), group=dp)
    except (RuntimeError, _Stalled) as exc:
        if not isinstance(exc, _Stalled):
            _caught(rank, exc)  # the hang, cut short by the process-group timeout
    _dump_and_leave(rank, world, store, out_dir, json_dir)


class _Stalled(Exception):
    """Ends a stalled rank's loop in two_stalls_worker once it is to be dumped."""


def _capture_both(
    worker: Callable[..., None],
    world: int,
    out_dir: Path,
    json_dir: Path,
    timeout_s: float,
    exits: dict[int, int] | None = None,
) -> list[Path]:
    """Run ``worker``; pickles go to ``out_dir`` and JSON dumps of the same run to ``json_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_dir.mkdir(parents=True, exist_ok=True)
    for old in [*out_dir.glob("trace_*"), *json_dir.glob("trace_*")]:
        old.unlink()  # a rank that dies writes none: no stale dump may stand in for it
    _run_ranks(worker, world, (out_dir, json_dir, timeout_s), exits)
    return sorted(out_dir.glob("trace_*")) + sorted(json_dir.glob("trace_*"))


def capture_pipeline_stall(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 2x2 pipeline whose rank 1 stalls; pickles to ``out_dir``, JSON to ``json_dir``."""
    return _capture_both(pipeline_stall_worker, 4, out_dir, json_dir, timeout_s)


def capture_pipeline_raise(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 2x2 pipeline whose rank 1 raises and exits with status 1, leaving no dump."""
    return _capture_both(pipeline_raise_worker, 4, out_dir, json_dir, timeout_s, {1: 1})


#: The rank whose dumps ``capture_truncated_beside_fault`` cuts, and the part of them it keeps.
TRUNCATED_RANK = 1
TRUNCATED_KEEP = 0.5


def capture_truncated_beside_fault(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the uneven-data job, then cut rank 1's two dumps to half their bytes.

    The cut emulates a process killed while writing its dump; rank 1 is not at fault.
    """
    paths = _capture_both(uneven_data_worker, 4, out_dir, json_dir, timeout_s)
    for path in (out_dir / f"trace_{TRUNCATED_RANK}", json_dir / f"trace_{TRUNCATED_RANK}.json"):
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * TRUNCATED_KEEP)])
    return paths


def capture_fsdp2_rank_dies(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the FSDP2 job whose rank 3 dies (status 1, no dump) in its second step."""
    return _capture_both(fsdp2_worker, 4, out_dir, json_dir, timeout_s, {3: 1})


def capture_mismatch_kills(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 3-rank job where rank 2 all_reduces 5 elements against 4 and exits with 1."""
    return _capture_both(mismatch_kills_worker, 3, out_dir, json_dir, timeout_s, {2: 1})


def capture_broadcast_2v2(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 4-rank job whose rank 3 names itself as root in step 3's broadcast."""
    return _capture_both(broadcast_2v2_worker, 4, out_dir, json_dir, timeout_s)


def capture_extra_call(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 2-rank job where rank 0 alone all_reduces its metrics after training."""
    return _capture_both(extra_call_worker, 2, out_dir, json_dir, timeout_s)


def capture_mesh_size_dies(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the tp 2 x dp 2 mesh whose rank 3 all_reduces [5, 8]; gloo aborts rank 2."""
    return _capture_both(mesh_size_dies_worker, 4, out_dir, json_dir, timeout_s, {2: -6})


def capture_helper_extra(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 2-rank job whose rank 0 all_reduces one tensor too many through the helper."""
    return _capture_both(helper_extra_worker, 2, out_dir, json_dir, timeout_s)


def capture_two_stalls(
    out_dir: Path, json_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the tp 4 x dp 2 mesh whose ranks 1 and 6 stall before their tp group's sixth call."""
    return _capture_both(two_stalls_worker, 8, out_dir, json_dir, timeout_s)


def _capture(worker: Callable[..., None], world: int, out_dir: Path, *args: Any) -> list[Path]:
    """Run ``worker`` on ``world`` ranks writing pickles to ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _run_ranks(worker, world, (out_dir, *args))
    return [out_dir / f"trace_{r}" for r in range(world)]


def capture_order_inversion(out_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S) -> list[Path]:
    """Run the 4-rank order-inversion deadlock; pickles go to ``out_dir``."""
    return _capture(order_inversion_worker, 4, out_dir, timeout_s)


def capture_broadcast_root(out_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S) -> list[Path]:
    """Run the 4-rank broadcast-root disagreement; pickles go to ``out_dir``."""
    return _capture(broadcast_root_worker, 4, out_dir, timeout_s)


def capture_size(out_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S) -> list[Path]:
    """Run the 3-rank all_reduce size mismatch; pickles go to ``out_dir``."""
    return _capture(size_worker, 3, out_dir, timeout_s)


def capture_alltoall(out_dir: Path) -> list[Path]:
    """Run the healthy 4-rank uneven all_to_all job; pickles go to ``out_dir``."""
    return _capture(alltoall_worker, 4, out_dir)


def capture_gather_scatter(out_dir: Path) -> list[Path]:
    """Run the healthy 4-rank gather/scatter/reduce/broadcast job; pickles go to ``out_dir``."""
    return _capture(gather_scatter_worker, 4, out_dir)


def capture_cascade(out_dir: Path, timeout_s: float = TUTORIAL_TIMEOUT_S) -> list[Path]:
    """Run the 4-rank cascading hang; pickles go to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _run_ranks(cascade_worker, 4, (out_dir, timeout_s))
    return [out_dir / f"trace_{r}" for r in range(4)]


def capture_tutorial(
    out_dir: Path, json_dir: Path | None = None, timeout_s: float = TUTORIAL_TIMEOUT_S
) -> list[Path]:
    """Run the 2-rank tutorial job; pickles go to ``out_dir``, JSON dumps to ``json_dir``.

    Both formats come from the same run so they describe the same collectives.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if json_dir is not None:
        json_dir.mkdir(parents=True, exist_ok=True)
    _run_ranks(tutorial_worker, 2, (out_dir, json_dir, timeout_s))
    paths = [out_dir / f"trace_{r}" for r in range(2)]
    if json_dir is not None:
        paths += [json_dir / f"trace_{r}.json" for r in range(2)]
    return paths


def capture_healthy(out_dir: Path) -> list[Path]:
    """Run the healthy 4-rank job with sub-groups; pickles go to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _run_ranks(healthy_worker, 4, (out_dir,))
    return [out_dir / f"trace_{r}" for r in range(4)]


def summarize(paths: Sequence[Path]) -> str:
    """A markdown table of (rank, pg, seq, op, sizes, state) read with plain pickle.

    Doubles as the check that the dumps are ordinary pickles, loadable without frtrace.
    """
    rows = [
        "| rank | pg (name, desc) | collective_seq_id | profiling_name | input_sizes "
        "| output_sizes | state |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(paths):
        rank = path.name.removeprefix("trace_")
        try:
            with open(path, "rb") as f:
                dump = pickle.load(f)
        except (pickle.UnpicklingError, EOFError):
            size = path.stat().st_size
            rows.append(f"| {rank} | (unreadable: the pickle ends after {size} bytes) | | | | | |")
            continue
        for e in dump["entries"]:
            pg = ", ".join(e["process_group"])
            rows.append(
                f"| {rank} | ({pg}) | {e['collective_seq_id']} | {e['profiling_name']} "
                f"| {e['input_sizes']} | {e['output_sizes']} | {e['state']} |"
            )
    return "\n".join(rows)


_README = """\
# Real Flight Recorder dumps

Written by `scripts/make_fixtures.py` (do not edit by hand; rerun the script instead):
torch {torch_version}, backend **gloo** on CPU, Python {python}, {system}.
Each rank ran in its own `spawn`ed process on 127.0.0.1 with `TORCH_FR_BUFFER_SIZE=2000`
(set through `frtrace.capture.enable_flight_recorder`) and wrote its own dump on demand
(`frtrace.capture.dump_flight_recorder`, i.e. `torch._C._distributed_c10d._dump_fr_trace*`).
Dump format version `{version}`. Stack traces are included in the pickles (JSON has none).
Re-capture some folders only with `--only FOLDER...` (the others stay as committed).
`tests/test_real_dumps.py` re-captures `tutorial` and `healthy_4rank` on every run;
`tests/test_real_fixtures.py` checks frtrace's verdict on the later folders against the
expected conclusions below; with `FRTRACE_RECAPTURE=1` (slow) it also re-captures each of them
but `cascade_4rank` and compares their entries with the committed ones. `logs/` holds real
logs and py-spy stacks of `torchrun` jobs, described in [logs/README.md](logs/README.md)
(`scripts/make_log_fixtures.py` writes them). Synthetic NCCL jobs of any size, with every
fault, come from `frtrace.synth` instead ([docs/generator.md](../docs/generator.md)).

What real gloo dumps look like (the loader must cope; synthetic fixtures may differ):

- `state` is `"scheduled"` for every entry, even completed and timed-out ones: gloo never
  updates it, `retired` is `True` and `time_discovered_*_ns` stay `None` (`0` in JSON).
  Only counts and sequence ids tell a stuck rank apart.
- `pg_config` is `{pg_config}`: one `''`-keyed
  group whose `ranks` is a *string*, `'[]'` once sub-groups exist. The real groups are only
  in each entry's `process_group` = `(pg_name, pg_desc)`, the default one being
  `('0', 'default_pg')`; their members must be inferred from which ranks' dumps use them.
- `pg_status` gives `last_enqueued/started/completed_collective` keyed by the entries'
  `pg_id`, a per-process index, *not* by `pg_name` (ranks 2 and 3 report `pair23`, named
  `2`, under key `1`; in `order_inversion_4rank` rank 0's `left` and rank 3's `right` are
  both key `1`, and a group a rank never used, even the default one, has no key). Values
  are ints in the pickle but strings in JSON; `last_started_collective` is `-1` on gloo.
  `last_completed_collective` is set when gloo's worker finishes an op, asynchronously: it
  usually counts a timed-out collective as completed, but a dump taken just after a
  timeout, or even just after a completed `barrier`, can find it one behind
  `last_enqueued_collective`. It tells neither a hang nor its place.
- An entry is written when the op is enqueued, so a collective a rank is stuck in (and
  timed out of) is in its dump, as `scheduled` like every other.
- Rooted collectives record no root: a `broadcast`, `reduce`, `gather` or `scatter` entry
  has only `profiling_name` (`gloo:broadcast`, ...), sizes and dtypes; no key holds `src`
  or `dst`. Sizes do tell the root of `gather` and `scatter` apart (below).
- `gather`: the root's `output_sizes` is the gather list as one stacked shape (`[[4, 3]]`
  for 4 tensors of 3), every other rank's `output_sizes` and `output_dtypes` are `[]`.
  `scatter`: the root's `input_sizes` is `[[4, 3]]`, the others' `input_sizes` and
  `input_dtypes` are `[]`. `reduce` and `broadcast` record `[[n]]` in and out on every rank.
- `barrier` is `gloo:barrier` with `[]` sizes and dtypes.
- `all_to_all_single` with uneven splits works on gloo and is recorded as
  `gloo:all_to_all` with each rank's whole input and output tensors (`[[7, 2]]`); the split
  sizes are not recorded, so healthy ranks legitimately disagree on both sizes.
- A size mismatch in `all_reduce` is not an error gloo raises. With the odd rank's tensor
  larger (8 elements against 6) a peer process was aborted (SIGABRT, so no dump); with it
  smaller (4 against 6) the odd rank's call returned and its peers timed out, which is what
  `size_3rank` uses. With it larger by one (5 against 4, `mismatch_kills_3rank`) the two
  peers' calls returned and the odd rank timed out waiting for its fifth element.
- A rank that dies (an uncaught exception, `os._exit`) writes no dump: its file is simply
  absent (`pipeline_raise_4rank` has `trace_0`, `trace_2`, `trace_3`). Its peers' gloo calls
  fail with "Connection closed by peer" / "reset by peer", or time out.
- JSON turns tuples into lists, `None` times into `0`, adds `nccl_comm_state: {{}}`
  and drops `frames`.
- gloo records `reduce_scatter_tensor` as `gloo:all_reduce` (of the whole input) and
  point-to-point `send`/`recv` not at all: `torch.distributed.pipelining`'s activations and
  gradients leave no entry, and its `pp` groups appear in no entry and no `pg_status` key.
- `init_device_mesh` groups are named by number like `new_group`'s, with desc
  `mesh_<dim name>`: the two dp groups of a 2 x 2 mesh are both `mesh_dp` (named `3` and `4`).
  A 1-D mesh over the whole world is the default group itself.
- FSDP2 (`fully_shard`) records `all_gather_into_tensor` as `gloo:all_gather` with a rank's
  shard in (`[[18]]`) and the world's out (`[[4, 18]]`), and its gradient reduce-scatter as
  `gloo:all_reduce` of the whole input (`[[72]]`).
- Sub-groups keep the 30-minute default `timeout_ms` (1800000) whatever the default
  group was given, unless `new_group(..., timeout=...)` sets one (`order_inversion_4rank`:
  2000).

## `tutorial/` (`trace_0`, `trace_1`, pickle) and `tutorial_json/` (`trace_0.json`, `trace_1.json`)

Both folders come from one 2-rank run. Rank 0 calls `all_reduce` on a (3, 4) tensor
twice, then once more on another tensor of the same shape (the call rank 1 "forgot"),
then twice again; rank 1 calls it 2 + 2 times. Because shapes match, gloo pairs rank 0's
extra call with rank 1's third, so rank 0's fifth `all_reduce` has no partner and fails
after the {timeout}-second process-group timeout (caught); both ranks then dump.

**Expected conclusion:** group `0` (`default_pg`, ranks 0-1); rank 0 is one collective
ahead (seq 1-5 vs 1-4) and every op, shape and dtype agree, so one rank issued a collective
the other did not, and collective 5 is the one rank 0 is stuck in. The stacks tell which:
rank 0's seq 3 comes from a call site rank 1 never reaches, so the root cause is
`missing_ranks` at seq 3 with culprit rank 0 (an extra call that shifted its later
collectives by one). The JSON dumps carry no stacks, and from them both ranks are named
(undecidable, at seq 5). They must load to the same (rank, collective_seq_id, op) rows as
the pickles.

{tutorial_table}

## `healthy_4rank/` (`trace_0` … `trace_3`, pickle)

4 ranks, default group plus `new_group([0, 1], group_desc="pair01")` (named `1`) and
`new_group([2, 3], group_desc="pair23")` (named `2`; rank 0 and 1 never use it). On the
default group every rank calls `all_reduce`, `broadcast`, `all_gather` (into a list),
`reduce_scatter_tensor` (recorded as `all_reduce`) and, at the end, `barrier`; on its pair
group each calls `all_reduce`, `all_gather`, `broadcast`. Dumps are taken after the
final barrier, so everything has completed.

**Expected conclusion:** no problem found. Groups: `0` = ranks 0-3 (5 collectives),
`1` (`pair01`) = ranks 0, 1 and `2` (`pair23`) = ranks 2, 3 (3 collectives each), all
derived from the entries despite the `''`-keyed `pg_config`; all-`scheduled` states must
not be reported as a hang.

{healthy_4rank_table}

## `cascade_4rank/` (`trace_0` … `trace_3`, pickle)

A hang that cascades across groups. Each step every rank calls `all_reduce` in its pair group
(`pair01` or `pair23`), then in the default group. In step 3 rank 3 stalls outside
collectives before its pair `all_reduce`: rank 2 waits for it in `pair23` (seq 3) and times
out; ranks 0 and 1, having finished `pair01` seq 3, wait for rank 2 in the default group
(seq 3) and time out. Rank 3 dumps last, once the others have.

**Expected conclusion:** root cause rank 3 in `pair23` (pg `2`) at seq 3, `missing_ranks`:
its own history shows this call always followed its last one. The chain reads: ranks 0-1
wait in `default_pg#3` for rank 2; rank 2 waits in `pair23#3` for rank 3; rank 3 never
issued it. Blaming rank 2 (where ranks 0-1 wait) would be wrong. The default group's
`default_pg#3`, which ranks 2 and 3 have not issued, is a consequence of that root cause, not a
second cause: rank 2 waits in `pair23#3` and rank 3 stopped. That stays so when one waiting
rank's dump is lost (rank 0 alone then issued `default_pg#3`, and is still not to blame).

{cascade_4rank_table}

## `order_inversion_4rank/` (`trace_0` … `trace_3`, pickle)

A deadlock from collectives issued in different orders. `new_group([0, 1, 2],
group_desc="left")` (named `1`) and `new_group([1, 2, 3], group_desc="right")` (named `2`)
share ranks 1 and 2; both get the {timeout}-second timeout, the default group is never used.
Each step every member calls `all_reduce` in `left` (shape [4]), then in `right` ([2, 2]).
In step 3 rank 1 calls `right` first: it waits in `right#3` for rank 2, which waits in
`left#3` for rank 1; rank 0 waits in `left#3` and rank 3 in `right#3` behind them. All four
time out in their first step-3 call and never issue their second; then each dumps.

What torch wrote: rank 1 ends `left#2, right#2, right#3`, rank 2 `left#2, right#2, left#3`;
so `left#3` lacks rank 1 and `right#3` lacks rank 2. `pg_config` is `''` with ranks `'[]'`.

**Expected conclusion:** findings (exit 1). Root cause `order_cycle`, culprit rank 1, in
`right` (pg `2`) at seq 3 (`all_reduce`), the call it issued before `left#3`: its own
history (`left` before `right` in steps 1-2) shows that rank 1 changed its order while rank
2 kept it. The cycle is ranks 1 and 2 (`right#3` <-> `left#3`); ranks 0 and 3 only wait.
Rank 1 missing from `left#3` and rank 2 from `right#3` are consequences, not causes.

{order_inversion_4rank_table}

## `broadcast_root_4rank/` (`trace_0` … `trace_3`, pickle)

Ranks disagree on a broadcast's root. Default group only, {timeout}-second timeout:
`broadcast` from roots 0, 1, 2 (seq 1-3) and an `all_reduce` (seq 4), all healthy; then
`broadcast` (seq 5) with `src=0` on ranks 0-2 but `src=3` on rank 3, then `all_reduce`
(seq 6). With gloo's tree broadcast ranks 0 and 2 get through seq 5 and wait in seq 6; ranks 1
and 3 time out inside seq 5 (both waiting on a send). Same outcome in all seven captures tried.

What torch wrote: every broadcast, the disputed one included, is `gloo:broadcast` with
`[[4]]` Float in and out on every rank; the root is recorded nowhere, so seq 5 looks the same
on all four ranks. Only what happened next differs: ranks 0 and 2 have `all_reduce` seq 6,
ranks 1 and 3 end at seq 5.

**Expected conclusion:** findings (exit 1). The real culprit, rank 3 naming the wrong root,
cannot be read from the dumps, nor can "root disagreement". What is knowable: in
`default_pg` (pg `0`) ranks 0 and 2 wait in seq 6 (`all_reduce`) that ranks 1 and 3 never
issued, their last record being the broadcast seq 5 that all four issued alike. So the root
cause is `missing_ranks` at pg `0` seq 6 with waiting ranks 0 and 2 and culprits ranks 1 and 3:
seq 5 is a rooted collective, which lets the root's side finish while others still wait (of
an `all_reduce` no member can leave before all arrived), so the ranks that completed it and
moved on are not suspects; which of ranks 1 and 3 named the wrong root is not recorded.

{broadcast_root_4rank_table}

## `size_3rank/` (`trace_0` … `trace_2`, pickle)

3 ranks, default group, {timeout}-second timeout. Two healthy `all_reduce`s of 6 elements
(seq 1-2); at seq 3 rank 2 all_reduces 4 elements while ranks 0 and 1 all_reduce 6. Rank 2's
call returns (with garbage), ranks 0 and 1 time out waiting for the rest; then each dumps.

**Expected conclusion:** findings (exit 1). Root cause `size_mismatch` in `default_pg`
(pg `0`) at seq 3 (`all_reduce`): culprit rank 2 (`[[4]]` against the majority's `[[6]]`),
ranks 0 and 1 waiting.

{size_3rank_table}

## `alltoall_uneven_4rank/` (`trace_0` … `trace_3`, pickle)

A healthy MoE-like job: three `all_to_all_single` calls with uneven splits (rank `r` sends
`(r' + 2 j) % 3 + 1` rows of 2 to rank `j`, with `r' = (r + step) % 4`), then `barrier`;
dumps after the barrier, everything completed.

What torch wrote: `gloo:all_to_all` with whole tensors, e.g. seq 2 inputs `[[8, 2]]`,
`[[9, 2]]`, `[[7, 2]]`, `[[7, 2]]` on ranks 0-3; outputs are `[[7, 2]]`, `[[9, 2]]`,
`[[8, 2]]`, `[[7, 2]]` every step; the splits are not recorded.

**Expected conclusion:** no problem found (exit 0, `ok`, no findings): uneven all_to_all
sizes are normal and must not be reported as a size mismatch. Group `0` = ranks 0-3,
collectives 1-4 on every rank.

{alltoall_uneven_4rank_table}

## `gather_scatter_4rank/` (`trace_0` … `trace_3`, pickle)

A healthy job with rooted collectives on the default group, tensors of 3 elements: `gather`
to rank 0 (seq 1), `scatter` from rank 1 (seq 2), `reduce` to rank 2 (seq 3), `broadcast`
from rank 3 (seq 4), `gather` to rank 3 (seq 5), `reduce` to rank 0 (seq 6), `barrier`
(seq 7); dumps after the barrier, everything completed.

What torch wrote: the gather roots (0 at seq 1, 3 at seq 5) have output `[[4, 3]]`, the
other ranks `[]`; the scatter root (1) has input `[[4, 3]]`, the others `[]`; `reduce` and
`broadcast` show `[[3]]` in and out everywhere; `gloo:barrier` has `[]`.

**Expected conclusion:** no problem found (exit 0, `ok`, no findings): a rooted
collective's root legitimately records other sizes than its peers. Group `0` = ranks 0-3,
collectives 1-7 on every rank.

{gather_scatter_4rank_table}

## `pipeline_stall_4rank/` (pickle) and `pipeline_stall_4rank_json/` (JSON)

One run, dumped in both formats (`trace_0` … `trace_3`, `.json` in the JSON folder).

A 2-stage pipeline on 4 ranks: `init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp",
"dp"))`, each mesh group created with the {timeout}-second timeout. Ranks 0-1 run stage 0,
ranks 2-3 stage 1 (`pp` pairs 0-2 and 1-3); each stage is a `Linear(4, 4)` driven by
`torch.distributed.pipelining`'s `ScheduleGPipe` over 2 microbatches (activations and
gradients go by send/recv). After each step every rank all_reduces its stage's two gradients
(weight `[4, 4]`, then bias `[4]`) in its `dp` group: `mesh_dp` named `3` (ranks 0, 1) or
`mesh_dp` named `4` (ranks 2, 3). In step 3 rank 1's `slow_data_loader` blocks outside any
collective. Rank 3, which needs rank 1's activations, times out in that recv; ranks 0 and 2 run
their step together and time out in the step's first dp `all_reduce` (seq 5), waiting for rank
1 and rank 3. Those three dump; rank 1 stays stalled until they have, is dumped then (an
on-demand dump taken mid-stall), and all four exit with status 0.

What torch wrote: the dp `all_reduce`s only. The pipeline's send/recv left no entry and the
`pp` groups appear nowhere (no entry, no `pg_status` key). Ranks 0 and 2 have seq 1-5 in
their `mesh_dp`, ranks 1 and 3 seq 1-4; the two groups share the desc `mesh_dp` and differ
only by name.

**Expected conclusion:** findings (exit 1). The real culprit is rank 1, stalled outside
collectives: it never issued `mesh_dp` (pg `3`) seq 5 (`all_reduce`), where rank 0 waits. The
dumps show the same in pg `4`: rank 3 never issued seq 5, where rank 2 waits, because it waits
for rank 1 in a recv nothing recorded. Nothing in the dumps links the two groups (swapping the
stages gives the same dumps but for the group names), so the evidence allows this much: ranks 1
and 3 both stopped before seq 5 of their `dp` group (`missing_ranks`, seq 5, `all_reduce`),
rank 1 among the culprits but not provably first; ranks 0 and 2 only wait and are never
culprits. Each stopped rank's own history of call sites (weight then bias, step after step)
says the seq 5 `all_reduce` is its next call. The JSON folder has no call sites, and its op
sequence cannot tell ranks 1 and 3 stopping from ranks 0 and 2 issuing one call more: from it,
ranks 0-3 are named, undecidable (never a more confident answer than the pickles'; before,
the JSON folder named 1 and 3 from the op sequence).

{pipeline_stall_4rank_table}

## `pipeline_raise_4rank/` (pickle) and `pipeline_raise_4rank_json/` (JSON)

One run, dumped in both formats (`trace_0`, `trace_2`, `trace_3`, `.json` in the JSON folder).

The pipeline of `pipeline_stall_4rank`, but in step 3 rank 1's data loader raises
(`CorruptSampleError`). Nothing catches it: rank 1 exits with status 1 and writes no dump.
Rank 3's recv from rank 1 and rank 0's dp `all_reduce` (seq 5) fail (gloo's "Connection
closed by peer" in one capture, the timeout in another: it depends on how soon rank 1's
process is gone); rank 2, through its step with rank 0, times out in its dp `all_reduce` (seq
5) waiting for rank 3. Ranks 0, 2 and 3 dump and exit with status 0.

What torch wrote: as in `pipeline_stall_4rank` without rank 1. Pg `3` (`mesh_dp`) is in rank
0's dump only (seq 1-5), pg `4` in ranks 2 (seq 1-5) and 3 (seq 1-4). `pg_config` is `''`
with ranks `'[]'`: no dump states the world size nor pg `3`'s other member.

**Expected conclusion:** findings (exit 1). Root cause `missing_dump`, culprit rank 1, the
one rank without a dump (the file names 0, 2, 3 leave a gap: the world has at least 4 ranks). Where:
rank 0 waits in `mesh_dp` (pg `3`) seq 5 (`all_reduce`); no other dump uses pg `3`, so its
other member left no dump, and rank 1 is the only rank that left none. Pg `4` is ranks 2 and
3, and its seq 4 completed (rank 2 went on to seq 5), so placing rank 1 there, or rank 3
waiting in pg `4` seq 4, is wrong. Rank 3, missing from pg `4` seq 5 where rank 2 waits, is
blocked in the unrecorded recv from rank 1: a consequence at most. Ranks 0 and 2 are never
culprits. The JSON folder must say the same.

{pipeline_raise_4rank_table}

## `truncated_beside_fault_4rank/` (pickle) and `truncated_beside_fault_4rank_json/` (JSON)

One run, dumped in both formats (`trace_0` … `trace_3`, `.json` in the JSON folder).

A real fault beside a damaged dump. 4 ranks, default group, {timeout}-second timeout. Each
step all_reduces a gradient `(2, 3)`, then a loss `(1)`; ranks 0-2 have 3 batches, rank 3 only
2 (uneven data), so rank 3 leaves the loop after seq 4 and waits outside collectives while
ranks 0-2 time out in step 3's gradient `all_reduce` (seq 5). All four dump and exit with
status 0. Then the script cuts rank 1's pickle to half its bytes, and its JSON dump likewise:
this emulates a process killed while writing its dump. Rank 1 is not at fault.

What torch wrote: ranks 0 and 2 seq 1-5, rank 3 seq 1-4 (`[[2, 3]]` and `[[1]]` in turn);
rank 1's files end mid-stream.

**Expected conclusion:** findings (exit 1); rank 1's file is skipped as unreadable with one
line on stderr, the rest analyzed. Root cause `missing_ranks` in `default_pg` (pg `0`) at seq
5 (`all_reduce`): culprit rank 3 (ranks 0 and 2 issued it), waiting ranks 0 and 2. What rank 1
did is unknown, and that never makes it a culprit: no finding blames rank 1. Same from the
JSON folder.

{truncated_beside_fault_4rank_table}

## `fsdp2_rank_dies_4rank/` (pickle) and `fsdp2_rank_dies_4rank_json/` (JSON)

One run, dumped in both formats (`trace_0` … `trace_2`, `.json` in the JSON folder).

FSDP2 on gloo: `init_device_mesh("cpu", (4,))` (on gloo its one group is the default group),
a `Linear(8, 8)` - `ReLU` - `Linear(8, 4)` model with `fully_shard` on each `Linear` and on
the root, SGD, {timeout}-second timeout. A step is 2 forward `all_gather`s (layer 0, then
layer 2), 2 backward `all_gather`s (layer 2, then layer 0) and 2 gradient reduce-scatters. In
step 2, between forward and backward, rank 3 calls `os._exit(1)`: it exits with status 1 and
writes no dump. Ranks 0-2 fail in the first backward `all_gather` (seq 9): some at once
("Connection closed by peer" or "reset by peer"), some after the timeout, which ones varies
from capture to capture; they dump and exit with status 0.

What torch wrote: `gloo:all_gather` with inputs `[[18]]` / `[[9]]` (a rank's shard) and
outputs `[[4, 18]]` / `[[4, 9]]`, and each reduce-scatter as `gloo:all_reduce` of the whole
input (`[[36]]`, `[[72]]`), all in `('0', 'default_pg')`. `pg_config` lists `'[0, 1, 2, 3]'`
(no sub-group was made). Ranks 0-2 all end at seq 9.

**Expected conclusion:** findings (exit 1). Root cause `missing_dump`, culprit rank 3: a
member of `default_pg` (pg `0`, ranks 0-3 by `pg_config`) that left no dump, while ranks 0-2,
the waiting ranks, all stopped at seq 9 (`all_gather`). No state says seq 9 did not complete,
but three members stopped at one collective while the fourth left nothing is what a dead rank
looks like; "no finding" would miss the cause. Ranks 0-2 are never culprits. Same from JSON.

{fsdp2_rank_dies_4rank_table}

## `mismatch_kills_3rank/` (pickle) and `mismatch_kills_3rank_json/` (JSON)

One run, dumped in both formats (`trace_0` … `trace_2`, `.json` in the JSON folder).

3 ranks, default group, {timeout}-second timeout. Two `all_reduce`s of 4 elements (seq 1-2),
then rank 2 all_reduces 5 elements while ranks 0 and 1 all_reduce 4 (seq 3). gloo lets ranks 0
and 1 finish seq 3 (their calls return) and they go on to the next `all_reduce` of 4 (seq 4);
rank 2 waits in seq 3 for its fifth element and times out ("Timed out waiting 2000ms for recv
operation"). Its error handler dumps, then re-raises: rank 2 exits with status 1. Ranks 0 and 1
time out in seq 4, dump, and exit with status 0. No process was aborted.

What torch wrote: ranks 0 and 1 seq 1-4, all `[[4]]`; rank 2 seq 1-3 with `[[5]]` at seq 3.

**Expected conclusion:** findings (exit 1). Root cause `size_mismatch` in `default_pg` (pg
`0`) at seq 3 (`all_reduce`): culprit rank 2 (`[[5]]` against `[[4]]` on ranks 0 and 1). That
ranks 0 and 1 then wait in seq 4, which rank 2 never issued, is a consequence of it, never a
second cause nor the root. Same from JSON.

{mismatch_kills_3rank_table}

## `broadcast_2v2_4rank/` (pickle) and `broadcast_2v2_4rank_json/` (JSON)

One run, dumped in both formats (`trace_0` … `trace_3`, `.json` in the JSON folder).

4 ranks, default group, {timeout}-second timeout. Each of 3 steps broadcasts the weights (4
floats) from rank 0, then all_reduces a gradient (4 floats). In step 3 rank 3 names itself as
the broadcast's root. As in `broadcast_root_4rank`, ranks 0 and 2 get through that broadcast
(seq 5) and time out in the step's `all_reduce` (seq 6); ranks 1 and 3 time out inside the
broadcast. All four dump and exit with status 0.

What torch wrote: seq 1-5 alike on every rank (`gloo:broadcast` and `gloo:all_reduce`, `[[4]]`,
no root anywhere); ranks 0 and 2 also have seq 6.

How this differs from `broadcast_root_4rank`: the fault and what gloo did are the same, the
history is not. Here every broadcast so far (seq 1, 3) was followed by an `all_reduce` (seq 2,
4) on every rank, so the ranks' own history also says that the `all_reduce` ranks 0 and 2
issued at seq 6 is the call due next, not an extra one; in `broadcast_root_4rank`
(broadcasts from roots 0, 1, 2, an `all_reduce`, the disputed broadcast) only the rooted
collective itself tells.

**Expected conclusion:** findings (exit 1). Root cause `missing_ranks` in `default_pg` (pg
`0`) at seq 6 (`all_reduce`): culprits ranks 1 and 3, which never left the broadcast at seq 5,
waiting ranks 0 and 2. The root rank 3 named is recorded nowhere, so rank 3 cannot be singled
out; naming rank 0 or 2 as a culprit would be wrong. Same from JSON.

{broadcast_2v2_4rank_table}

## `extra_call_2rank/` (pickle) and `extra_call_2rank_json/` (JSON)

One run, dumped in both formats (`trace_0`, `trace_1`, `.json` in the JSON folder).

2 ranks, default group, {timeout}-second timeout. Each of 3 steps broadcasts the weights from
rank 0 (4 floats), all_gathers embeddings (2 each), all_reduces a gradient (4), then a loss
(1). After the loop rank 0 alone (the "logging rank") all_reduces a metrics vector (3) from a
line of its own, and times out there (seq 13); rank 1 has finished and waits outside any
collective until rank 0 has dumped, then dumps. Both exit with status 0.

What torch wrote: seq 1-12 alike on both ranks; rank 0 also has seq 13, `gloo:all_reduce`
`[[3]]`, whose stack (pickle) is a call site no earlier entry used.

**Expected conclusion:** findings (exit 1): `missing_ranks` in `default_pg` (pg `0`) at seq 13
(`all_reduce`), waiting rank 0, undecidable: culprits ranks 0 and 1. The truth (rank 0 issued
one call too many) cannot be told from "rank 1 stopped before a call both ranks make after
training": seq 13 follows the last step and comes from a call site seen nowhere before, so no
history decides. The JSON folder holds less (no stacks; ops stand in for call sites) and must
not give a more confident answer: that an `all_reduce` (the loss) always followed an
`all_reduce` (the gradient) does not make rank 0's metrics call the one rank 1 was due to
make, so naming rank 1 alone there would be wrong. (This is the report "the pickle folder says
undecidable, ranks 0-1, but the JSON folder of the same run names rank 1" reproduced.)

{extra_call_2rank_table}

## `mesh_size_dies_4rank/` (pickle) and `mesh_size_dies_4rank_json/` (JSON)

One run, dumped in both formats (`trace_0`, `trace_1`, `trace_3`, `.json` in the JSON folder).

A tp 2 x dp 2 DeviceMesh: `init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))`,
its groups created with the {timeout}-second timeout. The tp groups are `mesh_tp` named `3`
(ranks 0, 1) and `4` (ranks 2, 3), the dp groups `mesh_dp` named `1` (ranks 0, 2) and `2`
(ranks 1, 3). Each of 3 steps all_reduces two activations `[4, 8]` in the tp group, then a
gradient `[6]` in the dp group. In step 3 rank 3's second tp all_reduce (`mesh_tp` seq 6) is
`[5, 8]`: rank 2 receives 40 floats where it expects 32, and gloo aborts its process
(`gloo::EnforceNotMet` ... "Received data size doesn't match expected size", SIGABRT: no
dump). Rank 3's call then fails ("Connection reset by peer"), and so does rank 0's dp
all_reduce with rank 2; rank 1 times out in its dp all_reduce waiting for rank 3. Ranks 0, 1
and 3 dump and exit with status 0.

What torch wrote: ranks 0 and 1 `mesh_tp` (pg `3`) seq 1-6, all `[[4, 8]]`, and their
`mesh_dp` seq 1-3; rank 3 `mesh_tp` (pg `4`) seq 1-6 with `[[5, 8]]` at seq 6, `mesh_dp`
(pg `2`) seq 1-2. Pg `4` is in rank 3's dump only, so its other member is not named anywhere.

**Expected conclusion:** findings (exit 1). Root cause `size_mismatch` in `mesh_tp` (pg `4`)
at seq 6 (`all_reduce`): culprit rank 3. Its only peer left no dump, but the sibling tp group
(pg `3`: ranks 0-1, the same program on the other slice) issued seq 6 as `[[4, 8]]`, as rank 3
itself did at every earlier `mesh_tp` call: rank 3's call is the one that differs. Rank 2's
missing dump follows from it (a consequence), never the cause alone. Same from JSON (the
sibling group's sizes are in both formats).

{mesh_size_dies_4rank_table}

## `helper_extra_2rank/` (pickle) and `helper_extra_2rank_json/` (JSON)

One run, dumped in both formats (`trace_0`, `trace_1`, `.json` in the JSON folder).

2 ranks, default group, {timeout}-second timeout. Every collective goes through one helper,
`sync(tensors)`, which all_reduces each tensor from one line. Each of 3 steps calls it, from
one line, with a gradient `[4]` and a loss `[1]`. In step 3 rank 0 passes its gradient once
more (to log its norm), so the helper issues an extra `[4]` (seq 7). Rank 1, done training,
calls the helper from another line with 3 metrics (`[3]`, seq 7). gloo lets rank 1's call
(3 elements) return; rank 0 waits for a fourth element and times out. Rank 1 waits outside
any collective for rank 0 to dump, then dumps. Both exit with status 0.

What torch wrote: seq 1-6 alike on both ranks, every stack the same (the helper's line, the
loop's line); seq 7 is `[[4]]` on rank 0, from that same stack, and `[[3]]` on rank 1, from
the metrics line.

**Expected conclusion:** findings (exit 1). Root cause `size_mismatch` in `default_pg` (pg `0`)
at seq 7 (`all_reduce`), undecidable: culprits ranks 0 and 1. The truth (rank 0 issued one
call too many) looks the same as "rank 1 skipped its last gradient": the extra call comes
from the helper's usual stack, and rank 1's metrics call is from a site it never used before,
so no call-site history decides. The JSON folder holds less and must not be more confident:
that `[[4]]` occurred before in the group and `[[3]]` did not does not make rank 1 the one
that changed (an insertion on one side and a deletion on the other are the same evidence).
(Before: the JSON folder named rank 1, "decided by the sequence of ops".)

{helper_extra_2rank_table}

## `two_stalls_8rank/` (pickle) and `two_stalls_8rank_json/` (JSON)

One run, dumped in both formats (`trace_0` … `trace_7`, `.json` in the JSON folder).

A tp 4 x dp 2 DeviceMesh, no pipeline: `init_device_mesh("cpu", (2, 4), ("dp", "tp"))`, the
tp groups `mesh_tp` named `5` (ranks 0-3) and `6` (ranks 4-7), the dp groups `mesh_dp` named
`1`-`4` (ranks 0, 4 / 1, 5 / 2, 6 / 3, 7), each with the {timeout}-second timeout. Each of 3
steps all_reduces two activations `[2, 4]` in the tp group, then a gradient `[3]` in the dp
group. In step 3, between its two tp calls, rank 1 stalls outside collectives, and so,
independently, does rank 6. Ranks 0, 2, 3 time out in `mesh_tp` seq 6 of pg `5`, ranks 4, 5, 7
in seq 6 of pg `6`; they dump. Ranks 1 and 6 are dumped on demand after them, still stalled.
All exit with status 0.

What torch wrote: every rank's `mesh_tp` seq 1-5 and `mesh_dp` seq 1-2; ranks 0, 2-5 and 7
also `mesh_tp` seq 6.

**Expected conclusion:** findings (exit 1). Two causes, each `missing_ranks` at `mesh_tp` seq
6 (`all_reduce`): rank 1 in pg `5` (ranks 0, 2, 3 wait) and rank 6 in pg `6` (ranks 4, 5, 7
wait). gloo records no send/recv, so one stall passed on through a pipeline would leave the
same dumps; but that needs a pipeline between the two, and the recorded groups already join
every rank (no stage boundary for a pipeline's sends to cross): the reading that needs no
unseen traffic is kept, and the other one is said. (Before: "one stall", ranks 1 and 6,
undecidable.) Same from JSON.

{two_stalls_8rank_table}
"""


#: Fixture folder -> how to capture it under the fixture root (`tutorial` also writes
#: `tutorial_json`).
CAPTURES: dict[str, Callable[[Path], list[Path]]] = {
    "tutorial": lambda out: capture_tutorial(out / "tutorial", out / "tutorial_json"),
    "healthy_4rank": lambda out: capture_healthy(out / "healthy_4rank"),
    "cascade_4rank": lambda out: capture_cascade(out / "cascade_4rank"),
    "order_inversion_4rank": lambda out: capture_order_inversion(out / "order_inversion_4rank"),
    "broadcast_root_4rank": lambda out: capture_broadcast_root(out / "broadcast_root_4rank"),
    "size_3rank": lambda out: capture_size(out / "size_3rank"),
    "alltoall_uneven_4rank": lambda out: capture_alltoall(out / "alltoall_uneven_4rank"),
    "gather_scatter_4rank": lambda out: capture_gather_scatter(out / "gather_scatter_4rank"),
}
#: Folders captured in both formats from one run: ``NAME/`` (pickle) and ``NAME_json/``.
BOTH_FORMATS: dict[str, Callable[[Path, Path], list[Path]]] = {
    "pipeline_stall_4rank": capture_pipeline_stall,
    "pipeline_raise_4rank": capture_pipeline_raise,
    "truncated_beside_fault_4rank": capture_truncated_beside_fault,
    "fsdp2_rank_dies_4rank": capture_fsdp2_rank_dies,
    "mismatch_kills_3rank": capture_mismatch_kills,
    "broadcast_2v2_4rank": capture_broadcast_2v2,
    "extra_call_2rank": capture_extra_call,
    "mesh_size_dies_4rank": capture_mesh_size_dies,
    "helper_extra_2rank": capture_helper_extra,
    "two_stalls_8rank": capture_two_stalls,
}


def _in_both_folders(
    name: str, capture: Callable[[Path, Path], list[Path]]
) -> Callable[[Path], list[Path]]:
    """Capture ``name`` under the fixture root: pickles in ``name/``, JSON in ``name_json/``."""
    return lambda out: capture(out / name, out / f"{name}_json")


CAPTURES.update({name: _in_both_folders(name, capture) for name, capture in BOTH_FORMATS.items()})


def write_fixtures(out: Path, only: Sequence[str] | None = None) -> dict[str, list[Path]]:
    """Capture the fixture folders under ``out`` (all, or ``only`` these) and write the README.

    The README's tables are read back from every folder on disk, so re-capturing one
    scenario leaves the others' committed bytes (and tables) as they are.
    """
    import torch

    names = list(CAPTURES) if only is None else list(only)
    unknown = sorted(set(names) - set(CAPTURES))
    if unknown:
        raise ValueError(f"unknown fixture(s) {unknown}; known: {sorted(CAPTURES)}")
    made = {name: CAPTURES[name](out) for name in names}
    tables = {}
    for name in CAPTURES:
        paths = sorted((out / name).glob("trace_*"))
        if not paths:
            raise FileNotFoundError(f"{out / name} has no dumps; capture it too (--only {name})")
        tables[f"{name}_table"] = summarize(paths)
    with open(out / "tutorial" / "trace_0", "rb") as f:
        sample = pickle.load(f)
    readme = _README.format(
        torch_version=torch.__version__,
        python=platform.python_version(),
        system=f"{platform.system()} {platform.machine()}",
        version=sample["version"],
        pg_config=sample["pg_config"],
        timeout=f"{TUTORIAL_TIMEOUT_S:g}",
        **tables,
    )
    (out / "README.md").write_text(readme)
    return made


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("fixtures"), help="fixture root")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(CAPTURES), help="capture only these folders"
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    made = write_fixtures(args.out, args.only)
    for name, paths in made.items():
        for p in paths:
            print(f"{name}: {p} ({p.stat().st_size} bytes)")
    print(f"done in {time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
