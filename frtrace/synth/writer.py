"""Write a synthetic job to disk the way torch's dump helpers and job launchers lay files out.

Dumps are built, serialized and dropped one rank at a time so writing a large job needs the
memory of one dump, not of all of them.
"""

from __future__ import annotations

import ast
import gzip
import json
import multiprocessing as mp
import pickle
from pathlib import Path
from typing import Any

from frtrace.synth.sim import SyntheticJob

FORMATS = ("pickle", "json")

# What torch's dump writer put in a dump at each older format version, as read in its source:
# NCCLTraceBuffer::dump (TraceUtils.h for 1.x to 2.1, NCCLUtils.hpp for 2.2 and 2.3) at the
# commit that set `version_val` to that version. docs/formats.md lists them and their sources.
_V1_0 = (
    "pg_id", "seq_id", "profiling_name", "time_created_ns", "duration_ms", "input_sizes",
    "output_sizes", "state", "retired", "frames",
)  # fmt: skip
_V1_4 = (
    "record_id", "pg_id", "seq_id", "op_id", "profiling_name", "time_created_ns", "duration_ms",
    "input_sizes", "output_sizes", "state", "time_discovered_started_ns",
    "time_discovered_completed_ns", "retired", "frames",
)  # fmt: skip
_V1_5 = ("record_id", "pg_id", "process_group", *_V1_4[2:])  # 1.5: + process_group
_V2_0 = (
    "record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id",
    "profiling_name", "time_created_ns", "duration_ms", "input_sizes", "input_dtypes",
    "output_sizes", "output_dtypes", "state", "time_discovered_started_ns",
    "time_discovered_completed_ns", "retired", "is_p2p", "frames",
)  # fmt: skip
_V2_2 = (*_V2_0, "timeout_ms")  # 2.2: + timeout_ms
ENTRY_KEYS: dict[str, tuple[str, ...]] = {
    "1.0": _V1_0,
    "1.4": _V1_4,
    "1.5": _V1_5,
    "2.0": _V2_0,
    "2.1": _V2_0,  # 2.1 changed how dtypes are named inside torch, not the keys
    "2.2": _V2_2,
    "2.3": _V2_2,  # 2.3: + pg_status at the top
}
OLD_FORMATS = tuple(ENTRY_KEYS)


def as_format(dump: dict[str, Any], version: str) -> dict[str, Any]:
    """A format-2.10 dump as torch's writer of the older format `version` wrote it.

    Entries keep only that version's keys. Before 2.0 an entry had one `seq_id`: the group's
    ProcessGroupNCCL bumped one counter in collective() and in pointToPoint() alike, and a
    coalesced block counted once ("seq_id refers to actual kernel launches (e.g. 1 per
    coalesced group)", the Entry comment of 1.4 and 1.5), so it is the sum of the two counters
    2.0 split it into. Up to 1.4 `pg_config` maps each process-local pg_id to a list of ranks
    (groups that left no entry, whose pg_id the dump does not say, are left out); from 1.5 it is
    keyed by group name as now. 1.0 wrote no `pg_config`; `pg_status` came in 2.3.
    """
    if version not in ENTRY_KEYS:
        raise ValueError(f"version must be one of {OLD_FORMATS}, got {version!r}")
    keys = ENTRY_KEYS[version]
    entries = []
    for entry in dump.get("entries") or []:
        if "seq_id" in keys:
            entry = dict(entry, seq_id=entry["collective_seq_id"] + entry["p2p_seq_id"])
        entries.append({key: entry[key] for key in keys if key in entry})
    out: dict[str, Any] = {"entries": entries, "version": version}
    if version == "1.4":
        ids = {e["process_group"][0]: e["pg_id"] for e in dump.get("entries") or []}
        out["pg_config"] = {
            ids[name]: ast.literal_eval(cfg["ranks"])
            for name, cfg in dump.get("pg_config", {}).items()
            if name in ids
        }
    elif version != "1.0":
        out["pg_config"] = dump.get("pg_config", {})
    if version == "2.3":
        out["pg_status"] = dump.get("pg_status", {})
    return out


BACKENDS = ("nccl", "gloo")


