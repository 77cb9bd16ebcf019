"""The rendered NCCL job logs (frtrace.synth.logs) and their scenario generator
(scripts/nccl_log_jobs.py): torch's formats, the split rule, determinism, group ranks."""

from __future__ import annotations

import importlib.util
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from frtrace.synth import Fault, JobSpec, Layout, simulate
from frtrace.synth.logs import (
    AGENT_LINE,
    Cluster,
    Failure,
    Group,
    LogStyle,
    Outstanding,
    agent_prefix,
    c10_prefix,
    child_failed_message,
    dump_signal_message,
    failure_message,
    outstanding,
    pg_prefix,
    render,
    timeout_message,
    traceback_lines,
)

REPO = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "nccl_log_jobs", REPO / "scripts" / "nccl_log_jobs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nccl_log_jobs"] = module
    spec.loader.exec_module(module)
    return module


gen = _load()

TP = Group(pg_id=1, name="5", desc="mesh_tp", ranks=(12, 13, 14, 15))


def _work(**kw: Any) -> Outstanding:
    base: dict[str, Any] = dict(
        rank=13, group=TP, seq=57, op_type="ALLREDUCE", numel_in=1024, numel_out=1024,
        created_ns=0, timeout_ms=600000, frames=(), last_enqueued=58, last_completed=56,
    )  # fmt: skip
    base.update(kw)
    return Outstanding(**base)


