"""One rank of a live gloo job serving PyTorch's debug server, for tests/test_live.py.

Started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by its agent), with
FRTRACE_TEST_DIR (where it says it is ready), FRTRACE_TEST_FRONTEND (a free port for the
debug server's page on rank 0) and FRTRACE_TEST_MODE:

- `hang`: every rank all_reduces twice; then rank 3 skips the third all_reduce and gets
  stuck in `wait_for_data` outside collectives while the others block in it.
- `moving`: every rank all_reduces, sleeps a little, and again, for its whole life.

Each rank writes `pid_<rank>` when its debug server runs, and rank 3 (hang) `stuck` once in
`wait_for_data`. Nobody waits forever: after LIFETIME seconds every rank stops its debug
server (and so rank 0's page process) and exits.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

LIFETIME = 150.0


def wait_for_data(ready: Path, deadline: float) -> None:
    """Rank 3's stall: a data loader that never delivers (the stack to find)."""
    ready.write_text("stuck")
    while time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    deadline = time.monotonic() + LIFETIME
    rank = int(os.environ["RANK"])
    folder = Path(os.environ["FRTRACE_TEST_DIR"])
    from frtrace.capture import enable_flight_recorder, start_debug_server

    enable_flight_recorder(buffer_size=200, dump_on_timeout=False)
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=LIFETIME))
    start_debug_server(port=int(os.environ["FRTRACE_TEST_FRONTEND"]))
    (folder / f"pid_{rank}").write_text(str(os.getpid()))
    x = torch.ones(4)
    try:
        if os.environ["FRTRACE_TEST_MODE"] == "moving":
            while time.monotonic() < deadline:
                dist.all_reduce(x)
                time.sleep(0.2)
        else:
            for step in range(1, 5):
                if rank == 3 and step == 3:
                    wait_for_data(folder / "stuck", deadline)
                    break
                dist.all_reduce(x)
    except RuntimeError:  # a peer gone or the timeout: the test is over
        pass
    if rank == 0:  # its page's process; the other ranks have only their worker server
        from torch.distributed.debug import stop_debug_server

        stop_debug_server()
    os._exit(0)  # no teardown of a process group whose peers are gone


if __name__ == "__main__":
    main()
