"""Logs beyond the CPU fixtures: NCCL's watchdog lines (built from torch's format strings),
NCCL WARN lines, and hostile logs (huge, binary, endless lines, escape codes)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from hostile_cases import RAW_CONTROLS, run_cli
from log_builders import nccl_async_error_lines, nccl_warn_line, nccl_watchdog_lines

from frtrace.cli import cli, expand_multi_values
from frtrace.evidence.logs import parse_log

LOGS = FIXTURES / "logs"


def json_report(folder: Path) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, expand_multi_values([str(folder), "--format", "json"]), catch_exceptions=False
    )
    return result.exit_code, json.loads(result.stdout)


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


def nccl_job(folder: Path, stuck: int = 3, seq: int = 5) -> None:
    """A 4-rank NCCL job on nodeA (ranks 0-1) and nodeB (ranks 2-3): every rank but `stuck`
    times out in default_pg's all_reduce `seq`; `stuck` only printed its progress."""
    folder.mkdir(parents=True, exist_ok=True)
    for node, ranks in (("nodeA", (0, 1)), ("nodeB", (2, 3))):
        lines: list[str] = []
        for local, rank in enumerate(ranks):
            header = f"[{node}:{local}]:"
            lines.append(f"{header}step {seq - 1} loss 0.5")
            if rank != stuck:
                lines += nccl_watchdog_lines(rank, seq, header=header)
        _write(folder / f"{node}.log", lines)


def test_nccl_watchdog_timeouts_name_the_group_seq_and_the_rank_that_never_came(
    tmp_path: Path,
) -> None:
    nccl_job(tmp_path / "job")
    code, data = json_report(tmp_path / "job")
    root = data["root_cause"]
    assert code == 1
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "missing_ranks",
        [3],
        [0, 1, 2],
    )
    assert (root["pg_name"], root["pg_desc"], root["collective_seq_id"], root["op"]) == (
        "0",
        "default_pg",
        5,
        "all_reduce",
    )
    assert root["hosts"] == ["nodeB"]


def test_a_watchdog_line_after_a_progress_bar_is_still_that_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    nccl_job(folder)
    text = (folder / "nodeA.log").read_text()
    bar = "[nodeA:1]:Epoch 10/10: 240it [05:55,  1.47s/it, loss=5.46]"
    (folder / "nodeA.log").write_text(text.replace("[nodeA:1]:[rank1]:", bar + "[rank1]:"))
    _code, data = json_report(folder)
    assert data["root_cause"]["waiting_ranks"] == [0, 1, 2]


def test_a_timeout_repeated_when_the_watchdog_exits_keeps_when_the_work_began(
    tmp_path: Path,
) -> None:
    """Watchdog::run logs `<PG prefix>Process group watchdog thread terminated with exception:
    <the timeout's message>` later: its `ran for` is the first line's, its clock later."""
    first = nccl_watchdog_lines(5, 19, group_rank=1, pg_id=1, pg_uid="8", pg_desc="mesh_tp")
    timeout = first[0].split("] ", 1)[1]  # `[Rank 1] Watchdog caught ...`, headers off
    exiting = (
        "[rank5]:[E1127 10:01:00.000000000 ProcessGroupNCCL.cpp:2197] [PG ID 1 PG GUID "
        f"8(mesh_tp) Rank 1] Process group watchdog thread terminated with exception: {timeout}"
    )
    log = tmp_path / "rank5.log"
    _write(log, [first[0], exiting])
    ((_speaker, wait),) = parse_log(log).waits
    assert (wait.pg_name, wait.seq) == ("8", 19)
    # 10:00:00.123456789 on Nov 27 (day 331 from Jan 1, in a leap year), less the 600017 ms
    assert wait.started == pytest.approx((331 * 86400 + 10 * 3600) + 0.123456789 - 600.017)


