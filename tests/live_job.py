"""One rank of a live, hung gloo job for tests/test_collect.py (run as a script).

Started with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in its environment (as
torchrun starts workers), and TORCH_FR_DUMP_TEMP_FILE / TORCH_WORKER_SERVER_SOCKET pointing
into a temporary folder. Both ranks all_reduce twice; then rank 0 gets stuck in
`slow_data_loader` outside any collective while rank 1 blocks in its third all_reduce. Each
rank writes its Flight Recorder dump (frtrace.capture) once it is where it stays, then the
file `ready_<rank>` next to the dump prefix. Nobody waits forever: rank 0 gives up after
LIFETIME seconds and rank 1's all_reduce times out then.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

LIFETIME = 120.0


def slow_data_loader(ready: Path) -> None:
    """Rank 0's stall: a data loader that never delivers (the stack to find)."""
    from frtrace.capture import dump_flight_recorder

    dump_flight_recorder()
    ready.write_text("stuck")
    deadline = time.monotonic() + LIFETIME
    while time.monotonic() < deadline:
        time.sleep(0.05)


def _announce_when_blocked(main: threading.Thread, ready: Path) -> None:
    """Rank 1: once the main thread is inside all_reduce, dump and say so."""
    from frtrace.capture import dump_flight_recorder

    ident = main.ident
    deadline = time.monotonic() + LIFETIME
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(ident) if ident is not None else None
        names = set()
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        if "all_reduce" in names:
            time.sleep(0.2)  # into the C++ wait, past the recording of the entry
            dump_flight_recorder()
            ready.write_text("blocked")
            return
        time.sleep(0.01)


def main() -> None:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    ready = Path(f"{os.path.dirname(prefix)}/ready_{rank}")

    from frtrace.capture import enable_flight_recorder

    enable_flight_recorder(buffer_size=200, dump_on_timeout=False, prefix=prefix)
    import torch
    import torch.distributed as dist
    from torch.distributed.elastic.control_plane import worker_main

    server = worker_main()  # serves TORCH_WORKER_SERVER_SOCKET (for --fresh-dump)
    assert server is not None
    with server:
        dist.init_process_group(
            "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=LIFETIME)
        )
        x = torch.ones(4)
        for _ in range(2):
            dist.all_reduce(x)
        if rank == 0:
            slow_data_loader(ready)
        else:
            watcher = threading.Thread(
                target=_announce_when_blocked, args=(threading.main_thread(), ready), daemon=True
            )
            watcher.start()
            with contextlib.suppress(RuntimeError):
                dist.all_reduce(x)
    os._exit(0)  # no teardown of a process group whose peer is gone


if __name__ == "__main__":
    main()
