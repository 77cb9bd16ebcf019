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
def run(folder: str) -> subprocess.CompletedProcess[str]:
    """``frtrace fixtures/FOLDER --format json``, its output and exit status."""
    return subprocess.run(
        [sys.executable, "-m", "frtrace", str(FIXTURES / folder), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )


def report(folder: str) -> tuple[int, dict[str, Any]]:
    """Exit status and parsed JSON report of ``frtrace fixtures/FOLDER --format json``."""
    out = run(folder)
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
    # Ranks 1 and 3 never got past the broadcast; rank 3 named the wrong root. Ranks 0 and 2
    # completed it and moved on: not suspects.
    assert root["culprit_ranks"] == [1, 3]


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


# --- thin evidence: each job dumped as pickle (FOLDER) and JSON (FOLDER_json) in one run ----
#
# Expectations follow fixtures/README.md, derived from each program, not from frtrace's output.

THIN = [
    "pipeline_stall_4rank",
    "pipeline_raise_4rank",
    "truncated_beside_fault_4rank",
    "fsdp2_rank_dies_4rank",
    "mismatch_kills_3rank",
    "broadcast_2v2_4rank",
    "extra_call_2rank",
    "mesh_size_dies_4rank",
    "helper_extra_2rank",
    "two_stalls_8rank",
]


def twins(folder: str) -> list[Any]:
    """The pickle folder and its JSON twin as parameters."""
    return [
        pytest.param(name, id=fmt)
        for name, fmt in (
            (folder, "pickle"),
            (f"{folder}_json", "json"),
        )
    ]


def place(finding: dict[str, Any]) -> tuple[str, str, int | None, str | None]:
    """Where a finding is: (pg_name, pg_desc, collective_seq_id, op)."""
    return (finding["pg_name"], finding["pg_desc"], finding["collective_seq_id"], finding["op"])


def causes(folder: str) -> list[dict[str, Any]]:
    """The findings that are causes, not consequences of another."""
    return [f for f in report(folder)[1]["findings"] if not f["secondary"]]


def blamed(folder: str) -> set[int]:
    """Every rank any finding names as a culprit."""
    return {r for f in report(folder)[1]["findings"] for r in f["culprit_ranks"]}


def entry_rows(folder: Path) -> list[tuple[str, ...]]:
    """What a folder's readable dumps recorded, one sorted row per entry."""
    cols = ["rank", "pg_name", "pg_desc", "collective_seq_id", "op", "input_numel", "output_numel"]
    entries = load_trace(folder).entries[cols].astype(str)
    return sorted(entries.itertuples(index=False, name=None))


@pytest.mark.parametrize("folder", THIN)
def test_json_twin_of_a_run_holds_the_same_collectives_as_its_pickles(folder: str) -> None:
    assert entry_rows(FIXTURES / f"{folder}_json") == entry_rows(FIXTURES / folder) != []


@pytest.mark.parametrize("folder", ["pipeline_stall_4rank", "pipeline_raise_4rank"])
def test_pipeline_dumps_record_the_dp_all_reduces_and_no_pipeline_send_or_recv(
    folder: str,
) -> None:
    trace = load_trace(FIXTURES / folder)
    ranks = set(trace.ranks)
    assert members(trace) == {
        ("3", "mesh_dp"): sorted({0, 1} & ranks),
        ("4", "mesh_dp"): [2, 3],
    }
    steps = {0: 5, 1: 4, 2: 5, 3: 4}  # seq 5 is step 3's first dp all_reduce
    assert calls(trace) == {
        r: [("mesh_dp", s, "all_reduce") for s in range(1, steps[r] + 1)] for r in ranks
    }


def test_pipeline_raise_leaves_no_file_from_rank_1() -> None:
    assert sorted(p.name for p in (FIXTURES / "pipeline_raise_4rank").iterdir()) == [
        "trace_0",
        "trace_2",
        "trace_3",
    ]


def test_fsdp2_dumps_end_at_the_first_backward_all_gather_of_step_2() -> None:
    trace = load_trace(FIXTURES / "fsdp2_rank_dies_4rank")
    assert (trace.ranks, trace.world.size, trace.world.stated) == ([0, 1, 2], 4, True)
    step = ["all_gather"] * 4 + ["all_reduce"] * 2  # 2 forward, 2 backward, 2 reduce-scatters
    ops = [*step, *step[:3]]
    assert calls(trace) == {
        r: [("default_pg", i + 1, op) for i, op in enumerate(ops)] for r in range(3)
    }


def test_mismatch_kills_dumps_hold_rank_2s_five_elements_at_seq_3() -> None:
    sizes = numel(load_trace(FIXTURES / "mismatch_kills_3rank"), "input_numel")
    expected = {(r, s): 4 for r in (0, 1) for s in (1, 2, 3, 4)}
    expected |= {(2, 1): 4, (2, 2): 4, (2, 3): 5}
    assert sizes == expected


def test_extra_call_dumps_differ_only_by_rank_0s_call_after_training() -> None:
    got = calls(load_trace(FIXTURES / "extra_call_2rank"))
    assert got[0] == [*got[1], ("default_pg", 13, "all_reduce")]
    assert len(got[1]) == 12


# pipeline_stall_4rank: rank 1 stalls in its data loader; rank 3 waits for it in an
# unrecorded recv, ranks 0 and 2 in their dp groups' seq 5.


def test_pipeline_stall_names_ranks_1_and_3_stopped_before_their_dp_seq_5() -> None:
    root = root_of("pipeline_stall_4rank")
    assert (root["kind"], root["pg_desc"], root["collective_seq_id"], root["op"]) == (
        "missing_ranks",
        "mesh_dp",
        5,
        "all_reduce",
    )
    assert root["culprit_ranks"] and set(root["culprit_ranks"]) <= {1, 3}
    assert {r for f in causes("pipeline_stall_4rank") for r in f["culprit_ranks"]} == {1, 3}


def test_pipeline_stall_is_one_stall_across_the_two_stages_naming_the_other_reading() -> None:
    [cause] = causes("pipeline_stall_4rank")
    assert (cause["culprit_ranks"], cause["evidence"]["reason"]) == ([1, 3], "unrecorded_p2p")
    assert cause["evidence"]["other_reading"] == "separate_stalls"


def test_pipeline_stall_never_blames_ranks_0_and_2_that_wait_in_dp() -> None:
    findings = report("pipeline_stall_4rank")[1]["findings"]
    assert blamed("pipeline_stall_4rank").isdisjoint({0, 2}), findings


def test_pipeline_stall_from_json_names_both_sides_of_each_dp_group_as_undecidable() -> None:
    """Without call sites, that ranks 1 and 3 stopped before seq 5 looks exactly like ranks 0
    and 2 issuing one call more: the usual next call (an op and its sizes) tells nothing."""
    root = root_of("pipeline_stall_4rank_json")
    assert (root["kind"], root["pg_desc"], root["collective_seq_id"]) == (
        "missing_ranks",
        "mesh_dp",
        5,
    )
    assert (root["culprit_ranks"], root["evidence"]["undecidable"]) == ([0, 1, 2, 3], True)
    assert len(causes("pipeline_stall_4rank_json")) == 1


# pipeline_raise_4rank: rank 1 raises and leaves no dump; rank 0 waits for it in mesh_dp 3.


@pytest.mark.parametrize("folder", twins("pipeline_raise_4rank"))
def test_pipeline_raise_reports_rank_1_without_a_dump(folder: str) -> None:
    rep = report(folder)[1]
    assert (rep["inputs"]["missing_dumps"], rep["unseen"]["no_file"]) == ([1], [1])


@pytest.mark.parametrize("folder", twins("pipeline_raise_4rank"))
def test_pipeline_raise_names_rank_1_with_its_dp_peer_that_alone_may_wait_for_it(
    folder: str,
) -> None:
    """Rank 0 alone may wait for rank 1 in mesh_dp#5: gloo records no completion, and a
    gloo job dumps only where its own code asks, so rank 0 may as well have completed the
    call and stopped elsewhere while rank 1 simply wrote no dump. One rank's word decides
    nothing: both are named, undecidable (the logs, when given, settle it)."""
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"], root["evidence"]["undecidable"]) == (
        "missing_dump",
        [0, 1],
        True,
    )
    assert place(root) == ("3", "mesh_dp", 5, "all_reduce")
    assert "rank 1 left no dump" in root["detail"]


