"""Dumps shaped the way ProcessGroupNCCL writes them, where they are awkward: the generator
follows torch's rules, and the analysis stays right on them."""

from __future__ import annotations

import importlib.util
import json
import pickle
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import REPO, nccl_dump, nccl_entry, write_pickle

from frtrace.analysis.analyze import analyze
from frtrace.cli import cli, expand_multi_values
from frtrace.report.json_report import load_schema
from frtrace.synth import Fault, JobSpec, Layout, simulate, spec_for_entries, write_job
from frtrace.tables.load import load_trace


def _sweep() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sweep", REPO / "scripts" / "sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sweep"] = module
    spec.loader.exec_module(module)
    return module


SWEEP = _sweep()


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, expand_multi_values(list(args)), catch_exceptions=False)
    return result.exit_code, result.stdout


# --- the generator writes what NCCL writes ----------------------------------------------------


def test_batched_p2p_parts_stay_scheduled_and_the_closer_carries_the_state() -> None:
    job = simulate(JobSpec(Layout(tp=1, dp=1, pp=2), steps=1, batch_p2p=True))
    entries = job.dumps[0]["entries"]
    send, closer = entries[0], entries[1]
    assert send["profiling_name"] == "nccl:send 0->1" and send["state"] == "scheduled"
    assert send["time_discovered_completed_ns"] is None and not send["retired"]
    assert closer["profiling_name"] == "nccl:coalesced" and closer["is_p2p"] is True
    assert closer["state"] == "completed" and closer["input_sizes"] == []
    assert send["p2p_seq_id"] == closer["p2p_seq_id"] == 1
    assert send["collective_seq_id"] == closer["collective_seq_id"] == 0


def test_without_timing_nothing_is_started_and_pg_status_never_starts() -> None:
    fault = Fault("missing_ranks", rank=1, group="tp", step=1)
    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=3, enable_timing=False, fault=fault))
    dump = job.dumps[0]
    assert {e["state"] for e in dump["entries"]} <= {"scheduled", "completed"}
    assert not any("duration_ms" in e for e in dump["entries"])
    assert {s["last_started_collective"] for s in dump["pg_status"].values()} == {-1}


def test_pg_status_of_a_p2p_group_reports_its_p2p_seq() -> None:
    job = simulate(JobSpec(Layout(tp=1, dp=1, pp=2), steps=2, batch_p2p=True))
    dump = job.dumps[0]
    pp_id = next(str(e["pg_id"]) for e in dump["entries"] if e["is_p2p"])
    last_p2p = max(e["p2p_seq_id"] for e in dump["entries"] if e["is_p2p"])
    assert dump["pg_status"][pp_id]["last_enqueued_collective"] == last_p2p


def _first_of_each_rank(job: Any, name: str, side: str) -> list[Any]:
    """`side` of each rank's first entry named `name` (ranks 0-3)."""
    return [
        next(e[side] for e in job.dumps[r]["entries"] if e["profiling_name"] == name)
        for r in range(4)
    ]


def test_rooted_and_moe_collectives_record_rank_dependent_sizes() -> None:
    job = simulate(JobSpec(Layout(tp=1, dp=4, ep=2), steps=1, extras=True))
    # all_to_all_single: ProcessGroupNCCL::alltoall_base records `nccl:all_to_all`.
    a2a_in = _first_of_each_rank(job, "nccl:all_to_all", "input_sizes")
    assert len({str(s) for s in a2a_in}) > 1  # uneven MoE splits
    gathered = _first_of_each_rank(job, "nccl:gather", "output_sizes")
    assert sorted(len(g) for g in gathered) == [1, 1, 1, 4]  # only the root holds all four
    assert [g for g in gathered if len(g) == 1] == [[[0]]] * 3


