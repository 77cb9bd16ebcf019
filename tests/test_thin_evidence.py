"""Thin evidence: lost hosts, unreadable dumps, unstated world sizes, one dump of many.

Less evidence never gives a more confident answer: what the dumps cannot show is said, a job
that cannot be seen whole is never called healthy (exit 4), and an input problem is a cause
only when ranks wait for that rank and nothing else explains the wait.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frtrace.analysis.analyze import Analysis, analyze
from frtrace.synth import Fault, JobSpec, Layout, SyntheticJob, simulate, write_job
from frtrace.tables.load import load_trace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def frtrace_json(folder: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """Exit status, JSON report and stderr of `frtrace FOLDER --format json ARGS`."""
    out = subprocess.run(
        [sys.executable, "-m", "frtrace", str(folder), "--format", "json", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.returncode, json.loads(out.stdout) if out.stdout else {}, out.stderr


def copy_fixture(name: str, tmp_path: Path, keep: list[int] | None = None) -> Path:
    """A copy of a real fixture folder, with only the `keep` ranks' dumps."""
    job = tmp_path / name
    shutil.copytree(FIXTURES / name, job)
    if keep is not None:
        for path in job.iterdir():
            if int(path.name.rsplit("_", 1)[1].split(".")[0]) not in keep:
                path.unlink()
    return job


def cut(path: Path, size: int) -> None:
    """A dump cut short, as a process killed while writing it leaves it."""
    path.write_bytes(path.read_bytes()[:size])


# --- a lost host: eight ranks of one node left no dump ----------------------------------------


def lost_host_job(tmp_path: Path, fmt: str = "pickle") -> Path:
    """Rank 24 stops; the whole of its node (ranks 24-31) leaves no dump, as when a host dies."""
    job = simulate(JobSpec(Layout(tp=8, dp=4, pp=1), fault=Fault("missing_dump", 24), steps=3))
    job.omit_ranks |= set(range(24, 32))
    write_job(job, tmp_path, fmt=fmt, host_names=True)
    return tmp_path


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_a_lost_host_is_one_root_cause_naming_its_eight_ranks(tmp_path: Path, fmt: str) -> None:
    analysis = analyze(load_trace(lost_host_job(tmp_path, fmt)))
    root = analysis.root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks) == ("missing_dump", list(range(24, 32)))
    assert [f for f in analysis.findings[1:] if not f.secondary] == [], "one cause, not four"
    assert all(n.kind != "independent_causes" for n in analysis.notes)


def test_a_lost_host_report_says_the_ranks_left_no_dump_and_exits_1(tmp_path: Path) -> None:
    status, rep, _err = frtrace_json(lost_host_job(tmp_path))
    assert (status, rep["verdict"]) == (1, "findings")
    assert rep["root_cause"]["culprit_ranks"] == list(range(24, 32))
    assert "ranks 24-31 left no dump" in rep["root_cause"]["detail"]
    assert rep["unseen"]["no_file"] == list(range(24, 32))


# --- an unreadable dump beside a real fault ---------------------------------------------------


