"""Stuck or slow: where the root cause is stuck, stragglers, and two snapshots compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import write_dumps
from click.testing import CliRunner

from frtrace.analysis.analyze import analyze
from frtrace.api import to_html
from frtrace.cli import cli
from frtrace.synth import Fault, JobSpec, Layout, simulate, write_job
from frtrace.tables.load import load_trace

LAYOUT = Layout(tp=4, dp=4, pp=4)  # 64 ranks


def report(folder: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, [str(folder), "--format", "json", *args])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize(
    ("kind", "stall"),
    [
        ("missing_ranks", "cpu_side"),
        ("state_mismatch", "gpu_not_started"),
        ("stuck_collective", "inside_collective"),
        ("order_cycle", None),  # stuck inside one of the cycle's collectives: no class
    ],
)
def test_the_root_cause_says_where_it_is_stuck(
    tmp_path: Path, kind: str, stall: str | None
) -> None:
    fault = Fault(kind, rank=22, group="tp", step=1)
    write_job(simulate(JobSpec(LAYOUT, steps=3, fault=fault, batch_p2p=True)), tmp_path)
    code, r = report(tmp_path)
    evidence = r["root_cause"]["evidence"]
    assert code == 1 and evidence.get("stall") == stall
    if stall is None:
        return
    assert evidence["timeout_ms"] == 600_000
    if stall == "cpu_side" and kind == "missing_ranks":
        assert evidence["idle_ms"] >= 600_000  # it left collectives before the timeout
    else:
        assert evidence["in_flight_ms"] >= 600_000


@pytest.mark.parametrize("lag_ms", [20, 100])
@pytest.mark.parametrize("timing", [True, False])
def test_a_straggler_is_named_first_with_its_lag(tmp_path: Path, lag_ms: int, timing: bool) -> None:
    job = simulate(
        JobSpec(
            LAYOUT,
            steps=4,
            straggler=(37, lag_ms * 1_000_000),
            jitter_ns=2_000_000,  # every rank jitters up to 2 ms per work item
            clock_skew_ms=0 if not timing else 40,  # GPU durations ignore host clocks
            enable_timing=timing,
            seed=lag_ms,
        )
    )
    write_job(job, tmp_path)
    code, r = report(tmp_path)
    top = r["stragglers"]["top"]
    assert code == 0 and r["ok"] is True  # slow is not hung
    assert top[0]["rank"] == 37 and top[0]["last_share"] >= 0.9
    if timing:
        assert r["stragglers"]["method"] == "duration"
        # The rank is `lag_ms` slower per work item; between two collectives with the same
        # peers it may run two items, so its arrival lag lies between one and two lags.
        assert 0.8 * lag_ms <= top[0]["median_lag_ms"] <= 2.0 * lag_ms
    code, _ = report(tmp_path, "--fail-on", "stragglers")
    assert code == 1


@pytest.mark.parametrize("timing", [True, False])
def test_a_healthy_jittering_job_names_no_straggler(tmp_path: Path, timing: bool) -> None:
    job = simulate(
        JobSpec(LAYOUT, steps=4, jitter_ns=2_000_000, enable_timing=timing, clock_skew_ms=40)
    )
    write_job(job, tmp_path)
    code, r = report(tmp_path, "--fail-on", "stragglers")
    assert code == 0 and r["stragglers"]["top"] == []


def test_a_rank_that_stopped_between_two_snapshots_is_named(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=22, group="tp", step=1)
    job = simulate(JobSpec(LAYOUT, steps=3, fault=fault, batch_p2p=True))
    stop = job.last_activity(22)
    others = max(job.last_activity(r) for r in range(LAYOUT.world))
    assert others > stop, "the others still worked after rank 22 stopped"
    older = write_dumps(job.snapshot_at(stop + 1), tmp_path / "t1")
    newer = write_dumps(job.snapshot_at(others + 1), tmp_path / "t2")
    code, r = report(newer, "--since", str(older))
    assert code == 1 and 22 in r["progress"]["stopped"]
    assert r["progress"]["advanced"], "others advanced"
    assert set(r["progress"]["stopped"]) < set(range(LAYOUT.world))


def test_two_snapshots_of_a_slow_healthy_job_name_no_stopped_rank(tmp_path: Path) -> None:
    job = simulate(JobSpec(LAYOUT, steps=4, straggler=(5, 30_000_000), batch_p2p=True))
    older = write_dumps(job.snapshot(0.4), tmp_path / "t1")
    newer = write_dumps(job.snapshot(0.8), tmp_path / "t2")
    code, r = report(newer, "--since", str(older))
    assert r["progress"]["stopped"] == [] and len(r["progress"]["advanced"]) == LAYOUT.world
    assert code == 0 and r["ok"] is True


def test_stragglers_and_classes_are_in_the_python_api(tmp_path: Path) -> None:
    job = simulate(JobSpec(LAYOUT, steps=3, straggler=(9, 40_000_000)))
    write_job(job, tmp_path)
    analysis = analyze(load_trace(tmp_path, jobs=1))
    assert analysis.stragglers is not None and analysis.stragglers.top[0].rank == 9


def test_the_html_page_carries_the_stall_class_and_the_stragglers(tmp_path: Path) -> None:
    import re

    fault = Fault("state_mismatch", rank=22, group="tp", step=2)
    job = simulate(JobSpec(LAYOUT, steps=4, fault=fault, straggler=(9, 40_000_000)))
    write_job(job, tmp_path)
    page = to_html(analyze(load_trace(tmp_path, jobs=1)))
    found = re.search(r'<script type="application/json" id="frtrace-data">(.*?)</script>', page)
    assert found is not None
    data = json.loads(found.group(1))
    assert data["root_stall"][0].startswith("stuck on the GPU")
    assert any(line.startswith("rank 9:") for line in data["stragglers"])


@pytest.mark.parametrize("seed", range(6))
def test_per_rank_lag_statistics_equal_pandas_group_by(seed: int) -> None:
    """Median, p95, share of last arrivals and count per rank, computed with one sort, are
    exactly pandas' group-by median, quantile(0.95), mean and size (ties and single lags
    included)."""
    import numpy as np
    import pandas as pd

    from frtrace.analysis.timing import lag_summary_per_rank

    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 4000))
    rank = rng.integers(0, int(rng.integers(1, 60)), size).astype(np.int32)
    lag = rng.choice([0.0, 0.5, 1.25, 3.0], size) if seed % 2 else rng.exponential(3.0, size)
    last = rng.random(size) < 0.3
    frame = pd.DataFrame({"rank": rank, "lag": lag, "last": last})
    by = frame.groupby("rank")
    expected = by.agg(median=("lag", "median"), last=("last", "mean"), n=("lag", "size"))
    expected["p95"] = by["lag"].quantile(0.95)
    got = lag_summary_per_rank(rank, lag, last)
    assert got["rank"].tolist() == expected.index.tolist()
    for column in ("median", "last", "n", "p95"):
        assert got[column].tolist() == expected[column].tolist(), column