@pytest.mark.parametrize("folder", twins("pipeline_raise_4rank"))
def test_pipeline_raise_never_blames_rank_2_that_waits_in_the_other_stage(folder: str) -> None:
    assert 2 not in blamed(folder), report(folder)[1]["findings"]


# truncated_beside_fault_4rank: rank 3 ran out of data; rank 1's dumps were cut in half.


@pytest.mark.parametrize("folder", twins("truncated_beside_fault_4rank"))
def test_truncated_dump_is_one_stderr_line_and_an_unreadable_rank(folder: str) -> None:
    out = run(folder)
    lines = [line for line in out.stderr.splitlines() if "trace_1" in line]
    assert len(lines) == 1 and lines[0].startswith("skipped"), out.stderr
    rep = json.loads(out.stdout)
    assert (rep["unseen"]["unreadable"], len(rep["inputs"]["skipped"])) == ([1], 1)


@pytest.mark.parametrize("folder", twins("truncated_beside_fault_4rank"))
def test_truncated_dump_beside_a_fault_leaves_rank_3_the_root_cause(folder: str) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "missing_ranks",
        [3],
        [0, 2],
    )
    assert place(root) == ("0", "default_pg", 5, "all_reduce")


@pytest.mark.parametrize("folder", twins("truncated_beside_fault_4rank"))
def test_truncated_rank_is_never_a_culprit(folder: str) -> None:
    assert 1 not in blamed(folder), report(folder)[1]["findings"]