def _ns(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    when = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    return int(when.timestamp()) * 1_000_000_000


def test_watchdog_lines_match_torchs_formats() -> None:
    # WorkNCCL::checkTimeout and operator<<(WorkNCCL): as published logs print them.
    assert timeout_message(1, _work(), 600012) == (
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=57, "
        "OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out."
    )
    # Watchdog::runLoop with createLogPrefix: two spaces before `failure`.
    assert failure_message(_work(), 1) == (
        "[PG ID 1 PG GUID 5(mesh_tp) Rank 1]  failure detected by watchdog at work sequence "
        "id: 57 PG status: last enqueued work: 58, last completed work: 56"
    )
    assert pg_prefix(TP, 1, with_desc=False) == "[PG ID 1 PG GUID 5 Rank 1] "
    assert pg_prefix(Group(0, "0", "undefined", (0, 1)), 0) == "[PG ID 0 PG GUID 0 Rank 0] "
    # c10's MessageLogger: `[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] `
    # (a published torch log; the month is not zero-padded, the ns are CLOCK_MONOTONIC's).
    t = _ns(2025, 7, 9, 17, 5, 38)
    assert c10_prefix("E", t, 162555850, 632, 0) == (
        "[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] "
    )
    assert c10_prefix("I", t, 5, 905, None) == "[I709 17:05:38.000000005 ProcessGroupNCCL.cpp:905] "
    # TorchLogsFormatter: `E0709 17:05:39.816000 56204 <path>:<line>] ` (published log).
    t2 = _ns(2025, 7, 9, 17, 5, 39) + 816_400_000
    site = ("site-packages/torch/distributed/elastic/multiprocessing/api.py", 874)
    assert agent_prefix("E", t2, 56204, site) == (
        "E0709 17:05:39.816000 56204 site-packages/torch/distributed/elastic/multiprocessing/"
        "api.py:874] "
    )
    assert AGENT_LINE["failed"][0] == "torch/distributed/elastic/multiprocessing/api.py"
    assert traceback_lines([("all_reduce", "/x/distributed_c10d.py", 3174)]) == [
        "Stack trace of the failed collective: ",
        "#0 all_reduce from /x/distributed_c10d.py:3174",
        "",
    ]
    assert dump_signal_message("[P] ", " rank 3", 59957, 59957).startswith(
        "[P] Received a dump signal due to a collective timeout from  rank 3 and we will try our "
        "best to dump the debug info. Last enqueued NCCL work: 59957, last completed NCCL work: "
        "59957.This is most likely caused by incorrect usages of collectives"
    )


def test_torchelastic_summary_matches_its_template() -> None:
    # The shape of a published summary (torch 2.x: exit codes with their signal name).
    stamp = _ns(2026, 6, 23, 21, 26, 19) // 1_000_000_000
    failures = [
        Failure(1, 1, 1134, -6, stamp),
        Failure(0, 0, 1133, -15, stamp + 1),
    ]
    text = child_failed_message("trainer.py", failures, "gpu-dev-7ab11a40")
    assert text == (
        "\n"
        "======================================================\n"
        "trainer.py FAILED\n"
        "------------------------------------------------------\n"
        "Failures:\n"
        "[1]:\n"
        "  time      : 2026-06-23_21:26:20\n"
        "  host      : gpu-dev-7ab11a40\n"
        "  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : -15 (pid: 1133)  (SIGTERM)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 15 (SIGTERM) received by PID 1133\n"
        "------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2026-06-23_21:26:19\n"
        "  host      : gpu-dev-7ab11a40\n"
        "  rank      : 1 (local_rank: 1)\n"
        "  exitcode  : -6 (pid: 1134)  (SIGABRT)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 6 (SIGABRT) received by PID 1134\n"
        "======================================================"
    )


def test_tune_never_draws_a_held_out_combination() -> None:
    seen: set[str] = set()
    for seed in range(200):
        assert gen.held_out_combo(gen.sample(seed, "tune")) is None, seed
    for seed in range(1000, 1200):
        combo = gen.sample(seed, "heldout")["held_out_combo"]
        if combo is not None:
            seen.add(combo)
    assert seen == set(gen.HELD_OUT)


def test_the_same_seed_renders_the_same_files(tmp_path: Path) -> None:
    for seed, split in ((3, "tune"), (1001, "heldout")):
        first = gen.write_scenario(tmp_path / "a", split, seed)
        second = gen.write_scenario(tmp_path / "b", split, seed)
        names = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
        assert names == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
        assert any(
            str(n).startswith("evidence/") and not n.name.startswith("nccl_trace") for n in names
        )
        for name in names:
            assert (first / name).read_bytes() == (second / name).read_bytes(), name


_PG_LINE = re.compile(
    r"\[rank(?P<g>\d+)\]:\[[EIF]\d{3,4} [\d:.]+ ProcessGroupNCCL\.cpp:\d+\] "
    r"\[PG ID (?P<id>\d+) PG GUID (?P<name>\w+)(?:\((?P<desc>[^)]*)\))? Rank (?P<r>\d+)\]"
)


def test_the_pg_prefix_names_the_rank_within_its_group() -> None:
    checked = 0
    for seed in range(8):
        _, job, cluster, rendered = gen.build(seed, "tune")
        order = {r: list(job.dumps.peek(r)["pg_config"]) for r in range(len(cluster.procs))}
        for rank, lines in rendered.worker.items():
            for _, _, text in lines:
                m = _PG_LINE.search(text)
                if m is None:
                    continue
                assert int(m["g"]) == rank
                desc, members = job.groups[m["name"]]
                assert int(m["r"]) == sorted(members).index(rank), text
                assert int(m["id"]) == order[rank].index(m["name"]), text
                assert m["desc"] in (None, desc)
                checked += 1
    assert checked > 100


def _timeouts(rendered: Any, rank: int) -> list[tuple[str, int, str, int]]:
    """(group name, seq, OpType, NumelIn) of each timeout a rank logged."""
    out = []
    lines = [text for _, _, text in rendered.worker[rank]]
    for i, text in enumerate(lines):
        m = re.search(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+), NumelIn=(\d+)", text)
        if m and "Watchdog caught" in text and "terminated" not in text and "what()" not in text:
            g = re.search(r"PG GUID (\w+)", lines[i + 1])
            assert g is not None
            out.append((g[1], int(m[1]), m[2], int(m[3])))
    return out


def _cluster(world: int) -> Cluster:
    import random

    hosts = [f"node{i}" for i in range(world // 4)]
    return Cluster.build(hosts, 4, random.Random(0))


def test_timeouts_come_from_the_dumps() -> None:
    # A rank stuck before a tp all_reduce: its tp peers report that seq, it does not.
    job = simulate(JobSpec(Layout(tp=4, dp=2), fault=Fault("missing_ranks", 5, "tp", 1, 2)))
    assert job.expected is not None
    out = render(job, _cluster(8), LogStyle(window_s=600), 1)
    pg = job.expected["pg_name"]
    for peer in (4, 6, 7):
        assert (pg, job.expected["collective_seq_id"], "ALLREDUCE") in [
            t[:3] for t in _timeouts(out, peer)
        ]
    assert all(t[0] != pg for t in _timeouts(out, 5))
    # A size mismatch: the culprit's NumelIn is not its peers'.
    job = simulate(JobSpec(Layout(tp=4, dp=2), fault=Fault("size_mismatch", 2, "tp", 1, 1)))
    out = render(job, _cluster(8), LogStyle(window_s=600), 1)
    numel = {r: {t[3] for t in _timeouts(out, r)} for r in (0, 1, 2, 3)}
    assert numel[2] and numel[0] and numel[2] != numel[0] == numel[1] == numel[3]


def test_p2p_work_reports_its_p2p_seq() -> None:
    # initWork: a p2p WorkNCCL carries seqP2P_; unbatched sends and receives are SEND / RECV.
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), fault=Fault("missing_ranks", 6, "pp", 1, 0)))
    for rank in range(8):
        for o in outstanding(job.dumps.peek(rank), rank):
            if o.op_type in ("SEND", "RECV"):
                entry = next(
                    e
                    for e in job.dumps.peek(rank)["entries"]
                    if e["time_created_ns"] == o.created_ns and e["pg_id"] == o.group.pg_id
                )
                assert entry["is_p2p"] and o.seq == entry["p2p_seq_id"]
                assert o.numel_in == o.numel_out > 0
                break
        else:
            continue
        return
    pytest.fail("no rank waits in a send or receive")


def test_healthy_jobs_log_no_timeout() -> None:
    for seed in range(40):
        style = gen.sample(seed, "tune")
        if style["fault"] != "healthy":
            continue
        _, job, _, rendered = gen.build(seed, "tune")
        assert not job.hung and not rendered.logged_ranks
        text = "\n".join(t for lines in rendered.worker.values() for _, _, t in lines)
        assert "Watchdog caught" not in text and "terminate called" not in text
        return
    pytest.fail("no healthy scenario among the first 40 tune seeds")
