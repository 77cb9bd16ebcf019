"""The heuristics engine on synthetic NCCL jobs: culprit, group, seq id, kind and exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from frtrace.analysis.analyze import Analysis, analyze
from frtrace.analysis.findings import Finding, Kind, Reason
from frtrace.api import to_json
from frtrace.cli import cli
from frtrace.report.json_report import load_schema
from frtrace.report.wording import chain_lines
from frtrace.synth import Fault, JobSpec, Layout, SyntheticJob, simulate, write_job
from frtrace.tables.load import load_trace

LAYOUTS = {
    "tp2-dp2-pp1": Layout(tp=2, dp=2, pp=1),
    "tp4-dp1-pp2": Layout(tp=4, dp=1, pp=2),
    "tp2-dp1-pp3": Layout(tp=2, dp=1, pp=3),
    "tp2-dp2-pp4": Layout(tp=2, dp=2, pp=4),
    "tp1-dp4-pp1": Layout(tp=1, dp=4, pp=1),
}


def run_job(
    tmp_path: Path,
    layout: Layout,
    fault: Fault | None = None,
    *,
    fmt: str = "pickle",
    host_names: bool = False,
    **spec: Any,
) -> tuple[SyntheticJob, Analysis]:
    """Simulate, write the dumps as a job would, load them back and analyze."""
    spec.setdefault("steps", (fault.step if fault else 1) + 2)
    job = simulate(JobSpec(layout, fault=fault, **spec))
    write_job(job, tmp_path, fmt=fmt, host_names=host_names)
    return job, analyze(load_trace(tmp_path))


def assert_blames_expected(job: SyntheticJob, analysis: Analysis) -> None:
    root = analysis.root_cause
    expected = job.expected
    assert expected is not None and root is not None
    assert (root.kind, root.culprit_ranks) == (expected["kind"], expected["culprit_ranks"])
    assert root.pg_name == expected["pg_name"]
    assert root.collective_seq_id == expected["collective_seq_id"]
    assert root.p2p_seq_id == expected["p2p_seq_id"]


@pytest.mark.parametrize("name", LAYOUTS)
def test_healthy_jobs_of_every_layout_have_no_findings(tmp_path: Path, name: str) -> None:
    _job, analysis = run_job(tmp_path, LAYOUTS[name])
    assert analysis.ok and analysis.root_cause is None


@pytest.mark.parametrize("name", ["tp2-dp2-pp4", "tp2-dp1-pp3"])
def test_small_ring_buffers_wrapped_at_different_points_stay_healthy(
    tmp_path: Path, name: str
) -> None:
    job, analysis = run_job(tmp_path, LAYOUTS[name], steps=6, buffer_size=37)
    first_records = {d["entries"][0]["record_id"] for d in job.dumps.values()}
    assert len(first_records) > 1  # the ring wrapped at different points
    assert analysis.ok


def test_wrapped_buffers_without_states_or_counters_are_judged_only_where_all_members_hold(
    tmp_path: Path,
) -> None:
    """No state moves, no timing, no pg_status (as in gloo's dumps: fixtures/cascade_4rank):
    the ring buffers' window alone keeps a collective that some members no longer hold from
    reading as issued by them alone."""
    job = simulate(JobSpec(LAYOUTS["tp2-dp2-pp4"], steps=6, buffer_size=37, enable_timing=False))
    for dump in job.dumps.values():
        dump.pop("pg_status", None)
        for entry in dump["entries"]:
            entry["state"] = "scheduled"
    write_job(job, tmp_path)
    first_records = {d["entries"][0]["record_id"] for d in job.dumps.values()}
    assert len(first_records) > 1  # the ring wrapped at different points
    assert analyze(load_trace(tmp_path)).findings == []


def test_only_active_dumps_of_a_healthy_job_are_healthy(tmp_path: Path) -> None:
    _job, analysis = run_job(tmp_path, LAYOUTS["tp2-dp2-pp4"], only_active=True)
    assert analysis.ok


FAULTS = [
    # kind, layout, culprit rank, group
    ("missing_ranks", "tp4-dp1-pp2", 5, "tp"),
    ("missing_ranks", "tp1-dp4-pp1", 2, "dp"),
    ("missing_ranks", "tp2-dp2-pp4", 9, "pp"),
    ("missing_ranks", "tp2-dp2-pp1", 3, "default"),
    ("type_mismatch", "tp4-dp1-pp2", 6, "tp"),
    ("size_mismatch", "tp1-dp4-pp1", 1, "dp"),
    ("size_mismatch", "tp2-dp2-pp1", 0, "dp"),
    ("dtype_mismatch", "tp2-dp2-pp1", 2, "default"),
    ("state_mismatch", "tp4-dp1-pp2", 3, "tp"),
    ("state_mismatch", "tp2-dp2-pp4", 13, "pp"),
    ("p2p_mismatch", "tp2-dp1-pp3", 0, "pp"),
    ("p2p_mismatch", "tp2-dp2-pp4", 10, "pp"),  # a middle stage: its op 1 is a send
    ("order_cycle", "tp4-dp1-pp2", 7, "tp"),
    ("order_cycle", "tp2-dp2-pp1", 1, "dp"),
    ("order_cycle", "tp2-dp2-pp4", 12, "default"),
    ("missing_dump", "tp4-dp1-pp2", 2, "tp"),
]


@pytest.mark.parametrize(("kind", "layout", "rank", "group"), FAULTS)
def test_each_fault_kind_is_blamed_on_the_rank_that_caused_it(
    tmp_path: Path, kind: str, layout: str, rank: int, group: str
) -> None:
    index = 1 if (kind, rank) == ("p2p_mismatch", 10) else 0
    fault = Fault(kind, rank=rank, group=group, step=2, index=index)
    job, analysis = run_job(tmp_path, LAYOUTS[layout], fault)
    assert_blames_expected(job, analysis)


def test_missing_dump_on_a_pipeline_stage_is_blamed_on_the_rank_without_a_dump(
    tmp_path: Path,
) -> None:
    # Which op a rank without a dump stopped before is unknowable; who and why is not.
    _job, analysis = run_job(tmp_path, LAYOUTS["tp2-dp2-pp4"], Fault("missing_dump", 9, "pp", 2))
    root = analysis.root_cause
    assert root is not None and (root.kind, root.culprit_ranks) == ("missing_dump", [9])
    assert 9 not in analysis.ctx.dumped and root.waiting_ranks


def test_cascading_hang_in_64_ranks_blames_the_tp_rank_not_the_waiters(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=13, group="tp", step=2)
    job, analysis = run_job(tmp_path, Layout(tp=8, dp=4, pp=2), fault)
    assert_blames_expected(job, analysis)
    root = analysis.root_cause
    assert root is not None and root.pg_desc == "mesh_tp"
    chain = chain_lines(root)
    assert len(chain) >= 2 and chain[-1].startswith("rank 13 never issued")
    waiters_elsewhere = [f for f in analysis.findings if f.secondary]
    assert waiters_elsewhere and all(13 not in f.waiting_ranks for f in waiters_elsewhere)


def test_two_member_mismatch_with_history_names_the_rank_that_changed(tmp_path: Path) -> None:
    job, analysis = run_job(tmp_path, LAYOUTS["tp2-dp2-pp1"], Fault("size_mismatch", 1, "tp", 2))
    assert_blames_expected(job, analysis)
    assert analysis.root_cause is not None
    assert analysis.root_cause.undecidable is False


def test_two_member_mismatch_without_history_or_sibling_names_both_as_undecidable(
    tmp_path: Path,
) -> None:
    """One tp group of two, at its first step: no sibling group, no earlier call to compare."""
    job, analysis = run_job(tmp_path, Layout(tp=2, dp=1, pp=1), Fault("dtype_mismatch", 1, "tp", 0))
    root = analysis.root_cause
    assert root is not None and job.expected is not None
    assert root.culprit_ranks == [0, 1] == job.expected["culprit_ranks"]
    assert root.undecidable is True


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_two_member_mismatch_without_history_is_told_by_the_sibling_group(
    tmp_path: Path, fmt: str
) -> None:
    """The other replica's tp group issued the same collective with the usual dtype."""
    fault = Fault("dtype_mismatch", 1, "tp", 0)
    job, analysis = run_job(tmp_path, LAYOUTS["tp2-dp2-pp1"], fault, fmt=fmt)
    root = analysis.root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.undecidable) == ("dtype_mismatch", [1], False)
    assert job.groups["2"] == ("mesh_tp", [2, 3])  # the other replica's tp group
    assert (root.reason, root.facts["siblings"]) == ("siblings_differ", ["2"])


