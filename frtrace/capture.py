"""Helpers for a training job to turn on PyTorch's Flight Recorder and write dumps.

torch is imported only inside the functions that need it, so that ``import frtrace.capture``
(and the rest of frtrace) works on a machine that only analyses dumps.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

#: Where dump_flight_recorder() writes when no prefix is configured (``<prefix><rank>``): torch
#: 2.6 and earlier's own default. Later releases write under ~/.cache/torch by default
#: (frtrace.dumps.discover says where each release writes); frtrace searches both.
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"

# torch reads the dump prefix from either name depending on version; we set and read both.
_PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


def enable_flight_recorder(
    buffer_size: int = 2000,
    dump_on_timeout: bool = True,
    prefix: str | None = None,
    timing: bool = False,
) -> dict[str, str]:
    """Set the environment variables that make torch record collectives.

    torch reads them when the process group is created, so call this before
    ``init_process_group``. Both the new (``TORCH_FR_*``) and the older NCCL-only names are
    set, so the same call works across torch versions and for gloo as well as NCCL.
    Returns the variables that were set.
    """
    if buffer_size < 0:
        raise ValueError(f"buffer_size must be >= 0, got {buffer_size}")
    env = {
        "TORCH_FR_BUFFER_SIZE": str(buffer_size),
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(buffer_size),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1" if dump_on_timeout else "0",
        "TORCH_NCCL_ENABLE_TIMING": "1" if timing else "0",
    }
    if prefix is not None:
        for name in _PREFIX_VARS:
            env[name] = prefix
    os.environ.update(env)
    return env


def default_dump_path(prefix: str | None = None) -> str:
    """Return ``<prefix><rank>``, the file name torch itself would use for this rank's dump.

    Using torch's naming lets one ``frtrace`` invocation read dumps written on timeout and
    dumps written on demand from the same folder.
    """
    if prefix is None:
        prefix = next((os.environ[n] for n in _PREFIX_VARS if os.environ.get(n)), DEFAULT_PREFIX)
    return f"{prefix}{_current_rank()}"


def dump_flight_recorder(
    path: str | Path | None = None,
    *,
    fmt: Literal["pickle", "json"] = "pickle",
    only_active: bool = False,
    include_stack_traces: bool = True,
) -> Path:
    """Write this process's Flight Recorder buffer to ``path`` and return the path.

    Useful when a job catches a timeout itself (e.g. gloo raises instead of aborting), or to
    snapshot a healthy job. ``path`` defaults to :func:`default_dump_path`. The JSON format
    carries no stack traces (torch does not offer them there).
    """
    dumper = _find_dumper(fmt)
    kwargs: dict[str, Any] = {"includeCollectives": True, "onlyActive": only_active}
    if fmt == "pickle":
        kwargs["includeStackTraces"] = include_stack_traces
    data = dumper(**kwargs)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    out = Path(path) if path is not None else Path(default_dump_path())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(raw)
    return out


def _find_dumper(fmt: str) -> Callable[..., Any]:
    """Return torch's dump function for ``fmt``, trying the current then the pre-2.7 name."""
    if fmt not in ("pickle", "json"):
        raise ValueError(f"fmt must be 'pickle' or 'json', got {fmt!r}")
    try:
        import torch._C._distributed_c10d as c10d
    except ImportError as exc:
        raise RuntimeError("dumping a Flight Recorder trace needs torch.distributed") from exc
    suffix = "_json" if fmt == "json" else ""
    names = (f"_dump_fr_trace{suffix}", f"_dump_nccl_trace{suffix}")
    for name in names:
        fn = getattr(c10d, name, None)
        if fn is not None:
            return fn
    raise RuntimeError(
        f"this torch build has no Flight Recorder dump function (looked for {', '.join(names)});"
        " torch >= 2.4 with distributed support is needed"
    )


def _current_rank() -> int:
    """Global rank from torch.distributed if initialised, else from the launcher's RANK."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0"))


def start_debug_server(port: int = 25999, worker_port: int = 0, **options: Any) -> None:
    """Start PyTorch's debug server on this rank, so that `frtrace live` can ask it for its
    Flight Recorder and stacks while the job hangs. Call it once on every rank, after
    ``init_process_group``.

    It is ``torch.distributed.debug.start_debug_server`` (torch 2.10 and later), which reads
    ``RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` from the environment (torchrun sets them),
    serves HTTP on ``worker_port`` (0: any free port) on every interface, and registers
    ``http://<host name>:<port>`` in the job's TCPStore; rank 0 also starts a page on
    ``port`` in a process of its own. There is no authentication: anyone who reaches the
    port can run the handlers (py-spy, the profiler). Trusted networks only.
    """
    missing = [v for v in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
    if missing:
        raise RuntimeError(
            f"the debug server reads {', '.join(missing)} from the environment: start the job "
            "with torchrun, or set them as it does"
        )
    try:
        from torch.distributed.debug import start_debug_server as start
    except ImportError as exc:
        raise RuntimeError("PyTorch's debug server needs torch 2.10 or later") from exc
    start(port=port, worker_port=worker_port, **options)
