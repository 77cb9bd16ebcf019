"""The job's facts (frtrace.analysis.facts): each function on a small table, and the two
providers agreeing on real dumps.

The analysis reads every fact about entries beyond its table from `ctx.facts`. A job loaded in
one process computes them from its whole table (Local); the Dask engine assembles them from
its workers' partitions (Assembled), so both must give the same facts of the same job.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import FIXTURES

import frtrace
from frtrace.analysis.context import Scope, build_context, status_by_name
from frtrace.analysis.facts import (
    Local,
    Partial,
    assembled,
    backends,
    combine,
    cut_points,
    first_records,
    last_completed,
    last_created,
    last_records,
    latest_times,
    lowest_seqs,
    max_timeout,
    timed,
)
from frtrace.cluster import assemble as raw
from frtrace.cluster.settle import members_of, merge_tallies, tally
from frtrace.cluster.spread import open_part
from frtrace.dumps.limits import budgets
from frtrace.errors import FrtraceError
from frtrace.synth import Fault, JobSpec, Layout, simulate, write_job
from frtrace.tables import partition as plan
from frtrace.tables.facts import Facts, Lags
from frtrace.tables.repair import pg_status_table
from frtrace.tables.table import Table

DUMP_DIRS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and any(p.glob("trace_*")))
FIELDS = (
    "entries", "backends", "first_record", "last_record", "latest_ns", "last_created_ns",
    "lowest_seq", "cut_lo", "timed", "max_timeout_ms", "last_completed",
)  # fmt: skip


def _entries(labels: dict[str, list[Any]] | None = None, **cols: list[Any]) -> Table:
    """A small entries table: the columns given, codes into `labels` where named there."""
    return Table({name: np.array(values) for name, values in cols.items()}, {**(labels or {})})


# ---------------------------------------------------------------- one fact each


def test_the_first_record_of_a_rank_is_its_lowest_record_id() -> None:
    e = _entries(rank=[0, 0, 1, 1], record_id=[7, 8, 0, 1])
    assert first_records(e) == {0: 7, 1: 0}


def test_the_last_record_of_a_rank_is_its_highest_record_id() -> None:
    e = _entries(rank=[0, 0, 1], record_id=[7, 9, 3])
    assert last_records(e) == {0: 9, 1: 3}


def test_a_ranks_latest_time_is_the_latest_it_created_started_or_completed() -> None:
    e = _entries(
        rank=[0, 0, 1],
        time_created_ns=[10, 20, 5],
        time_started_ns=[0, 25, 0],
        time_completed_ns=[30, 0, 0],
    )
    assert latest_times(e) == {0: 30, 1: 5}


def test_a_rank_without_an_enqueue_time_has_no_last_created_time() -> None:
    e = _entries(rank=[0, 0, 1], time_created_ns=[10, 20, 0])
    assert last_created(e) == {0: 20}


def test_the_lowest_seq_is_taken_per_group_and_rank() -> None:
    coll = _entries(pg=[0, 0, 1, 0], rank=[0, 0, 0, 1], seq=[5, 3, 9, 4])
    assert lowest_seqs(coll) == {(0, 0): 3, (1, 0): 9, (0, 1): 4}


def _block_at_start(record_id: int) -> Table:
    """Rank 0's buffer starts inside a coalescing block of group 1 at seq 4 (then an op)."""
    return _entries(
        {"op": ["all_reduce", "coalesced"], "input_sizes": ["[[2]]", "[]"]},
        rank=[0, 0, 0],
        pos=[0, 1, 2],
        record_id=[record_id, record_id + 1, record_id + 2],
        pg_name=[1, 1, 1],
        collective_seq_id=[4, 4, 5],
        coalesced=[True, False, False],
        is_p2p=[False, False, False],
        op=[0, 1, 0],
        input_sizes=[0, 1, 0],
    )


def test_a_wrapped_blocks_cut_point_is_the_seq_after_it() -> None:
    assert cut_points(_block_at_start(record_id=7)) == {1: 5}


def test_a_block_at_the_start_of_a_buffer_that_never_wrapped_cuts_nothing() -> None:
    assert cut_points(_block_at_start(record_id=0)) == {}


def test_the_last_completed_seq_of_a_group_ignores_p2p_and_unfinished_work() -> None:
    e = _entries(
        {"state": ["completed", "started"], "pg_name": ["0", "7"]},
        pg_name=[0, 0, 0, 1],
        collective_seq_id=[3, 4, 9, 2],
        state=[0, 1, 0, 0],
        is_p2p=[False, False, True, False],
    )
    assert last_completed(e) == {"0": 3, "7": 2}


def test_the_backends_are_named_once_each_sorted() -> None:
    e = _entries({"backend": ["nccl", "gloo"]}, backend=[0, 1, 0])
    assert backends(e) == ["gloo", "nccl"]


def test_a_job_is_timed_when_some_entry_has_a_duration() -> None:
    assert timed(_entries(duration_ms=[np.nan, 1.5]))
    assert not timed(_entries(duration_ms=[np.nan, np.nan]))


def test_the_longest_timeout_of_no_entries_is_zero() -> None:
    assert max_timeout(_entries(timeout_ms=np.zeros(0, np.int64).tolist())) == 0