def test_faults_are_found_in_json_dumps_with_host_names(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=6, group="tp", step=2)
    job, analysis = run_job(tmp_path, LAYOUTS["tp4-dp1-pp2"], fault, fmt="json", host_names=True)
    assert all(p.name.endswith(".json") and "-host_" in p.name for p in tmp_path.iterdir())
    assert_blames_expected(job, analysis)


def test_fault_after_the_ring_buffer_wrapped_is_still_found(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=2, group="dp", step=4)
    job, analysis = run_job(tmp_path, LAYOUTS["tp1-dp4-pp1"], fault, buffer_size=12)
    assert min(d["entries"][0]["record_id"] for d in job.dumps.values()) > 0
    assert_blames_expected(job, analysis)


def test_mismatch_cap_bounds_findings_per_group(tmp_path: Path) -> None:
    job = simulate(
        JobSpec(
            LAYOUTS["tp4-dp1-pp2"],
            steps=4,
            fault=Fault("missing_ranks", rank=5, group="tp", step=2),
        )
    )
    write_job(job, tmp_path)
    capped = analyze(load_trace(tmp_path), mismatch_cap=1)
    per_group: dict[str, int] = {}
    for f in capped.findings:
        if f.kind != "missing_ranks":
            continue
        per_group[f.pg_name] = per_group.get(f.pg_name, 0) + 1
    assert max(per_group.values()) == 1


