"""`frtrace history` over reports frtrace wrote for the bundled real fixtures: the host or
rank that broke most jobs comes first, wherever its host is learned from."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import FIXTURES

from frtrace.cli import cli
from frtrace.subcommands import history_command

# Dump fixtures whose reports name no host (fixtures/logs and the others would add hosts)
FIXTURE_NAMES = [
    "alltoall_uneven_4rank",
    "broadcast_root_4rank",
    "cascade_4rank",
    "gather_scatter_4rank",
    "healthy_4rank",
    "order_inversion_4rank",
    "size_3rank",
    "tutorial",
    "tutorial_json",
]
DAY = 86400.0


def analyze(trace_dir: Path, report: Path) -> None:
    """frtrace TRACE_DIR -o REPORT (the report every incident gets)."""
    result = CliRunner().invoke(cli, [str(trace_dir), "-o", str(report)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    assert report.is_file()


def history(*args: str) -> Result:
    return CliRunner().invoke(history_command, list(args), catch_exceptions=False)


def split_incident(root: Path, layout: dict[str, list[int]], source: str = "cascade_4rank") -> Path:
    """A fixture's dumps split into one sub-folder per host, as collected from each node."""
    for host, ranks in layout.items():
        (root / host).mkdir(parents=True)
        for rank in ranks:
            shutil.copy(FIXTURES / source / f"trace_{rank}", root / host / f"trace_{rank}")
    return root


@pytest.fixture(scope="module")
def fixture_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report per bundled fixture (no host in any of them)."""
    out = tmp_path_factory.mktemp("reports")
    for name in FIXTURE_NAMES:
        analyze(FIXTURES / name, out / f"{name}.json")
    return out


@pytest.fixture(scope="module")
def cascade_on_two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cascade fixture (rank 3 stopped) collected as nodeA (ranks 0-1), nodeB (2-3)."""
    incident = split_incident(
        tmp_path_factory.mktemp("incident"), {"nodeA": [0, 1], "nodeB": [2, 3]}
    )
    analyze(incident, incident / "report.json")
    return incident


def copy_incident(incident: Path, dest: Path) -> Path:
    shutil.copytree(incident, dest)
    return dest