# ---------------------------------------------------------------- combining partitions


def _partial(**values: Any) -> Partial:
    base: dict[str, Any] = {
        "entries": 0, "backends": set(), "first_record": {}, "last_record": {},
        "latest_ns": {}, "last_created_ns": {}, "lowest_seq": {}, "cut_lo": {},
        "timed": False, "max_timeout_ms": 0, "last_completed": {},
    }  # fmt: skip
    return Partial(**{**base, **values})


def test_combined_partitions_keep_the_lowest_of_lowest_seqs() -> None:
    a = _partial(lowest_seq={("tp", 0): 5})
    b = _partial(lowest_seq={("tp", 0): 3, ("tp", 1): 4})
    assert combine([a, b]).lowest_seq == {("tp", 0): 3, ("tp", 1): 4}


def test_combined_partitions_keep_the_highest_cut_point_and_last_completed() -> None:
    a = _partial(cut_lo={"tp": 5}, last_completed={"tp": 9})
    b = _partial(cut_lo={"tp": 8}, last_completed={"tp": 7, "dp": 2})
    job = combine([a, b])
    assert (job.cut_lo, job.last_completed) == ({"tp": 8}, {"tp": 9, "dp": 2})


def test_combined_partitions_add_their_entries_and_join_their_backends() -> None:
    a = _partial(entries=3, backends={"nccl"}, timed=True, max_timeout_ms=600)
    b = _partial(entries=4, backends={"gloo"}, max_timeout_ms=100)
    job = combine([a, b])
    assert (job.entries, job.backends, job.timed, job.max_timeout_ms) == (
        7,
        {"gloo", "nccl"},
        True,
        600,
    )


def test_assembled_facts_name_groups_by_the_clients_codes() -> None:
    job = _partial(lowest_seq={("tp", 0): 3}, cut_lo={"tp": 5})
    got = assembled(job, 0, {"tp": 2}, Lags("none", 0, {}, {}), lambda r: Table({}))
    assert (got.lowest_seq, got.cut_lo) == ({(2, 0): 3}, {2: 5})


# ---------------------------------------------------------------- the two providers


def _partitions(folder: Path, parts: int) -> list[Any]:
    """The job's worker contexts, `parts` partitions of its ranks (as the Dask engine opens
    them: frtrace.cluster.spread.open_part with the job's Scope), without a cluster."""
    ranked = [(p, re.search(r"_(\d+)(\.\w+)?$", p.name)) for p in folder.iterdir()]
    items = sorted(((str(p), int(m[1])) for p, m in ranked if m), key=lambda i: i[1])
    size = -(-len(items) // parts)
    parsed = [
        plan.parse_partition(items[i : i + size], False, {}, budgets())
        for i in range(0, len(items), size)
    ]
    job = raw.assemble(str(folder), raw.summarize([r for p in parsed for r in p]), [])
    members = members_of(job.groups)
    status = pg_status_table(job.metas, job.pg_ids)
    gloo = "gloo" in job.backends
    scope = Scope(gloo, {} if gloo else status_by_name(status, members, job.p2p_groups))
    contexts = [open_part(p, job.groups, job.stack_ids, scope) for p in parsed]
    return [c for c in contexts if c is not None]


def _assert_equal_facts(folder: Path) -> Facts:
    """The Local facts of the job in `folder` equal those assembled from 3 partitions."""
    trace = frtrace.load(str(folder))
    local = build_context(trace).facts
    whole = merge_tallies([tally(ctx) for ctx in _partitions(folder, 3)]).facts
    code = {str(name): i for i, name in enumerate(trace.table.labels["pg_name"])}
    got = assembled(whole, 0, code, Lags("none", 0, {}, {}), Local(trace.table).history)
    for name in FIELDS:
        assert getattr(got, name) == getattr(local, name), name
    return local


@pytest.mark.parametrize("fixture", DUMP_DIRS, ids=lambda p: p.name)
def test_the_local_and_the_assembled_facts_of_a_job_are_equal(fixture: Path) -> None:
    _assert_equal_facts(fixture)


def test_the_local_and_the_assembled_facts_of_a_wrapped_nccl_job_are_equal(
    tmp_path: Path,
) -> None:
    # Buffers wrapped at different records, one starting inside a coalescing block.
    fault = Fault("missing_ranks", rank=1, group="tp", step=6)
    job = simulate(JobSpec(Layout(tp=2, dp=4, pp=2), fault=fault, steps=8, buffer_size=110))
    write_job(job, tmp_path)
    local = _assert_equal_facts(tmp_path)
    assert local.cut_lo and any(local.first_record.values()) and local.timed


def test_local_facts_read_a_ranks_history_from_the_table() -> None:
    trace = frtrace.load(str(DUMP_DIRS[0]))
    mine = Local(trace.table).history(1)
    assert mine["pos"].tolist() == list(range(int((trace.table["rank"] == 1).sum())))


def test_a_partitions_local_facts_have_no_lags_of_their_own() -> None:
    with pytest.raises(FrtraceError, match="shuffle"):
        _ = Local(frtrace.load(str(DUMP_DIRS[0])).table).lags