def test_an_unreadable_dump_is_never_a_cause_beside_a_real_size_mismatch(tmp_path: Path) -> None:
    fault = Fault("size_mismatch", 5, group="tp", step=1)
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), fault=fault, steps=3))
    paths = write_job(job, tmp_path)
    cut(paths[2], len(paths[2].read_bytes()) // 2)
    status, rep, err = frtrace_json(tmp_path)
    assert status == 1
    assert (rep["root_cause"]["kind"], rep["root_cause"]["culprit_ranks"]) == (
        "size_mismatch",
        [5],
    )
    assert all(2 not in f["culprit_ranks"] for f in rep["findings"])
    assert rep["unseen"]["unreadable"] == [2]
    assert err.count("skipped") == 1


def test_a_dump_cut_to_500_bytes_is_blamed_only_where_ranks_wait_for_it(tmp_path: Path) -> None:
    """cascade_4rank: rank 2 waits in pair23#3 for rank 3, ranks 0-1 in default_pg#3 for 2.
    Rank 2 alone may wait for rank 3 (gloo records no completion): it may as well have
    completed pair23#3 and stopped elsewhere, holding ranks 0-1; one rank's word decides
    nothing, so both are named, undecidable, in pair23, and no other cause names rank 3."""
    job = copy_fixture("cascade_4rank", tmp_path)
    cut(job / "trace_3", 500)
    status, rep, _err = frtrace_json(job)
    root = rep["root_cause"]
    assert status == 1
    assert (root["kind"], root["culprit_ranks"], root["pg_desc"]) == (
        "missing_dump",
        [2, 3],
        "pair23",
    )
    assert root["evidence"]["undecidable"] is True
    assert "the dump of rank 3 is unreadable" in root["detail"]
    others = [f for f in rep["findings"][1:] if not f["secondary"]]
    assert all(3 not in f["culprit_ranks"] for f in others)


# --- what cannot be told ----------------------------------------------------------------------


def test_one_dump_of_a_hung_job_whose_world_nothing_states_exits_4(tmp_path: Path) -> None:
    status, rep, _err = frtrace_json(copy_fixture("cascade_4rank", tmp_path, keep=[0]))
    assert (status, rep["ok"], rep["verdict"]) == (4, False, "unknown")
    assert rep["unseen"]["world_stated"] is False
    assert any("world size" in why for why in rep["unseen"]["why"])


def test_one_dump_of_a_hung_two_rank_job_names_both_ranks_undecidable(
    tmp_path: Path,
) -> None:
    """The world is stated (gloo's list [0, 1]) and rank 1 left no file: rank 0 may wait for
    it in its last collective, or may have completed it and stopped elsewhere (gloo records
    no states, and writes a dump only where the job asks): one rank's word decides nothing."""
    status, rep, _err = frtrace_json(copy_fixture("tutorial", tmp_path, keep=[0]))
    root = rep["root_cause"]
    assert (status, rep["verdict"]) == (1, "findings")
    assert (root["kind"], root["culprit_ranks"], root["evidence"]["maybe"]) == (
        "missing_dump",
        [0, 1],
        True,
    )
    assert root["evidence"]["undecidable"] is True
    assert "rank 0 may wait in" in root["detail"]
    assert "one rank's word decides nothing" in root["detail"]
    assert (rep["unseen"]["world_size"], rep["unseen"]["no_file"]) == (2, [1])


def test_the_text_report_of_an_unknown_job_says_what_it_cannot_see(tmp_path: Path) -> None:
    job = copy_fixture("cascade_4rank", tmp_path, keep=[0])
    out = subprocess.run(
        [sys.executable, "-m", "frtrace", str(job)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 4
    assert "CANNOT TELL" in out.stdout and "no dump states the job's world size" in out.stdout
    assert out.stdout.rstrip().splitlines()[-1].startswith("UNKNOWN:")


def test_world_size_states_what_no_dump_does(tmp_path: Path) -> None:
    job = copy_fixture("cascade_4rank", tmp_path, keep=[0])
    status, rep, _err = frtrace_json(job, "--world-size", "1")
    assert (status, rep["verdict"], rep["unseen"]) == (0, "ok", None)


def test_world_size_below_the_ranks_seen_is_a_usage_error(tmp_path: Path) -> None:
    status, _rep, err = frtrace_json(FIXTURES / "cascade_4rank", "--world-size", "2")
    assert status == 2 and "below the ranks seen" in err and "Traceback" not in err


def test_a_whole_gloo_job_with_sub_groups_still_names_its_culprit() -> None:
    status, rep, _err = frtrace_json(FIXTURES / "cascade_4rank")
    assert (status, rep["root_cause"]["culprit_ranks"]) == (1, [3])
    assert rep["unseen"]["world_stated"] is False, "gloo states no world once sub-groups exist"


# --- ranks that completed a rooted collective and moved on -----------------------------------


def test_ranks_that_left_a_broadcast_are_not_suspects() -> None:
    status, rep, _err = frtrace_json(FIXTURES / "broadcast_root_4rank")
    root = rep["root_cause"]
    assert status == 1
    assert (root["culprit_ranks"], root["waiting_ranks"]) == ([1, 3], [0, 2])
    assert (root["evidence"]["reason"], root["evidence"]["undecidable"]) == (
        "left_in_rooted",
        False,
    )


# --- pickle and JSON of one run: the same answer unless stacks decided, and then it says so ---


def test_a_tie_the_stacks_broke_says_so_and_its_json_twin_stays_undecided() -> None:
    status, rep, _err = frtrace_json(FIXTURES / "tutorial")
    assert (status, rep["root_cause"]["culprit_ranks"]) == (1, [0])
    assert rep["root_cause"]["evidence"]["decided_by"] == "stacks"
    status, rep, _err = frtrace_json(FIXTURES / "tutorial_json")
    assert (status, rep["root_cause"]["culprit_ranks"]) == (1, [0, 1])
    assert rep["root_cause"]["evidence"]["undecidable"] is True
    text = subprocess.run(
        [sys.executable, "-m", "frtrace", str(FIXTURES / "tutorial")],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "decided by      the call sites in the stacks" in text


# --- a lost host beside another fault: two faults, two causes --------------------------------


def lost_host_and_size_job(tmp_path: Path, fmt: str = "pickle") -> Path:
    """tp 8 x dp 8 x pp 2 (128 ranks): rank 24 stops before its step-2 data-parallel
    all_reduce and its node (ranks 24-31) leaves no dump; rank 51, in another replica, issues
    mesh_tp#57 with the wrong size meanwhile."""
    job = simulate(
        JobSpec(
            Layout(tp=8, dp=8, pp=2),
            steps=3,
            microbatches=4,
            layers=4,
            fault=Fault("missing_dump", 24, group="dp"),
            also=(Fault("size_mismatch", 51, group="tp", index=24),),
            batch_p2p=True,
            extras=True,
            enable_timing=False,
        )
    )
    job.omit_ranks |= set(range(24, 32))
    write_job(job, tmp_path, fmt=fmt)
    return tmp_path


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_a_lost_host_beside_a_size_mismatch_is_the_second_of_two_causes(
    tmp_path: Path, fmt: str
) -> None:
    analysis = analyze(load_trace(lost_host_and_size_job(tmp_path, fmt)))
    root = analysis.root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.pg_desc, root.collective_seq_id) == (
        "size_mismatch",
        [51],
        "mesh_tp",
        57,
    )
    causes = [(f.kind, f.culprit_ranks) for f in analysis.findings if not f.secondary]
    assert causes == [("size_mismatch", [51]), ("missing_dump", list(range(24, 32)))]


def test_a_lost_host_beside_a_size_mismatch_blames_no_rank_that_only_waits(
    tmp_path: Path,
) -> None:
    status, rep, _err = frtrace_json(lost_host_and_size_job(tmp_path))
    assert status == 1
    blamed = {r for f in rep["findings"] if not f["secondary"] for r in f["culprit_ranks"]}
    assert blamed == {51, *range(24, 32)}


def test_an_unreadable_dump_beside_ranks_blocked_elsewhere_is_still_no_cause(
    tmp_path: Path,
) -> None:
    """The same job with rank 24's node whole but rank 24's dump cut short: alive to write it,
    it was most likely held up as the others are."""
    job = simulate(
        JobSpec(
            Layout(tp=8, dp=8, pp=2),
            steps=3,
            microbatches=4,
            layers=4,
            fault=Fault("size_mismatch", 51, group="tp", index=24),
            batch_p2p=True,
            extras=True,
            enable_timing=False,
        )
    )
    paths = write_job(job, tmp_path)
    cut(paths[24], len(paths[24].read_bytes()) // 2)
    analysis = analyze(load_trace(tmp_path))
    causes = [(f.kind, f.culprit_ranks) for f in analysis.findings if not f.secondary]
    assert causes == [("size_mismatch", [51])]


# --- healthy pipelines: bubbles and CPU jitter are not lateness ------------------------------


@pytest.mark.parametrize(
    ("layout", "seed"),
    [(Layout(tp=2, dp=2, pp=2), 0), (Layout(tp=4, dp=2, pp=2), 1), (Layout(tp=2, dp=2, pp=4), 2)],
)
def test_a_healthy_pipeline_without_timing_lists_no_straggler(
    tmp_path: Path, layout: Layout, seed: int
) -> None:
    """Layers that take ms (gpu_scale): stages wait for each other and the CPUs of one replica
    enqueue the data-parallel collectives late together, while no GPU waits for them."""
    spec = JobSpec(
        layout,
        steps=4,
        microbatches=4,
        seed=seed,
        gpu_scale=10,
        jitter_ns=2_000_000,
        enable_timing=False,
        batch_p2p=True,
        extras=True,
    )
    write_job(simulate(spec), tmp_path)
    analysis = analyze(load_trace(tmp_path))
    assert analysis.stragglers is not None and analysis.stragglers.method == "enqueue"
    assert analysis.stragglers.top == []


def test_a_late_data_loader_is_still_a_straggler_in_a_pipeline_with_bubbles(tmp_path: Path) -> None:
    layout = Layout(tp=2, dp=2, pp=2)
    spec = JobSpec(
        layout,
        steps=4,
        microbatches=4,
        gpu_scale=10,
        jitter_ns=2_000_000,
        enable_timing=False,
        batch_p2p=True,
        extras=True,
        step_straggler=(5, 30_000_000, 60_000_000),
    )
    write_job(simulate(spec), tmp_path)
    analysis = analyze(load_trace(tmp_path))
    assert analysis.stragglers is not None
    assert [s.rank for s in analysis.stragglers.top] == [5]


# --- gloo jobs from the generator: what gloo's recorder keeps of the same calls -------------


def gloo_job(
    tmp_path: Path, layout: Layout, fault: Fault, fmt: str = "pickle"
) -> tuple[SyntheticJob, Callable[[], list[Path]]]:
    """A simulated job and how to write it as gloo's recorder would (no send/recv, no states,
    calls that return when done: no CPU runs ahead), once its omitted ranks are set."""
    spec = JobSpec(layout, steps=3, fault=fault, coalesce_dp=False, enable_timing=False, window=1)
    job = simulate(spec)
    return job, lambda: write_job(job, tmp_path, fmt=fmt, backend="gloo")


def causes_of(folder: Path) -> list[tuple[str, list[int]]]:
    analysis = analyze(load_trace(folder))
    return [(str(f.kind), f.culprit_ranks) for f in analysis.findings if not f.secondary]


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_a_changed_call_whose_peer_died_unseen_is_blamed_by_the_sibling_groups(
    tmp_path: Path, fmt: str
) -> None:
    """Rank 13 changes a dp all_reduce; its only peer, rank 15, dies: the highest rank, so no
    gap in the file names shows it, but its dp group is smaller than the others."""
    fault = Fault("size_mismatch", 13, group="dp", step=1, index=0)
    job, write = gloo_job(tmp_path, Layout(tp=2, dp=2, pp=4), fault, fmt)
    job.omit_ranks.add(15)
    write()
    assert causes_of(tmp_path) == [("size_mismatch", [13])]


def test_a_changed_call_whose_peer_left_no_nccl_dump_is_blamed_where_it_stands(
    tmp_path: Path,
) -> None:
    """NCCL: the CPU ran ahead of the stuck call, so the group's newest op is not where rank 6
    stands; its first incomplete one is."""
    job = simulate(
        JobSpec(Layout(tp=2, dp=2, pp=2), steps=3, fault=Fault("size_mismatch", 6, "dp", 1, 2))
    )
    job.omit_ranks.add(4)
    write_job(job, tmp_path)
    analysis = analyze(load_trace(tmp_path))
    root = analysis.root_cause
    assert root is not None and job.expected is not None
    assert (root.kind, root.culprit_ranks, root.collective_seq_id) == (
        "size_mismatch",
        [6],
        job.expected["collective_seq_id"],
    )


def test_a_changed_call_in_a_gloo_pipeline_is_the_only_cause_at_every_stage(
    tmp_path: Path,
) -> None:
    """Rank 1 changes a tp all_reduce at stage 0: its tp pair stops there, the next stage stops
    in recvs gloo never records, and data-parallel groups of both stages wait."""
    _job, write = gloo_job(tmp_path, Layout(tp=2, dp=2, pp=2), Fault("size_mismatch", 1, "tp", 1))
    write()
    assert causes_of(tmp_path) == [("size_mismatch", [1])]


def test_a_stall_through_a_four_stage_gloo_pipeline_names_only_its_replica(tmp_path: Path) -> None:
    """Rank 3 stops before its first pipeline send: its replica stops at every stage, out of
    sight; the ranks of the other replica only wait."""
    fault = Fault("missing_ranks", 3, group="pp", step=1, index=0)
    _job, write = gloo_job(tmp_path, Layout(tp=2, dp=2, pp=4), fault)
    write()
    [(kind, culprits)] = causes_of(tmp_path)
    replica = {r for r in range(16) if (r % 4) // 2 == 1}
    assert kind == "missing_ranks" and 3 in culprits and set(culprits) <= replica


# --- a deadlock in a pair with no twin: call sites tell it, an op sequence does not ---------


def swapped_pair(tmp_path: Path, fmt: str) -> Analysis:
    """Rank 0 issues its step's next world all_reduce before its dp all_reduce; one dp pair per
    stage, so no ranks in the same role to compare with."""
    fault = Fault("order_cycle", 0, group="dp", step=1, index=0)
    job = simulate(
        JobSpec(Layout(tp=1, dp=2, pp=4), steps=2, fault=fault, batch_p2p=True, extras=True)
    )
    write_job(job, tmp_path, fmt=fmt)
    return analyze(load_trace(tmp_path))


def test_a_swapped_pair_without_twins_is_told_by_its_call_sites(tmp_path: Path) -> None:
    root = swapped_pair(tmp_path, "pickle").root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.undecidable) == ("order_cycle", [0], False)


def test_a_swapped_pair_without_twins_is_undecidable_from_json(tmp_path: Path) -> None:
    root = swapped_pair(tmp_path, "json").root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.undecidable) == ("order_cycle", [0, 1], True)
