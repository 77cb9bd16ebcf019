"""Behaviour of the synthetic job generator: it must look and hang like a real NCCL job."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import pickle
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from frtrace.synth import (
    FAULT_KINDS,
    Fault,
    JobSpec,
    Layout,
    SyntheticJob,
    as_format,
    simulate,
    spec_for_entries,
    write_job,
)
from frtrace.synth import cli as synth_cli
from frtrace.synth.writer import ENTRY_KEYS
from frtrace.tables.load import load_trace

Entry = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent


def entries_of(job: SyntheticJob, rank: int, pg_name: str | None = None) -> list[Entry]:
    return [
        e for e in job.dumps[rank]["entries"] if pg_name is None or e["process_group"][0] == pg_name
    ]


def collective(job: SyntheticJob, rank: int, pg_name: str, seq: int) -> list[Entry]:
    return [
        e
        for e in entries_of(job, rank, pg_name)
        if not e["is_p2p"] and e["collective_seq_id"] == seq
    ]


def group_named(job: SyntheticJob, rank: int, desc: str) -> str:
    for name, info in job.dumps[rank]["pg_config"].items():
        if info["desc"] == desc:
            return str(name)
    raise AssertionError(f"rank {rank} is in no {desc} group")


def faulted(
    kind: str, layout: Layout, rank: int, group: str = "tp", steps: int = 3, **kw: Any
) -> SyntheticJob:
    return simulate(JobSpec(layout, steps=steps, fault=Fault(kind, rank, group=group, **kw)))


HEALTHY_LAYOUTS = [
    Layout(),
    Layout(tp=2),
    Layout(dp=3),
    Layout(pp=2),
    Layout(pp=3),
    Layout(tp=2, dp=2, pp=2),
    Layout(tp=2, pp=4),
    Layout(dp=2, pp=3),
]


# Layout and groups -------------------------------------------------------------------------


def test_ranks_are_numbered_in_megatron_order() -> None:
    lay = Layout(tp=4, dp=2, pp=3)
    assert lay.world == 24
    assert lay.coords(13) == (1, 1, 1)
    assert lay.rank_of(2, 0, 3) == 19


def test_groups_have_the_same_name_on_every_member_and_only_members_list_them() -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=1))
    assert job.groups["0"] == ("default_pg", list(range(8)))
    assert [job.groups[n][0] for n in ("1", "5", "9")] == ["mesh_tp", "mesh_dp", "mesh_pp"]
    for name, (desc, ranks) in job.groups.items():
        for rank in range(8):
            config = job.dumps[rank]["pg_config"]
            assert (name in config) == (rank in ranks)
            if name in config:
                assert config[name] == {"name": name, "desc": desc, "ranks": str(ranks)}


def test_pg_ids_count_the_groups_a_process_joined() -> None:
    job = simulate(JobSpec(Layout(tp=2, pp=2), steps=1))
    pg_ids = {e["process_group"][1]: e["pg_id"] for e in entries_of(job, 3)}
    assert pg_ids == {"mesh_tp": 1, "mesh_pp": 2, "default_pg": 0}
    assert set(job.dumps[3]["pg_status"]) == {"0", "1", "2"}


# Healthy jobs ------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", HEALTHY_LAYOUTS, ids=str)
def test_healthy_job_ends_with_every_entry_completed(layout: Layout) -> None:
    job = simulate(JobSpec(layout, steps=2))
    assert job.expected is None and not job.hung and job.omit_ranks == set()
    for rank in range(layout.world):
        entries = entries_of(job, rank)
        parts = [e for e, nxt in itertools.pairwise(entries) if _same_block(e, nxt)]
        rest = [e for e in entries if not any(e is p for p in parts)]
        assert {e["state"] for e in rest} == {"completed"}
        # Coalesced parts are recorded without events, as NCCL does: frozen forever.
        assert all(p["state"] == "scheduled" and not p["retired"] for p in parts)


def _same_block(e: dict, nxt: dict) -> bool:
    key = "p2p_seq_id" if e["is_p2p"] else "collective_seq_id"
    return e["process_group"] == nxt["process_group"] and e[key] == nxt[key]


@pytest.mark.parametrize("layout", HEALTHY_LAYOUTS, ids=str)
def test_members_of_a_group_issue_the_same_collectives_under_the_same_seq_ids(
    layout: Layout,
) -> None:
    job = simulate(JobSpec(layout, steps=2))
    for name, (_, ranks) in job.groups.items():
        views = [
            [
                (e["collective_seq_id"], e["profiling_name"], e["input_sizes"])
                for e in entries_of(job, r, name)
                if not e["is_p2p"]
            ]
            for r in ranks
        ]
        assert all(v == views[0] for v in views)


def test_pg_status_reports_the_last_collective_of_each_group() -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=2))
    status = job.dumps[0]["pg_status"]
    assert status["0"] == {
        "last_enqueued_collective": 2,
        "last_started_collective": 2,
        "last_completed_collective": 2,
    }
    assert status["1"]["last_completed_collective"] == 16  # 2 steps x 2 mb x 2 layers x fwd+bwd


def test_p2p_ops_pair_up_under_group_local_rank_names() -> None:
    job = simulate(JobSpec(Layout(tp=2, pp=2), steps=1, microbatches=1))
    sender, receiver = 1, 3  # tp rank 1 of stage 0 and of stage 1: local ranks 0 and 1
    sends = [e for e in entries_of(job, sender) if e["is_p2p"]]
    recvs = [e for e in entries_of(job, receiver) if e["is_p2p"]]
    assert [e["profiling_name"] for e in sends] == ["nccl:send 0->1", "nccl:recv 0<-1"]
    assert [e["profiling_name"] for e in recvs] == ["nccl:recv 1<-0", "nccl:send 1->0"]
    for send, recv in zip(sends, recvs, strict=True):
        assert send["input_sizes"] == recv["input_sizes"]
        assert send["p2p_seq_id"] == recv["p2p_seq_id"]


def test_p2p_ops_advance_p2p_seq_id_but_freeze_collective_seq_id() -> None:
    job = simulate(JobSpec(Layout(pp=3), steps=2))
    p2p = [e for e in entries_of(job, 1) if e["is_p2p"]]
    assert [e["p2p_seq_id"] for e in p2p] == list(range(1, len(p2p) + 1))
    assert {e["collective_seq_id"] for e in p2p} == {0}
    assert [e["op_id"] for e in p2p] == list(range(1, len(p2p) + 1))


def test_coalesced_buckets_share_one_seq_id_and_end_with_the_marker() -> None:
    job = simulate(JobSpec(Layout(dp=2), steps=1))
    dp = entries_of(job, 0, group_named(job, 0, "mesh_dp"))
    names = [e["profiling_name"] for e in dp]
    assert names == ["nccl:all_reduce"] * 3 + ["nccl:coalesced", "nccl:all_gather"]
    assert [e["collective_seq_id"] for e in dp] == [1, 1, 1, 1, 2]
    assert [e["op_id"] for e in dp] == [1, 2, 3, 4, 5]
    parts, closer = dp[:3], dp[3]
    assert {p["state"] for p in parts} == {"scheduled"}
    assert all(p["time_discovered_completed_ns"] is None and "duration_ms" not in p for p in parts)
    assert closer["state"] == "completed" and closer["retired"] and closer["input_sizes"] == []


def test_all_gather_output_holds_the_input_of_every_member() -> None:
    job = simulate(JobSpec(Layout(dp=4), steps=1))
    gather = next(e for e in entries_of(job, 0) if e["profiling_name"] == "nccl:all_gather")
    assert gather["output_sizes"][0][0] == 4 * gather["input_sizes"][0][0]


def test_times_are_ordered_and_realistic() -> None:
    job = simulate(JobSpec(Layout(tp=2, pp=2), steps=2))
    entries = entries_of(job, 2)
    created = [e["time_created_ns"] for e in entries]
    assert created == sorted(created) and 1.7e18 < created[0] < 1.8e18
    for e in entries:
        assert e["time_created_ns"] <= e["time_discovered_started_ns"]
        assert e["time_discovered_started_ns"] <= e["time_discovered_completed_ns"]
        assert e["duration_ms"] > 0


def test_without_timing_entries_carry_no_start_time_or_duration() -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1, enable_timing=False))
    for e in entries_of(job, 0):
        assert e["time_discovered_started_ns"] is None and "duration_ms" not in e
        assert e["time_discovered_completed_ns"] is not None


def test_frames_are_fresh_dicts_that_share_their_strings() -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1))
    first, second = entries_of(job, 0)[:2]
    assert first["frames"] == second["frames"] and first["frames"] is not second["frames"]
    assert first["frames"][0] is not second["frames"][0]
    assert first["frames"][0]["filename"] is second["frames"][0]["filename"]
    assert first["frames"][0]["name"] == "all_reduce"
    assert [f["name"] for f in first["frames"][-3:]] == ["train_step", "main", "<module>"]
    stacks = {tuple(f["line"] for f in e["frames"]) for r in range(2) for e in entries_of(job, r)}
    assert len(stacks) == 3  # forward tp, backward tp, loss: one stack per call site
    assert all(8 <= len(e["frames"]) <= 14 for e in entries_of(job, 0))


def test_without_stacks_frames_are_empty() -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1, with_stacks=False))
    assert all(e["frames"] == [] for e in entries_of(job, 0))


def test_same_seed_gives_identical_dumps() -> None:
    first = simulate(JobSpec(Layout(tp=2, pp=2), seed=3)).dumps[1]
    again = simulate(JobSpec(Layout(tp=2, pp=2), seed=3)).dumps[1]
    other = simulate(JobSpec(Layout(tp=2, pp=2), seed=4)).dumps[1]
    assert first == again and first != other


# Ring buffer --------------------------------------------------------------------------------


def test_ring_buffer_keeps_the_last_entries_with_consecutive_record_ids() -> None:
    full = simulate(JobSpec(Layout(tp=2, pp=2), steps=3))
    ring = simulate(JobSpec(Layout(tp=2, pp=2), steps=3, buffer_size=10))
    kept = entries_of(ring, 0)
    assert len(kept) == 10
    assert [e["record_id"] for e in kept] == list(
        range(kept[0]["record_id"], kept[0]["record_id"] + 10)
    )
    assert kept == entries_of(full, 0)[-10:]


def test_ring_wraps_at_different_records_on_different_pipeline_stages() -> None:
    spec = spec_for_entries(Layout(tp=2, pp=3), 50)
    assert spec.buffer_size == 50
    job = simulate(spec)
    first_ids = set()
    for rank in range(6):
        kept = entries_of(job, rank)
        assert len(kept) == 50 and kept[0]["record_id"] > 0
        first_ids.add(kept[0]["record_id"])
    assert len(first_ids) > 1


def test_only_active_dumps_keep_only_unfinished_entries() -> None:
    job = simulate(
        JobSpec(Layout(tp=4), steps=3, only_active=True, fault=Fault("missing_ranks", 1, step=1))
    )
    assert entries_of(job, 1) == []
    active = entries_of(job, 0)
    assert active and all(e["state"] != "completed" for e in active)


# Faults -------------------------------------------------------------------------------------


def test_a_hung_job_never_completes_a_collective_some_member_did_not_issue() -> None:
    job = faulted("missing_ranks", Layout(tp=2, dp=2, pp=2), 5, group="dp", step=1)
    assert job.hung
    for name, (_, ranks) in job.groups.items():
        issued = [
            {e["collective_seq_id"] for e in entries_of(job, r, name) if not e["is_p2p"]}
            for r in ranks
        ]
        for r in ranks:
            for e in entries_of(job, r, name):
                if e["state"] == "completed" and not e["is_p2p"]:
                    assert all(e["collective_seq_id"] in seqs for seqs in issued)


def test_missing_rank_stops_after_its_last_op_completes_while_peers_wait() -> None:
    job = faulted("missing_ranks", Layout(tp=4), 2, step=1, index=1)
    x = job.expected
    assert x is not None
    assert x["culprit_ranks"] == [2] and x["op"] == "all_reduce" and x["pg_desc"] == "mesh_tp"
    assert entries_of(job, 2)[-1]["state"] == "completed"
    assert collective(job, 2, x["pg_name"], x["collective_seq_id"]) == []
    for peer in (0, 1, 3):
        [entry] = collective(job, peer, x["pg_name"], x["collective_seq_id"])
        assert entry["state"] == "started"


def test_missing_dump_fault_leaves_out_the_culprits_file(tmp_path: Path) -> None:
    job = faulted("missing_dump", Layout(tp=4), 3, step=1)
    assert job.omit_ranks == {3} and job.expected is not None
    assert job.expected["kind"] == "missing_dump" and job.expected["culprit_ranks"] == [3]
    written = write_job(job, tmp_path)
    assert sorted(p.name for p in written) == [f"nccl_trace_rank_{r}" for r in range(3)]


@pytest.mark.parametrize(
    ("kind", "field", "original"),
    [
        ("type_mismatch", "profiling_name", "nccl:all_reduce"),
        ("size_mismatch", "input_sizes", [[4, 2048, 4096]]),
        ("dtype_mismatch", "input_dtypes", ["BFloat16"]),
    ],
)
def test_mismatched_collective_is_started_everywhere_and_never_completes(
    kind: str, field: str, original: Any
) -> None:
    job = faulted(kind, Layout(tp=4), 1, step=1, index=2)
    x = job.expected
    assert x is not None and x["kind"] == kind and x["culprit_ranks"] == [1]
    for rank in range(4):
        [entry] = collective(job, rank, x["pg_name"], x["collective_seq_id"])
        assert entry["state"] == "started"
        assert (entry[field] == original) == (rank != 1)


def test_type_mismatch_keeps_its_sizes_consistent_with_the_new_op() -> None:
    job = faulted("type_mismatch", Layout(tp=4), 1, step=1)
    x = job.expected
    assert x is not None
    [entry] = collective(job, 1, x["pg_name"], x["collective_seq_id"])
    assert entry["profiling_name"] == "nccl:all_gather"
    assert entry["output_sizes"][0][0] == 4 * entry["input_sizes"][0][0]


def test_mismatch_in_a_group_of_two_without_history_or_sibling_blames_both_members() -> None:
    job = faulted("size_mismatch", Layout(tp=2), 1, step=0)
    assert job.expected is not None and job.expected["culprit_ranks"] == [0, 1]


def test_mismatch_in_a_group_of_two_without_history_blames_the_rank_a_sibling_group_tells() -> None:
    # Stage 0's tp group issued its first all_reduce whole: what rank 3 was due to issue.
    job = faulted("size_mismatch", Layout(tp=2, pp=2), 3, step=0)
    assert job.expected is not None and job.expected["culprit_ranks"] == [3]


def test_mismatch_in_a_group_of_two_after_a_step_of_history_blames_the_culprit() -> None:
    job = faulted("size_mismatch", Layout(tp=2, pp=2), 3, step=1)
    assert job.expected is not None and job.expected["culprit_ranks"] == [3]


def test_state_mismatch_leaves_the_culprits_op_scheduled_while_peers_started_it() -> None:
    job = faulted("state_mismatch", Layout(tp=4, dp=2), 6, group="dp", step=1)
    x = job.expected
    assert x is not None and x["pg_desc"] == "mesh_dp" and x["culprit_ranks"] == [6]
    culprit = collective(job, 6, x["pg_name"], x["collective_seq_id"])
    peer = collective(job, 2, x["pg_name"], x["collective_seq_id"])
    assert {e["state"] for e in culprit} == {"scheduled"}
    # Only the closing entry moves; the parts stay `scheduled` on every rank.
    assert [e["state"] for e in peer] == ["scheduled"] * 3 + ["started"]
    assert len(culprit) == 4  # the whole coalesced group: 3 buckets and the marker


def test_p2p_mismatch_changes_the_send_but_not_its_earlier_sends_or_the_recv() -> None:
    job = faulted("p2p_mismatch", Layout(tp=2, pp=2), 1, group="pp", step=1)
    x = job.expected
    assert x is not None
    assert x["op"] == "send" and x["collective_seq_id"] is None and x["culprit_ranks"] == [1]
    sends = [e for e in entries_of(job, 1, x["pg_name"]) if e["profiling_name"] == "nccl:send 0->1"]
    bad = next(e for e in sends if e["p2p_seq_id"] == x["p2p_seq_id"])
    recv = next(e for e in entries_of(job, 3, x["pg_name"]) if e["p2p_seq_id"] == x["p2p_seq_id"])
    assert bad["state"] == recv["state"] == "started"
    assert recv["profiling_name"] == "nccl:recv 1<-0"
    assert bad["input_sizes"] != recv["input_sizes"] == sends[0]["input_sizes"]


def test_order_cycle_waits_in_another_group_while_peers_wait_for_the_culprit() -> None:
    job = faulted("order_cycle", Layout(tp=2, dp=2), 1, step=1, index=3)
    x = job.expected
    assert x is not None and x["pg_desc"] == "default_pg" and x["culprit_ranks"] == [1]
    [early] = collective(job, 1, x["pg_name"], x["collective_seq_id"])
    assert early["state"] == "started"
    tp_name = group_named(job, 1, "mesh_tp")
    stuck = next(e for e in entries_of(job, 0, tp_name) if e["state"] == "started")
    [skipped] = collective(job, 1, tp_name, stuck["collective_seq_id"])
    assert skipped["state"] == "scheduled"
    assert skipped["record_id"] == early["record_id"] + 1


def test_every_fault_kind_hangs_the_job_and_names_its_kind() -> None:
    lay = Layout(tp=2, dp=2, pp=2)
    for kind in FAULT_KINDS:
        job = faulted(kind, lay, 3, group="pp" if kind == "p2p_mismatch" else "tp", step=1)
        assert job.hung and job.expected is not None and job.expected["kind"] == kind
        assert len(job.dumps) == lay.world


@pytest.mark.parametrize(
    ("layout", "fault"),
    [
        (Layout(tp=2), Fault("p2p_mismatch", 0, group="pp")),
        (Layout(dp=2), Fault("missing_ranks", 0, group="tp")),
        (Layout(tp=2), Fault("missing_ranks", 5)),
        (Layout(tp=2), Fault("missing_ranks", 0, step=9)),
        (Layout(tp=2), Fault("missing_ranks", 0, index=99)),
        (Layout(pp=2), Fault("size_mismatch", 0, group="pp")),
        (Layout(pp=2), Fault("p2p_mismatch", 1, group="pp", index=0)),
        (Layout(tp=2, dp=2), Fault("order_cycle", 0, group="tp", partner="dp")),
    ],
)
def test_faults_a_layout_cannot_host_are_rejected(layout: Layout, fault: Fault) -> None:
    with pytest.raises(ValueError):
        simulate(JobSpec(layout, steps=3, fault=fault))


@pytest.mark.parametrize("depth", [1, 4, 16])
def test_stack_depth_cuts_or_pads_every_stack_keeping_both_ends(depth: int) -> None:
    default = entries_of(simulate(JobSpec(Layout(tp=2), steps=1)), 0)
    job = simulate(JobSpec(Layout(tp=2), steps=1, stack_depth=depth))
    entries = entries_of(job, 0)
    assert all(len(e["frames"]) == depth for e in entries)
    assert entries[0]["frames"][0] == default[0]["frames"][0]  # the collective's own frame
    if depth > len(default[0]["frames"]):
        assert entries[0]["frames"][-3:] == default[0]["frames"][-3:]  # the training loop
        assert entries[0]["frames"][-4]["name"] in ("_call_impl", "_wrapped_call_impl")
    for e, d in zip(entries, default, strict=True):  # only the stacks change
        assert {k: v for k, v in e.items() if k != "frames"} == {
            k: v for k, v in d.items() if k != "frames"
        }


def test_bad_arguments_are_rejected_with_value_errors() -> None:
    with pytest.raises(ValueError, match="kind"):
        Fault("segfault", 0)
    with pytest.raises(ValueError, match="tp"):
        Layout(tp=0)
    with pytest.raises(ValueError, match="window"):
        JobSpec(Layout(), window=0)
    with pytest.raises(ValueError, match="stack_depth"):
        JobSpec(Layout(), stack_depth=0)


def test_spec_for_entries_lets_the_ring_fill_before_the_fault_strikes() -> None:
    spec = spec_for_entries(Layout(tp=2, pp=2), 40, fault=Fault("missing_ranks", 2, step=0))
    assert spec.fault is not None and spec.fault.step > 0 and spec.steps > spec.fault.step
    job = simulate(spec)
    assert job.hung
    assert all(len(entries_of(job, r)) == 40 for r in range(4))


# Writing ------------------------------------------------------------------------------------


def test_pickle_files_round_trip_to_the_dumps(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1))
    paths = write_job(job, tmp_path)
    assert [p.name for p in paths] == ["nccl_trace_rank_0", "nccl_trace_rank_1"]
    loaded = pickle.loads(paths[1].read_bytes())
    assert loaded == job.dumps[1]
    assert isinstance(loaded["entries"][0]["process_group"], tuple)


def test_json_files_follow_torchs_json_conventions(tmp_path: Path) -> None:
    job = faulted("missing_ranks", Layout(tp=2, dp=2), 0, step=1)
    paths = write_job(job, tmp_path, fmt="json")
    assert paths[0].name == "nccl_trace_rank_0.json"
    dump = json.loads(paths[1].read_text())
    assert dump["nccl_comm_state"] == {}
    assert all(isinstance(v, str) for s in dump["pg_status"].values() for v in s.values())
    entries = dump["entries"]
    assert all("frames" not in e and isinstance(e["process_group"], list) for e in entries)
    scheduled = next(e for e in entries if e["state"] == "scheduled")
    assert scheduled["time_discovered_started_ns"] == 0
    assert scheduled["time_discovered_completed_ns"] == 0


def test_a_gloo_job_is_written_as_real_gloo_dumps_look(tmp_path: Path) -> None:
    """As in fixtures/README.md: no send/recv, every state scheduled, gloo names, no world."""
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=2, coalesce_dp=False))
    paths = write_job(job, tmp_path, backend="gloo")
    dump = pickle.loads(paths[0].read_bytes())
    entries = dump["entries"]
    assert dump["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[]"}}
    assert not any(e["is_p2p"] for e in entries)
    assert {e["state"] for e in entries} == {"scheduled"}
    assert all(e["profiling_name"].startswith("gloo:") for e in entries)
    assert [e["record_id"] for e in entries] == list(range(len(entries)))
    assert load_trace(tmp_path).backends == ["gloo"]


def test_a_gloo_job_cannot_hold_coalescing_blocks(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(dp=2), steps=1))  # dp buckets coalesced by default
    with pytest.raises(ValueError, match="no coalescing blocks"):
        write_job(job, tmp_path, backend="gloo")


def test_json_dumps_without_entries_leave_out_the_entries_key(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1, only_active=True))
    [path, _] = write_job(job, tmp_path, fmt="json")
    assert "entries" not in json.loads(path.read_text())


def test_host_names_and_host_dirs_place_files_per_host(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(dp=10), steps=1))
    paths = write_job(job, tmp_path, host_names=True, host_dirs=True, prefix="fr_")
    assert paths[9] == tmp_path / "node01-host" / "fr_node01-host_9"
    assert paths[0] == tmp_path / "node00-host" / "fr_node00-host_0"


def test_gzip_writes_compressed_files_with_a_gz_suffix(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1))
    [path, _] = write_job(job, tmp_path, compress=True, fmt="json")
    assert path.name == "nccl_trace_rank_0.json.gz"
    assert json.loads(gzip.decompress(path.read_bytes()))["version"] == "2.10"


def test_edits_to_a_dump_are_what_gets_written(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1))
    job.dumps[0]["version"] = "9.9"
    del job.dumps[1]
    [path] = write_job(job, tmp_path)
    assert pickle.loads(path.read_bytes())["version"] == "9.9"


def test_cli_writes_dumps_and_prints_the_expected_culprit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = synth_cli.main(
        [
            str(tmp_path),
            "--tp",
            "2",
            "--pp",
            "2",
            "--entries",
            "30",
            "--fault",
            "state_mismatch",
            "--fault-rank",
            "1",
            "--format",
            "json",
        ]
    )
    assert code == 0
    expected = json.loads(capsys.readouterr().out)
    assert expected["kind"] == "state_mismatch" and expected["culprit_ranks"] == [1]
    assert len(list(tmp_path.glob("nccl_trace_rank_*.json"))) == 4
    by_state: defaultdict[str, int] = defaultdict(int)
    for e in json.loads((tmp_path / "nccl_trace_rank_0.json").read_text())["entries"]:
        by_state[e["state"]] += 1
    assert by_state["completed"] > 0 and by_state["started"] == 1


def test_scripts_synth_py_runs_the_generator_from_a_clone(tmp_path: Path) -> None:
    script = REPO / "scripts" / "synth.py"
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "--tp", "2", "--entries", "10"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is None  # a healthy job: no fault to expect
    assert len(list(tmp_path.glob("nccl_trace_rank_*"))) == 2


def test_parallel_writers_produce_the_same_files(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2, pp=2), steps=1))
    serial = write_job(job, tmp_path / "serial")
    parallel = write_job(job, tmp_path / "parallel", workers=3)
    assert [p.name for p in serial] == [p.name for p in parallel]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(serial, parallel, strict=True))


def test_dumps_before_format_2_0_count_p2p_ops_in_the_one_seq_id() -> None:
    """torch's 1.x writer: a group's one counter, bumped by collectives and p2p ops alike."""
    dump = simulate(JobSpec(Layout(tp=2, pp=2), steps=2, batch_p2p=True)).dumps[0]
    old = as_format(dump, "1.4")
    keys = set(ENTRY_KEYS["1.4"])
    assert all(keys - {"duration_ms"} <= set(e) <= keys for e in old["entries"])
    assert [e["seq_id"] for e in old["entries"]] == [
        e["collective_seq_id"] + e["p2p_seq_id"] for e in dump["entries"]
    ]
    assert any(e["is_p2p"] for e in dump["entries"])
    pg_ids = {e["pg_id"] for e in dump["entries"]}
    assert set(old["pg_config"]) == pg_ids  # keyed by process-local pg_id, up to 1.4
    assert all(type(ranks) is list for ranks in old["pg_config"].values())


def test_each_older_format_has_the_top_level_keys_torch_wrote() -> None:
    dump = simulate(JobSpec(Layout(tp=2), steps=1)).dumps[0]
    tops = {v: sorted(as_format(dump, v)) for v in ("1.0", "1.5", "2.2", "2.3")}
    assert tops == {
        "1.0": ["entries", "version"],
        "1.5": ["entries", "pg_config", "version"],
        "2.2": ["entries", "pg_config", "version"],
        "2.3": ["entries", "pg_config", "pg_status", "version"],
    }
    assert as_format(dump, "2.2")["entries"][0]["timeout_ms"] == dump["entries"][0]["timeout_ms"]
    assert "timeout_ms" not in as_format(dump, "2.1")["entries"][0]


def test_older_formats_are_written_as_pickles_only(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2), steps=1))
    with pytest.raises(ValueError, match="pickle only"):
        write_job(job, tmp_path, fmt="json", format_version="2.2")
    (path, _) = write_job(job, tmp_path, format_version="1.5")
    assert pickle.loads(path.read_bytes())["version"] == "1.5"
