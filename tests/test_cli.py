"""The command line as a user meets it: outputs, exit codes, errors without tracebacks."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result
from conftest import FIXTURES, REPO, nccl_dump, write_pickle

from frtrace.cli import TABLE_MAX_RANKS, cli, expand_multi_values
from frtrace.report.json_report import load_schema


def frtrace(*args: str, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner()
    return runner.invoke(cli, expand_multi_values(list(args)), env=env, catch_exceptions=False)


def test_tutorial_fixture_blames_rank_0s_extra_all_reduce_and_exits_1() -> None:
    result = frtrace(str(FIXTURES / "tutorial"))
    assert result.exit_code == 1
    assert "ROOT CAUSE: missing_ranks in default_pg#3" in result.stdout
    assert "culprit ranks   0\n" in result.stdout


def test_tutorial_json_report_validates_against_the_schema() -> None:
    result = frtrace(str(FIXTURES / "tutorial"), "--format", "json")
    report = json.loads(result.stdout)
    jsonschema.validate(report, load_schema())
    root = report["root_cause"]
    assert (report["ok"], root["kind"], root["pg_name"]) == (False, "missing_ranks", "0")
    assert (root["culprit_ranks"], root["collective_seq_id"]) == ([0], 3)
    assert report["inputs"]["ranks"] == [0, 1]


def test_tutorial_json_dumps_without_stacks_name_both_ranks_as_undecidable() -> None:
    report = json.loads(frtrace(str(FIXTURES / "tutorial_json"), "--format", "json").stdout)
    root = report["root_cause"]
    assert root["culprit_ranks"] == [0, 1]
    assert root["evidence"]["undecidable"] is True


def test_healthy_real_job_reports_ok_and_exits_0() -> None:
    result = frtrace(str(FIXTURES / "healthy_4rank"), "--format", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0
    assert (report["ok"], report["root_cause"], report["findings"]) == (True, None, [])


def test_output_file_gets_the_json_report_while_stdout_gets_text(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = frtrace(str(FIXTURES / "tutorial"), "-o", str(out))
    assert "ROOT CAUSE" in result.stdout
    assert json.loads(out.read_text())["schema"] == "frtrace.report/1"


def test_raw_mode_prints_only_the_selected_ranks_entries_as_json() -> None:
    result = frtrace(str(FIXTURES / "tutorial"), "-j", "--selected-ranks", "0")
    entries = json.loads(result.stdout)
    assert result.exit_code == 0
    assert {e["rank"] for e in entries} == {0}
    assert [e["collective_seq_id"] for e in entries] == [1, 2, 3, 4, 5]


def test_raw_mode_table_has_one_column_per_rank() -> None:
    result = frtrace(
        str(FIXTURES / "tutorial"), "-j", "--format", "table", "--pg-filters", "default_pg"
    )
    header = result.stdout.splitlines()[0]
    assert "rank 0" in header and "rank 1" in header
    assert result.stdout.count("all_reduce") == 9


def test_unknown_group_filter_is_a_one_line_error_with_exit_2() -> None:
    result = frtrace(str(FIXTURES / "tutorial"), "-j", "--pg-filters", "mesh_tp")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith("frtrace: error: no process group")
    assert "Traceback" not in result.stderr


@pytest.fixture
def mixed_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A good single-rank dump beside a truncated one, a text file and a hostile pickle."""
    marker = tmp_path / "pwned"
    folder = tmp_path / "dumps"
    write_pickle(folder / "trace_0", nccl_dump(0, 1))
    blob = pickle.dumps(nccl_dump(1, 1), protocol=2)
    (folder / "trace_1").write_bytes(blob[:100])
    (folder / "trace_2").write_bytes(b"not a dump\x00\x01\n")  # binary: not a log either
    hostile = (
        b"\x80\x02cposix\nsystem\nq\x00X"
        + len(f"touch {marker}").to_bytes(4, "little")
        + f"touch {marker}".encode()
        + b"\x85R."
    )
    (folder / "trace_3").write_bytes(hostile)
    return folder, marker


def test_broken_and_hostile_dumps_are_skipped_and_the_good_one_analyzed(
    mixed_dir: tuple[Path, Path],
) -> None:
    folder, marker = mixed_dir
    result = frtrace(str(folder), "--format", "json")
    report = json.loads(result.stdout)
    reasons = {Path(s["file"]).name: s["reason"] for s in report["inputs"]["skipped"]}
    # The good dump is healthy, but ranks 1-3 are unreadable: healthy cannot be told.
    assert (result.exit_code, report["verdict"]) == (4, "unknown")
    assert report["unseen"]["unreadable"] == [1, 2, 3]
    assert report["inputs"]["ranks"] == [0]
    assert reasons["trace_1"].startswith("truncated pickle")
    assert reasons["trace_2"] == "neither a pickle nor a JSON dump"
    assert "refused" in reasons["trace_3"]
    assert "skipped" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()


