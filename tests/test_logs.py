"""The job's logs and py-spy stacks as evidence: real torchrun jobs on gloo, two agents as two
nodes (fixtures/logs, written by scripts/make_log_fixtures.py; expected.json holds what the
workers themselves recorded: the faulty rank, its node and pid)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result
from conftest import FIXTURES

from frtrace.cli import cli, expand_multi_values
from frtrace.report.json_report import load_schema

LOGS = FIXTURES / "logs"
FAULTS = ("stuck", "raise", "kill", "skip")
WITH_DUMPS = ("stuck", "raise", "skip")  # the killed rank's job left no dump at all


def frtrace(*args: str) -> Result:
    return CliRunner().invoke(cli, expand_multi_values(list(args)), catch_exceptions=False)


def expected(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((LOGS / scenario / "expected.json").read_text())
    return data


def logs_only(scenario: str, into: Path) -> Path:
    """The scenario's folder without its dumps: the node logs and py-spy files only."""
    folder = into / scenario
    folder.mkdir()
    for path in (LOGS / scenario).iterdir():
        if path.is_file() and path.name != "expected.json":
            shutil.copy(path, folder / path.name)
    return folder


def dumps_only(scenario: str, into: Path) -> Path:
    """The scenario's dumps alone, in their node folders."""
    folder = into / f"{scenario}-dumps"
    folder.mkdir()
    for path in (LOGS / scenario).iterdir():
        if path.is_dir() and any(path.iterdir()):
            shutil.copytree(path, folder / path.name)
    return folder


def report(*args: str) -> tuple[Result, dict[str, Any]]:
    result = frtrace(*args, "--format", "json")
    data = json.loads(result.stdout)
    jsonschema.validate(data, load_schema())
    return result, data


@pytest.mark.parametrize("scenario", FAULTS)
def test_logs_alone_name_the_culprit_rank_and_its_host_with_exit_1(
    scenario: str, tmp_path: Path
) -> None:
    truth = expected(scenario)
    result, data = report(str(logs_only(scenario, tmp_path)))
    assert result.exit_code == 1
    assert data["root_cause"]["culprit_ranks"] == [truth["culprit_rank"]]
    assert data["root_cause"]["hosts"] == [truth["culprit_host"]]


@pytest.mark.parametrize("scenario", FAULTS)
def test_the_verdict_line_names_the_culprit_and_its_host(scenario: str, tmp_path: Path) -> None:
    truth = expected(scenario)
    result = frtrace(str(logs_only(scenario, tmp_path)))
    last = result.stdout.splitlines()[-1]
    assert f"culprit rank {truth['culprit_rank']} on {truth['culprit_host']}," in last
    assert last.endswith("exit 1")


def test_a_healthy_jobs_logs_without_an_ending_are_unknown_with_exit_4(tmp_path: Path) -> None:
    """torchrun's agents log nothing at their default level when the workers succeed: logs
    that stop cannot show the job ended cleanly, so they never give OK."""
    result, data = report(str(logs_only("healthy", tmp_path)))
    assert result.exit_code == 4
    assert (data["ok"], data["verdict"], data["root_cause"]) == (False, "unknown", None)
    assert "do not show the job ended" in data["unseen"]["why"][0]


def test_a_job_log_that_says_nothing_is_unknown_with_exit_4(tmp_path: Path) -> None:
    """An empty `slurm-<jobid>.out` (the job printed nothing before it was collected): the
    job is not seen at all, which is UNKNOWN, not a usage error about dumps."""
    (tmp_path / "slurm-8719008.out").write_text("")
    result, data = report(str(tmp_path))
    assert result.exit_code == 4
    assert (data["verdict"], data["inputs"]["logs"][0]["file"]) == (
        "unknown",
        str(tmp_path / "slurm-8719008.out"),
    )


def test_the_stuck_ranks_own_function_from_py_spy_is_in_the_report(tmp_path: Path) -> None:
    truth = expected("stuck")
    result = frtrace(str(logs_only("stuck", tmp_path)))
    assert "slow_data_loader" in result.stdout
    assert f"py-spy dump --pid {truth['culprit_pid']}" in result.stdout


def test_the_stuck_ranks_live_stack_is_matched_by_the_pid_in_torchelastics_summary(
    tmp_path: Path,
) -> None:
    truth = expected("stuck")
    _result, data = report(str(logs_only("stuck", tmp_path)))
    (culprit,) = data["root_cause"]["culprit_evidence"]
    stack = next(e for e in culprit["evidence"] if e["shows"] == "live_stack")
    assert stack["pid"] == truth["culprit_pid"]
    assert stack["in_collective"] is None
    assert stack["frames"][0].startswith("slow_data_loader (")


def test_the_exception_type_of_the_rank_that_raised_is_in_the_report(tmp_path: Path) -> None:
    _result, data = report(str(logs_only("raise", tmp_path)))
    assert "raised ValueError: bad batch at step 2" in data["root_cause"]["detail"]
    (culprit,) = data["root_cause"]["culprit_evidence"]
    shown = [e for e in culprit["evidence"] if e["shows"] == "exception"]
    assert [(e["exception"], e["message"]) for e in shown] == [
        ("ValueError", "bad batch at step 2")
    ]


