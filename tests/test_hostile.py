"""Hostile and broken input: each bad file costs one line, never the run, a traceback, the
machine's memory or unbounded time. The CLI runs in a subprocess under a 1.5 GB address-space
limit and a timeout (see hostile_cases.run_cli); several bad files share one run per kind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hostile_cases import (
    MARKER_NAME,
    REPO,
    Case,
    build_folder,
    case_args,
    cases,
    dump,
    nccl_entry,
    pickled,
    run_cli,
    verify,
    write,
)


def _all(tmp: Path) -> list[Case]:
    return cases(tmp / MARKER_NAME)


def _names(kind: str, batch: bool) -> list[str]:
    return [c.name for c in cases(Path("/unused")) if c.kind == kind and c.batch == batch]


def run_cases(tmp_path: Path, names: list[str]) -> None:
    selected = [c for c in _all(tmp_path) if c.name in names]
    assert len(selected) == len(names)
    folder = tmp_path / "dumps"
    build_folder(folder, selected)
    report = tmp_path / "report.json"
    args = case_args(selected[0], folder, report) if len(selected) == 1 else None
    if args is None:
        args = [str(folder), "--prefix", "trace_", "-o", str(report)]
    result = run_cli(args)
    verify(selected, result, folder, report)


@pytest.mark.parametrize("kind", ["pickle", "bomb", "types", "fs"])
def test_a_folder_of_bad_files_costs_one_line_each(tmp_path: Path, kind: str) -> None:
    run_cases(tmp_path, _names(kind, batch=True))


@pytest.mark.parametrize("name", _names("cli", batch=False))
def test_misused_options_are_usage_errors(tmp_path: Path, name: str) -> None:
    run_cases(tmp_path, [name])


def test_the_corpus_has_at_least_50_cases() -> None:
    assert len(cases(Path("/unused"))) >= 50


def test_a_megabyte_name_is_cut_and_said_so_with_verbose(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    entries = [nccl_entry(i, i + 1) for i in range(3)]
    entries[2]["profiling_name"] = "nccl:" + "x" * (1 << 20)
    write(folder / "trace_0", pickled(dump(entries)))
    write(folder / "trace_1", pickled(dump(entries)))
    result = run_cli([str(folder), "-v"])
    assert result.status == 0, result.stderr
    assert "more characters]" not in result.stdout or len(result.stdout) < 100_000
    assert "were cut" in result.stderr


def test_a_frame_with_a_bad_line_keeps_the_entry_and_verbose_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    entries = [nccl_entry(i, i + 1) for i in range(3)]
    entries[0]["frames"] = [{"name": "f", "filename": "f.py", "line": "x"}]
    write(folder / "trace_0", pickled(dump(entries)))
    write(folder / "trace_1", pickled(dump()))
    result = run_cli([str(folder), "-v", "-j"])
    assert result.status == 0, result.stderr
    assert (
        "'frames' is not a list of {name, filename, line} frames in 1 distinct stack"
        in result.stderr
    )


def test_a_non_utf8_name_prints_under_a_strict_utf8_locale(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    write(folder / "trace_0", pickled(dump()))
    write(folder / "trace_1", pickled(dump()))
    write(folder / "trace_\udcff_2", b"garbage\x00")  # binary: text would be read as a log
    env = {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict", "PYTHONUTF8": "0"}
    result = run_cli([str(folder), "--prefix", "trace_"], env=env)
    # rank 2's file is unreadable: the two good dumps are healthy, the job not seen whole
    assert result.status == 4 and "Traceback" not in result.stderr
    assert "skipped " in result.stderr and "trace_\\xff_2" in result.stderr


def test_a_bytearray_too_big_to_allocate_costs_one_line_and_no_system_error(
    tmp_path: Path,
) -> None:
    # A 15-character str, popped: its text is where CPython's failed allocation for the
    # BYTEARRAY8 then reads an uninitialized ob_exports (see read._unpickle_quietly).
    folder = tmp_path / "dumps"
    popped = b"X" + (15).to_bytes(4, "little") + b"A" * 15 + b"0"
    huge = b"\x96" + (1 << 48).to_bytes(8, "little")  # BYTEARRAY8 of 256 TiB
    write(folder / "trace_0", b"\x80\x02" + popped + huge + b".")
    write(folder / "trace_1", pickled(dump()))
    report = tmp_path / "report.json"
    result = run_cli([str(folder), "--prefix", "trace_", "-o", str(report)])
    assert result.status == 4, result.stderr  # rank 0 unreadable: healthy cannot be told
    assert "SystemError" not in result.stderr
    assert [line for line in result.stderr.splitlines() if "trace_0" in line] == [
        f"skipped {folder / 'trace_0'}: pickle needs more memory than the parse budget allows"
    ]
    assert json.loads(report.read_text())["inputs"]["ranks"] == [1]


def _frtrace_processes(tag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if tag.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _slow_folder(tmp_path: Path) -> Path:
    """Good dumps plus files whose parse burns CPU until the budget stops it (memo-shared
    tuples as dict keys hash in exponential time)."""
    from hostile_cases import dict_with_key, laughs_tuple

    folder = tmp_path / "dumps"
    write(folder / "trace_0", pickled(dump()))
    write(folder / "trace_1", pickled(dump()))
    for rank in range(2, 20):
        write(folder / f"trace_{rank}", dict_with_key(laughs_tuple(60)))
    return folder


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_stop_the_workers_too(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    tag = f"FRTRACE_TEST_{uuid.uuid4().hex}"
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1", **{tag: "1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "frtrace", str(_slow_folder(tmp_path)), "--jobs", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # as from an interactive shell: a background job's inherited SIG_IGN would hide SIGINT
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 10
    while len(_frtrace_processes(tag)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_frtrace_processes(tag)) >= 3, "the workers did not start"
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=10)
    assert proc.returncode == status
    assert b"Traceback" not in err
    deadline = time.monotonic() + 5
    while _frtrace_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _frtrace_processes(tag) == []


def _proc_field(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((line.split()[1] for line in f if line.startswith(name + ":")), "")
    except OSError:
        return ""


def _dask_workers(tag: str) -> list[int]:
    workers = []
    for pid in _frtrace_processes(tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    workers.append(pid)
        except OSError:
            continue
    return workers


def test_ctrl_c_on_a_terminal_stops_a_local_dask_cluster_quietly(tmp_path: Path) -> None:
    """A terminal sends Ctrl-C to every process of the foreground group, the Dask workers of
    the command's own cluster too: each printed two tracebacks as it died."""
    pytest.importorskip("distributed")
    tag = f"FRTRACE_TEST_{uuid.uuid4().hex}"
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1", **{tag: "1"})
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    args = [str(_slow_folder(tmp_path)), "--engine", "dask", "--jobs", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "frtrace", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    sigint = 1 << (signal.SIGINT - 1)
    deadline = time.monotonic() + 60
    # the cluster is up: both workers run, and the command hears Ctrl-C again
    while time.monotonic() < deadline and (
        len(_dask_workers(tag)) < 2 or int(_proc_field(proc.pid, "SigIgn") or "0", 16) & sigint
    ):
        time.sleep(0.05)
    assert len(_dask_workers(tag)) >= 2, "the cluster did not start"
    time.sleep(1)  # past the start (the parse takes 9 s): a Ctrl-C there is another test's
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err.decode()[-2000:]
    deadline = time.monotonic() + 10
    while _frtrace_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _frtrace_processes(tag) == []


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_ends_the_run_even_where_python_would_swallow_the_exception(
    sig: signal.Signals, status: int
) -> None:
    """What a weakref callback raises, CPython only reports; importlib runs one as each
    import ends. A signal turned into an exception there would be lost, the run would go on,
    and the import lock it left held would hang the next fork (seen in CI)."""
    code = (
        "import time, weakref\n"
        "from frtrace.exits import stop_on_signals\n"
        "stop_on_signals()\n"
        "class Box: pass\n"
        "def callback(_ref):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(30)\n"
        "box = Box()\n"
        "ref = weakref.ref(box, callback)\n"
        "del box\n"
        "print('went on', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == status
    assert "went on" not in out and "Traceback" not in err


def test_a_closed_pipe_exits_141_quietly(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    entries = [nccl_entry(i, i + 1) for i in range(2000)]
    write(folder / "trace_0", pickled(dump(entries)))
    write(folder / "trace_1", pickled(dump(entries)))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "frtrace", str(folder), "-j"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=20) == 141
    assert b"Traceback" not in err and b"Error" not in err


def test_an_internal_error_exits_3_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    import frtrace.tables.load
    from frtrace.cli import cli

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(frtrace.tables.load, "assemble_parsed", broken)
    result = CliRunner().invoke(cli, [str(REPO / "fixtures" / "tutorial")])
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines()[-1] == (
        "frtrace: error: internal error: RuntimeError: boom (rerun with --debug for a traceback)"
    )


def test_budgets_are_set_from_the_environment_and_typos_are_usage_errors(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    build_folder(folder, [])
    tight = run_cli([str(folder)], env={"FRTRACE_BUDGETS": "max_entries=2"})
    assert tight.status == 2
    assert tight.stderr.count("above the budget max_entries (2)") == 2
    typo = run_cli([str(folder)], env={"FRTRACE_BUDGETS": "max_entrys=2"})
    assert typo.status == 2 and "unknown budget 'max_entrys'" in typo.stderr


def test_raw_json_keeps_control_characters_exact_while_the_table_escapes_them(
    tmp_path: Path,
) -> None:
    import json

    name = "nccl:all_reduce\x1b]0;pwned\x07\r\x9b"
    entries = [nccl_entry(i, i + 1, profiling_name=name) for i in range(3)]
    folder = tmp_path / "dumps"
    write(folder / "trace_0", pickled(dump(entries)))
    write(folder / "trace_1", pickled(dump(entries)))
    raw = run_cli([str(folder), "-j"])
    assert raw.status == 0
    assert {e["profiling_name"] for e in json.loads(raw.stdout)} == {name}
    table = run_cli([str(folder), "-j", "--format", "table"])
    assert table.status == 0 and "\x1b" not in table.stdout and "\\x1b]0;pwned" in table.stdout


def test_a_stack_of_any_wrong_type_is_dropped_and_verbose_says_so(tmp_path: Path) -> None:
    """A str, dict, int, tuple, bytes or set where the stack belongs, or frames whose name,
    file or line has the wrong type: the entry stays, its stack is unset, `-v` says so (a
    stack that was not a list crashed the parse worker: a traceback, and the file lost)."""
    selected = [c for c in _all(tmp_path) if c.name.startswith("frames_")]
    assert len(selected) >= 18
    folder = tmp_path / "dumps"
    build_folder(folder, selected)
    report = tmp_path / "report.json"
    result = run_cli([str(folder), "--prefix", "trace_", "-v", "-o", str(report)])
    assert result.status in (0, 1, 4) and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert json.loads(report.read_text())["inputs"]["skipped"] == []
    for case in selected:
        assert f"note: rank {case.rank}: 'frames' is not a list of" in result.stderr, case.name


def test_a_log_whose_lines_claim_groups_of_millions_is_read_within_the_budget(
    tmp_path: Path,
) -> None:
    """Watchdog lines are untrusted: a group's stated size of a billion, a rank tag of ten
    million, a group rank of ten million, an NCCL communicator of ten million ranks. They
    cost neither the time limit nor the memory limit, and the hang is still reported."""
    clock = "[E1127 10:10:00.000100000 ProcessGroupNCCL.cpp:2395]"
    status = (
        "failure detected by watchdog at work sequence id: 3 PG status: last enqueued work: 3,"
        " last completed work: 2"
    )
    lines = [
        "[rank5]:[I1127 09:59:00.000000000 ProcessGroupNCCL.cpp:905] [PG ID 1 PG GUID 7(mesh_dp)"
        " Rank 1] ProcessGroupNCCL initialization options: size: 999999999, global rank: 5",
        f"[rank9999999]:{clock} [PG ID 0 PG GUID 0(default_pg) Rank 9999999]  {status}",
        f"[rank3]:{clock} [PG ID 0 PG GUID 0(default_pg) Rank 3]  {status}",
        f"[rank5]:{clock} [PG ID 3 PG GUID 7(mesh_dp) Rank 9999998]  {status}",
        f"[rank6]:{clock} [PG ID 3 PG GUID 7(mesh_dp) Rank 1]  {status}",
        *(
            f"[rank{r}]:nodeA:{100 + r}:{200 + r} [0] NCCL INFO ncclCommInitRankConfig comm "
            f"0x55d0{r:08x} rank {cr} nranks 9999999 cudaDev 0 nvmlDev 0 busId 1a000 commId "
            "0xbad - Init COMPLETE"
            for r, cr in ((7, 9999998), (8, 1))
        ),
        f"[rank7]:{clock} [PG ID 4 PG GUID 9(mesh_tp) Rank 9999998]  {status}",
        f"[rank8]:{clock} [PG ID 4 PG GUID 9(mesh_tp) Rank 1]  {status}",
    ]
    write(tmp_path / "node.log", ("\n".join(lines) + "\n").encode())
    result = run_cli([str(tmp_path), "--format", "json"])
    assert result.status == 1, result.stderr
    assert result.report["verdict"] == "findings"