def test_nothing_usable_exits_2_after_listing_every_skipped_file(tmp_path: Path) -> None:
    (tmp_path / "trace_0").write_text("garbage")
    (tmp_path / "trace_1").write_bytes(b"\x80\x02")
    result = frtrace(str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.count("skipped ") == 2
    assert "no usable dump" in result.stderr


def test_a_folder_without_dumps_is_one_line(tmp_path: Path) -> None:
    """Not also `using prefix '' (inferred ...)`: no name there carries a rank to infer from."""
    (tmp_path / "README").write_text("hi")
    result = frtrace(str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"frtrace: error: no dump files found in {tmp_path}"]


def test_a_job_too_big_for_this_machine_is_said_before_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local engine holds every entry: a job past the memory left was killed by the kernel
    minutes in, with no report and no word of --engine dask."""
    from frtrace.loading import memory

    size = sum(p.stat().st_size for p in (FIXTURES / "tutorial").iterdir())
    monkeypatch.setattr(memory, "available_memory", lambda: size // 2)
    result = frtrace(str(FIXTURES / "tutorial"))
    assert result.exit_code == 1  # it still runs: the estimate may be wrong
    warning = next(line for line in result.stderr.splitlines() if line.startswith("warning:"))
    assert re.fullmatch(
        r"warning: these [0-9.]+ KB of dumps may not fit in the [0-9.]+ KB of memory available: "
        r"the local engine holds every entry \(about 0.75 byte per byte of dumps on the bench "
        r"jobs\); --engine dask keeps them on a cluster's workers",
        warning,
    ), warning
    monkeypatch.setattr(memory, "available_memory", lambda: size)
    assert "warning:" not in frtrace(str(FIXTURES / "tutorial")).stderr


def test_the_size_of_a_large_folder_is_estimated_from_a_sample(tmp_path: Path) -> None:
    from frtrace.dumps.discover import discover
    from frtrace.loading.memory import SAMPLE, dump_bytes

    for rank in range(SAMPLE * 4):
        (tmp_path / f"trace_{rank}").write_bytes(b"\x80" + b"x" * 999)  # a pickle's first byte
    assert dump_bytes(discover(tmp_path, "trace_")) == SAMPLE * 4 * 1000


def _machine(root: Path, cgroup: str, files: dict[str, str]) -> Path:
    """A /proc and /sys/fs/cgroup as a container shows them: 20 GB available on the host."""
    for path, text in {
        "proc/meminfo": "MemTotal: 40000000 kB\nMemAvailable: 20000000 kB\n",
        "proc/self/cgroup": cgroup,
        **files,
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_available_memory_is_the_hosts_without_a_cgroup_limit(tmp_path: Path) -> None:
    from frtrace.loading.memory import available_memory

    root = _machine(tmp_path, "0::/\n", {"sys/fs/cgroup/memory.max": "max\n"})
    assert available_memory(str(root)) == 20_000_000 * 1024


def test_available_memory_is_a_pods_room_under_its_cgroup_v2_limit(tmp_path: Path) -> None:
    """A Kubernetes pod sees the host's memory in /proc/meminfo; its limit is what kills it.
    Inactive page cache is reclaimed before that, so it counts as room."""
    from frtrace.loading.memory import available_memory

    pod = "sys/fs/cgroup/kubepods/pod1"
    root = _machine(
        tmp_path,
        "0::/kubepods/pod1\n",
        {
            "sys/fs/cgroup/kubepods/memory.max": "max\n",
            f"{pod}/memory.max": "1000000000\n",
            f"{pod}/memory.current": "600000000\n",
            f"{pod}/memory.stat": "anon 500000000\ninactive_file 100000000\n",
        },
    )
    assert available_memory(str(root)) == 500_000_000


def test_available_memory_is_a_slurm_jobs_room_under_its_cgroup_v1_limit(tmp_path: Path) -> None:
    from frtrace.loading.memory import available_memory

    job = "sys/fs/cgroup/memory/slurm/job_7"
    root = _machine(
        tmp_path,
        "5:cpu,cpuacct:/slurm/job_7\n4:memory:/slurm/job_7\n0::/\n",
        {
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            f"{job}/memory.limit_in_bytes": "2000000000\n",
            f"{job}/memory.usage_in_bytes": "1500000000\n",
        },
    )
    assert available_memory(str(root)) == 500_000_000


@pytest.fixture
def killed_while_dumping(tmp_path: Path) -> Path:
    """Two good dumps and 23 files cut short alike (a job killed as it dumped), one other."""
    shutil.copytree(FIXTURES / "tutorial", tmp_path / "job")
    folder = tmp_path / "job"
    for rank in range(2, 25):
        (folder / f"trace_{rank}").write_bytes(b"\x80\x02")
    (folder / "trace_25").write_text("{}")
    return folder


def test_many_files_skipped_alike_name_ten_and_count_the_rest(killed_while_dumping: Path) -> None:
    result = frtrace(str(killed_while_dumping), "--format", "json")
    lines = [line for line in result.stderr.splitlines() if line.startswith("skipped")]
    truncated = "truncated pickle (file ends early)"
    assert lines[:10] == [
        f"skipped {killed_while_dumping}/trace_{r}: {truncated}" for r in range(2, 12)
    ]
    assert lines[10].startswith(f"skipped {killed_while_dumping}/trace_25: not a Flight Recorder")
    assert lines[11:] == [f"skipped 13 more file(s) alike: {truncated} (-v names them all)"]
    assert len(json.loads(result.stdout)["inputs"]["skipped"]) == 24
    assert result.exit_code == 1  # the two good dumps' answer


def test_verbose_names_every_skipped_file(killed_while_dumping: Path) -> None:
    result = frtrace(str(killed_while_dumping), "--format", "json", "-v")
    lines = [line for line in result.stderr.splitlines() if line.startswith("skipped")]
    assert len(lines) == 24 and not [line for line in lines if "more file(s)" in line]


def test_nothing_usable_counts_the_files_skipped_alike(tmp_path: Path) -> None:
    for rank in range(12):
        (tmp_path / f"trace_{rank}").write_bytes(b"garbage\x00")  # binary: not a log either
    result = frtrace(str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.count("skipped ") == 11
    assert "skipped 2 more file(s) alike: neither a pickle nor a JSON dump" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("frtrace: error: no usable dump")


def test_host_names_in_file_names_do_not_confuse_the_rank(tmp_path: Path) -> None:
    write_pickle(tmp_path / "nccl_trace_rank_node03-host_27", nccl_dump(27, 28))
    result = frtrace(str(tmp_path), "-j")
    assert {e["rank"] for e in json.loads(result.stdout)} == {27}


def test_several_values_follow_one_option_but_the_folder_is_not_eaten() -> None:
    args = expand_multi_values(["--selected-ranks", "0", "1", "dumps/", "--pg-filters", "tp", "dp"])
    assert args == [
        "--selected-ranks",
        "0",
        "--selected-ranks",
        "1",
        "dumps/",
        "--pg-filters",
        "tp",
        "--pg-filters",
        "dp",
    ]


def test_color_only_when_forced_and_never_with_no_color() -> None:
    colored = frtrace(str(FIXTURES / "tutorial"), env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    plain = frtrace(str(FIXTURES / "tutorial"), env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\033[" in colored.stdout
    assert "\033[" not in plain.stdout


def test_help_has_examples_and_documents_exit_codes() -> None:
    result = frtrace("--help")
    assert "Examples:" in result.stdout and "Exit status:" in result.stdout
    assert "1  findings" in result.stdout


def test_the_analyzer_never_imports_torch() -> None:
    code = (
        "import sys, frtrace.cli, frtrace.tables.load, frtrace.analysis.analyze, "
        "frtrace.report.text, frtrace.synth; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_m_frtrace_runs_the_cli_with_real_exit_codes() -> None:
    env = dict(os.environ, NO_COLOR="1")
    out = subprocess.run(
        [sys.executable, "-m", "frtrace", str(FIXTURES / "tutorial")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert out.returncode == 1
    assert "ROOT CAUSE" in out.stdout and "using prefix" in out.stderr


def test_progress_line_shows_files_and_entries_and_is_erased(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from frtrace.report import progress_line as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    stream = io.StringIO()
    bar = progress_module.ProgressLine(stream, force=True)
    bar(3, 4, 6000)
    bar(4, 4, 8000)
    bar.close()
    text = stream.getvalue()
    assert "4/4 files, 8,000 entries" in text and text.endswith("\r\033[K")


def test_progress_line_names_the_analysis_and_is_gone_before_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the files, the line says what runs (the analysis of 16,384 ranks takes tens of
    seconds), and it is erased before the report and its exit status."""
    import functools

    from frtrace.report import progress_line as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    forced = functools.partial(progress_module.ProgressLine, force=True)
    monkeypatch.setattr(progress_module, "ProgressLine", forced)
    result = frtrace(str(FIXTURES / "tutorial"))
    assert result.exit_code == 1 and "ROOT CAUSE" in result.stdout
    assert "\r" not in result.stdout
    err = result.stderr
    reading, analyzing = err.index("reading dumps ["), err.index("analyzing 9 entries")
    assert "2/2 files, 9 entries" in err and reading < analyzing
    assert err.endswith("\r\033[K")


def test_a_step_s_clock_keeps_moving_without_news(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step with nothing to count (a settle round of minutes) is redrawn by a ticker."""
    import io
    import time

    from frtrace.report import progress_line as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "TICK_S", 0.01)
    stream = io.StringIO()
    bar = progress_module.ProgressLine(stream, force=True)
    bar.stage("settling: comparing signatures, round 1")
    deadline = time.monotonic() + 30
    while stream.getvalue().count("round 1, ") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    bar.close()
    assert stream.getvalue().count("round 1, ") >= 3
    assert stream.getvalue().endswith("\r\033[K")


def test_progress_stays_silent_when_stderr_is_not_a_terminal() -> None:
    import io

    from frtrace.report.progress_line import ProgressLine

    stream = io.StringIO()
    bar = ProgressLine(stream)
    bar(1, 1, 10)
    bar.close()
    assert stream.getvalue() == ""


def test_a_long_wait_is_one_line_off_a_terminal_and_the_line_on_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wait of hours (workers in a Slurm queue) must show in a batch job's log, where the
    progress line is silent; on a terminal it is the line, erased before the report."""
    import io

    from frtrace.report import progress_line as progress_module

    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    log, terminal = io.StringIO(), io.StringIO()
    for bar in (
        progress_module.ProgressLine(log),
        progress_module.ProgressLine(terminal, force=True),
    ):
        bar.notice("waiting for a Dask worker")
        bar(1, 1, 10)
        bar.close()
    assert log.getvalue() == "frtrace: waiting for a Dask worker\n"
    assert (
        "\n" not in terminal.getvalue() and "\rwaiting for a Dask worker, " in terminal.getvalue()
    )


def _python_m_frtrace(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "frtrace", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )


def test_help_lists_the_subcommands_with_examples() -> None:
    result = frtrace("--help")
    assert "frtrace collect OUT/%h" in result.stdout
    assert "pdsh -w node[01-16] frtrace collect /shared/inc-42/%h" in result.stdout
    assert "frtrace history reports/" in result.stdout


def test_collect_as_first_argument_is_the_subcommand_and_dot_slash_the_folder(
    tmp_path: Path,
) -> None:
    shutil.copytree(FIXTURES / "tutorial", tmp_path / "collect")
    bare = _python_m_frtrace("collect", cwd=tmp_path)
    assert bare.returncode == 2
    assert "note: to analyze the folder ./collect, run: frtrace ./collect" in bare.stderr
    folder = _python_m_frtrace("./collect", cwd=tmp_path)
    assert folder.returncode == 1
    assert "ROOT CAUSE: missing_ranks in default_pg#3" in folder.stdout


def test_history_runs_through_the_frtrace_command(tmp_path: Path) -> None:
    frtrace(str(FIXTURES / "tutorial"), "-o", str(tmp_path / "report.json"))
    result = _python_m_frtrace("history", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("frtrace history: 1 report(s), 1 with a root cause")


def test_collect_and_history_import_neither_numpy_nor_pandas_nor_torch(tmp_path: Path) -> None:
    frtrace(str(FIXTURES / "tutorial"), "-o", str(tmp_path / "report.json"))
    runs = [
        ("history", str(tmp_path / "report.json")),
        ("collect", str(tmp_path / "out"), "--rank-var", "NO_SUCH", "--prefix", str(tmp_path)),
    ]
    for args in runs:
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "frtrace", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            check=False,
        )
        imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
        assert not imported & {"numpy", "pandas", "torch"}, args
        assert "frtrace.history" in imported or "frtrace.collect.run" in imported


def test_a_healthy_job_dumped_before_format_2_0_exits_2_naming_the_version(
    tmp_path: Path,
) -> None:
    """Its one seq_id per group counts p2p ops too: read as a collective_seq_id, this healthy
    pipeline job got a type_mismatch blaming every rank (exit 1)."""
    from frtrace.synth import JobSpec, Layout, simulate, write_job

    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=2, batch_p2p=True, extras=True))
    write_job(job, tmp_path, format_version="1.4")
    result = frtrace(str(tmp_path))
    assert result.exit_code == 2
    assert "ROOT CAUSE" not in result.stdout and "OK" not in result.stdout
    lines = result.stderr.splitlines()
    assert sum("format version 1.4 is not supported" in line for line in lines) == 8
    assert lines[-1] == f"frtrace: error: no usable dump in {tmp_path} (8 file(s) skipped)"