def test_the_generator_records_a_scatter_as_process_group_nccl_does() -> None:
    # ProcessGroupNCCL::scatter calls collective(outputs, inputs): the entry's inputs are the
    # chunk each rank receives, its outputs the root's list (an undefined tensor elsewhere).
    job = simulate(JobSpec(Layout(tp=1, dp=4), steps=1, extras=True))
    assert _first_of_each_rank(job, "nccl:scatter", "input_sizes") == [[[4]]] * 4
    outputs = _first_of_each_rank(job, "nccl:scatter", "output_sizes")
    dtypes = _first_of_each_rank(job, "nccl:scatter", "output_dtypes")
    assert sorted(len(o) for o in outputs) == [1, 1, 1, 4]
    assert [o for o in outputs if len(o) == 1] == [[[0]]] * 3
    assert [d for d in dtypes if len(d) == 1] == [["UNKNOWN_SCALAR"]] * 3


def test_the_generator_records_each_uneven_all_gather_part_with_one_shard_on_every_member() -> None:
    # ProcessGroupNCCL::allgather: part i is _broadcast_oop(output[i], i == rank ? input :
    # output[i]): shard i in and out, whichever rank records it.
    job = simulate(JobSpec(Layout(tp=1, dp=4), steps=1, extras=True))
    for rank in range(4):
        parts = [
            e for e in job.dumps[rank]["entries"] if e["profiling_name"] == "nccl:_broadcast_oop"
        ]
        assert [(p["input_sizes"], p["output_sizes"]) for p in parts] == [
            ([[8 + i]], [[8 + i]]) for i in range(4)
        ]


def test_a_hung_jobs_dumps_are_written_after_the_timeout_on_each_rank_s_clock() -> None:
    fault = Fault("stuck_collective", rank=1, group="tp", step=1)
    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=3, fault=fault))
    stuck = [e for e in job.dumps[0]["entries"] if e["state"] == "started"]
    assert stuck, "the collective every member is inside stays started"
    age_ms = (stuck[0]["time_discovered_started_ns"] - stuck[0]["time_created_ns"]) / 1e6
    assert age_ms >= stuck[0]["timeout_ms"]


# --- the analysis on them ---------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SWEEP.SCENARIOS, ids=lambda s: s.name.replace(" ", "_"))
def test_sweep_subset_names_the_injected_fault_and_nothing_else(
    tmp_path: Path, scenario: Any
) -> None:
    """One MoE layout, timing on and off, buffers that wrapped inside blocks and did not."""
    p2p = scenario.kind == "p2p_mismatch" or scenario.group == "pp" or scenario.second
    layout = None if p2p else Layout(tp=4, dp=2, pp=1, ep=2)
    layout = layout or Layout(tp=2, dp=2, pp=2)
    if scenario.lost_host:  # a job of more than one 8-rank host
        layout = Layout(tp=2, dp=4, pp=2)
    ran = 0
    for timing in (True, False):
        for wrapped in (True, False):
            outcome, _ = SWEEP.run_case(scenario, layout, timing, wrapped, "pickle", tmp_path)
            if outcome is None:
                continue
            ran += 1
            assert outcome.ok, f"timing={timing} wrapped={wrapped}: {outcome.why}"
    assert ran


def test_a_hang_inside_a_collective_is_a_finding_and_exits_1(tmp_path: Path) -> None:
    fault = Fault("stuck_collective", rank=3, group="tp", step=1)
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=3, fault=fault, batch_p2p=True))
    write_job(job, tmp_path)
    code, out = run(str(tmp_path), "--format", "json")
    root = json.loads(out)["root_cause"]
    assert code == 1 and root["kind"] == "stuck_collective"
    assert root["culprit_ranks"] == [2, 3] and root["collective_seq_id"] == 9
    assert root["evidence"]["confirmed"] is True
    assert root["evidence"]["in_flight_ms"] >= root["evidence"]["timeout_ms"]


