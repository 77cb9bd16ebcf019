"""Will the local engine fit in this machine's memory? An estimate before the parse.

A job that does not fit is killed by the kernel minutes in, with no report; said before the
parse, the user can turn to --engine dask instead. The local engine holds every entry of the
job: about 0.75 byte for each byte of pickle dumps on the bench jobs (8.2 GB for 16,384 ranks
of 2,000 entries with 4-frame stacks, 10.6 GB of dumps; 18.5 GB for 32,768, 25.2 GB of
dumps). Deeper stacks take more disk for the same entries, dumps without stacks less: an
estimate, hence a warning only.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frtrace.dumps.store import StoreDiscovery
from frtrace.tables.parse import total_bytes

if TYPE_CHECKING:
    from frtrace.loading import Found

HELD_PER_DUMP_BYTE = 0.75  # the local engine's peak memory per byte of dumps (scripts/bench.py)
SAMPLE = 64  # files sized in a folder: the rest are taken to be alike


def dump_bytes(found: Found) -> int:
    """The dumps' total size: a store listed it; a folder's is a sample of its files' scaled
    to their number (100,000 stat calls on a shared file system take a while)."""
    if isinstance(found, StoreDiscovery):
        return found.total_bytes
    files = found.files
    if not files:
        return 0
    sample = [str(f.path) for f in files[:: max(1, len(files) // SAMPLE)][:SAMPLE]]
    return int(total_bytes(sample) / len(sample) * len(files))


def available_memory(root: str = "/") -> int | None:
    """What this process may still allocate: the kernel's available memory, or less where a
    cgroup limit binds (a Kubernetes pod, a Slurm job's --mem); None off Linux."""
    try:
        with open(os.path.join(root, "proc/meminfo"), encoding="ascii") as f:
            free = next(
                int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")
            )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return min([free, *_cgroup_rooms(root)])


def _cgroup_rooms(root: str) -> list[int]:
    """The room under each memory limit of this process's cgroups (v2 and v1), up to the
    mount's root: limit - (usage - inactive page cache, which the kernel reclaims first)."""
    try:
        with open(os.path.join(root, "proc/self/cgroup"), encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    rooms: list[int] = []
    for line in lines:
        fields = line.split(":", 2)  # hierarchy:controllers:path
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":  # v2
            files = ("sys/fs/cgroup", "memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            files = (
                "sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            )
        else:
            continue
        mount, limit_file, usage_file, cache = files
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            folder = os.path.join(root, mount, *parts[:depth])
            room = _room(folder, limit_file, usage_file, cache)
            if room is not None:
                rooms.append(room)
    return rooms


def _room(folder: str, limit_file: str, usage_file: str, cache: str) -> int | None:
    try:
        with open(os.path.join(folder, limit_file), encoding="ascii") as f:
            limit = f.read().strip()
        if not limit.isdigit() or int(limit) >= 1 << 60:  # "max", or v1's "no limit"
            return None
        with open(os.path.join(folder, usage_file), encoding="ascii") as f:
            usage = int(f.read().strip())
        inactive = 0
        with contextlib.suppress(OSError), open(os.path.join(folder, "memory.stat")) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == cache:
                    inactive = int(value)
    except (OSError, ValueError):
        return None
    return max(0, int(limit) - max(0, usage - inactive))


@dataclass(frozen=True)
class Shortfall:
    """The local engine would likely hold more than is available: the dumps' bytes, the bytes
    available, and the estimate's ratio (held bytes per byte of dumps)."""

    dump_bytes: int
    available: int
    held_per_dump_byte: float = HELD_PER_DUMP_BYTE


def local_shortfall(found: Found) -> Shortfall | None:
    """The shortfall when the local engine would likely hold more than is available; None
    when it fits or nobody can say."""
    available = available_memory()
    if available is None:
        return None
    size = dump_bytes(found)
    return Shortfall(size, available) if size * HELD_PER_DUMP_BYTE > available else None