def test_a_selected_rank_no_dump_has_exits_2_naming_the_ranks_there() -> None:
    result = frtrace(str(FIXTURES / "extra_call_2rank"), "--selected-ranks", "99")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        "frtrace: error: no rank 99 among the dumps: ranks 0-1"
    )


def test_raw_mode_with_a_selected_rank_no_dump_has_names_the_ranks_there() -> None:
    result = frtrace(str(FIXTURES / "extra_call_2rank"), "-j", "--selected-ranks", "7-9")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "frtrace: error: no ranks 7-9 among the dumps: ranks 0-1"
    )


def test_a_rank_of_the_job_that_left_no_dump_can_still_be_selected() -> None:
    # fsdp2_rank_dies_4rank: rank 3 died and left no dump; the findings about it remain.
    result = frtrace(str(FIXTURES / "fsdp2_rank_dies_4rank"), "--selected-ranks", "3")
    assert result.exit_code == 1
    assert "warning" not in result.stderr


def test_a_selection_beyond_the_job_names_the_job_s_ranks() -> None:
    result = frtrace(str(FIXTURES / "fsdp2_rank_dies_4rank"), "--selected-ranks", "9")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == "frtrace: error: no rank 9 in the job: ranks 0-3"


def test_a_partly_matching_selection_warns_of_the_absent_ranks_and_shows_the_rest() -> None:
    result = frtrace(str(FIXTURES / "extra_call_2rank"), "-j", "--selected-ranks", "1", "99")
    assert result.exit_code == 0
    assert {e["rank"] for e in json.loads(result.stdout)} == {1}
    assert (
        "warning: no rank 99 among the dumps (ranks 0-1); showing the others selected"
        in result.stderr
    )