def test_a_healthy_snapshot_with_work_in_flight_exits_0(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=3, snapshot=0.5, batch_p2p=True))
    write_job(job, tmp_path)
    trace = load_trace(tmp_path, jobs=1)
    assert (trace.entries["state"] == "started").any(), "the snapshot caught work in flight"
    code, out = run(str(tmp_path), "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    assert any("snapshot of a live job" in n for n in report["notes"])


def test_a_buffer_that_starts_inside_a_coalesced_block_is_no_evidence(tmp_path: Path) -> None:
    # 1024-rank benchmark's shape at small scale: buffers wrap at different points per rank.
    fault = Fault("missing_ranks", rank=13, group="tp", step=1)
    job = simulate(spec_for_entries(Layout(tp=4, dp=4, pp=2), 61, fault=fault, extras=True))
    cut = [
        r
        for r in job.dumps
        if job.dumps[r]["entries"]
        and job.dumps[r]["entries"][0]["profiling_name"] in ("nccl:all_reduce", "nccl:coalesced")
        and job.dumps[r]["entries"][0]["process_group"][1] == "mesh_dp"
    ]
    assert cut, "some buffer starts inside a coalesced dp block"
    write_job(job, tmp_path)
    analysis = analyze(load_trace(tmp_path, jobs=1))
    kinds = {f.kind for f in analysis.findings}
    assert not kinds & {"type_mismatch", "size_mismatch", "dtype_mismatch"}
    assert analysis.root_cause is not None and analysis.root_cause.culprit_ranks == [13]


# --- the report never contradicts itself ------------------------------------------------------


@pytest.fixture(scope="module")
def tp_fault_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tp_fault")
    fault = Fault("missing_ranks", rank=5, group="tp", step=1)
    write_job(simulate(JobSpec(Layout(tp=4, dp=2, pp=2), steps=3, fault=fault)), out)
    return out


def test_selected_ranks_without_the_culprit_keep_the_root_cause_and_exit_1(
    tp_fault_dir: Path,
) -> None:
    code, out = run(str(tp_fault_dir), "--format", "json", "--selected-ranks", "8-11")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert report["root_cause"]["culprit_ranks"] == [5]
    assert report["selection"] == {
        "ranks": [8, 9, 10, 11],
        "groups": None,
        "root_cause_outside": True,
    }
    for f in report["findings"]:
        involved = set(f["culprit_ranks"]) | set(f["waiting_ranks"]) | set(f["expected_ranks"])
        assert involved & {8, 9, 10, 11}
    code, text = run(str(tp_fault_dir), "--selected-ranks", "8-11")
    assert code == 1 and "root cause lies outside the selection" in text
    assert "ROOT CAUSE: missing_ranks in mesh_tp" in text


def test_pg_filters_never_turn_a_hung_job_into_ok(tp_fault_dir: Path) -> None:
    code, out = run(str(tp_fault_dir), "--format", "json", "--pg-filters", "mesh_pp")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["root_cause"]["pg_desc"] == "mesh_tp"
    assert report["selection"]["root_cause_outside"] is True


def test_consequences_are_marked_and_listed_after_the_causes(tp_fault_dir: Path) -> None:
    report = json.loads(run(str(tp_fault_dir), "--format", "json")[1])
    flags = [f["secondary"] for f in report["findings"]]
    assert flags[0] is False and flags == sorted(flags)
    assert any(flags), "ranks blocked behind rank 5 give consequence findings"
    for f in report["findings"]:
        if not f["evidence"]["undecidable"]:
            assert not set(f["culprit_ranks"]) & set(f["waiting_ranks"]), f


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return load_schema()


@pytest.mark.parametrize(
    "fault",
    [
        Fault("missing_ranks", rank=37, group="dp", step=1),
        Fault("missing_dump", rank=37, group="tp", step=1),
        Fault("type_mismatch", rank=37, group="tp", step=1),
        Fault("size_mismatch", rank=37, group="dp", step=1, index=1),
        Fault("dtype_mismatch", rank=37, group="tp", step=1),
        Fault("state_mismatch", rank=37, group="tp", step=1),
        Fault("p2p_mismatch", rank=1, group="pp", step=1),
        Fault("order_cycle", rank=37, group="tp", step=1),
        Fault("stuck_collective", rank=37, group="dp", step=1),
        Fault("type_mismatch", rank=37, group="dp", step=1, index=1, drop_part=True),
    ],
    ids=lambda f: f"{f.kind}-{f.group}{'-drop' if f.drop_part else ''}",
)
def test_every_output_path_works_on_a_large_faulted_job(
    tmp_path: Path, fault: Fault, schema: dict[str, Any]
) -> None:
    layout = Layout(tp=4, dp=8, pp=2, ep=2)
    job = simulate(spec_for_entries(layout, 80, fault=fault, batch_p2p=True, extras=True))
    write_job(job, tmp_path)
    code, text = run(str(tmp_path))
    assert code == 1 and "ROOT CAUSE:" in text
    code, out = run(str(tmp_path), "--format", "json")
    report = json.loads(out)
    jsonschema.validate(report, schema)
    assert code == 1 and report["root_cause"]["kind"] == job.expected["kind"]  # type: ignore[index]
    assert report["root_cause"]["culprit_ranks"] == job.expected["culprit_ranks"]  # type: ignore[index]
    code, raw = run(str(tmp_path), "-j", "--selected-ranks", "36-39")
    assert code == 0 and {e["rank"] for e in json.loads(raw)} <= {36, 37, 38, 39}
    code, table = run(
        str(tmp_path), "-j", "--format", "table", "--pg-filters", "0", "--selected-ranks", "32-47"
    )
    assert code == 0 and table.strip()  # 16 rank columns: the most a table shows


def test_text_report_of_a_1024_rank_dp_fault_has_no_internal_error(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=777, group="dp", step=0)
    job = simulate(JobSpec(Layout(tp=8, dp=128), steps=2, layers=1, microbatches=1, fault=fault))
    write_job(job, tmp_path)
    code, text = run(str(tmp_path))
    assert code == 1 and "internal error" not in text and "ROOT CAUSE" in text


def test_dumps_of_two_jobs_in_one_folder_are_refused_with_exit_2(tmp_path: Path) -> None:
    small = simulate(JobSpec(Layout(tp=2, dp=2), steps=1, seed=1))
    large = simulate(JobSpec(Layout(tp=2, dp=4), steps=1, seed=2))
    write_job(small, tmp_path)
    for rank in range(4, 8):
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(large.dumps[rank]))
    result = CliRunner().invoke(cli, [str(tmp_path)])
    assert result.exit_code == 2
    assert "more than one job" in result.stderr and "pg 0" in result.stderr


