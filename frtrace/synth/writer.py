"""Write a synthetic job to disk the way torch's dump helpers and job launchers lay files out.

Dumps are built, serialized and dropped one rank at a time so writing a large job needs the
memory of one dump, not of all of them.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing as mp
import pickle
from pathlib import Path
from typing import Any

from frtrace.synth.sim import SyntheticJob

FORMATS = ("pickle", "json")


def host_of(rank: int) -> str:
    """Host name a rank lives on: 8 GPUs per node."""
    return f"node{rank // 8:02d}-host"


def to_json_dump(dump: dict[str, Any]) -> dict[str, Any]:
    """Apply the conventions of torch's JSON dump to a pickle-style dump dict.

    JSON dumps carry no stacks, spell pg_status counters as strings, write 0 for unset
    times, list process_group as an array and leave out `entries` when there are none.
    """
    out: dict[str, Any] = {
        "version": dump["version"],
        "comm_lib_version": dump.get("comm_lib_version", ""),
        "pg_config": dump.get("pg_config", {}),
        "pg_status": {
            pg: {key: str(value) for key, value in status.items()}
            for pg, status in dump.get("pg_status", {}).items()
        },
        "nccl_comm_state": {},
    }
    entries = dump.get("entries") or []
    if entries:
        converted = []
        for entry in entries:
            item = {key: value for key, value in entry.items() if key != "frames"}
            item["process_group"] = list(entry["process_group"])
            for key in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                if item.get(key) is None:
                    item[key] = 0
            converted.append(item)
        out["entries"] = converted
    return out


def dump_path(
    directory: Path,
    rank: int,
    *,
    prefix: str = "nccl_trace_rank_",
    fmt: str = "pickle",
    compress: bool = False,
    host_names: bool = False,
    host_dirs: bool = False,
) -> Path:
    """Where rank `rank`'s dump goes under the given naming options."""
    host = host_of(rank)
    name = f"{prefix}{host}_{rank}" if host_names else f"{prefix}{rank}"
    if fmt == "json":
        name += ".json"
    if compress:
        name += ".gz"
    return directory / host / name if host_dirs else directory / name


def write_job(
    job: SyntheticJob,
    directory: str | Path,
    *,
    prefix: str = "nccl_trace_rank_",
    fmt: str = "pickle",
    compress: bool = False,
    host_names: bool = False,
    host_dirs: bool = False,
    workers: int = 1,
) -> list[Path]:
    """Write every dump except those of `job.omit_ranks`; returns the paths in rank order.

    `workers` > 1 forks that many processes (POSIX only) that build and write disjoint ranks:
    building dicts dominates, and forked children share the simulation state for free.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if not prefix or "/" in prefix:
        raise ValueError(f"prefix must be a non-empty file name prefix, got {prefix!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    root = Path(directory)
    todo: list[tuple[int, Path]] = []
    for rank in sorted(job.dumps):
        if rank in job.omit_ranks:
            continue
        path = dump_path(
            root,
            rank,
            prefix=prefix,
            fmt=fmt,
            compress=compress,
            host_names=host_names,
            host_dirs=host_dirs,
        )
        todo.append((rank, path))
    for parent in sorted({path.parent for _, path in todo} | {root}):
        parent.mkdir(parents=True, exist_ok=True)
    if workers > 1 and len(todo) > 1 and "fork" in mp.get_all_start_methods():
        ctx = mp.get_context("fork")
        procs = [
            ctx.Process(target=_write_ranks, args=(job, todo[i::workers], fmt, compress))
            for i in range(min(workers, len(todo)))
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
        if failed:
            raise RuntimeError(f"{len(failed)} dump writer process(es) failed: {failed}")
    else:
        _write_ranks(job, todo, fmt, compress)
    return [path for _, path in todo]


def _write_ranks(job: SyntheticJob, todo: list[tuple[int, Path]], fmt: str, compress: bool) -> None:
    """Serialize one dump at a time so memory stays at one dump, however large the job."""
    peek = getattr(job.dumps, "peek", job.dumps.__getitem__)
    for rank, path in todo:
        dump = peek(rank)
        if fmt == "json":
            data = json.dumps(to_json_dump(dump)).encode()
        else:
            data = pickle.dumps(dump, protocol=2)
        del dump
        if compress:
            data = gzip.compress(data, compresslevel=3, mtime=0)
        path.write_bytes(data)