def _wide_job(folder: Path, ranks: int) -> Path:
    for rank in range(ranks):
        write_pickle(folder / f"trace_{rank}", nccl_dump(rank, ranks))
    return folder


def test_raw_table_of_more_ranks_than_a_screen_shows_is_refused_saying_what_to_use(
    tmp_path: Path,
) -> None:
    result = frtrace(str(_wide_job(tmp_path, TABLE_MAX_RANKS + 1)), "-j", "--format", "table")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        "frtrace: error: -j --format table shows each rank as a column: 17 ranks do not fit "
        "(at most 16); narrow them with --selected-ranks (e.g. 0-15) or --pg-filters, or print "
        "every rank with --format json"
    )


def test_raw_table_of_a_selection_within_the_bound_is_printed(tmp_path: Path) -> None:
    folder = _wide_job(tmp_path, TABLE_MAX_RANKS + 1)
    result = frtrace(str(folder), "-j", "--format", "table", "--selected-ranks", "0-15")
    assert result.exit_code == 0
    header = result.stdout.splitlines()[0]
    assert "rank 15" in header and "rank 16" not in header


def _python_m_synth(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frtrace.synth", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=False,
    )


def test_python_m_frtrace_synth_writes_a_job_and_prints_its_ground_truth(tmp_path: Path) -> None:
    fault = ["--fault", "missing_ranks", "--fault-rank", "1"]
    result = _python_m_synth(str(tmp_path), "--tp", "2", "--entries", "20", *fault)
    assert result.returncode == 0, result.stderr
    truth = json.loads(result.stdout)
    assert (truth["kind"], truth["culprit_ranks"]) == ("missing_ranks", [1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nccl_trace_rank_0", "nccl_trace_rank_1"]


def test_python_m_frtrace_synth_refuses_an_unknown_fault_with_exit_2() -> None:
    result = _python_m_synth("out", "--fault", "hang")
    assert result.returncode == 2
    assert "python -m frtrace.synth: error: argument --fault: invalid choice: 'hang'" in (
        result.stderr
    )
