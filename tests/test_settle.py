"""A job analyzed without its settled entries gives the answer of the whole job.

The oracle is the analysis of the whole job (frtrace.analyze on everything the dumps hold),
which never settles anything: the reduced job must give the same JSON, text and HTML, on every
fixture and on generated jobs with each kind of fault and the awkward shapes real dumps have.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import FIXTURES

import frtrace
from frtrace.analysis.analyze import Analysis, analyze
from frtrace.analysis.facts import cut_points
from frtrace.cluster.settle import ANSWERS, Ask, Verdict, refine, settle
from frtrace.synth import Fault, JobSpec, Layout, simulate, write_job
from frtrace.tables.load import load_trace
from frtrace.tables.table import Table
from frtrace.tables.trace import Trace

FIXTURE_DIRS = sorted(p for p in FIXTURES.iterdir() if p.is_dir())


def _outputs(analysis: Analysis) -> tuple[dict[str, Any], str, str]:
    return (
        json.loads(frtrace.to_json(analysis)),
        frtrace.to_text(analysis, width=100, verbose=True),
        frtrace.to_html(analysis),
    )


def _assert_same_answer(trace: Trace) -> Trace:
    reduced = settle(trace)
    whole_json, whole_text, whole_html = _outputs(analyze(trace))
    json_, text, html = _outputs(analyze(reduced))
    assert json_ == whole_json
    assert text == whole_text
    assert html == whole_html
    return reduced


def _of_group(table: Table, name: str) -> Table:
    """The table's rows of the group called `name`."""
    return table.take(table["pg_name"] == table.code("pg_name", name))


def _job(tmp_path: Path, layout: Layout, fault: Fault | None, fmt: str, **spec: Any) -> Trace:
    job = simulate(JobSpec(layout, fault=fault, steps=6, **spec))
    write_job(job, tmp_path, fmt=fmt)
    return load_trace(tmp_path)


@pytest.mark.parametrize("fixture", FIXTURE_DIRS, ids=lambda p: p.name)
def test_fixtures_give_the_same_answer_settled(fixture: Path) -> None:
    _assert_same_answer(frtrace.load(str(fixture)))