def test_thousands_of_members_without_dumps_nobody_waits_for_are_unseen_not_causes(
    tmp_path: Path,
) -> None:
    """Two healthy dumps of a 5000-rank job: nobody waits, so the 4998 ranks without a dump
    are no cause, and healthy cannot be told (exit 4)."""
    for rank in range(2):
        write_pickle(tmp_path / f"nccl_trace_rank_{rank}", nccl_dump(rank, 5000))
    result = CliRunner().invoke(cli, [str(tmp_path), "--format", "json"])
    report = json.loads(result.stdout)
    assert (result.exit_code, report["verdict"], report["findings"]) == (4, "unknown", [])
    assert report["unseen"]["no_file"] == list(range(2, 5000))
    assert len(result.stdout) < 1_000_000  # members x members would be hundreds of MB


# --- a rank between two parts of a coalescing block --------------------------------------------

MID_BLOCK = Fault("missing_ranks", rank=37, group="dp", step=1, index=1, mid_block=True)


def _block_parts(dump: dict[str, Any], pg_name: str, seq: int) -> list[str]:
    return [
        e["profiling_name"]
        for e in dump["entries"]
        if e["process_group"][0] == pg_name and e["collective_seq_id"] == seq and not e["is_p2p"]
    ]


def _place(finding: dict[str, Any]) -> tuple[str, int | None]:
    """A finding's (group, collective seq), as a report or the generator's truth has it."""
    return finding["pg_name"], finding["collective_seq_id"]


