"""Dumps shaped like ProcessGroupNCCL's, for tests and scripts (no pytest needed here)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frtrace.synth.sim import DumpMap

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


def nccl_entry(record_id: int, seq: int, **fields: Any) -> dict[str, Any]:
    """One entry shaped like what ProcessGroupNCCL records (format 2.10)."""
    entry: dict[str, Any] = {
        "frames": [
            {
                "name": "all_reduce",
                "filename": "torch/distributed/distributed_c10d.py",
                "line": 3245,
            },
            {"name": "train_step", "filename": "train.py", "line": 42},
        ],
        "record_id": record_id,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": 1_730_000_000_000_000_000 + record_id * 1000,
        "input_sizes": [[3, 4]],
        "input_dtypes": ["Float"],
        "output_sizes": [[3, 4]],
        "output_dtypes": ["Float"],
        "state": "completed",
        "time_discovered_started_ns": 1_730_000_000_000_000_100 + record_id * 1000,
        "time_discovered_completed_ns": 1_730_000_000_000_000_200 + record_id * 1000,
        "duration_ms": 0.1,
        "retired": True,
        "timeout_ms": 600000,
        "is_p2p": False,
        "thread_id": "140000",
        "thread_name": "pt_main_thread",
    }
    entry.update(fields)
    return entry


def nccl_dump(rank: int, world: int, entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A whole dump; by default three completed all_reduces on the default group."""
    if entries is None:
        entries = [nccl_entry(i, i + 1) for i in range(3)]
    return {
        "version": "2.10",
        "comm_lib_version": "2.27.5",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": len(entries),
                "last_started_collective": len(entries),
                "last_completed_collective": len(entries),
            }
        },
        "entries": entries,
    }


def write_pickle(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data, protocol=2))
    return path


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def write_dumps(dumps: DumpMap, folder: Path) -> Path:
    """A snapshot's dumps (`job.snapshot_at(ns)`), one pickle per rank."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in dumps:
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dumps.peek(rank)))
    return folder
