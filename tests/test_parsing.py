"""Parsing in the background: results while the caller is busy, and nothing left behind."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from frtrace.dumps.discover import discover
from frtrace.dumps.limits import budgets
from frtrace.synth import JobSpec, Layout, simulate, write_job
from frtrace.tables import parse, workers
from frtrace.tables.load import load_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def job(tmp_path: Path) -> list[tuple[str, int]]:
    """Eight ranks' dumps, as files to parse."""
    write_job(simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=3)), tmp_path)
    return parse.select_files(discover(tmp_path, None))


def _finishes(work: Any) -> Any:
    """work() run in a thread that must end: a hang fails the test instead of the suite."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "parsing hung"
    return out


def test_every_file_comes_back_once_with_its_rank(job: list[tuple[str, int]]) -> None:
    with parse.start_parsing(job, jobs=2) as parsing:
        results = list(parsing)
    assert sorted(r[0] for r in results) == list(range(8))
    assert all(r[2] is not None and r[2].n > 0 for r in results)


def test_an_error_while_collecting_reaches_the_consumer(
    job: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("the pool could not start")

    monkeypatch.setattr(parse, "iter_isolated", broken)

    def consume() -> list[Any]:
        with parse.start_parsing(job, jobs=2) as parsing:
            return list(parsing)

    out = _finishes(consume)
    assert isinstance(out.get("error"), RuntimeError)


def test_leaving_early_stops_the_workers_and_the_collector(job: list[tuple[str, int]]) -> None:
    def take_one() -> Any:
        with parse.start_parsing(job, jobs=2) as parsing:
            first = next(iter(parsing))
        return first, parsing

    out = _finishes(take_one)
    first, parsing = out["value"]
    assert first[2] is not None
    assert not parsing._thread.is_alive()
    assert multiprocessing.active_children() == []


def test_a_small_backlog_limit_still_delivers_the_whole_job(
    job: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for one result at a time the workers wait for the consumer, and nothing
    is lost or reordered on the way (the trace equals one loaded without a limit)."""
    expected = load_trace(str(Path(job[0][0]).parent))
    monkeypatch.setattr(parse, "QUEUED_ENTRIES", 1)
    got = _finishes(lambda: load_trace(str(Path(job[0][0]).parent), jobs=2))["value"]
    assert got.entries.equals(expected.entries)
    assert got.ranks == expected.ranks


