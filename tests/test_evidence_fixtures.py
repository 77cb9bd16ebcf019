"""Real jobs whose evidence was collected the ways people collect it (fixtures/evidence,
written by scripts/make_evidence_fixtures.py): what frtrace names is checked against what the
job itself recorded (expected.json: the culprit's rank, host, pid, function, exception,
signal), never against frtrace's own reasoning."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
from click.testing import CliRunner
from conftest import FIXTURES

from frtrace.cli import cli, expand_multi_values
from frtrace.evidence.gather import short_host
from frtrace.report.json_report import load_schema

EVIDENCE = FIXTURES / "evidence"


def truth(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVIDENCE / name / "expected.json").read_text())
    return data


def report(folder: Path) -> tuple[int, dict[str, Any], str]:
    runner = CliRunner()
    args = expand_multi_values([str(folder), "--format", "json"])
    result = runner.invoke(cli, args, catch_exceptions=False)
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema())
    text = runner.invoke(cli, [str(folder)], catch_exceptions=False).stdout
    return result.exit_code, data, text


def shown(root: dict[str, Any]) -> str:
    return json.dumps(root["culprit_evidence"]) + root["detail"]


def copied(name: str, to: Path) -> Path:
    """Fixture `name`'s evidence copied to `to`, for a test to cut or edit."""
    shutil.copytree(EVIDENCE / name / "evidence", to)
    return to


def decided(folder: Path) -> tuple[int, list[int], bool, str]:
    """The exit status, culprit ranks, whether undecidable, and the reason of a report."""
    code, data, _text = report(folder)
    root = data["root_cause"]
    return code, root["culprit_ranks"], root["evidence"]["undecidable"], root["evidence"]["reason"]


