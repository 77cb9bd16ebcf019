"""Regenerate frtrace's real Flight Recorder fixtures by running small gloo jobs on CPU.

Usage: ``python scripts/make_fixtures.py [--out fixtures]``

The synthetic dumps in frtrace.synth say what we *think* torch writes; these say what it
really writes (e.g. gloo never moves ``state`` past "scheduled" and keys ``pg_config`` by
``''``), so the loader is tested against both. The capture functions are importable so the
test-suite can re-capture with the installed torch instead of trusting committed bytes.
Workers are top-level functions because ranks are started with the ``spawn`` method, and
torch is imported only inside them so that ``--help`` and imports work without torch.
"""

from __future__ import annotations

import argparse
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

#: Seconds a rank may take before the whole capture is declared stuck.
_CAPTURE_DEADLINE_S = 60.0
#: The process-group timeout that turns the tutorial's missing collective into an error.
TUTORIAL_TIMEOUT_S = 2.0


def _free_port() -> int:
    """Ask the OS for an unused localhost port, so parallel captures do not collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_ranks(target: Callable[..., None], world: int, args: tuple[Any, ...]) -> None:
    """Run ``target(rank, world, port, *args)`` in ``world`` spawned processes and wait.

    Raises if any rank fails or the job outlives the deadline (stragglers are killed), so a
    broken capture never leaves half-written fixtures looking valid.
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
    failed = {r: p.exitcode for r, p in enumerate(procs) if p.exitcode != 0}
    if stuck or failed:
        raise RuntimeError(f"capture failed: stuck ranks {stuck}, exit codes {failed}")


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
    """A markdown table of (rank, pg, seq, op, sizes) read with plain pickle.

    Doubles as the check that the dumps are ordinary pickles, loadable without frtrace.
    """
    rows = [
        "| rank | pg (name, desc) | collective_seq_id | profiling_name | input_sizes | state |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(paths):
        with open(path, "rb") as f:
            dump = pickle.load(f)
        rank = path.name.removeprefix("trace_")
        for e in dump["entries"]:
            pg = ", ".join(e["process_group"])
            rows.append(
                f"| {rank} | ({pg}) | {e['collective_seq_id']} | {e['profiling_name']} "
                f"| {e['input_sizes']} | {e['state']} |"
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
  `2`, under key `1`). Values are ints in the pickle but strings in JSON;
  `last_started_collective` is `-1` on gloo and `last_completed_collective` counts the
  timed-out collective as completed.
- JSON turns tuples into lists, `None` times into `0`, adds `nccl_comm_state: {{}}`
  and drops `frames`.
- gloo records `reduce_scatter_tensor` as `gloo:all_reduce` (of the whole input) and
  point-to-point `send`/`recv` not at all.
- Sub-groups keep the 30-minute default `timeout_ms` (1800000) whatever the default
  group was given.

## `tutorial/` (`trace_0`, `trace_1`, pickle) and `tutorial_json/` (`trace_0.json`, `trace_1.json`)

Both folders come from one 2-rank run. Rank 0 calls `all_reduce` on a (3, 4) tensor
twice, then once more on another tensor of the same shape (the call rank 1 "forgot"),
then twice again; rank 1 calls it 2 + 2 times. Because shapes match, gloo pairs rank 0's
extra call with rank 1's third, so rank 0's fifth `all_reduce` has no partner and fails
after the {timeout}-second process-group timeout (caught); both ranks then dump.

**Expected conclusion:** group `0` (`default_pg`, ranks 0-1); rank 0 is one collective
ahead (seq 1-5 vs 1-4); every op, shape and dtype agree, so the desync is a *missing*
collective on rank 1, and collective 5 is the one rank 0 is stuck in. The JSON dumps
must load to the same (rank, collective_seq_id, op) rows as the pickles.

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

{healthy_table}

## `cascade_4rank/` (`trace_0` … `trace_3`, pickle)

A hang that cascades across groups. Each step every rank calls `all_reduce` in its pair group
(`pair01` or `pair23`), then in the default group. In step 3 rank 3 stalls outside
collectives before its pair `all_reduce`: rank 2 waits for it in `pair23` (seq 3) and times
out; ranks 0 and 1, having finished `pair01` seq 3, wait for rank 2 in the default group
(seq 3) and time out. Rank 3 dumps last, once the others have.

**Expected conclusion:** root cause rank 3 in `pair23` (pg `2`) at seq 3, `missing_ranks`:
its own history shows this call always followed its last one. The chain reads: ranks 0-1
wait in `default_pg#3` for rank 2; rank 2 waits in `pair23#3` for rank 3; rank 3 never
issued it. Blaming rank 2 (where ranks 0-1 wait) would be wrong.

{cascade_table}
"""


def write_fixtures(out: Path) -> dict[str, list[Path]]:
    """Capture every fixture folder under ``out`` and write its README."""
    import torch

    made = {
        "tutorial": capture_tutorial(out / "tutorial", out / "tutorial_json"),
        "healthy_4rank": capture_healthy(out / "healthy_4rank"),
        "cascade_4rank": capture_cascade(out / "cascade_4rank"),
    }
    with open(out / "tutorial" / "trace_0", "rb") as f:
        sample = pickle.load(f)
    readme = _README.format(
        torch_version=torch.__version__,
        python=platform.python_version(),
        system=f"{platform.system()} {platform.machine()}",
        version=sample["version"],
        pg_config=sample["pg_config"],
        timeout=f"{TUTORIAL_TIMEOUT_S:g}",
        tutorial_table=summarize([p for p in made["tutorial"] if p.suffix != ".json"]),
        healthy_table=summarize(made["healthy_4rank"]),
        cascade_table=summarize(made["cascade_4rank"]),
    )
    (out / "README.md").write_text(readme)
    return made


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("fixtures"), help="fixture root")
    args = parser.parse_args(argv)
    start = time.monotonic()
    made = write_fixtures(args.out)
    for name, paths in made.items():
        for p in paths:
            print(f"{name}: {p} ({p.stat().st_size} bytes)")
    print(f"done in {time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