def test_the_signal_of_the_killed_rank_is_in_the_report(tmp_path: Path) -> None:
    result = frtrace(str(logs_only("kill", tmp_path)))
    assert "killed by SIGKILL" in result.stdout
    assert "SIGKILL (exit code -9)" in result.stdout


def test_a_rank_in_another_collective_is_named_with_where_it_waits(tmp_path: Path) -> None:
    _result, data = report(str(logs_only("skip", tmp_path)))
    root = data["root_cause"]
    assert (root["op"], root["waiting_ranks"]) == ("all_reduce", [0, 1, 2])
    assert "rank 3 waited in barrier instead" in root["detail"]


def test_labelled_py_spy_blocks_give_every_rank_its_stack(tmp_path: Path) -> None:
    """The skip job's stacks carry `# frtrace-collect` labels: each rank's stack, even those
    inside collectives, which nothing else tells apart."""
    from frtrace.api import analyze, load

    analysis = analyze(load(logs_only("skip", tmp_path)))
    assert analysis.evidence is not None
    mains = {r: e.stack.main for r, e in analysis.evidence.ranks.items() if e.stack}
    ops = {r: main.frames[0].function for r, main in mains.items() if main is not None}
    assert ops == {0: "all_reduce", 1: "all_reduce", 2: "all_reduce", 3: "barrier"}


@pytest.mark.parametrize("scenario", WITH_DUMPS)
def test_with_dumps_the_dumps_decide_and_the_logs_evidence_is_attached_to_the_culprit(
    scenario: str, tmp_path: Path
) -> None:
    truth = expected(scenario)
    _r, alone = report(str(dumps_only(scenario, tmp_path)))
    result, mixed = report(str(LOGS / scenario))
    keys = ("kind", "pg_name", "collective_seq_id", "culprit_ranks")
    assert [mixed["root_cause"][k] for k in keys] == [alone["root_cause"][k] for k in keys]
    assert result.exit_code == 1
    (culprit,) = mixed["root_cause"]["culprit_evidence"]
    assert (culprit["rank"], culprit["host"]) == (truth["culprit_rank"], truth["culprit_host"])
    assert any(e["source"] in ("log", "torchelastic") for e in culprit["evidence"])
    assert any(f.endswith(f"{truth['culprit_host']}.log") for f in culprit["files"])


def test_the_raised_exception_is_shown_beside_the_dumps_verdict() -> None:
    result = frtrace(str(LOGS / "raise"))
    assert "ValueError: bad batch at step 2" in result.stdout


def test_dump_names_and_folders_give_the_culprits_host(tmp_path: Path) -> None:
    _r, data = report(str(dumps_only("stuck", tmp_path)))
    assert data["root_cause"]["hosts"] == [expected("stuck")["culprit_host"]]


def test_the_header_says_what_was_read() -> None:
    first = frtrace(str(LOGS / "stuck")).stdout.split("\n\n")[0].replace("\n  ", " ")
    assert first.startswith("frtrace: 4 dumps, 2 logs (nodeA, nodeB), 4 py-spy stacks from ")


def test_logs_and_stacks_are_not_reported_as_broken_dumps(tmp_path: Path) -> None:
    result, data = report(str(LOGS / "stuck"))
    assert data["inputs"]["skipped"] == []
    assert {Path(f["file"]).name for f in data["inputs"]["logs"]} == {"nodeA.log", "nodeB.log"}
    assert "skipped" not in result.stderr


def test_logs_and_stacks_given_as_several_files_are_one_job() -> None:
    folder = LOGS / "stuck"
    files = [folder / "nodeA.log", folder / "nodeB.log", folder / "nodeB.pyspy.txt"]
    result, data = report(*map(str, files))
    assert (result.exit_code, data["root_cause"]["culprit_ranks"]) == (1, [3])
    assert "slow_data_loader" in data["root_cause"]["detail"]


def test_dump_folders_and_logs_given_together_are_one_job() -> None:
    folder = LOGS / "raise"
    paths = [folder / "nodeA", folder / "nodeB", folder / "nodeA.log", folder / "nodeB.log"]
    _result, data = report(*map(str, paths))
    assert data["inputs"]["files"] == 3
    assert data["root_cause"]["culprit_evidence"][0]["host"] == "nodeB"


def test_dumps_and_py_spy_files_without_logs_show_the_culprits_live_stack(
    tmp_path: Path,
) -> None:
    """No log ties a pid to a rank, and ranks 2 and 3 both last recorded the loop's one
    all_reduce: the dumps' verdict (rank 2 waits in a collective, rank 3 in none) ties
    node B's one process outside collectives to rank 3."""
    truth = expected("stuck")
    folder = dumps_only("stuck", tmp_path)
    for spy in LOGS.glob("stuck/*.pyspy.txt"):
        shutil.copy(spy, folder / spy.name)
    result, data = report(str(folder))
    assert result.exit_code == 1
    (culprit,) = data["root_cause"]["culprit_evidence"]
    assert (culprit["rank"], culprit["pid"]) == (truth["culprit_rank"], truth["culprit_pid"])
    assert "slow_data_loader  make_log_fixtures.py:70" in frtrace(str(folder)).stdout