@pytest.mark.parametrize("shared", [True, False], ids=["shared-memory", "pipe"])
def test_results_arrive_whole_through_shared_memory_or_the_pipe(
    job: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    """Workers hand their columns over in shared memory where the OS has memfd and through
    their pipe elsewhere (or for tiny results): the trace is the one parsed in this process."""
    if shared and not hasattr(os, "memfd_create"):
        pytest.skip("no memfd on this OS")
    expected = load_trace(str(Path(job[0][0]).parent), jobs=1)
    monkeypatch.setattr(workers, "SHARED_MIN_BYTES", 1 if shared else 1 << 62)
    got = _finishes(lambda: load_trace(str(Path(job[0][0]).parent), jobs=2))["value"]
    assert got.entries.equals(expected.entries)
    assert got.stacks == expected.stacks


def test_the_file_handed_to_a_worker_that_crashes_is_parsed_by_the_next_one(
    job: list[tuple[str, int]], tmp_path: Path
) -> None:
    """A worker is given its next file before its last result is read; when that last parse
    crashed it, the file given meanwhile was never started, and a fresh worker parses it."""
    from hostile_cases import dict_with_key

    crash = tmp_path / "crash"
    crash.write_bytes(dict_with_key(b"K\x01" + b"\x85" * 1_000_000))
    items = [(str(crash), 99), *job]
    results = _finishes(
        lambda: list(workers.iter_isolated(items, 1, parse.parse_file, parse.lost, budgets()))
    )["value"]
    by_rank = {r[0]: r for r in results}
    assert sorted(by_rank) == sorted([99, *range(8)])
    assert by_rank[99][2] is None and "crashed" in by_rank[99][5]
    assert all(by_rank[rank][2] is not None for rank in range(8))


def test_the_command_does_not_import_pandas_before_its_workers_start() -> None:
    """The half second of importing pandas overlaps the parsing only if the workers are
    started first: the engine and the parsing must not import it."""
    code = (
        "import sys, frtrace.cli, frtrace.loading, frtrace.tables.parse; "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_command_flushes_its_report_before_it_exits(tmp_path: Path) -> None:
    """The command leaves without the interpreter's teardown: the whole report still arrives,
    with the status, through a pipe."""
    proc = subprocess.run(
        [sys.executable, "-m", "frtrace", str(FIXTURES / "tutorial"), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stdout.rstrip().endswith("}")
    assert '"root_cause"' in proc.stdout


def test_leaving_returns_even_when_the_collector_cannot_fork(
    job: list[tuple[str, int]],
) -> None:
    """A fork waits for the import lock; an import interrupted at the wrong bytecode (Ctrl-C
    in a notebook) can leave it held. Leaving must still return, not wait for the thread."""
    code = (
        "import _imp, os, sys, time\n"
        "from frtrace.tables import parse\n"
        "parse.CLOSE_WAIT = 0.5\n"
        f"items = {job!r}\n"
        "_imp.acquire_lock()\n"
        "with parse.start_parsing(items, jobs=2):\n"
        "    time.sleep(0.3)\n"
        "print('left', flush=True)\n"
        "os._exit(0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "left\n", proc.stderr


def test_a_worker_whose_parent_is_gone_before_it_starts_leaves_by_itself() -> None:
    """The parent can be killed between forking a worker and the worker's PR_SET_PDEATHSIG:
    no signal would come, and the worker's copy of the parent's pipe end would keep it
    waiting for work forever (holding the terminal's pipes open)."""
    from frtrace.dumps.limits import budgets
    from frtrace.tables import workers

    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    not_its_parent = -1
    worker = ctx.Process(
        target=workers._worker, args=(theirs, [], parse.parse_file, budgets(), not_its_parent)
    )
    worker.start()
    try:
        worker.join(30)
        assert worker.exitcode == 0
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()
        ours.close()
        theirs.close()


def test_a_stop_signal_landing_as_a_scratch_folder_is_made_still_removes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stop signal's handler (abort) may run in the main thread the moment the folder
    exists, whichever thread took the signal: abort() must know the folder by then."""
    seen: list[bool] = []

    def landing(make: Callable[..., Any]) -> Callable[..., Any]:
        def made(*args: Any, **kwargs: Any) -> Any:
            out = make(*args, **kwargs)
            path = out if isinstance(out, str) else args[0]
            workers.abort()  # the handler runs here
            seen.append(os.path.lexists(path))
            return out

        return made

    monkeypatch.setattr(workers.os, "mkdir", landing(os.mkdir))
    monkeypatch.setattr(workers.tempfile, "mkdtemp", landing(tempfile.mkdtemp))
    with workers.scratch_dir():
        pass
    assert seen == [False]


def test_a_mistyped_folder_is_reported_without_importing_pandas(tmp_path: Path) -> None:
    """A user error is answered at once, not after the analysis' half second of imports."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "frtrace", str(tmp_path / "no_such_dir")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "frtrace: error:" in proc.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()]
    assert "pandas" not in imported


@pytest.mark.parametrize(
    "args", [[], ["-v"], ["--format", "json"]], ids=["text", "verbose", "json"]
)
def test_the_analysis_and_its_reports_never_import_pandas(args: list[str]) -> None:
    """pandas' quarter second of imports is more than a small job's whole analysis: the
    analysis reads numpy tables, and only notebooks, raw output and --html build DataFrames."""
    fixture = str(FIXTURES / "cascade_4rank")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "frtrace", fixture, *args],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    if args == ["--format", "json"]:
        assert json.loads(proc.stdout)["root_cause"]["culprit_ranks"] == [3]
    else:
        assert "culprit rank 3" in proc.stdout.splitlines()[-1]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()]
    assert "pandas" not in imported
