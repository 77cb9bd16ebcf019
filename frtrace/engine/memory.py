"""Will the local engine fit in this machine's memory? An estimate before the parse.

A job that does not fit is killed by the kernel minutes in, with no report; said before the
parse, the user can turn to --engine dask instead. The local engine holds every entry of the
job: about 0.75 byte for each byte of pickle dumps on the bench jobs (8.2 GB for 16,384 ranks
of 2,000 entries with 4-frame stacks, 10.6 GB of dumps; 18.5 GB for 32,768, 25.2 GB of
dumps). Deeper stacks take more disk for the same entries, dumps without stacks less: an
estimate, hence a warning only.
"""

from __future__ import annotations

import os
from typing import Any

HELD_PER_DUMP_BYTE = 0.75  # the local engine's peak memory per byte of dumps (scripts/bench.py)
SAMPLE = 64  # files sized in a folder: the rest are taken to be alike


def dump_bytes(found: Any) -> int:
    """The dumps' total size: a store listed it; a folder's is a sample of its files' scaled
    to their number (100,000 stat calls on a shared file system take a while)."""
    if hasattr(found, "total_bytes"):
        return int(found.total_bytes)
    files = found.files
    if not files:
        return 0
    step = max(1, len(files) // SAMPLE)
    sizes = []
    for f in files[::step][:SAMPLE]:
        try:
            sizes.append(os.stat(f.path).st_size)
        except OSError:
            continue
    return int(sum(sizes) / len(sizes) * len(files)) if sizes else 0


def available_memory() -> int | None:
    """What the kernel says can still be allocated without swapping (Linux), else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def local_shortfall(found: Any) -> tuple[int, int] | None:
    """(dump bytes, bytes available) when the local engine would likely hold more than is
    available; None when it fits or nobody can say."""
    available = available_memory()
    if available is None:
        return None
    size = dump_bytes(found)
    return (size, available) if size * HELD_PER_DUMP_BYTE > available else None