def test_a_rank_stalled_inside_a_block_records_parts_but_no_closer_and_no_enqueue() -> None:
    job = simulate(JobSpec(Layout(tp=4, dp=8, pp=2, ep=2), steps=3, fault=MID_BLOCK))
    assert job.expected is not None
    pg, seq = job.expected["pg_name"], job.expected["collective_seq_id"]
    mine = _block_parts(job.dumps[37], pg, seq)
    peer = _block_parts(job.dumps[33], pg, seq)
    assert peer[-1].endswith("coalesced") and 2 <= len(mine) < len(peer)
    assert mine == peer[: len(mine)]  # the same parts, cut before the end
    pg_id = next(e["pg_id"] for e in job.dumps[37]["entries"] if e["process_group"][0] == pg)
    assert job.dumps[37]["pg_status"][str(pg_id)]["last_enqueued_collective"] == seq - 1


@pytest.mark.parametrize("timing", [True, False], ids=["timing", "no-timing"])
def test_a_rank_stalled_inside_a_block_is_missing_there_not_a_mismatch(
    tmp_path: Path, timing: bool
) -> None:
    spec = JobSpec(Layout(tp=4, dp=8, pp=2, ep=2), steps=3, fault=MID_BLOCK, enable_timing=timing)
    job = simulate(spec)
    write_job(job, tmp_path)
    code, out = run(str(tmp_path), "--format", "json")
    root = json.loads(out)["root_cause"]
    assert job.expected is not None and code == 1
    want = job.expected
    assert (root["kind"], root["culprit_ranks"]) == ("missing_ranks", [37])
    assert _place(root) == _place(want)
    parts = len(_block_parts(job.dumps[37], want["pg_name"], want["collective_seq_id"]))
    assert root["evidence"]["reason"] == "not_launched" and root["evidence"]["parts"] == {
        "37": parts
    }
    assert "stopped before the block's end" in root["detail"]


def test_a_two_member_block_begun_and_never_ended_needs_no_history(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=1, group="dp", step=0, index=1, mid_block=True)
    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=2, fault=fault))
    write_job(job, tmp_path)
    analysis = analyze(load_trace(tmp_path))
    root = analysis.root_cause
    assert root is not None and job.expected is not None
    assert (root.culprit_ranks, root.undecidable) == ([1], False)
    assert root.collective_seq_id == job.expected["collective_seq_id"]


def test_a_snapshot_taken_between_two_parts_of_a_block_is_healthy(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=4, dp=8, pp=2, ep=2), steps=2))
    me = job.simulator.ranks[37]
    # A part followed by another part: a dump right after it cuts the block in two.
    i = next(i for i in range(len(me.part) - 1) if me.part[i] and me.part[i + 1])
    dumps = job.snapshot_at(me.times[3 * i])
    (tmp_path / "job").mkdir()
    for rank in dumps:
        (tmp_path / "job" / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(dumps.peek(rank)))
    cut = dumps.peek(37)["entries"][-1]
    assert cut["state"] == "scheduled" and not cut["profiling_name"].endswith("coalesced")
    code, out = run(str(tmp_path / "job"), "--format", "json")
    report = json.loads(out)
    assert (code, report["findings"]) == (0, [])


# --- a rank that stops before a pipeline send or receive ---------------------------------------


def _stopped_before_p2p(tmp_path: Path, index: int) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """Rank 5 (stage 1 of 4, tensor-parallel peer of rank 4) stops before its `index`-th
    pipeline op of step 1: (expected, exit status, JSON report)."""
    fault = Fault("missing_ranks", rank=5, group="pp", step=1, index=index)
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=4), steps=2, fault=fault))
    write_job(job, tmp_path)
    code, out = run(str(tmp_path), "--format", "json")
    assert job.expected is not None
    return job.expected, code, json.loads(out)