def test_json_report_of_a_fault_validates_and_ok_is_false(tmp_path: Path) -> None:
    _job, analysis = run_job(tmp_path, LAYOUTS["tp4-dp1-pp2"], Fault("type_mismatch", 6, "tp", 2))
    report = json.loads(to_json(analysis))
    jsonschema.validate(report, load_schema())
    assert report["ok"] is False and report["root_cause"] == report["findings"][0]


def test_cli_exit_status_is_1_on_a_desync_and_0_on_a_healthy_job(tmp_path: Path) -> None:
    sick, healthy = tmp_path / "sick", tmp_path / "healthy"
    write_job(
        simulate(
            JobSpec(LAYOUTS["tp2-dp2-pp1"], steps=4, fault=Fault("missing_ranks", 3, "dp", 2))
        ),
        sick,
    )
    write_job(simulate(JobSpec(LAYOUTS["tp2-dp2-pp1"], steps=2)), healthy)
    runner = CliRunner()
    sick_run = runner.invoke(cli, [str(sick), "--format", "json"])
    healthy_run = runner.invoke(cli, [str(healthy)])
    assert sick_run.exit_code == 1 and json.loads(sick_run.stdout)["root_cause"]
    assert healthy_run.exit_code == 0 and "OK: no desync" in healthy_run.stdout


def tp_fault_report(folder: Path, *options: str) -> dict[str, Any]:
    """The JSON report of a job where rank 5 stops before its tp all_reduce."""
    fault = Fault("missing_ranks", 5, "tp", 2)
    write_job(simulate(JobSpec(LAYOUTS["tp4-dp1-pp2"], steps=4, fault=fault)), folder)
    run = CliRunner().invoke(cli, [str(folder), "--format", "json", *options])
    return json.loads(run.stdout)


def test_selected_ranks_narrow_the_report_to_findings_involving_them(tmp_path: Path) -> None:
    about_5 = tp_fault_report(tmp_path, "--selected-ranks", "5")
    assert about_5["findings"] and all(
        5 in f["culprit_ranks"] + f["waiting_ranks"] for f in about_5["findings"]
    )