# fsdp2_rank_dies_4rank: rank 3 calls os._exit(1) between forward and backward.


@pytest.mark.parametrize("folder", twins("fsdp2_rank_dies_4rank"))
def test_fsdp2_rank_that_died_without_a_dump_is_the_root_cause(folder: str) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "missing_dump",
        [3],
        [0, 1, 2],
    )
    assert place(root) == ("0", "default_pg", 9, "all_gather")


@pytest.mark.parametrize("folder", twins("fsdp2_rank_dies_4rank"))
def test_fsdp2_job_with_a_dead_rank_is_never_called_healthy(folder: str) -> None:
    status, rep = report(folder)
    assert (status, rep["ok"]) != (0, True)
    assert blamed(folder) <= {3}


# mismatch_kills_3rank: rank 2 all_reduces 5 elements against 4, times out, and ends.


@pytest.mark.parametrize("folder", twins("mismatch_kills_3rank"))
def test_mismatch_that_ended_rank_2_is_the_root_cause(folder: str) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "size_mismatch",
        [2],
        [0, 1],
    )
    assert place(root) == ("0", "default_pg", 3, "all_reduce")


@pytest.mark.parametrize("folder", twins("mismatch_kills_3rank"))
def test_mismatch_kills_wait_at_seq_4_is_a_consequence(folder: str) -> None:
    later = [f for f in report(folder)[1]["findings"] if f["collective_seq_id"] == 4]
    assert later and all(f["secondary"] and f["culprit_ranks"] == [2] for f in later), later


@pytest.mark.parametrize("folder", twins("mismatch_kills_3rank"))
def test_mismatch_kills_wait_at_seq_4_is_reported_once(folder: str) -> None:
    later = [f for f in report(folder)[1]["findings"] if f["collective_seq_id"] == 4]
    assert len(later) == 1, later


# broadcast_2v2_4rank: rank 3 names itself as root in step 3; ranks 1 and 3 stay inside.


@pytest.mark.parametrize("folder", twins("broadcast_2v2_4rank"))
def test_broadcast_2v2_blames_the_two_ranks_left_in_the_broadcast(folder: str) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "missing_ranks",
        [1, 3],
        [0, 2],
    )
    assert place(root) == ("0", "default_pg", 6, "all_reduce")
    assert blamed(folder) == {1, 3}


# extra_call_2rank: after training rank 0 alone all_reduces its metrics.


@pytest.mark.parametrize("folder", twins("extra_call_2rank"))
def test_extra_call_after_training_is_undecidable_between_ranks_0_and_1(folder: str) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "missing_ranks",
        [0, 1],
        [0],
    )
    assert place(root) == ("0", "default_pg", 13, "all_reduce")
    assert root["evidence"]["undecidable"] is True


# mesh_size_dies_4rank: rank 3 all_reduces [5, 8] in mesh_tp seq 6; gloo aborts rank 2.


def test_mesh_size_dies_dumps_hold_the_odd_shape_and_no_trace_of_rank_2() -> None:
    trace = load_trace(FIXTURES / "mesh_size_dies_4rank")
    assert (trace.ranks, trace.no_file) == ([0, 1, 3], [2])
    sizes = {
        (int(r), str(pg), int(seq)): str(size)
        for r, pg, seq, size in zip(
            trace.entries["rank"],
            trace.entries["pg_name"],
            trace.entries["collective_seq_id"],
            trace.entries["input_sizes"],
            strict=True,
        )
    }
    assert sizes[3, "4", 6] == "[[5, 8]]"
    assert sizes[0, "3", 6] == sizes[3, "4", 5] == "[[4, 8]]"


