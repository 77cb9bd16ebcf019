"""The normalized tables: versions, defaults, memberships and p2p peers as analyzers see them."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, nccl_dump, nccl_entry, write_pickle

from frtrace.dumps.discover import discover
from frtrace.synth import JobSpec, Layout, as_format, simulate
from frtrace.tables.load import load_trace
from frtrace.tables.parse import NoUsableDumpError, ParseResult
from frtrace.tables.trace import Trace


def test_a_format_2_0_dump_loads_with_defaults_for_the_fields_it_lacks(tmp_path: Path) -> None:
    """Format 2.0 (torch's writer as of the collective/p2p split) had no timeout_ms, threads,
    pg_status or comm_lib_version."""
    dump = as_format(nccl_dump(0, 1), "2.0")
    assert "timeout_ms" not in dump["entries"][0] and "pg_status" not in dump
    write_pickle(tmp_path / "trace_0", dump)
    trace = load_trace(tmp_path)
    rows = trace.entries
    assert rows["collective_seq_id"].tolist() == [1, 2, 3]
    assert rows["timeout_ms"].tolist() == [0, 0, 0]
    assert set(rows["thread_name"].astype(str)) == {""}
    assert trace.versions == ["2.0"]
    assert any("timeout_ms" in note for note in trace.notes)


@pytest.mark.parametrize("version", ["1.0", "1.4", "1.5"])
def test_a_dump_of_a_format_before_2_0_is_refused_naming_its_version(
    tmp_path: Path, version: str
) -> None:
    """One seq_id then counted a group's collectives and p2p ops together: read as a
    collective_seq_id it matched ranks' collectives wrongly (a healthy job got findings)."""
    for rank in range(2):
        write_pickle(tmp_path / f"trace_{rank}", as_format(nccl_dump(rank, 2), version))
    with pytest.raises(NoUsableDumpError) as refused:
        load_trace(tmp_path)
    assert [s.reason.split(":")[0] for s in refused.value.skipped] == [
        f"format version {version} is not supported"
    ] * 2


def test_entries_with_seq_id_and_no_collective_seq_id_are_refused(tmp_path: Path) -> None:
    entries = as_format(nccl_dump(0, 2), "1.5")["entries"]
    write_pickle(tmp_path / "trace_0", nccl_dump(0, 2, entries))  # says format 2.10
    with pytest.raises(NoUsableDumpError) as refused:
        load_trace(tmp_path)
    (skipped,) = refused.value.skipped
    assert skipped.reason.startswith("entries have 'seq_id', not 'collective_seq_id'")


@pytest.mark.parametrize("version", [2, 2.5, ["2.10"], {"v": "2.10"}, None])
def test_a_version_that_is_not_a_string_skips_the_file(tmp_path: Path, version: object) -> None:
    write_pickle(tmp_path / "trace_0", nccl_dump(0, 2))
    write_pickle(tmp_path / "trace_1", nccl_dump(1, 2) | {"version": version})
    trace = load_trace(tmp_path)
    assert trace.ranks == [0]
    (skipped,) = trace.skipped
    assert skipped.reason.startswith("'version' is ") and "not a string" in skipped.reason


def test_a_mix_of_format_versions_is_loaded_and_warned_about(tmp_path: Path) -> None:
    new = nccl_dump(0, 2)
    old = as_format(nccl_dump(1, 2), "2.2")
    write_pickle(tmp_path / "trace_0", new)
    write_pickle(tmp_path / "trace_1", old)
    trace = load_trace(tmp_path)
    assert trace.versions == ["2.10", "2.2"]
    assert "dumps mix format versions (2.10: ranks 0; 2.2: ranks 1)" in trace.warnings


def test_membership_warnings_of_a_large_job_name_rank_ranges_not_lists(tmp_path: Path) -> None:
    """A 1,024-rank job whose dumps name a default group of 1,024 ranks and of 1,032: each
    warning listed every member, a line of 6,000 characters (600,000 at 100,000 ranks)."""
    job = simulate(JobSpec(Layout(tp=8, dp=128), steps=1))
    for rank, dump in job.dumps.items():
        if rank < 8:
            default = next(c for c in dump["pg_config"].values() if c["desc"] == "default_pg")
            default["ranks"] = str(list(range(1032)))
        write_pickle(tmp_path / f"trace_{rank}", dump)
    warnings = load_trace(tmp_path).warnings
    assert "pg 0 (default_pg): dumps disagree on its members; using 0-1023" in warnings
    assert max(len(w) for w in warnings) < 200


def test_gloo_memberships_are_inferred_from_entries_despite_the_empty_pg_config() -> None:
    trace = load_trace(FIXTURES / "healthy_4rank")
    groups = {
        g.pg_name: (g.pg_desc, list(g.ranks), g.source)
        for g in trace.groups.itertuples(index=False)
    }
    assert groups["0"] == ("default_pg", [0, 1, 2, 3], "inferred")
    assert groups["1"] == ("pair01", [0, 1], "inferred")
    assert groups["2"] == ("pair23", [2, 3], "inferred")


def test_p2p_peers_are_translated_to_global_ranks(tmp_path: Path) -> None:
    pp = {"name": "5", "desc": "mesh_pp", "ranks": "[2, 6]"}
    send = nccl_entry(
        0,
        0,
        process_group=("5", "mesh_pp"),
        profiling_name="nccl:send 0->1",
        is_p2p=True,
        p2p_seq_id=1,
        pg_id=1,
    )
    recv = nccl_entry(
        0,
        0,
        process_group=("5", "mesh_pp"),
        profiling_name="nccl:recv 1<-0",
        is_p2p=True,
        p2p_seq_id=1,
        pg_id=1,
    )
    for rank, entry in ((2, send), (6, recv)):
        dump = nccl_dump(rank, 8, [entry])
        dump["pg_config"]["5"] = pp
        write_pickle(tmp_path / f"trace_{rank}", dump)
    e = load_trace(tmp_path).entries.set_index("rank")
    assert (e.loc[2, "op"], e.loc[2, "global_src"], e.loc[2, "global_dst"]) == ("send", 2, 6)
    assert (e.loc[6, "op"], e.loc[6, "global_src"], e.loc[6, "global_dst"]) == ("recv", 2, 6)


def test_identical_stacks_are_stored_once_for_the_whole_job(tmp_path: Path) -> None:
    for rank in range(4):
        write_pickle(tmp_path / f"trace_{rank}", nccl_dump(rank, 4))
    trace = load_trace(tmp_path)
    assert len(trace.stacks) == 1
    assert set(trace.entries["stack_id"]) == {0}


def test_interning_by_key_numbers_values_as_the_exact_path_does() -> None:
    """intern_keyed trusts a key only after comparing each value with its key's first one:
    values that share a key but differ (rank-dependent sizes), unhashable keys and repeats
    get the codes and first-seen order of intern_equal, value by value."""
    from frtrace.tables.columns import intern_equal, intern_keyed

    values: list[object] = [[1], [2], [1], [3], [2], [1, 1], [3], [[0]], [[0]], [1]]
    keys: list[object] = ["a", "b", "a", "a", "b", "a", "a", "c", "c", "a"]
    fast, exact = intern_keyed(values, keys), intern_equal(values, keys)
    assert fast.codes.tolist() == exact.codes.tolist() == [0, 1, 0, 2, 1, 3, 2, 4, 4, 0]
    assert fast.uniques == exact.uniques == [[1], [2], [3], [1, 1], [[0]]]
    odd = intern_keyed(values, [*keys[:7], ["x"], ["x"], "a"])  # unhashable keys
    assert odd.codes.tolist() == exact.codes.tolist() and odd.uniques == exact.uniques
    same = intern_keyed([(1, [2])] * 3 + [(2, [2])], [1, 1, 1, 2])
    assert same.codes.tolist() == [0, 0, 0, 1] and same.uniques == [(1, [2]), (2, [2])]
    empty = intern_keyed([], [])
    assert empty.codes.tolist() == [] and empty.uniques == []


def test_writing_files_as_they_arrive_gives_the_table_of_writing_them_at_once(
    tmp_path: Path,
) -> None:
    """Results arrive out of order and are written into the job's table as soon as the ones
    before them are here: the entries, stacks and groups equal those of writing every file
    at the end."""
    from frtrace.synth import JobSpec, Layout, simulate, write_job
    from frtrace.tables import load, parse

    write_job(simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=3)), tmp_path)
    found = discover(tmp_path, None)
    items = [(str(f.path), f.rank) for f in found.files]
    results = [parse.parse_file(item) for item in items]
    arrival = [results[i] for i in (1, 0, 3, 2, 5, 7, 4, 6)]  # workers overtaking each other

    def assemble(order: list[int] | None) -> Trace:
        copies: list[ParseResult] = [(r[0], r[1], copy.deepcopy(r[2]), *r[3:]) for r in arrival]
        return load.assemble_trace(str(tmp_path), found.prefix, copies, 8, [], None, order)

    at_once = assemble(None)
    as_they_come = assemble([rank for _path, rank in items])
    pd.testing.assert_frame_equal(as_they_come.entries, at_once.entries)
    assert as_they_come.stacks == at_once.stacks
    pd.testing.assert_frame_equal(as_they_come.groups, at_once.groups)
    assert list(as_they_come.entries["rank"].unique()) == list(range(8))