def test_parallel_and_serial_parsing_give_identical_reports(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=9, group="tp", step=2)
    write_job(simulate(JobSpec(LAYOUTS["tp2-dp2-pp4"], steps=4, fault=fault)), tmp_path)
    serial = json.loads(to_json(analyze(load_trace(tmp_path, jobs=1))))
    parallel = json.loads(to_json(analyze(load_trace(tmp_path, jobs=2))))
    assert serial == parallel


def test_report_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=5, group="tp", step=2)
    write_job(simulate(JobSpec(Layout(tp=4, dp=2, pp=2), steps=4, fault=fault)), tmp_path)
    outputs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run(
            [sys.executable, "-m", "frtrace", str(tmp_path), "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
        )
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1] and json.loads(outputs[0])["root_cause"]


def test_only_active_dumps_still_name_a_rank_that_left_no_entries(tmp_path: Path) -> None:
    fault = Fault("missing_ranks", rank=5, group="tp", step=2)
    job, analysis = run_job(tmp_path, Layout(tp=4, dp=2, pp=2), fault, only_active=True)
    # Everything it did had completed; only coalesced parts stay, `scheduled` forever.
    left = job.dumps[5].get("entries") or []
    assert all(e["state"] == "scheduled" and not e["retired"] for e in left)
    assert {e["profiling_name"] for e in left} <= {"nccl:all_reduce"}
    assert_blames_expected(job, analysis)


def test_pg_filters_narrow_the_report_to_the_matching_groups(tmp_path: Path) -> None:
    tp_only = tp_fault_report(tmp_path, "--pg-filters", "mesh_tp")
    descs = {f["pg_desc"] for f in tp_only["findings"]}
    assert descs == {"mesh_tp"} and tp_only["root_cause"]["culprit_ranks"] == [5]


def test_ranks_waiting_in_several_places_for_one_rank_without_a_dump_are_one_cause(
    tmp_path: Path,
) -> None:
    fault = Fault("missing_dump", rank=5, group="tp", step=1)
    job, analysis = run_job(tmp_path, Layout(tp=2, dp=4, pp=2), fault, steps=3)
    assert_blames_expected(job, analysis)
    repeats = [f for f in analysis.findings[1:] if f.kind == "missing_dump"]
    assert len(repeats) >= 2, "ranks of the dp and pp groups wait for rank 5 too"
    assert all(f.secondary and f.culprit_ranks == [5] for f in repeats)
    assert [f for f in analysis.findings[1:] if not f.secondary] == []
    assert all(n.kind != "independent_causes" for n in analysis.notes)


def test_kinds_and_reasons_format_as_their_names() -> None:
    kind, reason = Kind.MISSING_RANKS, Reason.NEVER_ISSUED
    assert (str(kind), f"{kind}", f"{reason:>13}") == (
        "missing_ranks",
        "missing_ranks",
        " never_issued",
    )


def test_kinds_and_reasons_serialize_as_their_names_in_json() -> None:
    pair = {Kind.MISSING_RANKS: Reason.NEVER_ISSUED}
    assert json.dumps(pair) == '{"missing_ranks": "never_issued"}'


def _finding(kind: Any, reason: Any) -> Finding:
    """A finding built as an API user may, with plain names (untyped here, for mypy)."""
    return Finding(kind, "0", "default_pg", 3, None, "all_reduce", [1], [0], [0, 1], reason)


def test_a_finding_given_kind_and_reason_as_text_holds_the_members() -> None:
    f = _finding("size_mismatch", "numel")
    assert (f.kind, f.reason) == (Kind.SIZE_MISMATCH, Reason.NUMEL)
    assert (type(f.kind), type(f.reason)) == (Kind, Reason)


def test_a_finding_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown finding kind 'hang'"):
        _finding("hang", "numel")


def test_the_report_schema_lists_every_finding_kind_in_order() -> None:
    kinds = load_schema()["$defs"]["finding"]["properties"]["kind"]["enum"]
    assert kinds == [kind.value for kind in Kind]
