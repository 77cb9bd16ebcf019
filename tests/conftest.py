"""Shared builders: small NCCL-shaped dumps written to a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import FIXTURES, REPO, nccl_dump, nccl_entry, write_json, write_pickle

__all__ = ["FIXTURES", "REPO", "nccl_dump", "nccl_entry", "write_json", "write_pickle"]


@pytest.fixture
def healthy_dir(tmp_path: Path) -> Path:
    """Two ranks, three completed all_reduces each, as NCCL would write them."""
    for rank in range(2):
        write_pickle(tmp_path / f"nccl_trace_rank_{rank}", nccl_dump(rank, 2))
    return tmp_path
