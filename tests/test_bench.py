"""Smoke test of scripts/bench.py: a tiny job end to end, so the benchmark cannot rot unseen."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the bench samples /proc and forks")


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cli", REPO / "scripts" / "bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def bench_line(capsys: pytest.CaptureFixture[str], cache: Path, *extra: str) -> dict[str, Any]:
    bench = load_bench()
    argv = ["--ranks", "8", "--entries", "50", "--skip-reference", "--cache-dir", str(cache)]
    assert bench.main([*argv, *extra]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    for row in ("frtrace ", "floor (pickle.load)", "frtrace / floor"):
        assert any(line.startswith(row) for line in out), row
    line: dict[str, Any] = json.loads(out[-1])
    return line


def test_healthy_and_faulted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    healthy = bench_line(capsys, tmp_path, "--compare-serial")
    assert healthy["fault"] is None and healthy["torchfrtrace"] is None
    assert healthy["frtrace"]["exit"] == 0 and healthy["frtrace"]["ok"] is True
    assert healthy["frtrace"]["root_cause"] is None
    assert healthy["serial_identical"] is True
    assert healthy["files"] == 8 and healthy["cached"] is False
    for key in ("wall_s", "cpu_s", "cpu_s_per_m_entries", "peak_rss_mb"):
        assert healthy["frtrace"][key] > 0 and healthy["floor"][key] > 0
    assert healthy["ratio_to_floor"] > 0 and healthy["cpu_ratio_to_floor"] > 0
    assert healthy["total_entries"] == 8 * 50
    assert healthy["stack_depth"] is None and healthy["coalesce_dp"] is True

    faulted = bench_line(capsys, tmp_path, "--fault", "missing_ranks")
    assert faulted["frtrace"]["exit"] == 1
    assert faulted["frtrace"]["culprit_found"] is True
    assert faulted["frtrace"]["root_cause"]["kind"] == "missing_ranks"
    assert faulted["frtrace"]["root_cause"]["culprit_ranks"] == faulted["expected"]["culprit_ranks"]

    again = bench_line(capsys, tmp_path, "--fault", "missing_ranks")
    assert again["cached"] is True and again["frtrace"]["culprit_found"] is True


def test_stack_depth_and_no_coalesce(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each job shape is its own cache entry, and frtrace still reads it as healthy."""
    shallow = bench_line(capsys, tmp_path, "--stack-depth", "4", "--no-coalesce")
    assert shallow["stack_depth"] == 4 and shallow["coalesce_dp"] is False
    assert shallow["cached"] is False and shallow["frtrace"]["ok"] is True
    deep = bench_line(capsys, tmp_path, "--stack-depth", "16")
    assert deep["cached"] is False and deep["frtrace"]["root_cause"] is None
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("g2-"))
    assert any(n.endswith("-d4-nocoal") for n in names) and any(n.endswith("-d16") for n in names)


def test_dask_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--engine dask runs frtrace on a local Dask cluster too: same findings, its client's peak
    memory beside the whole tree's."""
    if not importlib.util.find_spec("distributed"):
        if os.environ.get("FRTRACE_REQUIRE_EXTRAS"):
            raise AssertionError("dask.distributed is not installed (FRTRACE_REQUIRE_EXTRAS)")
        pytest.skip("needs the dask extra")
    line = bench_line(capsys, tmp_path, "--fault", "missing_ranks", "--engine", "dask")
    dask = line["dask"]
    assert dask["exit"] == 1 and dask["identical_to_local"] is True
    assert 0 < dask["client_peak_rss_mb"] <= dask["peak_rss_mb"]
    assert line["frtrace"]["client_peak_rss_mb"] > 0


def test_store_bench_reads_a_folder_and_its_copy_in_s3_alike() -> None:
    """scripts/store_bench.py on a fixture, through its delaying proxy: four runs, one report."""
    for module in ("distributed", "moto", "s3fs"):
        if not importlib.util.find_spec(module):
            if os.environ.get("FRTRACE_REQUIRE_EXTRAS"):
                raise AssertionError(f"{module} is not installed (FRTRACE_REQUIRE_EXTRAS)")
            pytest.skip(f"needs {module}")
    script = REPO / "scripts" / "store_bench.py"
    folder = REPO / "fixtures" / "cascade_4rank"
    done = subprocess.run(
        [sys.executable, str(script), str(folder), "--latency-ms", "5", "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split()[:2] for line in done.stdout.splitlines() if " s  exit 1 " in line]
    assert rows == [["local", "folder"], ["local", "s3"], ["dask", "folder"], ["dask", "s3"]]
    assert done.stdout.splitlines()[-1] == "identical reports"