def test_files_larger_than_the_first_all_reach_the_table(tmp_path: Path) -> None:
    """The first file sizes the job's table; later files with more entries (buffers that did
    not wrap) make it grow, and every entry is there, each rank's in its order."""
    from frtrace.tables import load, parse

    counts = [1, 4, 2, 9]
    for rank, count in enumerate(counts):
        entries = [nccl_entry(i, i + 1) for i in range(count)]
        write_pickle(tmp_path / f"nccl_trace_rank_{rank}", nccl_dump(rank, 4, entries))
    found = discover(tmp_path, None)
    results = [parse.parse_file((str(f.path), f.rank)) for f in found.files]
    trace = load.assemble_trace(str(tmp_path), found.prefix, results, 4, [], None, [0, 1, 2, 3])
    entries = trace.entries
    assert entries["rank"].value_counts().sort_index().tolist() == counts
    assert entries.groupby("rank")["record_id"].apply(list).tolist() == [
        list(range(c)) for c in counts
    ]


@pytest.mark.parametrize("count", [0, 1, 7, 256, 257, 3000])
def test_interning_few_values_codes_them_as_interning_many_does(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The direct path for a few values and numpy's path for many give the same codes
    (dense, in first-seen order) and the same distinct values."""
    import random

    import numpy as np

    from frtrace.tables import columns

    rng = random.Random(count)
    values = [rng.choice([("a", 1), ("b", 2), None, "c", 3, ("a", 1.0)]) for _ in range(count)]
    direct = columns.intern(values)
    monkeypatch.setattr(columns, "SMALL_INTERN", -1)
    by_numpy = columns.intern(values)
    assert direct.uniques == by_numpy.uniques
    assert direct.codes.dtype == by_numpy.codes.dtype == np.int32
    assert direct.codes.tolist() == by_numpy.codes.tolist()
    assert [direct.uniques[c] for c in direct.codes] == values
