"""Where each rank's worker server listens, as the job's TCPStore says.

`torch.distributed.debug.start_debug_server()` (torch/distributed/debug/__init__.py) has
every rank store `http://<socket.gethostname()>:<worker port>` under `rank<RANK>` in a
`PrefixStore("debug_server", TCPStore(MASTER_ADDR, MASTER_PORT, is_master=False))`
(torch/distributed/debug/_store.py, `tcpstore_client`), and a PrefixStore joins prefix and
key with a slash (torch/csrc/distributed/c10d/PrefixStore.cpp, `PrefixStore::joinKey`): the
keys are `debug_server/rank<N>` of the store at `MASTER_ADDR:MASTER_PORT`.

The store is read with torch, imported here only: its wire protocol is numbered by the
`QueryType` enum of torch/csrc/distributed/c10d/TCPStoreBackend.hpp, which is not the same in
every version (one has `VALIDATE` at its head, an older one not, which renumbers every query
after it), and neither version that could be read holds the query behind `list_keys`; so
frtrace does not speak it itself. Every release with the debug server
(2.10 and later) has `Store.list_keys`. The values are untrusted like everything fetched:
bounded, and each must be an http://HOST:PORT address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from frtrace.errors import FrtraceError, first_line
from frtrace.live.http import Worker, parse_worker

KEY = re.compile(r"^debug_server/rank([0-9]{1,7})$")
MAX_VALUE = 1024  # bytes of one registered address
NEEDS_TORCH = (
    "reading the job's TCPStore (--store) needs torch: pip install 'frtrace[torch]', or give "
    "each rank's worker address with --worker [RANK=]http://HOST:PORT"
)


@dataclass
class Registered:
    """The ranks' worker servers the store lists, and the entries that are not addresses."""

    workers: dict[int, Worker] = field(default_factory=dict)
    bad: list[tuple[int, str]] = field(default_factory=list)  # (rank, why)


def read_store(host: str, port: int, timeout: float) -> Registered:
    """Every `debug_server/rank<N>` of the TCPStore at host:port (within `timeout` seconds
    to connect); FrtraceError when torch is missing or the store cannot be read."""
    try:
        # Optional dependency (the torch extra), needed only here: see the module docstring.
        from torch.distributed import TCPStore
    except ImportError as exc:
        raise FrtraceError(NEEDS_TORCH) from exc
    where = f"{host}:{port}"
    try:
        store = TCPStore(
            host, port, is_master=False, timeout=timedelta(seconds=timeout), wait_for_workers=False
        )
        keys = [k for k in store.list_keys() if isinstance(k, str) and KEY.match(k)]
        values = store.multi_get(keys) if keys else []
    except Exception as exc:  # torch raises its own error types (DistNetworkError, ...)
        raise FrtraceError(f"cannot read the job's store at {where}: {first_line(exc)}") from exc
    found = Registered()
    for key, value in zip(keys, values, strict=True):
        match = KEY.match(key)
        assert match is not None
        rank = int(match.group(1))
        if not isinstance(value, bytes) or len(value) > MAX_VALUE:
            found.bad.append((rank, f"its {key} is not an address of at most {MAX_VALUE} bytes"))
            continue
        try:
            found.workers[rank] = parse_worker(value.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            found.bad.append((rank, f"its {key} is not an http://HOST:PORT address ({exc})"))
    if not found.workers and not found.bad:
        raise FrtraceError(
            f"the job's store at {where} lists no debug server (no debug_server/rank<N> key): "
            "did every rank call torch.distributed.debug.start_debug_server()?"
        )
    return found