FAULTS = [
    ("missing_ranks", Layout(tp=4, dp=1, pp=2), 5, "tp"),
    ("missing_ranks", Layout(tp=2, dp=2, pp=4), 9, "pp"),
    ("missing_ranks", Layout(tp=2, dp=2, pp=1), 3, "default"),
    ("type_mismatch", Layout(tp=4, dp=1, pp=2), 6, "tp"),
    ("size_mismatch", Layout(tp=2, dp=2, pp=1), 0, "dp"),
    ("dtype_mismatch", Layout(tp=2, dp=2, pp=1), 2, "default"),
    ("state_mismatch", Layout(tp=2, dp=2, pp=4), 13, "pp"),
    ("p2p_mismatch", Layout(tp=2, dp=1, pp=3), 0, "pp"),
    ("order_cycle", Layout(tp=2, dp=2, pp=4), 12, "default"),
    ("missing_dump", Layout(tp=4, dp=1, pp=2), 2, "tp"),
    ("stuck_collective", Layout(tp=2, dp=2, pp=1), 1, "dp"),
]
SHAPES: dict[str, dict[str, Any]] = {
    "plain": {},
    "wrapped": {"buffer_size": 37},
    "only_active": {"only_active": True},
    "batched_p2p_and_rooted": {"batch_p2p": True, "extras": True, "buffer_size": 53},
    "no_stacks_no_timing": {"with_stacks": False, "enable_timing": False},
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("kind", "layout", "rank", "group"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_gives_the_same_answer_settled(
    tmp_path: Path, kind: str, layout: Layout, rank: int, group: str, shape: str
) -> None:
    fault = Fault(kind, rank=rank, group=group, step=2)
    fmt = "json" if shape == "no_stacks_no_timing" else "pickle"
    trace = _job(tmp_path, layout, fault, fmt, **SHAPES[shape])
    reduced = _assert_same_answer(trace)
    assert analyze(reduced).root_cause is not None


def test_a_straggler_is_found_from_settled_lags(tmp_path: Path) -> None:
    trace = _job(tmp_path, Layout(tp=2, dp=2, pp=2), None, "pickle", straggler=(3, 30_000_000))
    reduced = _assert_same_answer(trace)
    late = analyze(reduced).stragglers
    assert late is not None and [s.rank for s in late.top] == [3]


def test_a_step_straggler_and_where_it_shows_are_found_from_settled_lags(
    tmp_path: Path,
) -> None:
    trace = _job(
        tmp_path,
        Layout(tp=2, dp=2, pp=2),
        None,
        "pickle",
        step_straggler=(6, 20_000_000, 60_000_000),
        batch_p2p=True,
    )
    reduced = _assert_same_answer(trace)
    late = analyze(reduced).stragglers
    assert late is not None and [s.rank for s in late.top] == [6]
    assert late.top[0].where is not None and late.top[0].where.step_index == 0


def test_most_entries_of_a_long_healthy_job_stay_behind(tmp_path: Path) -> None:
    trace = _job(tmp_path, Layout(tp=2, dp=2, pp=4), None, "pickle")
    reduced = _assert_same_answer(trace)
    assert reduced.facts is not None
    assert len(reduced.table) + reduced.facts.left_out == len(trace.table)
    assert reduced.facts.left_out > len(trace.table) * 3 // 4
    # Each rank's newest entry stays.
    kept = reduced.table
    for rank in trace.ranks:
        whole = trace.table["pos"][trace.table["rank"] == rank]
        assert int(kept["pos"][kept["rank"] == rank].max()) == int(whole.max())


def test_a_group_settles_among_the_members_that_dumped(tmp_path: Path) -> None:
    # A rank that crashed leaves no dump; its peers' completed collectives still name no one.
    # Kept whole, every group of a lost rank would reach the client at 100,000 ranks.
    fault = Fault("missing_dump", rank=2, group="tp", step=2)
    trace = _job(tmp_path, Layout(tp=4, dp=1, pp=1), fault, "pickle")
    reduced = _assert_same_answer(trace)
    assert reduced.facts is not None
    assert reduced.facts.left_out > len(trace.table) // 2
    root = analyze(reduced).root_cause
    assert root is not None and (root.kind, root.culprit_ranks) == ("missing_dump", [2])


def test_an_old_mismatch_among_the_members_that_dumped_is_still_found(tmp_path: Path) -> None:
    fault = Fault("missing_dump", rank=3, group="tp", step=2)
    job = simulate(JobSpec(Layout(tp=4, dp=1, pp=1), fault=fault, steps=6))
    entry = _edit_middle(job, 1, "nccl:all_reduce", input_dtypes=["Half"], output_dtypes=["Half"])
    write_job(job, tmp_path)
    trace = load_trace(tmp_path)
    reduced = _assert_same_answer(trace)
    found = {(f.kind, f.collective_seq_id) for f in analyze(reduced).findings}
    assert ("dtype_mismatch", entry["collective_seq_id"]) in found


def test_a_block_a_wrapped_buffer_cut_does_not_hold_its_group_back(tmp_path: Path) -> None:
    # Ranks that stop at different points wrap their buffers at different records: where a
    # member's buffer begins inside a coalescing block, its folded op there has fewer parts
    # than its peers'. The analysis judges the group from after that block; so must settling,
    # or the group's whole history stays (a quarter of a 20,000-entry bench job did).
    fault = Fault("missing_ranks", rank=1, group="tp", step=6)
    job = simulate(JobSpec(Layout(tp=2, dp=4, pp=2), fault=fault, steps=8, buffer_size=110))
    write_job(job, tmp_path)
    trace = load_trace(tmp_path)
    cut = cut_points(trace.table)
    assert cut, "no buffer begins inside a block: the situation is gone"
    reduced = _assert_same_answer(trace)
    for code in cut:
        name = trace.table.labels["pg_name"][code]
        assert len(_of_group(reduced.table, name)) < len(_of_group(trace.table, name)) // 2


def test_a_mismatch_keeps_its_whole_group(tmp_path: Path) -> None:
    fault = Fault("size_mismatch", rank=1, group="default", step=1)
    trace = _job(tmp_path, Layout(tp=1, dp=4, pp=1), fault, "pickle")
    reduced = _assert_same_answer(trace)
    e = reduced.table
    default = e.code("pg_name", analyze(trace).root_cause.pg_name)  # type: ignore[union-attr]
    in_group = trace.table["pg_name"] == default
    assert int(np.sum(e["pg_name"] == default)) == int(in_group.sum())


def test_an_old_completed_p2p_mismatch_keeps_its_channel(tmp_path: Path) -> None:
    # A send whose recv expected another shape, long completed (the job went on): the pair
    # is a finding only the whole channel shows, so the channel must not settle.
    job = simulate(JobSpec(Layout(tp=1, dp=1, pp=2), steps=6))
    entries = job.dumps[0]["entries"]
    sends = [i for i, x in enumerate(entries) if "send" in x["profiling_name"]]
    changed = entries[sends[len(sends) // 2]]
    changed["input_sizes"] = changed["output_sizes"] = [[4, 999, 4096]]
    write_job(job, tmp_path)
    trace = load_trace(tmp_path)
    reduced = _assert_same_answer(trace)
    root = analyze(reduced).root_cause
    assert root is not None and root.kind == "p2p_mismatch"
    assert root.p2p_seq_id == changed["p2p_seq_id"]
    assert reduced.facts is not None and reduced.facts.left_out > 0  # collectives still do


def _edit_middle(job: Any, rank: int, name: str, **fields: Any) -> dict[str, Any]:
    """Change one rank's op `name` halfway through its dump (long completed) in place."""
    entries = job.dumps[rank]["entries"]
    hits = [x for x in entries if x["profiling_name"] == name and x["state"] == "completed"]
    entry = hits[len(hits) // 2]
    entry.update(fields)
    return entry


def test_an_old_completed_size_mismatch_keeps_its_group(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=1), steps=6))
    entry = _edit_middle(job, 1, "nccl:all_reduce", input_sizes=[[7, 7]], output_sizes=[[7, 7]])
    write_job(job, tmp_path)
    reduced = _assert_same_answer(load_trace(tmp_path))
    found = [(f.kind, f.collective_seq_id, f.culprit_ranks) for f in analyze(reduced).findings]
    # A tie in a group of two: rank 1's own history (settled, fetched) shows it changed.
    assert found == [("size_mismatch", entry["collective_seq_id"], [1])]


def test_an_old_mismatch_keeps_the_piece_of_its_group_around_it(tmp_path: Path) -> None:
    # One rank's all_reduce of long ago had other sizes and the job went on. The group's
    # range does not settle as a whole; asked again in pieces, all but the piece around the
    # mismatch do, so a desync in a 100,000-rank group does not bring its history back.
    job = simulate(JobSpec(Layout(tp=4, dp=1, pp=1), steps=12))
    entry = _edit_middle(job, 1, "nccl:all_reduce", input_sizes=[[7, 7]], output_sizes=[[7, 7]])
    write_job(job, tmp_path)
    trace = load_trace(tmp_path)
    reduced = _assert_same_answer(trace)
    found = [(f.kind, f.collective_seq_id, f.culprit_ranks) for f in analyze(reduced).findings]
    assert found == [("size_mismatch", entry["collective_seq_id"], [1])]
    name = entry["process_group"][0]
    kept = _of_group(reduced.table, name)
    assert len(kept) < len(_of_group(trace.table, name)) // 4
    assert int(np.sum(kept["collective_seq_id"] == entry["collective_seq_id"])) == 4


@pytest.mark.parametrize("members", [4, 100_000, 20_000_000])
def test_pieces_asked_again_stay_within_the_answer_budget(members: int) -> None:
    # Where a 100,000-rank group disagrees everywhere, 16 pieces per member would be 1.6 M
    # answers on the client: the pieces grow instead, and none are asked for where even two
    # would be over budget.
    ask = Ask(True, {"0": [(5, 10_004)]}, {"0": members}, {}, "none")
    more = refine(ask, Verdict({}, set(), {}))
    if members > ANSWERS // 2:
        assert more is None
        return
    assert more is not None
    pieces = more.candidates["0"]
    assert 2 <= len(pieces) <= 16 and len(pieces) * members <= ANSWERS
    assert pieces[0][0] == 5 and pieces[-1][1] == 10_004
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(pieces))


def test_an_old_all_gather_with_the_wrong_numel_keeps_its_group(tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=1), steps=6))
    entry = _edit_middle(job, 0, "nccl:all_gather", output_sizes=[[12345]])
    write_job(job, tmp_path)
    reduced = _assert_same_answer(load_trace(tmp_path))
    found = [f for f in analyze(reduced).findings if f.kind == "size_mismatch"]
    assert entry["collective_seq_id"] in [f.collective_seq_id for f in found]