def test_the_watchdog_status_line_gives_the_groups_last_enqueued_and_completed(
    tmp_path: Path,
) -> None:
    log = tmp_path / "rank0.log"
    _write(log, nccl_watchdog_lines(0, 7, last_enqueued=9, last_completed=6, pg_desc="mesh_tp"))
    parsed = parse_log(log)
    ((speaker, wait),) = parsed.waits
    assert speaker.rank == 0
    assert (wait.op, wait.seq, wait.timeout_ms, wait.pg_desc) == (
        "all_reduce",
        7,
        600_000,
        "mesh_tp",
    )
    assert (wait.last_enqueued, wait.last_completed) == (9, 6)


def test_an_nccl_warn_line_is_filed_under_the_rank_with_that_pid(tmp_path: Path) -> None:
    from frtrace.api import load

    folder = tmp_path / "job"
    folder.mkdir()
    truth = json.loads((LOGS / "kill" / "expected.json").read_text())
    text = (LOGS / "kill" / "nodeB.log").read_text()
    pid = truth["pids"]["2"]
    warn = nccl_warn_line("nodeB", pid, "NET/IB : Got completion with error 12")
    (folder / "nodeB.log").write_text(warn + "\n" + text)
    evidence = load(folder).evidence
    assert evidence is not None
    assert [w.message for w in evidence.ranks[2].warnings] == [
        "NET/IB : Got completion with error 12"
    ]


def _huge_sparse_log(path: Path, head: str, tail: str, size: int) -> None:
    with open(path, "wb") as f:
        f.write(head.encode())
        f.truncate(size)
        f.seek(size - len(tail.encode()))
        f.write(tail.encode())


def test_a_2gb_log_is_read_by_its_head_and_tail_and_its_failure_found(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "nodeA.log").write_text((LOGS / "raise" / "nodeA.log").read_text())
    tail = (LOGS / "raise" / "nodeB.log").read_text()
    _huge_sparse_log(folder / "nodeB.log", "[nodeB:0]:starting\n", tail, 2 << 30)
    result = run_cli([str(folder), "--format", "json"])
    data = result.report
    assert result.status == 1, result.stderr[-2000:]
    assert data["root_cause"]["culprit_ranks"] == [3]
    big = next(f for f in data["inputs"]["logs"] if f["file"].endswith("nodeB.log"))
    assert big["truncated"] is True


def test_binary_junk_in_a_log_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "nodeA.log").write_text((LOGS / "raise" / "nodeA.log").read_text())
    lines = (LOGS / "raise" / "nodeB.log").read_bytes().split(b"\n")
    junk = bytes(range(256)) * 40
    mixed = lines[:8] + [x for line in lines[8:] for x in (junk, line)]  # after the first KB
    (folder / "nodeB.log").write_bytes(b"\n".join(mixed))
    code, data = json_report(folder)
    assert (code, data["root_cause"]["culprit_ranks"]) == (1, [3])
    big = next(f for f in data["inputs"]["logs"] if f["file"].endswith("nodeB.log"))
    assert big["binary_lines"] >= len(lines) - 8


def test_a_10mb_line_is_cut_and_never_printed(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "nodeA.log").write_text((LOGS / "raise" / "nodeA.log").read_text())
    text = (LOGS / "raise" / "nodeB.log").read_text()
    long_line = "[nodeB:1]:[rank3]: " + "x" * (10 << 20)
    (folder / "nodeB.log").write_text(long_line + "\n" + text)
    result = run_cli([str(folder), "--format", "json"])
    assert result.status == 1, result.stderr[-2000:]
    assert len(result.stdout) < 100_000
    big = next(f for f in result.report["inputs"]["logs"] if f["file"].endswith("nodeB.log"))
    assert big["cut_lines"] == 1