@pytest.mark.parametrize("index", [0, 1], ids=["before-recv", "before-send"])
def test_a_rank_stopped_before_a_pipeline_op_is_blamed_there_not_at_its_peers_all_reduce(
    tmp_path: Path, index: int
) -> None:
    # Its tensor-parallel peer made the same calls, then the p2p op, then waits in the next
    # all_reduce for it; the pipeline neighbour waits for the p2p op itself.
    want, code, report = _stopped_before_p2p(tmp_path, index)
    root = report["root_cause"]
    assert code == 1 and want["op"] == ("recv" if index == 0 else "send")
    assert (root["kind"], root["culprit_ranks"], root["pg_desc"]) == (
        "missing_ranks",
        [5],
        "mesh_pp",
    )
    assert (root["pg_name"], root["p2p_seq_id"], root["op"]) == (
        want["pg_name"],
        want["p2p_seq_id"],
        want["op"],
    )
    peer_wait = [
        f for f in report["findings"] if f["pg_desc"] == "mesh_tp" and 5 in f["culprit_ranks"]
    ]
    assert peer_wait and all(f["secondary"] for f in peer_wait)
    assert not any(4 in f["culprit_ranks"] for f in peer_wait)  # the peer that waits is no culprit


def test_the_text_report_shows_the_receiver_at_its_own_recv_and_the_send_never_enqueued(
    tmp_path: Path,
) -> None:
    _want, _code, _report = _stopped_before_p2p(tmp_path, 1)
    code, out = run(str(tmp_path))
    assert code == 1
    assert "ROOT CAUSE: missing_ranks in mesh_pp" in out
    assert "it never enqueued the send" in out
    assert "rank 9 (waiting) at recv mesh_pp" in out


def _blamed(
    tmp_path: Path, layout: Layout, fault: Fault, buffer_size: int = 2000, window: int = 2
) -> tuple[dict[str, Any], dict[str, Any], dict]:
    """(expected, root cause, JSON report) of a two-step job with extras and batched p2p,
    once its exit status is 1 and its root cause names the faulted rank alone, as the
    fault's kind."""
    spec = JobSpec(
        layout,
        steps=2,
        fault=fault,
        batch_p2p=True,
        extras=True,
        buffer_size=buffer_size,
        window=window,
    )
    job = simulate(spec)
    write_job(job, tmp_path)
    code, out = run(str(tmp_path), "--format", "json")
    assert job.expected is not None
    report = json.loads(out)
    root = report["root_cause"]
    assert code == 1 and (root["kind"], root["culprit_ranks"]) == (fault.kind, [fault.rank])
    return job.expected, root, report


def test_a_rank_awaited_in_several_groups_is_named_alone_in_a_two_member_tie(
    tmp_path: Path,
) -> None:
    # Rank 0 stops at the start of step 1: its tp peer waits in the first all_reduce, and
    # no earlier step boundary is in its history; the pipeline peers waiting for it too rule
    # out an extra call by the peer. One replica, and CPUs that run no work ahead of their
    # GPU: no other tp group issued that all_reduce (the later stages wait for stage 0's
    # activations first) to tell it instead.
    fault = Fault("missing_ranks", rank=0, group="tp", step=1, index=0)
    want, root, _ = _blamed(tmp_path, Layout(tp=2, dp=1, pp=4), fault, window=1)
    assert root["evidence"]["reason"] == "awaited_elsewhere" and not root["evidence"]["undecidable"]
    assert _place(root) == _place(want)
    assert "ranks also wait for it in" in root["detail"]