def test_a_slurm_job_log_and_py_spy_recipe_files_name_the_stuck_rank_its_host_and_function() -> (
    None
):
    want = truth("slurm_pyspy_recipe")["culprit"]
    code, data, _text = report(EVIDENCE / "slurm_pyspy_recipe" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert [short_host(h) for h in root["hosts"]] == [short_host(want["host"])]
    assert want["function"] in shown(root)


def test_a_folder_holding_several_nodes_files_names_no_node(tmp_path: Path) -> None:
    """The same evidence one folder down (`incident/evidence/`, as users copy it): a folder
    whose py-spy files name three nodes is no node, so the culprit keeps its rank and host."""
    want = truth("slurm_pyspy_recipe")["culprit"]
    copied("slurm_pyspy_recipe", tmp_path / "evidence")
    code, data, _text = report(tmp_path)
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert [short_host(h) for h in root["hosts"]] == [short_host(want["host"])]


def test_the_agents_in_a_py_spy_recipe_file_are_not_workers() -> None:
    _code, data, _text = report(EVIDENCE / "slurm_pyspy_recipe" / "evidence")
    stacks = sum(f["lines"] > 0 for f in data["inputs"]["stacks"])
    assert stacks == 3  # one file per node, read
    assert data["root_cause"]["waiting_ranks"] == [r for r in range(6) if r != 2]


def test_a_cancelled_hang_without_dumps_or_summary_is_never_ok() -> None:
    code, data, text = report(EVIDENCE / "cancelled_stacks_only" / "evidence")
    assert code == 1 and not data["ok"]
    assert text.splitlines()[-1].startswith("HUNG:")


def test_a_stuck_process_nothing_ties_to_a_rank_is_named_by_host_and_pid() -> None:
    want = truth("cancelled_stacks_only")["culprit"]
    _code, data, _text = report(EVIDENCE / "cancelled_stacks_only" / "evidence")
    root = data["root_cause"]
    assert root["culprit_ranks"] == []
    ((proc,),) = [root["culprit_processes"]]
    assert (short_host(proc["host"]), proc["pid"]) == (short_host(want["host"]), want["pid"])
    assert want["function"] in shown(root)


def test_with_its_stacks_lost_the_same_hang_is_unknown_not_ok(tmp_path: Path) -> None:
    """Less evidence never a surer answer: the logs alone of the cancelled job show no
    culprit and no end."""
    folder = copied("cancelled_stacks_only", tmp_path / "logs")
    shutil.rmtree(folder / "pyspy")
    code, data, _text = report(folder)
    assert (code, data["verdict"]) == (4, "unknown")


def test_short_numeric_roles_are_named_by_the_nodes_real_host_name() -> None:
    want = truth("short_roles")["culprit"]
    code, data, _text = report(EVIDENCE / "short_roles" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert [short_host(h) for h in root["hosts"]] == [short_host(want["host"])]
    assert want["exception"] in shown(root)


def test_detail_logs_blame_the_rank_the_monitored_barrier_names_not_every_rank() -> None:
    want = truth("detail_monitored_barrier")["culprit"]
    code, data, _text = report(EVIDENCE / "detail_monitored_barrier" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert root["evidence"]["decided_by"] == "monitored_barrier"


def test_a_prefix_template_of_global_ranks_gives_the_killed_rank() -> None:
    want = truth("prefix_template")["culprit"]
    code, data, _text = report(EVIDENCE / "prefix_template" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert [short_host(h) for h in root["hosts"]] == [short_host(want["host"])]
    assert want["signal"] in shown(root)


def test_a_healthy_job_whose_agents_logged_their_end_is_ok() -> None:
    code, data, _text = report(EVIDENCE / "healthy_info" / "evidence")
    assert (code, data["ok"], data["root_cause"]) == (0, True, None)


def test_a_healthy_job_missing_one_nodes_log_is_unknown(tmp_path: Path) -> None:
    folder = copied("healthy_info", tmp_path / "job")
    logs = sorted(p for p in folder.rglob("*") if p.is_file())
    logs[0].unlink()
    code, data, _text = report(folder)
    assert (code, data["verdict"]) == (4, "unknown")


def test_survivors_of_a_lost_peer_are_not_blamed_when_its_nodes_log_is_missing(
    tmp_path: Path,
) -> None:
    """gloo's peers lost their connection: the rank that died is on the node whose log is
    missing, and none of the ranks these logs show is named."""
    folder = copied("prefix_template", tmp_path / "job")
    want = truth("prefix_template")["culprit"]
    for path in folder.rglob("*"):
        if path.is_file() and short_host(want["host"]) in path.name:
            path.unlink()
    code, data, _text = report(folder)
    root = data["root_cause"]
    assert (code, root["culprit_ranks"], root["culprit_processes"]) == (1, [], [])
    assert "in none of these inputs" in root["detail"]


def test_a_rank_its_agent_ended_after_the_peer_died_is_not_that_peer(tmp_path: Path) -> None:
    """Torchelastic's summary ends rank 0 with the closing SIGTERM after ranks 1-2 lost their
    peer: rank 0 was alive then, so it is not the rank that died (lines as torch 2.13 writes
    them)."""
    lost = (
        "[{r}]:[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] "
        "Connection closed by peer [127.0.0.1]:40211. This is typically caused by a remote "
        "worker crashing.\n"
    )
    summary = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "Failures:\n[1]:\n  host      : a100-80\n  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : -15 (pid: 29501)  (SIGTERM)\n"
        "  traceback : Signal 15 (SIGTERM) received by PID 29501\n"
        "------------------------------------------------------------\n"
    )
    text = "[0]:starting\n" + "".join(
        f"[{r}]:[rank{r}]: Traceback (most recent call last):\n" + lost.format(r=r) for r in (1, 2)
    )
    (tmp_path / "a100-80.log").write_text(text + summary)
    code, data, _text = report(tmp_path)
    root = data["root_cause"]
    assert (code, root["culprit_ranks"], root["waiting_ranks"]) == (1, [], [1, 2])


def test_stacks_outside_collectives_with_no_rank_waiting_are_no_hang(tmp_path: Path) -> None:
    """A py-spy dump of a job at work (no rank inside a collective) is no evidence of a hang:
    no culprit, and not OK either (nothing shows the job ended)."""
    shutil.copy(FIXTURES / "logs" / "pyspy" / "native.txt", tmp_path / "node17.pyspy.txt")
    code, data, _text = report(tmp_path)
    assert (code, data["root_cause"]) == (4, None)


def test_gloos_dumps_under_detail_leave_the_logs_to_decide() -> None:
    want = truth("detail_with_dumps")["culprit"]
    code, data, _text = report(EVIDENCE / "detail_with_dumps" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert want["function"] in shown(root)


def test_gloos_dumps_under_detail_with_no_fault_in_the_logs_give_no_finding(
    tmp_path: Path,
) -> None:
    """The dumps' sequence numbers mix the wrapper's checks with the job's calls: unmatched
    there is no fault of its own, and the logs, which show the debug level, show none."""
    folder = tmp_path / "job"
    folder.mkdir()
    for dump in (EVIDENCE / "detail_with_dumps" / "evidence").glob("trace_*"):
        shutil.copy(dump, folder / dump.name)
    (folder / "node.log").write_text(
        "[I1128 12:32:07.629509714 debug.cpp:48] [c10d] The debug level is set to DETAIL.\n"
    )
    _code, data, _text = report(folder)
    assert data["root_cause"] is None


def test_gloos_dumps_under_detail_are_not_matched_when_the_log_saying_so_is_lost(
    tmp_path: Path,
) -> None:
    """The job log that states the debug level is gone; the dumps show the wrapper's checks
    themselves (all_gather entries under the stack of an all_reduce): still unmatched, and
    the py-spy stacks name the stuck rank, not an order cycle of the mixed seqs."""
    want = truth("detail_with_dumps")["culprit"]
    folder = copied("detail_with_dumps", tmp_path / "evidence")
    shutil.rmtree(folder / "logs")
    code, data, _text = report(folder)
    assert (code, data["root_cause"]["kind"], data["root_cause"]["culprit_ranks"]) == (
        1,
        "missing_ranks",
        [want["rank"]],
    )


def test_gloos_dumps_under_detail_alone_are_never_ok(tmp_path: Path) -> None:
    """Only the dumps, and the world's size given: they cannot be matched and nothing shows
    how the job ended, so the job is unknown (exit 4), not healthy."""
    folder = tmp_path / "job"
    folder.mkdir()
    for dump in (EVIDENCE / "detail_with_dumps" / "evidence").glob("trace_*"):
        shutil.copy(dump, folder / dump.name)
    runner = CliRunner()
    result = runner.invoke(cli, [str(folder), "--world-size", "3", "--format", "json"])
    data = json.loads(result.stdout)
    assert (result.exit_code, data["verdict"], data["root_cause"]) == (4, "unknown", None)
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in " ".join(data["unseen"]["why"])


def test_detail_lines_name_the_rank_that_never_entered_the_collective_the_others_did() -> None:
    """Cancelled before any timeout, no dump, no stack: DETAIL's `Running collective` lines
    alone show which rank never entered the collective the others are in."""
    want = truth("detail_entered")["culprit"]
    code, data, _text = report(EVIDENCE / "detail_entered" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert [short_host(h) for h in root["hosts"]] == [short_host(want["host"])]


def test_an_even_split_is_settled_by_the_rank_its_agent_found_still_running() -> None:
    want = truth("even_split_alive")["culprit"]
    folder = EVIDENCE / "even_split_alive" / "evidence"
    assert decided(folder) == (1, [want["rank"]], False, "still_running")


def test_an_even_split_without_the_agents_closing_line_stays_undecidable(tmp_path: Path) -> None:
    """The same job without the line that shows the absent rank alive: both ranks named."""
    folder = copied("even_split_alive", tmp_path / "evidence")
    for log in folder.rglob("*"):
        if log.is_file() and "closing signal" in log.read_text(errors="replace"):
            kept = [ln for ln in log.read_text().splitlines() if "closing signal" not in ln]
            log.write_text("\n".join(kept) + "\n")
    assert decided(folder)[:3] == (1, [0, 1], True)


def test_an_even_split_is_settled_by_the_absent_ranks_own_exception() -> None:
    want = truth("even_split_failed")["culprit"]
    folder = EVIDENCE / "even_split_failed" / "evidence"
    assert decided(folder) == (1, [want["rank"]], False, "failed_by_itself")
    _code, data, text = report(folder)
    assert want["exception"] in shown(data["root_cause"]) and "raised an exception" in text


def test_an_even_split_whose_absent_rank_shows_no_failure_stays_undecidable(
    tmp_path: Path,
) -> None:
    """The same job with only the absent rank's progress lines left in its node's log (no
    traceback, no agent, no summary): nothing tells the two ranks apart."""
    folder = copied("even_split_failed", tmp_path / "evidence")
    want = truth("even_split_failed")["culprit"]
    log = folder / f"{want['host']}.log"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(ln for ln in lines if "| loss" in ln) + "\n")
    assert decided(folder)[:3] == (1, [0, 1], True)


def test_an_even_split_stays_undecidable_where_the_issuing_rank_failed_by_itself_too(
    tmp_path: Path,
) -> None:
    """The same job with rank 0's wait (gloo's lost peer) replaced by an exception of its
    own: both sides failed by themselves, so neither failure settles the split."""
    folder = copied("even_split_failed", tmp_path / "evidence")
    (log,) = [p for p in folder.glob("*.log") if "rank=0 " in p.read_text()]
    head = log.read_text().splitlines()[0].split("]:", 1)[0] + "]:[rank0]: "
    kept = [ln for ln in log.read_text().splitlines() if "[rank0]:" not in ln]
    own = ["Traceback (most recent call last):", '  File "/job/x.py", line 3, in load']
    kept += [head + ln for ln in [*own, "ValueError: corrupt batch"]]
    log.write_text("\n".join(kept) + "\n")
    assert decided(folder)[:3] == (1, [0, 1], True)


def test_an_agent_that_lost_its_rendezvous_store_names_the_rank_no_input_shows() -> None:
    want = truth("store_lost")["culprit"]
    folder = EVIDENCE / "store_lost" / "evidence"
    assert decided(folder) == (1, [want["rank"]], False, "store_lost")
    assert "lost its rendezvous store" in report(folder)[2]


def _store_lost_log(tmp_path: Path, keep: Callable[[str], bool], extra: str = "") -> Path:
    folder = copied("store_lost", tmp_path / "evidence")
    (log,) = folder.glob("*.out")
    log.write_text("".join(ln + "\n" for ln in log.read_text().splitlines() if keep(ln)) + extra)
    return folder


def test_without_the_agents_own_death_the_lost_node_is_unknown(tmp_path: Path) -> None:
    """The same log cut before the agent's traceback: a rank ended by its agent, nothing
    more, so the job cannot be told (UNKNOWN), not blamed on the unseen rank."""
    folder = _store_lost_log(
        tmp_path, lambda ln: "Rendezvous" not in ln and "DistNetwork" not in ln
    )
    code, data, _text = report(folder)
    assert code == 4 and data["root_cause"] is None


def test_a_lost_store_names_nobody_where_every_rank_is_seen(tmp_path: Path) -> None:
    """Rank 1's own line beside the agent's death: no rank is unseen, so the node that went
    away cannot be told from the logs."""
    folder = _store_lost_log(tmp_path, lambda ln: True, "rank 1 pid 4242 on nB\n")
    code, data, _text = report(folder)
    assert code == 4 and data["root_cause"] is None


def test_a_lost_store_with_several_ranks_unseen_names_them_all_undecidable(
    tmp_path: Path,
) -> None:
    """The same log with the agents' roster stating a world of 3: ranks 1 and 2 are unseen,
    and which of them the node that went away held is not known."""
    folder = _store_lost_log(tmp_path, lambda ln: True)
    (log,) = folder.glob("*.out")
    log.write_text(log.read_text().replace("world_sizes=[2]", "world_sizes=[3]"))
    assert decided(folder) == (1, [1, 2], True, "store_lost")
    assert "some of ranks 1-2, which no input shows" in report(folder)[1]["root_cause"]["detail"]


def test_untied_dumps_without_a_pid_are_named_by_host_and_place_never_pid_none(
    tmp_path: Path,
) -> None:
    """Two faulthandler dumps in one node's shared stream (no pid, no rank), rank 0 waiting
    elsewhere: the report names them by host and by where each stack is, and its JSON holds
    a null pid and no py-spy command for a pid it does not know."""
    dump = (
        "Current thread 0x00007f02fab33b80 (most recent call first):\n"
        '  File "/job/main.py", line 67 in fetch_batch\n'
        "Current thread 0x00007f926f40ab80 (most recent call first):\n"
        '  File "/job/main.py", line 90 in read_shard\n'
    )
    gloo = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/venv/torch/distributed/distributed_c10d.py", line 3252, in all_reduce\n'
        "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc"
        ":78] Timed out waiting 16000ms for recv operation to complete\n"
    )
    text = "".join(f"1: {line}\n" for line in dump.splitlines())
    text += "".join(f"0: {line}\n" for line in gloo.splitlines())
    text += "srun: error: gpu7: task 1: Exited with exit code 1\n"
    (tmp_path / "slurm-77.out").write_text(text)
    code, data, said = report(tmp_path)
    root = data["root_cause"]
    assert code == 1 and root["culprit_ranks"] == []
    assert [p["pid"] for p in root["culprit_processes"]] == [None, None]
    assert "pid None" not in said and "--pid None" not in json.dumps(data)
    assert "2 processes on gpu7" in said
    assert "a process on gpu7 (its stack at slurm-77.out:1)" in said.replace("\n  ", " ")


def test_a_rank_whose_dump_was_lost_is_no_culprit_where_its_log_shows_it_waiting(
    tmp_path: Path,
) -> None:
    """Rank 0's dump is gone; its log shows it timing out in its collective: a victim whose
    dump was lost, and rank 1, which the logs show never joining, holds the job."""
    want = truth("even_split_alive")["culprit"]
    folder = copied("even_split_alive", tmp_path / "evidence")
    (folder / "dumps" / "gpu-st-p4d-24xlarge-85.cluster.internal" / "trace_0").unlink()
    assert decided(folder)[:3] == (1, [want["rank"]], False)


def test_a_missing_dump_that_ranks_only_may_wait_for_names_them_too(tmp_path: Path) -> None:
    """One gloo dump alone: rank 1's last call records no completion, so rank 1 may wait
    for rank 0, which left no dump, or may have completed it and stopped elsewhere."""
    dump = next((EVIDENCE / "even_split_alive" / "evidence" / "dumps").rglob("trace_1"))
    shutil.copy(dump, tmp_path / "trace_1")
    code, data, _text = report(tmp_path)
    root = data["root_cause"]
    assert (code, root["kind"], root["culprit_ranks"], root["evidence"]["undecidable"]) == (
        1,
        "missing_dump",
        [0, 1],
        True,
    )
    assert "rank 0 left no dump" in root["detail"]


def test_a_missing_dump_is_its_ranks_alone_where_the_logs_show_the_others_waiting(
    tmp_path: Path,
) -> None:
    """The raising rank's dump is gone, and the other rank's log shows it timing out in its
    collective: the wait the dump could not confirm is confirmed, the missing rank named."""
    want = truth("even_split_failed")["culprit"]
    folder = copied("even_split_failed", tmp_path / "evidence")
    (folder / "dumps" / "gpu-st-p4d-24xlarge-254.cluster.internal" / "trace_1").unlink()
    code, data, _text = report(folder)
    root = data["root_cause"]
    assert (code, root["kind"], root["culprit_ranks"], root["evidence"]["undecidable"]) == (
        1,
        "missing_dump",
        [want["rank"]],
        False,
    )


def test_a_healthy_job_with_gloo_dumps_and_the_agents_end_is_ok() -> None:
    code, data, _text = report(EVIDENCE / "healthy_dumps_info" / "evidence")
    assert (code, data["verdict"]) == (0, "ok")


def test_a_lost_dump_of_a_healthy_job_whose_logs_show_its_end_is_no_finding(
    tmp_path: Path,
) -> None:
    """Rank 3's dump is gone: the others' last calls are not known to have completed (gloo),
    but the agents' lines show every worker exited 0, so nothing held the job; the lost dump
    leaves it unseen (exit 4), never a culprit."""
    folder = copied("healthy_dumps_info", tmp_path / "evidence")
    (folder / "trace_3").unlink()
    code, data, _text = report(folder)
    assert (code, data["root_cause"]) == (4, None)


def test_a_lost_dump_of_gloo_dumps_alone_is_named_undecidable(tmp_path: Path) -> None:
    """The same without the logs: ranks 0-2 may wait for rank 3, or the job ended (a job that
    ended cleanly looks the same in gloo's dumps): rank 3 is named, undecidable."""
    folder = copied("healthy_dumps_info", tmp_path / "evidence")
    for path in [folder / "trace_3", *folder.glob("*.log")]:
        path.unlink()
    code, data, _text = report(folder)
    root = data["root_cause"]
    assert (code, root["kind"], root["culprit_ranks"], root["evidence"]["undecidable"]) == (
        1,
        "missing_dump",
        [3],
        True,
    )
    assert "a job that ended cleanly looks the same" in root["detail"]


def test_faulthandler_stacks_beside_gloo_dumps_name_the_stuck_rank_and_its_function() -> None:
    want = truth("faulthandler_dumps")["culprit"]
    code, data, _text = report(EVIDENCE / "faulthandler_dumps" / "evidence")
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [want["rank"]])
    assert want["function"] in shown(root)


def test_a_lost_dump_beside_a_live_stack_stuck_outside_collectives_is_no_culprit(
    tmp_path: Path,
) -> None:
    """Rank 0's dump is gone, so rank 1's last call may wait for it; but the faulthandler
    stacks show a process of rank 0's host stuck outside collectives (its pid and rank
    untold): that process is the culprit, shown with its own stack, not its neighbours'."""
    want = truth("faulthandler_dumps")["culprit"]
    folder = copied("faulthandler_dumps", tmp_path / "evidence")
    (folder / "trace_0").unlink()
    code, data, _text = report(folder)
    root = data["root_cause"]
    assert (code, root["culprit_ranks"]) == (1, [])
    assert [p["host"] for p in root["culprit_processes"]] == [want["host"]]
    (proc,) = root["culprit_evidence"]
    assert want["function"] in json.dumps(proc["evidence"])