@pytest.mark.parametrize("folder", twins("mesh_size_dies_4rank"))
def test_mesh_size_dies_blames_the_rank_whose_call_differs_from_the_sibling_group(
    folder: str,
) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"]) == ("size_mismatch", [3])
    assert place(root) == ("4", "mesh_tp", 6, "all_reduce")
    assert (root["evidence"]["decided_by"], root["evidence"]["siblings"]) == ("siblings", ["3"])


@pytest.mark.parametrize("folder", twins("mesh_size_dies_4rank"))
def test_mesh_size_dies_never_makes_the_aborted_rank_a_cause(folder: str) -> None:
    assert all(2 not in f["culprit_ranks"] for f in causes(folder)), causes(folder)


# helper_extra_2rank: rank 0's helper all_reduces its gradient once more; rank 1 its metrics.


@pytest.mark.parametrize("folder", twins("helper_extra_2rank"))
def test_helper_extra_call_is_undecidable_between_ranks_0_and_1(folder: str) -> None:
    root = root_of(folder)
    assert (root["kind"], root["culprit_ranks"]) == ("size_mismatch", [0, 1])
    assert place(root) == ("0", "default_pg", 7, "all_reduce")
    assert root["evidence"]["undecidable"] is True


def test_helper_extra_calls_come_from_one_stack_so_the_stacks_cannot_decide() -> None:
    e = load_trace(FIXTURES / "helper_extra_2rank").entries
    rank0 = e[e["rank"] == 0].sort_values("collective_seq_id")
    assert rank0["stack_id"].nunique() == 1
    assert list(rank0["input_numel"]) == [4, 1, 4, 1, 4, 1, 4]


# two_stalls_8rank: ranks 1 and 6 stall apart in a tp 4 x dp 2 mesh that has no pipeline.


@pytest.mark.parametrize("folder", twins("two_stalls_8rank"))
def test_two_stalls_without_a_pipeline_are_two_causes(folder: str) -> None:
    found = sorted((f["pg_name"], f["culprit_ranks"]) for f in causes(folder))
    assert found == [("5", [1]), ("6", [6])]
    assert all(
        (f["kind"], f["pg_desc"], f["collective_seq_id"]) == ("missing_ranks", "mesh_tp", 6)
        for f in causes(folder)
    )


@pytest.mark.parametrize("folder", twins("two_stalls_8rank"))
def test_two_stalls_report_names_the_one_stall_reading_it_did_not_take(folder: str) -> None:
    root = root_of(folder)
    assert root["evidence"]["other_reading"] == "one_stall"
    assert "one stall passed on by unrecorded send/recv" in root["detail"]


# Both formats of one run: the JSON twin holds less, so it may not be more confident.


@pytest.mark.parametrize("folder", THIN)
def test_the_json_twin_of_a_run_is_never_more_confident_than_its_pickles(folder: str) -> None:
    """Same verdict, kind and place; the JSON root names every culprit the pickle root names,
    and is undecidable where the pickle's is (or names more, where call sites told)."""
    status, rep = report(folder)
    json_status, json_rep = report(f"{folder}_json")
    assert (json_status, json_rep["verdict"]) == (status, rep["verdict"])
    root, json_root = rep["root_cause"], json_rep["root_cause"]
    assert (root is None) == (json_root is None)
    if root is None:
        return
    assert (json_root["kind"], place(json_root)) == (root["kind"], place(root))
    assert set(root["culprit_ranks"]) <= set(json_root["culprit_ranks"])
    if root["evidence"]["undecidable"] or json_root["culprit_ranks"] != root["culprit_ranks"]:
        assert json_root["evidence"]["undecidable"] is True


@pytest.mark.parametrize("folder", [f for f in THIN if f != "pipeline_stall_4rank"])
def test_the_json_twin_gives_the_same_root_cause_where_no_call_site_decided(folder: str) -> None:
    def root(name: str) -> tuple[Any, ...] | None:
        status, rep = report(name)
        found = rep["root_cause"]
        if found is None:
            return (status, rep["verdict"])
        return (status, found["kind"], *place(found), found["culprit_ranks"])

    assert root(f"{folder}_json") == root(folder)


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


@pytest.mark.skipif(not os.environ.get("FRTRACE_RECAPTURE"), reason="set FRTRACE_RECAPTURE=1")
@pytest.mark.parametrize("folder", THIN)
def test_recaptured_job_matches_both_committed_folders(folder: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    make_fixtures.BOTH_FORMATS[folder](tmp_path / "pickle", tmp_path / "json")
    assert entry_rows(tmp_path / "pickle") == entry_rows(FIXTURES / folder)
    assert entry_rows(tmp_path / "json") == entry_rows(FIXTURES / f"{folder}_json")