def test_a_peer_blocked_before_the_collective_still_shows_what_came_first(
    tmp_path: Path,
) -> None:
    # Rank 1 stops before a data-parallel broadcast; its twin rank 0 waits in it, having
    # issued the next world all_reduce behind it, where ranks 2-7 wait: no deadlock.
    fault = Fault("missing_ranks", rank=1, group="dp", step=1, index=4)
    want, root, report = _blamed(tmp_path, Layout(tp=1, dp=2, pp=4), fault)
    assert _place(root) == _place(want)
    assert all(f["secondary"] for f in report["findings"][1:])


def test_an_op_changed_at_a_call_site_that_serves_every_bucket_is_the_changers_fault(
    tmp_path: Path,
) -> None:
    # The call site issues one all_gather per bucket, each of its own size: only the op,
    # the column the two members disagree on, tells which of them changed. One dp group: no
    # sibling group to tell it instead.
    fault = Fault("type_mismatch", rank=0, group="dp", step=1, index=3)
    want, root, _ = _blamed(tmp_path, Layout(tp=1, dp=2, pp=1), fault)
    assert root["collective_seq_id"] == want["collective_seq_id"]
    assert root["evidence"]["reason"] == "history_changed"


def _swapper_alone_named(
    tmp_path: Path, layout: Layout, rank: int, group: str, index: int, buffer_size: int = 2000
) -> None:
    """The rank issues its group's op `index` of step 1 after the next op of another group:
    the deadlock names it alone, at the collective it issued first."""
    fault = Fault("order_cycle", rank=rank, group=group, step=1, index=index)
    want, root, _ = _blamed(tmp_path, layout, fault, buffer_size)
    assert _place(root) == _place(want)


@pytest.mark.parametrize("rank", [0, 2])
def test_a_pair_that_swapped_two_collectives_first_thing_in_a_step_is_told_apart_by_its_twins(
    tmp_path: Path, rank: int
) -> None:
    # The rank issues the step's closing world all_reduce before its first tp all_reduce; its
    # tp peer waits in that all_reduce. Each of the pair issued one first, and the step into
    # either never happened before (one earlier step, begun at the tp op): only the ranks in
    # the same role elsewhere (another tp pair at the same stage) show which one swapped.
    _swapper_alone_named(tmp_path, Layout(tp=2, dp=2, pp=4), rank, "tp", 0)


def test_twins_of_a_swapped_rank_are_found_past_the_nearest_ranks_of_another_stage(
    tmp_path: Path,
) -> None:
    # Rank 4 opens pipeline stage 1: its 3 nearest ranks outside the tie are in stage 0. Its
    # ring buffer (39 entries) lost its previous step's start, so its own history cannot tell.
    _swapper_alone_named(tmp_path, Layout(tp=2, dp=2, pp=4), 4, "tp", 0, buffer_size=39)


def test_a_swap_after_a_call_site_that_issues_several_ops_is_told_by_the_op(
    tmp_path: Path,
) -> None:
    # Rank 6 issues the world all_reduce right after a bucket's all_gather instead of the
    # broadcasts that follow it from the same call site; it has no twin (tp=1, the dp pair
    # is the whole stage). Only the op shows that this step is new to it.
    _swapper_alone_named(tmp_path, Layout(tp=1, dp=2, pp=4), 6, "dp", 4)


# --- rooted and variable-size records, read per backend (docs/nccl-records.md) ---------------

UNDEFINED = "UNKNOWN_SCALAR"  # dtype of the undefined tensor a non-root hands to collective()


def _record(name: str, ins: list[Any], outs: list[Any], **fields: Any) -> dict[str, Any]:
    """Sizes and dtypes of one entry; a `[0]` shape is an undefined tensor."""
    dtype = [UNDEFINED if s == [0] else "Float" for s in ins]
    out_dtype = [UNDEFINED if s == [0] else "Float" for s in outs]
    return {
        "profiling_name": name,
        "input_sizes": ins,
        "input_dtypes": dtype,
        "output_sizes": outs,
        "output_dtypes": out_dtype,
        **fields,
    }