def as_json(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_host_that_broke_most_jobs_is_named_first(
    fixture_reports: Path, cascade_on_two_hosts: Path, tmp_path: Path
) -> None:
    shutil.copytree(fixture_reports, tmp_path / "reports")
    for name in ("incident-1", "incident-2"):
        copy_incident(cascade_on_two_hosts, tmp_path / name)
    # once more a job broken by a rank on nodeA: the tutorial's rank 0
    tutorial = split_incident(tmp_path / "incident-3", {"nodeA": [0], "nodeC": [1]}, "tutorial")
    analyze(tutorial, tutorial / "report.json")
    result = history(str(tmp_path))
    assert result.exit_code == 0, result.output
    table = result.stdout.splitlines()
    header = table.index(next(line for line in table if line.startswith("host ")))
    rows = [line.split()[:4] for line in table[header + 2 : header + 4]]
    assert rows == [["nodeB", "2", "2", "missing_ranks"], ["nodeA", "1", "1", "missing_ranks"]]
    assert table[-1].startswith(
        f"MOST OFTEN: host nodeB, culprit in 2 of {3 + 6} hung job(s) (2 alone)"
    )


def test_json_lists_hosts_then_ranks_of_unknown_host_with_counts_by_kind(
    fixture_reports: Path, cascade_on_two_hosts: Path, tmp_path: Path
) -> None:
    copy_incident(cascade_on_two_hosts, tmp_path / "incident-1")
    shutil.copy(fixture_reports / "tutorial.json", tmp_path / "a.json")
    shutil.copy(fixture_reports / "tutorial.json", tmp_path / "b.json")
    data = as_json(history(str(tmp_path), "--format", "json"))
    assert (data["schema"], data["reports"], data["hung"]) == ("frtrace.history/1", 3, 3)
    [host] = data["hosts"]
    assert (host["host"], host["times"], host["kinds"], host["ranks"]) == (
        "nodeB",
        1,
        {"missing_ranks": 1},
        [3],
    )
    assert [(r["rank"], r["times"], r["alone"]) for r in data["ranks_without_host"]] == [(0, 2, 2)]


def test_root_cause_hosts_in_the_report_win_over_the_dump_folders(
    cascade_on_two_hosts: Path, tmp_path: Path
) -> None:
    incident = copy_incident(cascade_on_two_hosts, tmp_path / "incident")
    report = json.loads((incident / "report.json").read_text())
    report["root_cause"]["hosts"] = {"3": "node17"}
    (incident / "report.json").write_text(json.dumps(report))
    data = as_json(history(str(incident / "report.json"), "--format", "json"))
    assert [(h["host"], h["ranks"]) for h in data["hosts"]] == [("node17", [3])]
    assert data["incidents"][0]["hosts_from"] == "report"


def test_hosts_and_time_come_from_collect_manifests_when_the_report_names_no_host(
    tmp_path: Path,
) -> None:
    incident = split_incident(tmp_path / "incident", {"x1": [0, 1], "x2": [2, 3]})
    for folder, host, ranks in (("x1", "gpu-a", [0, 1]), ("x2", "gpu-b", [2, 3])):
        manifest = {
            "schema": "frtrace.collect/1",
            "host": host,
            "time": f"2026-03-0{1 if host == 'gpu-a' else 2}T10:00:00Z",
            "processes": [{"rank": r, "local_rank": r % 2, "pid": 100 + r} for r in ranks],
            "files": [],
        }
        (incident / folder / "collect.json").write_text(json.dumps(manifest))
    analyze(incident, incident / "report.json")
    data = as_json(history(str(incident), "--format", "json"))
    assert [(h["host"], h["ranks"], h["first_seen"]) for h in data["hosts"]] == [
        ("gpu-b", [3], "2026-03-01T10:00:00Z")
    ]
    assert (data["incidents"][0]["hosts_from"], data["incidents"][0]["time_from"]) == (
        "collect",
        "collect",
    )


def test_a_host_inside_the_dump_names_is_found_without_sub_folders(tmp_path: Path) -> None:
    incident = tmp_path / "incident"
    incident.mkdir()
    for rank in range(4):
        host = "node01-host" if rank < 2 else "node02-host"
        shutil.copy(
            FIXTURES / "cascade_4rank" / f"trace_{rank}",
            incident / f"nccl_trace_rank_{host}_{rank}",
        )
    analyze(incident, tmp_path / "report.json")
    data = as_json(history(str(tmp_path / "report.json"), "--format", "json"))
    assert [(h["host"], h["ranks"]) for h in data["hosts"]] == [("node02-host", [3])]


def test_first_and_last_seen_are_the_report_files_times_when_nothing_else_says(
    fixture_reports: Path, tmp_path: Path
) -> None:
    for name, day in (("old.json", 1), ("new.json", 30)):
        shutil.copy(fixture_reports / "tutorial.json", tmp_path / name)
        os.utime(tmp_path / name, (day * DAY, day * DAY))
    data = as_json(history(str(tmp_path), "--format", "json"))
    [row] = data["ranks_without_host"]
    assert (row["first_seen"], row["last_seen"]) == ("1970-01-02T00:00:00Z", "1970-01-31T00:00:00Z")
    assert {i["time_from"] for i in data["incidents"]} == {"mtime"}


def test_kind_filter_counts_only_incidents_of_that_kind(
    fixture_reports: Path, tmp_path: Path
) -> None:
    data = as_json(history(str(fixture_reports), "--kind", "size_mismatch", "--format", "json"))
    kinds = {k for r in data["ranks_without_host"] for k in r["kinds"]}
    assert kinds == {"size_mismatch"}


def test_a_file_that_is_not_a_report_is_one_line_and_the_rest_are_counted(
    fixture_reports: Path, tmp_path: Path
) -> None:
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    (tmp_path / "broken.json").write_text('{"schema": "frtrace.report/1", ')
    result = history(
        str(fixture_reports / "tutorial.json"),
        str(tmp_path / "notes.json"),
        str(tmp_path / "broken.json"),
    )
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"skipped {tmp_path / 'notes.json'}: not a frtrace report (no frtrace.report schema)",
        f"skipped {tmp_path / 'broken.json'}: not JSON",
    ]
    assert result.stdout.startswith("frtrace history: 1 report(s)")


def test_a_wrongly_typed_field_is_named_and_that_report_skipped(
    fixture_reports: Path, tmp_path: Path
) -> None:
    report = json.loads((fixture_reports / "tutorial.json").read_text())
    report["root_cause"]["culprit_ranks"] = "0"
    (tmp_path / "bad.json").write_text(json.dumps(report))
    shutil.copy(fixture_reports / "cascade_4rank.json", tmp_path / "good.json")
    result = history(str(tmp_path))
    assert result.stderr.splitlines() == [
        f"skipped {tmp_path / 'bad.json'}: root_cause.culprit_ranks is not a list of ranks"
    ]
    assert result.stdout.startswith("frtrace history: 1 report(s), 1 with a root cause")


def test_no_report_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "collect.json").write_text('{"schema": "frtrace.collect/1"}')
    result = history(str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr == f"frtrace: error: no frtrace report found in {tmp_path}\n"
