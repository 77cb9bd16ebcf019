"""frtrace's verdicts on real gloo dumps of jobs built to fail (or not) in a known way.

The dumps in ``fixtures/`` come from ``scripts/make_fixtures.py``; every expected conclusion
below follows from how that job was built (see ``fixtures/README.md``), not from what frtrace
printed.
Set ``FRTRACE_RECAPTURE=1`` to also re-capture these jobs with the installed torch (about
20 s each on a busy 2-core machine) and compare them with the committed copies.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, REPO

from frtrace.tables.load import load_trace
from frtrace.tables.trace import Trace

SCRIPTS = str(REPO / "scripts")
# Spawned ranks import the worker functions by module name, and inherit this path.
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)

import make_fixtures  # noqa: E402  (needs the path above; imports no torch)


@cache
def report(folder: str) -> tuple[int, dict[str, Any]]:
    """Exit status and parsed JSON report of ``frtrace fixtures/FOLDER --format json``."""
    out = subprocess.run(
        [sys.executable, "-m", "frtrace", str(FIXTURES / folder), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.returncode, json.loads(out.stdout)


def root_of(folder: str) -> dict[str, Any]:
    """The root cause of a faulty fixture, after checking the faulty-job contract."""
    status, rep = report(folder)
    assert (status, rep["ok"]) == (1, False), rep["findings"]
    assert rep["root_cause"] is not None and rep["findings"][0] == rep["root_cause"]
    root: dict[str, Any] = rep["root_cause"]
    return root


def assert_healthy(folder: str) -> None:
    """The healthy-job contract: exit 0, ``ok``, no root cause, no findings."""
    status, rep = report(folder)
    assert rep["findings"] == []
    assert (status, rep["ok"], rep["root_cause"]) == (0, True, None)


def members(trace: Trace) -> dict[tuple[str, str], list[int]]:
    """(pg_name, pg_desc) -> sorted member ranks, as the loader recovered them."""
    return {
        (str(name), str(desc)): sorted(int(r) for r in ranks)
        for name, desc, ranks in zip(
            trace.groups["pg_name"], trace.groups["pg_desc"], trace.groups["ranks"], strict=True
        )
    }


def calls(trace: Trace) -> dict[int, list[tuple[str, int, str]]]:
    """rank -> its (pg_desc, collective_seq_id, op) in the order it issued them."""
    e = trace.entries.sort_values(["rank", "record_id"])
    return {
        int(rank): [
            (str(d), int(s), str(o))
            for d, s, o in zip(g["pg_desc"], g["collective_seq_id"], g["op"], strict=True)
        ]
        for rank, g in e.groupby("rank")
    }


def numel(trace: Trace, column: str) -> dict[tuple[int, int], int]:
    """(rank, collective_seq_id) -> ``input_numel`` or ``output_numel``."""
    e = trace.entries
    return {
        (int(r), int(s)): int(n)
        for r, s, n in zip(e["rank"], e["collective_seq_id"], e[column], strict=True)
    }


# --- order_inversion_4rank: rank 1 calls right#3 before left#3 -----------------------------


def test_order_inversion_dumps_show_the_two_overlapping_groups_and_the_inverted_call() -> None:
    trace = load_trace(FIXTURES / "order_inversion_4rank")
    assert trace.ranks == [0, 1, 2, 3]
    assert members(trace) == {("1", "left"): [0, 1, 2], ("2", "right"): [1, 2, 3]}
    steps = [("left", 1), ("right", 1), ("left", 2), ("right", 2)]
    got = {r: [(d, s) for d, s, _ in c] for r, c in calls(trace).items()}
    assert got == {
        0: [("left", 1), ("left", 2), ("left", 3)],
        1: [*steps, ("right", 3)],  # the inversion: right#3 where left#3 was due
        2: [*steps, ("left", 3)],
        3: [("right", 1), ("right", 2), ("right", 3)],
    }


def test_order_inversion_is_a_deadlock_between_ranks_1_and_2_only() -> None:
    root = root_of("order_inversion_4rank")
    assert root["kind"] == "order_cycle"
    assert (root["collective_seq_id"], root["op"]) == (3, "all_reduce")
    assert 1 in root["culprit_ranks"]
    # Ranks 0 and 3 only wait behind the cycle: no finding may blame them.
    for finding in report("order_inversion_4rank")[1]["findings"]:
        assert set(finding["culprit_ranks"]) <= {1, 2}, finding


def test_order_inversion_blames_rank_1_for_issuing_right_3_early() -> None:
    root = root_of("order_inversion_4rank")
    assert (root["kind"], root["culprit_ranks"]) == ("order_cycle", [1])
    assert (root["pg_name"], root["pg_desc"], root["collective_seq_id"]) == ("2", "right", 3)


# --- cascade_4rank: rank 3 stalls before pair23#3; rank 2 waits for it, ranks 0-1 for rank 2 --


def test_cascade_default_group_hang_is_a_consequence_of_rank_3_not_a_second_cause() -> None:
    rep = report("cascade_4rank")[1]
    root = root_of("cascade_4rank")
    assert (root["culprit_ranks"], root["pg_desc"], root["collective_seq_id"]) == ([3], "pair23", 3)
    others = rep["findings"][1:]
    assert [f for f in others if not f["secondary"]] == []
    (default,) = [f for f in others if f["pg_desc"] == "default_pg"]
    assert (default["kind"], default["collective_seq_id"]) == ("missing_ranks", 3)
    assert (default["culprit_ranks"], default["waiting_ranks"]) == ([2, 3], [0, 1])
    assert default["evidence"]["blocked_in"] == {"2": "pair23#3 (pg 2)"}


def test_cascade_with_rank_1s_dump_lost_still_spares_rank_0(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(FIXTURES / "cascade_4rank", job)
    (job / "trace_1").write_bytes((job / "trace_1").read_bytes()[:100])  # cut short
    out = subprocess.run(
        [sys.executable, "-m", "frtrace", str(job), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    rep = json.loads(out.stdout)
    assert (out.returncode, rep["root_cause"]["culprit_ranks"]) == (1, [3])
    assert all(0 not in f["culprit_ranks"] for f in rep["findings"]), rep["findings"]
    assert all(1 not in f["culprit_ranks"] for f in rep["findings"]), "unreadable is no cause"
    assert rep["unseen"]["unreadable"] == [1]
    by_kind = {f["kind"]: f for f in rep["findings"][1:]}
    consequence = by_kind["missing_ranks"]
    assert (consequence["pg_desc"], consequence["secondary"]) == ("default_pg", True)
    assert consequence["culprit_ranks"] == [2, 3]
    assert out.stderr.count("\n") == 2 and "trace_1: truncated pickle" in out.stderr


# --- broadcast_root_4rank: rank 3 broadcasts from itself, ranks 0-2 from rank 0 -------------


def test_broadcast_root_dumps_record_no_root_so_seq_5_looks_alike_everywhere() -> None:
    trace = load_trace(FIXTURES / "broadcast_root_4rank")
    assert members(trace) == {("0", "default_pg"): [0, 1, 2, 3]}
    ops = ["broadcast"] * 3 + ["all_reduce", "broadcast", "all_reduce"]
    expected = [("default_pg", i + 1, op) for i, op in enumerate(ops)]
    assert calls(trace) == {0: expected, 1: expected[:5], 2: expected, 3: expected[:5]}
    bcast = trace.entries[trace.entries["collective_seq_id"] == 5]
    assert set(bcast["input_sizes"]) == set(bcast["output_sizes"]) == {"[[4]]"}
    assert set(bcast["profiling_name"]) == {"gloo:broadcast"}


def test_broadcast_root_hang_is_located_and_keeps_the_real_culprit_among_the_named() -> None:
    """The root is not recorded: the knowable part is where ranks 0 and 2 wait, and for whom."""
    root = root_of("broadcast_root_4rank")
    assert (root["kind"], root["pg_name"], root["pg_desc"]) == (
        "missing_ranks",
        "0",
        "default_pg",
    )
    assert (root["collective_seq_id"], root["op"], root["waiting_ranks"]) == (
        6,
        "all_reduce",
        [0, 2],
    )
    # Ranks 1 and 3 never got past the broadcast; rank 3 named the wrong root.
    assert {1, 3} <= set(root["culprit_ranks"])


# --- size_3rank: rank 2 all_reduces 4 elements, ranks 0-1 six ------------------------------


def test_size_dumps_hold_three_ranks_and_the_odd_size() -> None:
    trace = load_trace(FIXTURES / "size_3rank")
    assert members(trace) == {("0", "default_pg"): [0, 1, 2]}
    sizes = numel(trace, "input_numel")
    assert sizes == {(r, s): 4 if (r, s) == (2, 3) else 6 for r in range(3) for s in (1, 2, 3)}


def test_size_mismatch_blames_rank_2_at_default_pg_3() -> None:
    root = root_of("size_3rank")
    assert (root["kind"], root["pg_name"], root["pg_desc"]) == (
        "size_mismatch",
        "0",
        "default_pg",
    )
    assert (root["collective_seq_id"], root["op"]) == (3, "all_reduce")
    assert (root["culprit_ranks"], root["waiting_ranks"]) == ([2], [0, 1])


# --- alltoall_uneven_4rank: healthy, uneven all_to_all_single splits ------------------------


def test_alltoall_dumps_record_whole_uneven_tensors_not_splits() -> None:
    trace = load_trace(FIXTURES / "alltoall_uneven_4rank")
    assert members(trace) == {("0", "default_pg"): [0, 1, 2, 3]}
    ops = ["all_to_all"] * 3 + ["barrier"]
    assert calls(trace) == {
        r: [("default_pg", i + 1, op) for i, op in enumerate(ops)] for r in range(4)
    }
    split = make_fixtures.alltoall_split
    sent = {
        (r, step + 1): 2 * sum(split((r + step) % 4, j) for j in range(4))
        for r in range(4)
        for step in range(3)
    }
    received = {
        (r, step + 1): 2 * sum(split((j + step) % 4, r) for j in range(4))
        for r in range(4)
        for step in range(3)
    }
    got_in, got_out = numel(trace, "input_numel"), numel(trace, "output_numel")
    assert {k: got_in[k] for k in sent} == sent
    assert {k: got_out[k] for k in received} == received
    assert len(set(sent.values())) > 1  # really uneven


def test_uneven_alltoall_is_healthy() -> None:
    assert_healthy("alltoall_uneven_4rank")


# --- gather_scatter_4rank: healthy rooted collectives ---------------------------------------


def test_gather_scatter_dumps_show_roots_only_through_sizes() -> None:
    trace = load_trace(FIXTURES / "gather_scatter_4rank")
    assert members(trace) == {("0", "default_pg"): [0, 1, 2, 3]}
    ops = ["gather", "scatter", "reduce", "broadcast", "gather", "reduce", "barrier"]
    assert calls(trace) == {
        r: [("default_pg", i + 1, op) for i, op in enumerate(ops)] for r in range(4)
    }
    got_in, got_out = numel(trace, "input_numel"), numel(trace, "output_numel")
    gather_roots = {1: 0, 5: 3}  # seq -> dst
    for seq, dst in gather_roots.items():
        assert {r: got_out[r, seq] for r in range(4)} == {
            r: 12 if r == dst else 0 for r in range(4)
        }
    assert {r: got_in[r, 2] for r in range(4)} == {r: 12 if r == 1 else 0 for r in range(4)}
    for seq in (3, 4, 6):
        assert {got_in[r, seq] for r in range(4)} == {got_out[r, seq] for r in range(4)} == {3}
    assert {got_in[r, 7] for r in range(4)} == {0}


def test_gather_scatter_reduce_broadcast_with_various_roots_is_healthy() -> None:
    assert_healthy("gather_scatter_4rank")


# --- re-capture with the installed torch (opt-in: slow) -------------------------------------

RECAPTURE = {
    "order_inversion_4rank": make_fixtures.capture_order_inversion,
    "broadcast_root_4rank": make_fixtures.capture_broadcast_root,
    "size_3rank": make_fixtures.capture_size,
    "alltoall_uneven_4rank": make_fixtures.capture_alltoall,
    "gather_scatter_4rank": make_fixtures.capture_gather_scatter,
}


@pytest.mark.skipif(not os.environ.get("FRTRACE_RECAPTURE"), reason="set FRTRACE_RECAPTURE=1")
@pytest.mark.parametrize("folder", sorted(RECAPTURE))
def test_recaptured_job_matches_the_committed_fixture(folder: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    RECAPTURE[folder](tmp_path)
    cols = ["rank", "pg_name", "pg_desc", "collective_seq_id", "op", "input_numel", "output_numel"]

    def rows(trace: Trace) -> list[tuple[Any, ...]]:
        return sorted(trace.entries[cols].astype(str).itertuples(index=False, name=None))

    assert rows(load_trace(tmp_path)) == rows(load_trace(FIXTURES / folder))