def test_escape_codes_in_a_traceback_are_never_printed_raw(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "nodeA.log").write_text((LOGS / "raise" / "nodeA.log").read_text())
    text = (LOGS / "raise" / "nodeB.log").read_text()
    evil = "bad \x1b]0;pwned\x07\x1b[2J\x9b31m\x07 batch\r at step 2"
    (folder / "nodeB.log").write_text(text.replace("bad batch at step 2", evil))
    result = run_cli([str(folder)])
    assert result.status == 1, result.stderr[-2000:]
    assert not RAW_CONTROLS.search(result.stdout), result.stdout
    assert not RAW_CONTROLS.search(result.stderr)
    assert "ValueError" in result.stdout


def test_the_log_budget_is_set_like_the_dump_budgets(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for name in ("nodeA.log", "nodeB.log"):
        (folder / name).write_text((LOGS / "raise" / name).read_text())
    env = dict(os.environ, FRTRACE_BUDGETS="max_log_bytes=2048")
    result = run_cli([str(folder), "--format", "json"], env=env)
    assert all(f["truncated"] for f in result.report["inputs"]["logs"])


def test_one_nodes_logs_alone_do_not_blame_the_ranks_that_waited(tmp_path: Path) -> None:
    """nodeA's ranks timed out waiting for a rank on nodeB, whose log is not given: less
    evidence names no culprit with confidence."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "nodeA.log").write_text((LOGS / "raise" / "nodeA.log").read_text())
    code, data = json_report(folder)
    root = data["root_cause"]
    assert code == 1
    assert (root["kind"], root["evidence"]["undecidable"]) == ("stuck_collective", True)
    assert "logs that were not given" in root["detail"]


def test_a_log_named_like_a_dump_is_read_as_a_log_not_skipped_as_a_broken_dump(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for node in ("nodeA", "nodeB"):
        (folder / f"trace_{node}_0").write_text((LOGS / "raise" / f"{node}.log").read_text())
    code, data = json_report(folder)
    assert data["inputs"]["skipped"] == []
    assert len(data["inputs"]["logs"]) == 2
    assert (code, data["root_cause"]["culprit_ranks"]) == (1, [3])


def test_without_role_the_default_prefix_and_the_files_name_give_the_host(tmp_path: Path) -> None:
    """`torchrun` without `--role` writes `[default<local>]:`; the node is the file's."""
    folder = tmp_path / "job"
    folder.mkdir()
    for node in ("nodeA", "nodeB"):
        text = (LOGS / "raise" / f"{node}.log").read_text()
        (folder / f"{node}.out").write_text(text.replace(f"[{node}:", "[default"))
    _code, data = json_report(folder)
    assert data["root_cause"]["hosts"] == ["nodeB"]


def test_per_rank_files_without_prefixes_are_their_ranks(tmp_path: Path) -> None:
    """One file per rank (`rank3.log`), lines as the worker wrote them, nothing prefixed."""
    folder = tmp_path / "job"
    folder.mkdir()
    timeout = (
        "Traceback (most recent call last):\n"
        '  File "/job/train.py", line 40, in step\n'
        "    dist.all_reduce(x)\n"
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", '
        "line 3252, in all_reduce\n"
        "    work.wait()\n"
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
        "waiting 5000ms for recv operation to complete\n"
    )
    for rank in (0, 1, 2):
        (folder / f"rank{rank}.log").write_text(f"step 9 on rank {rank}\n" + timeout)
    (folder / "rank3.log").write_text("step 9 on rank 3\nloading shard 17\n")
    code, data = json_report(folder)
    root = data["root_cause"]
    assert (code, root["culprit_ranks"], root["waiting_ranks"]) == (1, [3], [0, 1, 2])


def test_a_chained_exception_is_read_as_its_last_one(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text(
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/job/data.py", line 88, in slow_data_loader\n'
        "[rank0]:     return next(it)\n"
        "[rank0]: StopIteration\n"
        "\n"
        "[rank0]: During handling of the above exception, another exception occurred:\n"
        "\n"
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/job/train.py", line 12, in <module>\n'
        "[rank0]:     main()\n"
        '[rank0]:   File "/job/data.py", line 90, in slow_data_loader\n'
        '[rank0]:     raise RuntimeError("shard 17 is empty")\n'
        "[rank0]: RuntimeError: shard 17 is empty\n"
    )
    parsed = parse_log(log)
    assert [(s.rank, r.type, r.message) for s, r in parsed.raised] == [
        (0, "StopIteration", ""),
        (0, "RuntimeError", "shard 17 is empty"),
    ]
    last = parsed.raised[-1][1]
    assert [f.function for f in last.frames] == ["slow_data_loader", "<module>"]


def test_a_log_named_like_the_next_ranks_dump_is_read_as_a_log(tmp_path: Path) -> None:
    """Dumps are told apart by content only when needed: this one is found when its parse
    fails, and is then read as the log it is."""
    folder = tmp_path / "job"
    shutil.copytree(LOGS / "raise" / "nodeA", folder)
    shutil.copy(LOGS / "raise" / "nodeB" / "nccl_trace_rank_nodeB_3", folder)
    (folder / "nccl_trace_rank_nodeB_2").write_text((LOGS / "raise" / "nodeB.log").read_text())
    code, data = json_report(folder)
    assert data["inputs"]["skipped"] == []
    assert [Path(f["file"]).name for f in data["inputs"]["logs"]] == ["nccl_trace_rank_nodeB_2"]
    assert (code, data["inputs"]["ranks"]) == (1, [0, 1, 3])


def test_a_larger_family_of_logs_does_not_hide_the_dumps(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    shutil.copytree(LOGS / "raise" / "nodeA", folder)
    for i, node in enumerate(("nodeA", "nodeB", "nodeA")):
        (folder / f"out_{i}").write_text((LOGS / "raise" / f"{node}.log").read_text())
    _code, data = json_report(folder)
    assert data["inputs"]["ranks"] == [0, 1]
    assert len(data["inputs"]["logs"]) == 3


def test_an_nccl_error_is_a_communication_error_not_a_timeout(tmp_path: Path) -> None:
    log = tmp_path / "rank1.log"
    message = "NCCL error: remote process exited or there was a network error"
    _write(log, nccl_async_error_lines(1, 9, message))
    ((_speaker, wait),) = parse_log(log).waits  # the status line completes the error's
    assert (wait.how, wait.op, wait.seq, wait.detail) == ("comm_error", "all_reduce", 9, message)
    assert (wait.pg_name, wait.pg_desc, wait.last_completed) == ("0", "default_pg", 8)


def test_every_ranks_host_is_in_the_json_report() -> None:
    _code, data = json_report(LOGS / "stuck")
    truth = json.loads((LOGS / "stuck" / "expected.json").read_text())
    assert data["inputs"]["hosts"] == truth["hosts"]


def test_a_rank_that_wrote_no_line_of_its_own_is_no_surer_absent_than_inside(
    tmp_path: Path,
) -> None:
    """As above, but rank 3's own lines are all lost: only its agent's summary entry names it
    (ended by SIGTERM). The others' watchdogs alone speak for it, so it may as well have
    waited inside the collective with them: undecidable, the waiting named too."""
    folder = tmp_path / "job"
    nccl_job(folder)
    kept = [ln for ln in (folder / "nodeB.log").read_text().splitlines() if "nodeB:1" not in ln]
    summary = [
        "Failures:",
        "[1]:",
        "  time      : 2024-11-27_10:20:00",
        "  host      : nodeB",
        "  rank      : 3 (local_rank: 1)",
        "  exitcode  : -15 (pid: 4103)  (SIGTERM)",
        "  error_file: <N/A>",
        "  traceback : Signal 15 (SIGTERM) received by PID 4103",
    ]
    _write(folder / "nodeB.log", kept + summary)
    code, data = json_report(folder)
    root = data["root_cause"]
    assert (code, root["culprit_ranks"], root["evidence"]["undecidable"]) == (
        1,
        [0, 1, 2, 3],
        True,
    )