def _nccl_scatter(rank: int, root: int, world: int, chunk: int = 4) -> dict[str, Any]:
    # ProcessGroupNCCL::scatter: collective(outputs, inputs): in = the received chunk,
    # out = the root's list, one undefined tensor elsewhere.
    outs = [[chunk]] * world if rank == root else [[0]]
    return _record("nccl:scatter", [[chunk]], outs)


def _gloo_scatter(rank: int, root: int, world: int, chunk: int = 4) -> dict[str, Any]:
    # AsyncScatterWork: inputs = the root's list stacked into one shape, [] elsewhere.
    ins = [[world, chunk]] if rank == root else []
    return _record("gloo:scatter", ins, [[chunk]])


def _analyze_records(tmp_path: Path, world: int, records: Any) -> Any:
    """`records(rank)`: that rank's entries' fields, numbered seq 1, 2, ... in order."""
    for rank in range(world):
        entries = [nccl_entry(i, i + 1, **fields) for i, fields in enumerate(records(rank))]
        write_pickle(tmp_path / f"nccl_trace_rank_{rank}", nccl_dump(rank, world, entries))
    return analyze(load_trace(tmp_path, jobs=1))


def test_a_healthy_nccl_scatter_gives_no_finding(tmp_path: Path) -> None:
    report = _analyze_records(tmp_path, 4, lambda r: [_nccl_scatter(r, root=1, world=4)])
    assert report.findings == []


def test_a_non_root_that_scatters_a_different_size_on_nccl_is_named(tmp_path: Path) -> None:
    def records(rank: int) -> list[dict[str, Any]]:
        return [_nccl_scatter(rank, root=1, world=4, chunk=8 if rank == 2 else 4)]

    root = _analyze_records(tmp_path, 4, records).root_cause
    assert root is not None and root.kind == "size_mismatch"
    assert root.culprit_ranks == [2] and root.collective_seq_id == 1


def test_a_job_with_gloo_and_nccl_groups_reads_each_scatter_by_its_backend(
    tmp_path: Path,
) -> None:
    # A CPU side group on gloo (its root's list in the inputs) beside the NCCL default group
    # (its root's list in the outputs): both healthy.
    def records(rank: int) -> list[dict[str, Any]]:
        gloo = _gloo_scatter(rank, root=3, world=4)
        gloo.update(process_group=("1", "cpu"), pg_id=1, collective_seq_id=1)
        return [_nccl_scatter(rank, root=0, world=4), gloo]

    assert _analyze_records(tmp_path, 4, records).findings == []


def test_a_scatter_on_a_backend_of_unverified_layout_compares_neither_side(
    tmp_path: Path,
) -> None:
    # xccl's scatter layout was not checked against its source: the root's list could be on
    # either side, so a root that differs from its peers there is no evidence.
    def records(rank: int) -> list[dict[str, Any]]:
        entry = _nccl_scatter(rank, root=2, world=4)
        return [{**entry, "profiling_name": "xccl:scatter"}]

    assert _analyze_records(tmp_path, 4, records).findings == []


def test_an_nccl_all_gather_into_tensor_that_does_not_fit_the_group_size_is_named(
    tmp_path: Path,
) -> None:
    # all_gather_into_tensor records `nccl:_all_gather_base` (ProcessGroupNCCL::_allgather_base):
    # output numel = input numel x 2 here. Two members that differ are an even split; the
    # group size tells which one is wrong.
    def records(rank: int) -> list[dict[str, Any]]:
        return [_record("nccl:_all_gather_base", [[4]], [[12 if rank == 1 else 8]])]

    report = _analyze_records(tmp_path, 2, records)
    numel = [f for f in report.findings if f.reason == "numel"]
    assert [(f.kind, f.culprit_ranks) for f in numel] == [("size_mismatch", [1])]