def as_gloo(dump: dict[str, Any]) -> dict[str, Any]:
    """An NCCL job's dump as ProcessGroupGloo's Flight Recorder writes the same calls.

    What differs (fixtures/README.md lists it from real torch 2.13 gloo dumps): send/recv make
    no entry (`ProcessGroupGloo::send` / `::recv` never pass through `ProcessGroupGloo::enqueue`,
    where gloo records), so p2p entries and their batches go and record ids close up; states
    stay `scheduled` and no time is discovered (gloo never updates them; `retired` is True);
    no duration; names are `gloo:<op>`; `pg_config` is one `''`-keyed group whose ranks are
    `'[]'` once sub-groups exist; `pg_status` counts no start (-1) and lists only the groups
    the rank recorded work in; `comm_lib_version` is empty. Collective coalescing blocks have
    no gloo form here: a job written this way must have none (`coalesce_dp=False`, no
    `extras`)."""
    entries: list[dict[str, Any]] = []
    used: set[int] = set()
    first = None
    for entry in dump.get("entries") or []:
        if entry["is_p2p"]:
            continue
        name = str(entry["profiling_name"])
        if not entry["input_sizes"] and name.endswith("coalesced"):
            raise ValueError("a gloo job has no coalescing blocks: write it without them")
        first = entry["record_id"] if first is None else first
        item = {k: v for k, v in entry.items() if k != "duration_ms"}
        item.update(
            record_id=first + len(entries),
            p2p_seq_id=0,
            profiling_name="gloo:" + name.split(":", 1)[-1],
            state="scheduled",
            retired=True,
            time_discovered_started_ns=None,
            time_discovered_completed_ns=None,
            thread_name="python",
        )
        used.add(int(entry["pg_id"]))
        entries.append(item)
    groups: dict[str, dict[str, str]] = dump.get("pg_config") or {}
    only = next(iter(groups.values()), {"ranks": "[]"})
    ranks = "[]" if len(groups) > 1 else only.get("ranks", "[]")
    status = {
        pg: {**counts, "last_started_collective": -1}
        for pg, counts in (dump.get("pg_status") or {}).items()
        if int(pg) in used
    }
    return {
        "version": dump["version"],
        "pg_config": {"": {"name": "", "desc": "", "ranks": ranks}},
        "comm_lib_version": "",
        "pg_status": status,
        "entries": entries,
    }


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
    format_version: str | None = None,
    backend: str = "nccl",
) -> list[Path]:
    """Write every dump except those of `job.omit_ranks`; returns the paths in rank order.

    `backend` "gloo" writes what gloo's recorder would have of the same calls (as_gloo).

    `format_version` (one of OLD_FORMATS) writes the dumps as torch's writer of that older
    format did (see as_format); pickle only: torch wrote JSON dumps from 2.3 on, with
    conventions of their own that this module follows for the current format only.

    `workers` > 1 forks that many processes (POSIX only) that build and write disjoint ranks:
    building dicts dominates, and forked children share the simulation state for free.
    """
    _check_options(fmt, format_version, prefix, workers)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
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
        _write_forked(job, todo, workers, fmt, compress, format_version, backend)
    else:
        _write_ranks(job, todo, fmt, compress, format_version, backend)
    return [path for _, path in todo]


def _check_options(fmt: str, format_version: str | None, prefix: str, workers: int) -> None:
    """Refuse write_job's options before anything is written (a half-written job misleads)."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if format_version is not None and (format_version not in ENTRY_KEYS or fmt != "pickle"):
        raise ValueError(
            f"format_version must be one of {OLD_FORMATS} (pickle only), got {format_version!r}"
        )
    if not prefix or "/" in prefix:
        raise ValueError(f"prefix must be a non-empty file name prefix, got {prefix!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")


def _write_forked(
    job: SyntheticJob,
    todo: list[tuple[int, Path]],
    workers: int,
    fmt: str,
    compress: bool,
    format_version: str | None,
    backend: str = "nccl",
) -> None:
    """Split the ranks among forked writers, each taking every `workers`-th one; a failed
    writer fails the job (its files would be missing)."""
    ctx = mp.get_context("fork")
    procs = [
        ctx.Process(
            target=_write_ranks,
            args=(job, todo[i::workers], fmt, compress, format_version, backend),
        )
        for i in range(min(workers, len(todo)))
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} dump writer process(es) failed: {failed}")


def _write_ranks(
    job: SyntheticJob,
    todo: list[tuple[int, Path]],
    fmt: str,
    compress: bool,
    format_version: str | None = None,
    backend: str = "nccl",
) -> None:
    """Serialize one dump at a time so memory stays at one dump, however large the job."""
    peek = getattr(job.dumps, "peek", job.dumps.__getitem__)
    for rank, path in todo:
        dump = peek(rank)
        if backend == "gloo":
            dump = as_gloo(dump)
        if format_version is not None:
            dump = as_format(dump, format_version)
        if fmt == "json":
            data = json.dumps(to_json_dump(dump)).encode()
        else:
            data = pickle.dumps(dump, protocol=2)
        del dump
        if compress:
            data = gzip.compress(data, compresslevel=3, mtime=0)
        path.write_bytes(data)
