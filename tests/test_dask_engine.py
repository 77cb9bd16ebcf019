"""The Dask engine against the local one, on a real LocalCluster of two worker processes, and
dumps read from a real S3 API (moto's server on 127.0.0.1). Nothing of Dask or S3 is mocked.

These tests need the extras (`pip install -e '.[test,dask,s3]'`). Without them they skip,
unless FRTRACE_REQUIRE_EXTRAS is set (scripts/check.sh, CI), where a missing extra fails.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gzip
import importlib
import itertools
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import FIXTURES, REPO, write_dumps

import frtrace
import frtrace.cluster.dask
from frtrace.analysis.context import Scope
from frtrace.errors import FrtraceError
from frtrace.synth import Fault, JobSpec, Layout, simulate, write_job


def _require(module: str) -> Any:
    if os.environ.get("FRTRACE_REQUIRE_EXTRAS"):
        return importlib.import_module(module)  # __import__("a.b") would return a
    return pytest.importorskip(module)


distributed = _require("distributed")
dask = _require("dask")

# Workers are spawned with this environment: the S3 tests' credentials must be there first.
for _name, _value in (
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
):
    os.environ.setdefault(_name, _value)

FIXTURE_DIRS = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
TIMING_FIELDS: set[str] = set()  # the report holds no timings today; listed here if it ever does


@contextlib.contextmanager
def _cluster(workers: int = 2, **options: Any) -> Iterator[Any]:
    """A client of a fresh local cluster of `workers` worker processes (`options`: more for
    LocalCluster, e.g. a worker preload)."""
    scheduler = {"dashboard_address": ":0", **options.pop("scheduler_kwargs", {})}
    with (
        distributed.LocalCluster(
            n_workers=workers,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            scheduler_kwargs=scheduler,
            **options,
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with _cluster() as c:
        yield c


def _report(analysis: Any) -> dict[str, Any]:
    report = json.loads(frtrace.to_json(analysis))
    for name in TIMING_FIELDS:
        report.pop(name, None)
    return report


def _both(source: Any, client: Any, **load: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    local = _report(frtrace.analyze(frtrace.load(source, **load)))
    dask = _report(frtrace.analyze(frtrace.load(source, engine="dask", client=client, **load)))
    return local, dask


@pytest.mark.parametrize("fixture", FIXTURE_DIRS, ids=lambda p: p.name)
def test_fixture_reports_identical(client: Any, fixture: Path) -> None:
    local, dask = _both(str(fixture), client)
    assert dask == local


def _write(job: Any, folder: Path, **kw: Any) -> Path:
    write_job(job, folder, **kw)
    return folder


FAULTS = [
    ("tp_missing_ranks", Layout(tp=2, dp=2, pp=2), Fault("missing_ranks", 5, group="tp"), {}),
    ("dp_size_mismatch", Layout(tp=2, dp=2, pp=2), Fault("size_mismatch", 2, group="dp"), {}),
    ("pp_p2p_mismatch", Layout(tp=2, pp=2), Fault("p2p_mismatch", 1, group="pp"), {}),
    ("json_state_mismatch", Layout(tp=2, dp=2), Fault("state_mismatch", 3), {"fmt": "json"}),
    ("missing_dump", Layout(tp=2, dp=2, pp=2), Fault("missing_dump", 6, group="dp"), {}),
    ("order_cycle_gz", Layout(tp=2, dp=2), Fault("order_cycle", 1, group="dp"), {"compress": True}),
]


@pytest.mark.parametrize("name,layout,fault,kw", FAULTS, ids=[f[0] for f in FAULTS])
def test_generated_faults_identical(
    client: Any, tmp_path: Path, name: str, layout: Layout, fault: Fault, kw: dict[str, Any]
) -> None:
    job = simulate(JobSpec(layout, steps=3, fault=fault))
    folder = _write(job, tmp_path / name, **kw)
    local, dask = _both(str(folder), client)
    assert dask == local
    assert local["root_cause"] is not None


def test_broken_and_missing_files_identical(client: Any, tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=2))
    folder = _write(job, tmp_path / "dumps")
    (folder / "nccl_trace_rank_2").write_bytes(b"\x80\x02garbage")  # a corrupt pickle
    (folder / "nccl_trace_rank_3").unlink()  # a missing dump
    (folder / "nccl_trace_rank_9").write_bytes(gzip.compress(b"\x80" * 100))
    local, dask = _both(str(folder), client)
    assert dask == local
    skipped = {Path(s["file"]).name for s in local["inputs"]["skipped"]}
    assert skipped == {"nccl_trace_rank_2", "nccl_trace_rank_9"}
    assert 3 in local["inputs"]["missing_dumps"]


def _hostile_folder(folder: Path, marker: Path) -> dict[str, bytes]:
    """Good dumps of a small job plus files that attack the reader: a pickle that crashes the
    C unpickler (its worker dies), a gzip bomb, a pickle that asks to run a shell command."""
    from hostile_cases import dict_with_key, global_reduce, gzip_bomb

    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=2))
    _write(job, folder)
    bad = {
        "nccl_trace_rank_4": dict_with_key(b"K\x01" + b"\x85" * 1_000_000),
        "nccl_trace_rank_5": gzip_bomb(),
        "nccl_trace_rank_6": global_reduce(marker),
    }
    for name, blob in bad.items():
        (folder / name).write_bytes(blob)
    return bad


@contextlib.contextmanager
def _no_faulthandler() -> Iterator[None]:
    """The crashing parse child inherits pytest's faulthandler, which would print a fatal
    error and every thread's stack to the test log for a crash that is expected."""
    enabled = faulthandler.is_enabled()
    faulthandler.disable()
    try:
        yield
    finally:
        if enabled:
            faulthandler.enable()


def test_hostile_files_skipped_alike(client: Any, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    _hostile_folder(tmp_path / "dumps", marker)
    with _no_faulthandler():
        local, dask = _both(str(tmp_path / "dumps"), client)
    assert dask == local
    reasons = {Path(s["file"]).name: s["reason"] for s in dask["inputs"]["skipped"]}
    assert "crashed" in reasons["nccl_trace_rank_4"]
    assert "gzip inflates" in reasons["nccl_trace_rank_5"]
    assert "refused" in reasons["nccl_trace_rank_6"]
    assert not marker.exists()
    assert len(client.scheduler_info()["workers"]) == 2  # no Dask worker was lost


def test_client_never_reads_dump_bytes(
    client: Any, s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every way this process could read a dump is made to fail: the workers (other processes)
    still load the job, from a folder and from S3."""
    from frtrace.dumps import read, store
    from frtrace.tables import parse
    from frtrace.tables import partition as plan

    def refuse(*_args: Any, **_kw: Any) -> Any:
        raise AssertionError("the client read a dump")

    for module, name in (
        (read, "read_bytes"),
        (read, "read_dump"),
        (read, "read_dump_bytes"),
        (store, "download"),
        (plan, "download"),
        (plan, "iter_isolated"),
        (parse, "read_bytes"),
        (parse, "decode_inflated"),
        (parse, "iter_isolated"),
    ):
        monkeypatch.setattr(module, name, refuse)
    with pytest.raises(AssertionError, match="the client read a dump"):
        frtrace.load(str(FIXTURES / "cascade_4rank"))  # the local engine does read here
    folder = frtrace.load(str(FIXTURES / "cascade_4rank"), engine="dask", client=client)
    assert folder.ranks == [0, 1, 2, 3]
    remote = frtrace.load(
        "s3://dumps/cascade_4rank/", engine="dask", client=client, storage_options=s3["options"]
    )
    assert remote.ranks == [0, 1, 2, 3]


def test_selected_ranks_and_files_list(client: Any) -> None:
    folder = FIXTURES / "cascade_4rank"
    files = sorted(str(p) for p in folder.iterdir() if p.is_file())
    local = frtrace.load(files, ranks=[0, 1])
    dask = frtrace.load(files, ranks=[0, 1], engine="dask", client=client)
    assert local.ranks == dask.ranks == [0, 1]
    assert dask.entry_count == len(local.entries)
    assert _report(frtrace.analyze(dask)) == _report(frtrace.analyze(local))


@pytest.fixture(scope="module")
def long_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight ranks, a missing rank in a tp group after many healthy steps: most entries settle."""
    spec = JobSpec(Layout(tp=2, dp=2, pp=2), steps=8, fault=Fault("missing_ranks", 5, "tp", step=6))
    return _write(simulate(spec), tmp_path_factory.mktemp("long") / "dumps")


def test_settled_entries_stay_on_the_workers(client: Any, long_job: Path) -> None:
    local = frtrace.load(str(long_job))
    dask = frtrace.load(str(long_job), engine="dask", client=client)
    assert dask.facts is not None
    assert dask.facts.left_out > len(local.table) // 2
    assert len(dask.table) + dask.facts.left_out == len(local.table) == dask.entry_count
    a, b = frtrace.analyze(local), frtrace.analyze(dask)
    assert _report(b) == _report(a)
    assert frtrace.to_text(b, width=100, verbose=True) == frtrace.to_text(
        a, width=100, verbose=True
    )
    assert frtrace.to_html(b) == frtrace.to_html(a)
    assert a.root_cause is not None and a.root_cause.culprit_ranks == [5]


class Heard:
    """A progress hook like the terminal's line: files read, and the steps named after."""

    def __init__(self) -> None:
        self.files: list[tuple[int, int, int]] = []
        self.steps: list[tuple[str, int, int]] = []

    def __call__(self, done: int, total: int, entries: int) -> None:
        self.files.append((done, total, entries))

    def stage(self, what: str, done: int = 0, total: int = 0) -> None:
        self.steps.append((what, done, total))


def _progress_of(work: str, client: Any, job: Path, tmp_path: Path) -> Heard:
    heard = Heard()
    if work == "analysis":
        frtrace.load(str(job), engine="dask", client=client, progress=heard).close()
        return heard
    from frtrace.dumps.discover import discover
    from frtrace.loading import make_plan
    from frtrace.report.parquet import write_raw

    plan = make_plan(discover(str(job), None), None)
    out = str(tmp_path / "raw")
    write_raw(client, plan.items, plan.remote, {}, str(job), [], [], False, out, heard)
    return heard


@pytest.mark.parametrize("work", ["analysis", "raw"])
def test_progress_hears_of_each_partition_as_it_is_read(
    client: Any, long_job: Path, tmp_path: Path, work: str
) -> None:
    """8 files on 2 workers are 8 partitions: the terminal's progress line shows 0 of 8 at
    once, then moves 8 times, not once when every file is read (100,000 files take minutes
    on a cluster)."""
    entries = frtrace.load(str(long_job)).entry_count
    calls = _progress_of(work, client, long_job, tmp_path).files
    assert [done for done, _total, _n in calls] == list(range(9))
    assert {total for _done, total, _n in calls} == {8}
    counts = [n for _done, _total, n in calls]
    assert counts == sorted(counts) and 0 == counts[0] < counts[1] < counts[-1] == entries


def test_progress_names_each_step_after_the_reading(client: Any, long_job: Path) -> None:
    """The line does not sit at 100% while the cluster settles the job: it names each step,
    in order, and counts the partitions whose unsettled entries have come back."""
    steps = _progress_of("analysis", client, long_job, Path()).steps
    names = [what for what, _done, _total in steps]
    order = ["inferring", "indexing", "settling: counting", "settling: comparing", "timing"]
    firsts = [next(i for i, n in enumerate(names) if n.startswith(o)) for o in order]
    assert firsts == sorted(firsts)
    assert "settling: comparing signatures, round 1" in names
    fetched = [(done, total) for what, done, total in steps if what.startswith("fetching")]
    assert fetched[0] == (0, 8) and fetched[-1] == (8, 8)
    assert [done for done, _total in fetched] == list(range(9))


def test_raw_mode_counts_the_parquet_partitions_as_they_are_written(
    client: Any, long_job: Path, tmp_path: Path
) -> None:
    steps = _progress_of("raw", client, long_job, tmp_path).steps
    written = [(done, total) for what, done, total in steps if what.startswith("writing Parquet")]
    assert written == [(k, 8) for k in range(9)]


def test_no_task_reads_more_than_part_files_files(
    client: Any, long_job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitions are cut for the workers there are, but never above PART_FILES files: a
    cluster whose workers are still starting would otherwise get a few huge tasks."""
    monkeypatch.setattr(frtrace.cluster.dask, "TASKS_PER_WORKER", 1)
    monkeypatch.setattr(frtrace.cluster.dask, "PART_FILES", 3)
    done = [done for done, _total, _n in _progress_of("analysis", client, long_job, Path()).files]
    steps = sorted(b - a for a, b in itertools.pairwise(done))
    assert done[0] == 0 and steps == [2, 3, 3]  # 8 files in 3 + 3 + 2, in any order


def test_a_scheduler_without_workers_is_waited_for(long_job: Path) -> None:
    """dask-jobqueue's `scale` returns before Slurm starts a worker: the run says it waits,
    then reads the job on the workers that come, with the local engine's answer."""
    local = frtrace.analyze(frtrace.load(str(long_job)))
    heard = Heard()
    out: list[Any] = []
    with _cluster(0) as c:

        def run() -> None:
            trace = frtrace.load(str(long_job), engine="dask", client=c, progress=heard)
            out.append(frtrace.analyze(trace))
            trace.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not heard.steps and time.monotonic() < deadline:
            time.sleep(0.05)
        assert heard.steps[0][0] == (
            f"waiting for a Dask worker to join the scheduler at {c.scheduler.address}"
        )
        assert not heard.files  # nothing is cut into partitions before a worker is there
        c.cluster.scale(2)
        thread.join(timeout=180)
    assert out and _report(out[0]) == _report(local)


def test_a_batch_log_says_the_run_waits_for_workers(long_job: Path) -> None:
    """Off a terminal the progress line is silent, but a wait for workers may last hours
    (a Slurm queue): one stderr line says so, then the report comes as usual."""
    args = [str(long_job), "--prefix", "nccl_trace_rank_", "--format", "json"]
    local = _cli(*args)
    with _cluster(0) as c:
        address = c.scheduler.address
        run = subprocess.Popen(
            [sys.executable, "-m", "frtrace", *args, "--engine", "dask", "--scheduler", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        try:
            stream = run.stderr
            assert stream is not None
            lines: list[str] = []  # the first line, read aside: silence must fail, not hang
            reader = threading.Thread(target=lambda: lines.append(stream.readline()))
            reader.start()
            reader.join(timeout=120)
            first = lines[0] if lines else ""
            c.cluster.scale(2)
            out, err = run.communicate(timeout=180)
        finally:
            run.kill()
    waiting = "waiting for a Dask worker to join the scheduler at"
    assert first == f"frtrace: {waiting} {address}\n"
    assert run.returncode == local.returncode == 1, err
    assert json.loads(out) == json.loads(local.stdout)
    assert "waiting" not in err and "Traceback" not in err


def _workers_that(preload: str, tmp_path: Path) -> contextlib.AbstractContextManager[Any]:
    """A client of a real local cluster of one worker process that ran `preload` (Python) as
    it started."""
    script = tmp_path / "preload_worker.py"
    script.write_text(preload)
    return _cluster(1, preload=[str(script)])


HIDE_FRTRACE = """import sys
for name in [n for n in sys.modules if n == "frtrace" or n.startswith("frtrace.")]:
    del sys.modules[name]
sys.modules["frtrace"] = None  # an environment without frtrace
"""


def test_workers_without_frtrace_are_one_line_and_exit_2_not_a_hang(tmp_path: Path) -> None:
    """Such a worker cannot read its task and dies; the run used to wait for it forever."""
    with _workers_that(HIDE_FRTRACE, tmp_path) as c:
        out = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", c.scheduler.address)
    assert out.returncode == 2, out.stderr
    error = out.stderr.strip().splitlines()[-1]
    assert error.startswith("frtrace: error: 1 of 1 Dask workers cannot import frtrace")
    assert "pip install 'frtrace[dask]==" in error and "Traceback" not in out.stderr


def test_workers_with_another_frtrace_are_refused(tmp_path: Path) -> None:
    older = "import frtrace.version\nfrtrace.version.__version__ = '0.0.1'\n"
    with _workers_that(older, tmp_path) as c:
        out = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", c.scheduler.address)
    assert out.returncode == 2, out.stderr
    assert "1 of 1 Dask workers run frtrace '0.0.1'" in out.stderr
    assert f"this client {frtrace.__version__}: install the same version" in out.stderr


def test_a_worker_with_another_frtrace_that_joined_after_the_check_is_refused_by_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers are asked which frtrace they run before the tasks go out; one that joins later
    (an autoscaled cluster) is not, and would parse with other code. Here the start's check
    does not see the worker, as it would not see a later one."""
    older = "import frtrace.version\nfrtrace.version.__version__ = '0.0.1'\n"
    monkeypatch.setattr(frtrace.cluster.dask, "ready_workers", lambda client, progress=None: 1)
    with _workers_that(older, tmp_path) as c, pytest.raises(FrtraceError) as caught:
        frtrace.load(FIXTURES / "tutorial", engine="dask", client=c)
    assert str(caught.value) == (
        f"a Dask worker that joined after the start runs frtrace '0.0.1', this client "
        f"{frtrace.__version__}: install the same version on every worker"
    )


DIE_IN_PARSING = """import os
import frtrace.tables.partition
def _die(*args, **kwargs):
    os._exit(1)  # as a worker killed for its memory
frtrace.tables.partition.parse_partition = _die
"""


def test_workers_dying_on_a_task_are_one_line_naming_the_usual_causes(tmp_path: Path) -> None:
    """Dask gives up on a task that killed its workers (KilledWorker): no error to show, and
    its text, cut short, named a worker address but no cause."""
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        _workers_that(DIE_IN_PARSING, tmp_path) as c,
    ):
        out = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", c.scheduler.address)
    assert out.returncode == 2, out.stderr
    error = out.stderr.strip().splitlines()[-1]
    assert error.startswith("frtrace: error: the Dask analysis tasks failed: KilledWorker: ")
    assert "workers short of memory" in error and f"without frtrace {frtrace.__version__}" in error
    assert "Traceback" not in out.stderr


HOLD_PARSING = """import os, time
from frtrace.tables import partition as plan
_parse = getattr(plan, "unheld", plan.parse_partition)  # a worker runs its preload twice
def _held(*args, **kwargs):
    open({started!r}, "w").close()
    while os.path.exists({hold!r}):
        time.sleep(0.05)
    return _parse(*args, **kwargs)
plan.unheld, plan.parse_partition = _parse, _held
"""


@contextlib.contextmanager
def _spawned(*argv: str) -> Iterator[subprocess.Popen[bytes]]:
    """A Dask scheduler or worker as a process of its own, to be killed as a node dies."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _until(done: Any, what: str, seconds: float = 120) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := done()):
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.05)
    return found


def _address_in(scheduler_file: Path) -> str | None:
    try:
        return str(json.loads(scheduler_file.read_text())["address"])
    except (OSError, ValueError, KeyError):  # not written yet, or half written
        return None


def _holding_worker(
    address: str, tmp_path: Path
) -> tuple[contextlib.AbstractContextManager[subprocess.Popen[bytes]], Path, Path]:
    """A worker process whose parse tasks wait while `hold` exists, having made `started`:
    the run is surely mid-way when the test breaks the cluster."""
    started, hold = tmp_path / "started", tmp_path / "hold"
    hold.touch()
    script = tmp_path / "hold_parsing.py"
    script.write_text(HOLD_PARSING.format(started=str(started), hold=str(hold)))
    worker = _spawned(
        "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
        "--preload", str(script),
    )  # fmt: skip
    return worker, started, hold


def _frtrace(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "frtrace", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _heard_until(text: str, stream: Any) -> list[str]:
    """The lines of `stream` up to the first holding `text`, read aside: a line that never
    comes must fail the test, not hang it."""
    lines: list[str] = []

    def read() -> None:
        while (line := stream.readline()) and text not in line:
            lines.append(line)
        lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=120)
    assert lines and text in lines[-1], lines
    return lines


def test_a_scheduler_lost_mid_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A scheduler killed, or its node gone, while the tasks run: Dask cancels every result
    naming no cause ("FuturesCancelledError: 7 Futures cancelled:"), after 36 lines of its
    own log with a traceback."""
    sched = tmp_path / "sched.json"
    with _spawned(
        "distributed.cli.dask_scheduler", "--scheduler-file", str(sched), "--port", "0",
        "--dashboard-address", ":0",
    ) as scheduler:  # fmt: skip
        address = _until(lambda: _address_in(sched), "the scheduler file")
        worker, started, _hold = _holding_worker(address, tmp_path)
        with worker:
            run = _frtrace("fixtures/tutorial", "--engine", "dask", "--scheduler", str(sched))
            try:
                _until(started.exists, "a parse task")
                scheduler.kill()
                _out, err = run.communicate(timeout=120)
            finally:
                run.kill()
    assert run.returncode == 2, err
    assert err.splitlines()[-1] == (
        f"frtrace: error: lost the connection to the Dask scheduler at {address} (stopped, or "
        "its node went away): the work on its cluster is gone; run again once it is back"
    )
    assert "Traceback" not in err and "distributed." not in err


def test_a_run_whose_workers_all_left_says_it_waits_then_goes_on_with_new_ones(
    tmp_path: Path,
) -> None:
    """Every worker gone mid-run (preempted, or killed for memory): the tasks wait for one to
    join, and the run used to wait in silence. A batch log now says so, and says when a
    worker came; the report is then the local engine's."""
    args = ["fixtures/tutorial", "--format", "json"]
    local = _cli(*args)
    with _cluster(0) as c:  # the scheduler; its workers are processes of their own
        address = c.scheduler.address
        worker, started, _hold = _holding_worker(address, tmp_path)
        with worker as process:
            run = _frtrace(*args, "--engine", "dask", "--scheduler", address)
            try:
                _until(started.exists, "a parse task")
                process.kill()
                stream = run.stderr
                assert stream is not None
                heard = _heard_until("no Dask worker left", stream)
                again = tmp_path / "again"
                again.mkdir()
                second, _started, held = _holding_worker(address, again)
                with second:
                    heard += _heard_until("a Dask worker joined", stream)
                    held.unlink()
                    out, err = run.communicate(timeout=180)
            finally:
                run.kill()
    assert heard[-2:] == [
        f"frtrace: no Dask worker left at {address}; waiting for one to join (it reads "
        "again what the lost ones held)\n",
        f"frtrace: a Dask worker joined {address}; going on\n",
    ]
    assert run.returncode == local.returncode == 1, err
    assert json.loads(out) == json.loads(local.stdout)
    assert "Traceback" not in "".join(heard) + err


class Noticed(Heard):
    """The progress hook of the command: it also hears of long waits."""

    def __init__(self) -> None:
        super().__init__()
        self.notices: list[str] = []

    def notice(self, what: str) -> None:
        self.notices.append(what)


def test_no_worker_left_while_nothing_waits_is_not_told(
    long_job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adaptive cluster scales to no worker once idle, as while the report is written:
    no task waits for one, so nothing is said."""
    monkeypatch.setattr(frtrace.cluster.dask, "WATCH_SECONDS", 0.05)
    heard = Noticed()
    with _cluster(1) as c:
        trace = frtrace.load(
            str(long_job), engine="dask", scheduler=c.scheduler.address, progress=heard
        )
        try:
            c.cluster.scale(0)
            _until(lambda: not c.scheduler_info()["workers"], "no worker")
            time.sleep(1)  # the watch asks 20 times
        finally:
            trace.close()
    assert heard.notices == []


def test_a_folder_the_workers_cannot_see_is_one_line_naming_it(client: Any, tmp_path: Path) -> None:
    """As on workers without the shared file system: each file was one `skipped` line, then
    "no usable dump", with nothing saying why (100,000 lines for a large job)."""
    from frtrace.loading import load_found, locate

    job = tmp_path / "job"
    shutil.copytree(FIXTURES / "cascade_4rank", job)
    found = locate(str(job))
    shutil.rmtree(job)  # listed here, absent where the workers look
    with pytest.raises(FrtraceError) as info:
        load_found(found, engine="dask", client=client)
    said = str(info.value)
    assert said.startswith(f"2 of 2 Dask workers cannot read {job / 'trace_0'} (tcp://"), said
    assert said.endswith(
        ": No such file or directory): a folder must be readable at the same path on every "
        "worker (a shared file system), or give a store URL"
    )


def test_a_folder_a_late_worker_cannot_see_is_one_line_from_its_task(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that joins after the start's check is not asked; its task asks itself rather
    than skip its every file and leave their ranks to be blamed as dumpless."""
    from frtrace.loading import load_found, locate

    monkeypatch.setattr(frtrace.cluster.dask, "check_access", lambda *args: None)
    job = tmp_path / "job"
    shutil.copytree(FIXTURES / "cascade_4rank", job)
    found = locate(str(job))
    shutil.rmtree(job)
    with pytest.raises(FrtraceError) as info:
        load_found(found, engine="dask", client=client)
    told = {  # each partition's task asks for its first file; whichever fails first is told
        (
            "a Dask worker (one that joined after the start, or whose access changed since) "
            f"cannot read {job / f'trace_{rank}'} (No such file or directory): a folder must "
            "be readable at the same path on every worker (a shared file system), or give a "
            "store URL"
        )
        for rank in range(4)
    }
    assert str(info.value) in told


def test_a_dump_removed_after_the_listing_is_skipped_not_taken_for_a_missing_folder(
    client: Any, tmp_path: Path
) -> None:
    """Its folder is there: the file went (a cleanup, a rotation), as the local engine says."""
    from frtrace.loading import load_found, locate

    job = tmp_path / "job"
    shutil.copytree(FIXTURES / "cascade_4rank", job)
    found = locate(str(job))
    (job / "trace_0").unlink()
    trace = load_found(found, engine="dask", client=client)
    try:
        assert trace.ranks == [1, 2, 3]
        assert [(Path(s.file).name, s.reason) for s in trace.skipped] == [
            ("trace_0", "cannot read (No such file or directory)")
        ]
    finally:
        trace.close()


NO_CREDENTIALS = """import os
for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
    os.environ.pop(name, None)
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.environ["AWS_CONFIG_FILE"] = os.devnull
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # and no instance role to ask
"""


def test_workers_without_the_store_credentials_are_one_line_not_a_line_per_object(
    s3: dict[str, Any], tmp_path: Path
) -> None:
    """The client lists the bucket with its credentials; workers started without them used to
    skip every object, one line each, and end in "no usable dump"."""
    with _workers_that(NO_CREDENTIALS, tmp_path) as c:
        out = _cli(
            "s3://dumps/cascade_4rank/",
            "--engine",
            "dask",
            "--scheduler",
            c.scheduler.address,
            env={"FSSPEC_S3_ENDPOINT_URL": s3["endpoint"]},
        )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    start = "frtrace: error: 1 of 1 Dask workers cannot read s3://dumps/cascade_4rank/trace_0"
    assert lines[-1].startswith(start + " (tcp://"), out.stderr
    assert "NoCredentialsError: Unable to locate credentials" in lines[-1]
    assert lines[-1].endswith(
        "the workers need the store's library, credentials, endpoint and network access, "
        "as this client has them"
    )
    assert not [line for line in lines if line.startswith("skipped")]


def test_a_late_worker_without_the_store_credentials_is_one_line_from_its_task(
    s3: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frtrace.cluster.dask, "check_access", lambda *args: None)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # the client's own credentials
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    options = {"endpoint_url": s3["endpoint"]}
    with _workers_that(NO_CREDENTIALS, tmp_path) as c, pytest.raises(FrtraceError) as info:
        frtrace.load("s3://dumps/cascade_4rank/", engine="dask", client=c, storage_options=options)
    assert str(info.value) == (
        "a Dask worker (one that joined after the start, or whose access changed since) "
        "cannot read s3://dumps/cascade_4rank/trace_0 "
        "(NoCredentialsError: Unable to locate credentials): the workers need the store's "
        "library, credentials, endpoint and network access, as this client has them"
    )


def test_rank_history_comes_from_its_worker(client: Any, long_job: Path) -> None:
    local = frtrace.load(str(long_job))
    dask = frtrace.load(str(long_job), engine="dask", client=client)
    assert dask.facts is not None
    for rank in (0, 5, 7):
        mine = local.table.take(local.table["rank"] == rank).to_pandas()
        fetched = dask.facts.history(rank).to_pandas()
        assert list(fetched.columns) == list(mine.columns)
        for column in mine.columns:
            assert fetched[column].equals(mine[column]), column
    dask.close()
    with pytest.raises(FrtraceError, match="not on the cluster"):
        dask.facts.history(0)
    dask.close()  # twice is harmless


def _held_specs(dask_scheduler: Any) -> dict[str, int]:
    """On the scheduler: the tasks whose results it holds, and their specs' pickled sizes."""
    return {
        str(key): len(pickle.dumps(ts.run_spec)) if ts.run_spec is not None else 0
        for key, ts in dask_scheduler.tasks.items()
        if ts.state == "memory"
    }


def test_a_partition_adds_less_than_the_group_table_to_the_scheduler(
    client: Any, long_job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partitions' contexts are held for the Trace's life, and so are their task specs:
    the job-wide groups and pg_status must be one object they share, not a copy per partition
    (a thousand partitions on a large cluster). Loaded in 2, then 8 partitions; closing the
    Trace releases all it held."""
    total: dict[int, int] = {}
    for per_worker in (1, 4):
        monkeypatch.setattr(frtrace.cluster.dask, "TASKS_PER_WORKER", per_worker)
        before = set(client.run_on_scheduler(_held_specs))
        trace = frtrace.load(str(long_job), engine="dask", client=client)
        held = {k: n for k, n in client.run_on_scheduler(_held_specs).items() if k not in before}
        total[per_worker] = sum(held.values())
        groups = len(pickle.dumps(trace.group_table))
        trace.close()
        for _ in range(200):  # the scheduler hears of released futures a moment later
            left = set(held) & set(client.run_on_scheduler(_held_specs))
            if not left:
                break
            time.sleep(0.05)
        assert not left
    assert 0 < (total[4] - total[1]) / 6 < groups


def _fetched(dask_worker: Any) -> list[str]:
    """On a worker: the keys it fetched from other workers."""
    return [str(k) for t in dask_worker.transfer_incoming_log for k in t.get("keys", {})]


def test_partitions_never_travel_between_workers(tmp_path: Path) -> None:
    """A partition's columns are hundreds of MB at scale: every task that reads them is
    placed on the worker holding them, however busy it is (64 ranks: 8 partitions on 2
    workers). Work stealing is off here: it may still move a task, weighing the partition's
    size (tested below), and on a job this small moving is cheap."""
    spec = JobSpec(Layout(tp=4, dp=8, pp=2), steps=40, fault=Fault("missing_ranks", 9, "tp", 30))
    folder = _write(simulate(spec), tmp_path / "dumps")
    with dask.config.set({"distributed.scheduler.work-stealing": False}), _cluster() as own:
        trace = frtrace.load(str(folder), engine="dask", client=own)
        fetched = [k for ks in own.run(_fetched).values() for k in ks]
        trace.close()
    assert fetched  # the lag shuffle's pieces do travel
    assert not [k for k in fetched if k.startswith(("parse_partition", "open_part"))]


def test_dask_weighs_a_partition_by_its_columns(long_job: Path) -> None:
    """Dask sizes a task's result with sys.getsizeof unless told: a partition weighed at a
    few bytes is what it ships freely, and what its spilling overlooks."""
    from dask.sizeof import sizeof

    from frtrace.cluster import assemble as raw
    from frtrace.cluster.spread import open_part
    from frtrace.dumps.limits import budgets
    from frtrace.tables import partition as plan

    items = [(str(p), int(p.name.rsplit("_", 1)[1].split(".")[0])) for p in long_job.iterdir()]
    parsed = plan.parse_partition(sorted(items, key=lambda i: i[1]), False, {}, budgets())
    job = raw.assemble(str(long_job), raw.summarize(parsed), [])
    context = open_part(parsed, job.groups, job.stack_ids, Scope(False, {}))
    assert context is not None
    table = context.trace.table
    assert sizeof(parsed) >= sum(c.ints["record_id"].nbytes for _r, _p, c, *_ in parsed if c)
    assert sizeof(context) >= sum(v.nbytes for v in table.cols.values()) > 10_000


def test_rank_histories_survive_the_loss_of_each_worker(long_job: Path) -> None:
    """A worker lost after the load takes its partitions' entries: they are made again on
    the others from their parse tasks and the job-wide facts, which must outlive any one
    worker. Each worker in turn is restarted empty, then histories are asked for."""
    local = frtrace.load(str(long_job))
    with _cluster() as own:
        remote = frtrace.load(str(long_job), engine="dask", client=own)
        assert remote.facts is not None
        for worker in sorted(own.scheduler_info()["workers"]):
            own.restart_workers([worker])
            for rank in (0, 5, 7):
                fetched = remote.facts.history(rank)
                assert len(fetched) == int((local.table["rank"] == rank).sum())
        remote.close()


def test_straggler_lags_shuffled_between_workers(client: Any, tmp_path: Path) -> None:
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=6, straggler=(3, 30_000_000)))
    folder = _write(job, tmp_path / "dumps")
    local, dask = _both(str(folder), client)
    assert dask == local
    assert [s["rank"] for s in local["stragglers"]["top"]][:1] == [3]


def test_a_step_straggler_and_where_it_shows_alike_between_workers(
    client: Any, tmp_path: Path
) -> None:
    spec = JobSpec(
        Layout(tp=2, dp=2, pp=2), steps=6, step_straggler=(6, 20_000_000, 60_000_000),
        batch_p2p=True,
    )  # fmt: skip
    folder = _write(simulate(spec), tmp_path / "dumps")
    local, dask = _both(str(folder), client)
    assert dask == local
    (late,) = local["stragglers"]["top"]
    assert late["rank"] == 6 and late["where"]["step_index"] == 0


def test_batched_p2p_channels_settle_alike(client: Any, tmp_path: Path) -> None:
    fault = Fault("p2p_mismatch", 1, "pp", step=3)
    spec = JobSpec(Layout(tp=2, pp=4), steps=6, batch_p2p=True, fault=fault)
    folder = _write(simulate(spec), tmp_path / "dumps")
    local, dask = _both(str(folder), client)
    assert dask == local
    assert local["root_cause"]["kind"] == "p2p_mismatch"


def test_an_old_mismatch_settles_in_pieces_across_workers(client: Any, tmp_path: Path) -> None:
    # The tp group's four ranks are parsed in separate partitions on two workers: the rounds
    # that ask again in pieces must settle there what one process settles.
    job = simulate(JobSpec(Layout(tp=4), steps=12))
    entries = job.dumps[2]["entries"]
    done = [x for x in entries if x["profiling_name"] == "nccl:all_reduce"]
    old = done[len(done) // 2]
    old["input_dtypes"] = old["output_dtypes"] = ["Half"]
    folder = _write(job, tmp_path / "dumps")
    dask = frtrace.load(str(folder), engine="dask", client=client)
    assert dask.facts is not None and len(dask.table) < dask.entry_count // 4
    local, remote = _both(str(folder), client)
    assert remote == local
    found = [(f["kind"], f["collective_seq_id"]) for f in local["findings"]]
    assert ("dtype_mismatch", old["collective_seq_id"]) in found


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frtrace", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        timeout=240,
    )


@pytest.mark.parametrize("fixture", ["tutorial", "healthy_4rank", "cascade_4rank"])
def test_cli_exit_status_and_report_equal(client: Any, fixture: str) -> None:
    folder = f"fixtures/{fixture}"  # relative: workers get absolute paths, reports the given
    local = _cli(folder, "--format", "json")
    address = client.scheduler.address
    dask = _cli(folder, "--format", "json", "--engine", "dask", "--scheduler", address)
    assert dask.returncode == local.returncode, dask.stderr
    assert json.loads(dask.stdout) == json.loads(local.stdout)


def test_cli_scheduler_from_environment(client: Any) -> None:
    folder = str(FIXTURES / "tutorial")
    env = {"DASK_SCHEDULER_ADDRESS": client.scheduler.address}
    result = _cli(folder, "--engine", "dask", env=env)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[-1].startswith("HUNG: root cause missing_ranks")


@pytest.mark.parametrize("name", ["sched.json", "scheduler-info"])
def test_cli_scheduler_from_the_file_the_scheduler_wrote(tmp_path: Path, name: str) -> None:
    """As on Slurm: `dask scheduler --scheduler-file sched.json` on a node known only once it
    runs; the command is given the file, known by existing whatever its name."""
    sched = tmp_path / name
    local = _cli("fixtures/tutorial", "--format", "json")
    with _cluster(1, scheduler_kwargs={"scheduler_file": str(sched)}):
        result = _cli(
            "fixtures/tutorial", "--format", "json", "--engine", "dask", "--scheduler", str(sched)
        )
    assert result.returncode == local.returncode == 1, result.stderr
    assert json.loads(result.stdout) == json.loads(local.stdout)


def test_cli_missing_or_foreign_scheduler_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "sched.json"
    result = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", str(missing))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"frtrace: error: no Dask scheduler file at {missing} (the scheduler writes it when "
        f"started with --scheduler-file {missing})"
    )
    missing.write_text('{"type": "Scheduler"}')
    result = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", str(missing))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"frtrace: error: {missing}: not a Dask scheduler file (no address in it)"
    )


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("nonsense", "missing port number in address 'nonsense'"),
        ("tcp://10.0.0.2", "missing port number in address '10.0.0.2'"),
        ("tcp://10.0.0.2:99999", "port 99999 out of range"),
        (
            "http://10.0.0.2:8787",  # the dashboard's, copied from the browser
            "a web address, as the dashboard's; a scheduler's is tcp://, on port 8786 unless "
            "told otherwise",
        ),
    ],
)
def test_cli_malformed_scheduler_address_is_one_line(address: str, why: str) -> None:
    """Dask's Client raised a ValueError for these only once started (a traceback, then a 30 s
    wait for the half-built client to close, exit 3)."""
    result = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", address)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"frtrace: error: not a Dask scheduler address: {address} ({why}); give one like "
        "tcp://10.0.0.2:8786, or the file the scheduler wrote (--scheduler-file)"
    )


def test_cli_since_reads_both_snapshots_on_one_cluster_and_reports_as_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--since` with the command's own cluster: the older snapshot is read on the cluster that
    holds the newer one, not on a second cluster started beside it (twice the memory)."""
    from click.testing import CliRunner

    from frtrace.cli import cli

    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=3, fault=Fault("missing_ranks", 5)))
    stop, others = job.last_activity(5), max(job.last_activity(r) for r in range(8))
    older = write_dumps(job.snapshot_at(stop + 1), tmp_path / "t1")
    newer = write_dumps(job.snapshot_at(others + 1), tmp_path / "t2")
    started: list[Any] = []
    real: Any = distributed.LocalCluster

    class Counted(real):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            started.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", Counted)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    args = [str(newer), "--since", str(older), "--format", "json"]
    local = CliRunner().invoke(cli, args)
    dask = CliRunner().invoke(cli, [*args, "--engine", "dask", "--jobs", "2"])
    assert dask.exit_code == local.exit_code == 1, dask.output
    assert json.loads(dask.stdout) == json.loads(local.stdout)
    assert 5 in json.loads(dask.stdout)["progress"]["stopped"]
    assert len(started) == 1


def test_cli_starts_a_local_cluster_and_says_only_its_own_lines() -> None:
    """Dask's default dashboard port is often taken (a notebook's cluster): the cluster
    frtrace starts must not make Dask warn about it on stderr."""
    with socket.socket() as taken:
        with contextlib.suppress(OSError):  # already taken is as good
            taken.bind(("", 8787))
            taken.listen()
        result = _cli(str(FIXTURES / "tutorial"), "--engine", "dask", "--jobs", "1")
    assert result.returncode == 1, result.stderr
    assert all(line.startswith("frtrace: ") for line in result.stderr.splitlines()), result.stderr


def test_a_script_starting_a_local_cluster_outside_a_main_guard_is_told_why(
    tmp_path: Path,
) -> None:
    """Dask's worker processes import the script, which starts a cluster again: Dask says
    only "Nanny failed to start.". The error names the script and the fix."""
    script = tmp_path / "check_job.py"
    script.write_text(
        f"import frtrace\nfrtrace.load({str(FIXTURES / 'tutorial')!r}, engine='dask', jobs=1)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=240
    )
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (
        "frtrace.errors.FrtraceError: cannot start a local Dask cluster: RuntimeError: Nanny "
        f"failed to start. (in a script such as {script}, start the run under `if __name__ == "
        "'__main__':`: Dask's worker processes import the script)"
    )


def test_cli_usage_errors() -> None:
    tutorial = str(FIXTURES / "tutorial")
    for args in (
        [tutorial, "--scheduler", "tcp://127.0.0.1:1"],
        [tutorial, "-j", "--engine", "dask"],
        [tutorial, "--raw-output", "/tmp/x"],
    ):
        result = _cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("frtrace: error: ")
        assert "Traceback" not in result.stderr


def test_cli_unreachable_scheduler() -> None:
    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _cli(
        str(FIXTURES / "tutorial"), "--engine", "dask", "--scheduler", f"tcp://127.0.0.1:{port}"
    )
    assert result.returncode == 2, result.stderr
    assert "cannot reach the Dask scheduler" in result.stderr
    assert "Traceback" not in result.stderr


@contextlib.contextmanager
def _listener(answer: bytes | None) -> Iterator[str]:
    """The address of a port where something other than a Dask scheduler listens: it sends
    `answer` to whoever connects, or nothing, as a web server waiting for a request does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                held.append(conn)
                if answer is not None:
                    conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


DEFAULT_PORTS = "a scheduler listens on port 8786 unless told otherwise; 8787 is its dashboard"


def test_cli_a_port_where_something_else_answers_is_one_line() -> None:
    """A server that answers with other bytes: Dask's client read them as a frame's length
    and tried to allocate exabytes (internal error: MemoryError)."""
    with _listener(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n") as address:
        result = _cli("fixtures/tutorial", "--engine", "dask", "--scheduler", address)
    assert result.returncode == 2, result.stderr
    error = result.stderr.splitlines()[-1]
    assert error.startswith(f"frtrace: error: no Dask scheduler at {address}: what answered ")
    assert error.endswith(f"; {DEFAULT_PORTS})")


def test_a_port_where_something_else_is_silent_is_one_line() -> None:
    """A web server waits for a request, and Dask's client waited forever for a handshake."""
    with _listener(None) as address, pytest.raises(FrtraceError) as caught:
        frtrace.cluster.dask.knock(address, seconds=1)
    assert str(caught.value) == (
        f"no Dask scheduler at {address}: something listens there, but did not answer as one "
        f"in 6 s ({DEFAULT_PORTS})"
    )


def test_missing_dask_is_one_line() -> None:
    code = (
        "import sys; sys.modules['distributed'] = None; "
        "from frtrace.cli import main; main(sys.argv[1:])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / "tutorial"), "--engine", "dask"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "pip install 'frtrace[dask]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # the prefix note, then the error


@pytest.mark.parametrize(
    "url,hint",
    [
        ("s3://bucket/job/", "pip install 'frtrace[s3]'"),
        ("gs://bucket/job/", "pip install 'frtrace[gcs]'"),
        ("az://container/job/", "adlfs"),  # no extra of ours: fsspec's advice
        ("nosuchstore://x/job/", "Protocol not known: nosuchstore"),
    ],
)
def test_a_store_without_its_package_is_one_line_naming_it(url: str, hint: str) -> None:
    code = (
        "import sys; sys.modules['s3fs'] = sys.modules['gcsfs'] = sys.modules['adlfs'] = None; "
        "from frtrace.cli import main; main(sys.argv[1:])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert hint in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_import_stays_light() -> None:
    code = (
        "import sys, frtrace, frtrace.cli; "
        "bad = [m for m in ('dask', 'distributed', 'pandas', 'fsspec', 's3fs', 'torch') "
        "if m in sys.modules]; print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def raw_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """p2p (global peers), coalesced blocks, stacks, and a broken file among good ones."""
    folder = tmp_path_factory.mktemp("raw") / "dumps"
    job = simulate(JobSpec(Layout(tp=2, dp=2, pp=2), steps=2, fault=Fault("missing_ranks", 5)))
    _write(job, folder)
    (folder / "nccl_trace_rank_9").write_bytes(b"\x80\x02garbage")
    return folder


RAW_CASES = [
    ("cascade_4rank", []),
    ("tutorial_json", []),
    ("raw_job", []),
    ("raw_job", ["--print-stack-trace"]),
    ("raw_job", ["--selected-ranks", "0-2,6", "--pg-filters", "mesh_pp", "mesh_tp"]),
]


@pytest.mark.parametrize(
    "source,options", RAW_CASES, ids=[" ".join([c[0], *c[1]]) for c in RAW_CASES]
)
def test_raw_parquet_matches_local_json(
    client: Any, tmp_path: Path, raw_job: Path, source: str, options: list[str]
) -> None:
    """Workers write the Parquet files; their rows are exactly `frtrace -j`'s entries."""
    pq = _require("pyarrow.parquet")
    pd = pytest.importorskip("pandas")
    folder = str(raw_job if source == "raw_job" else FIXTURES / source)
    local = _cli(folder, "-j", *options)
    assert local.returncode == 0, local.stderr
    out = tmp_path / "raw"
    address = client.scheduler.address
    dask = _cli(
        folder, *options, "-j", "--engine", "dask", "--scheduler", address, "--raw-output", str(out)
    )
    assert dask.returncode == 0, dask.stderr
    assert dask.stdout == ""
    assert "written by the workers" in dask.stderr
    expected = json.loads(local.stdout)
    assert len(pd.read_parquet(out)) == len(expected)
    assert pq.read_table(out).to_pylist() == expected
    skipped = [line for line in local.stderr.splitlines() if line.startswith("skipped")]
    assert skipped == [line for line in dask.stderr.splitlines() if line.startswith("skipped")]
    again = _cli(folder, "-j", "--engine", "dask", "--scheduler", address, "--raw-output", str(out))
    assert again.returncode == 2 and "holds .parquet files already" in again.stderr


# --- S3: a real S3 API served by moto on 127.0.0.1 ---------------------------------------------


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    _require("s3fs")
    server_mod = _require("moto.server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("dumps")
    for fixture in ("cascade_4rank", "tutorial_json"):
        for path in sorted((FIXTURES / fixture).iterdir()):
            fs.pipe(f"dumps/{fixture}/{path.name}", path.read_bytes())
    job = simulate(JobSpec(Layout(tp=2, dp=2), steps=2, fault=Fault("missing_ranks", 1)))
    for rank, dump in job.dumps.items():
        # host sub-folders, host names in the file names: ranks come from the trailing number
        fs.pipe(f"dumps/job-7/node{rank // 2}/fr_node{rank // 2}-host_{rank}", pickle.dumps(dump))
    fs.pipe("dumps/job-7/node1/fr_node1-host_9", b"\x80\x02not a dump")
    fs.pipe("dumps/job-7/README", b"not a dump")
    yield {"endpoint": endpoint, "options": options, "fs": fs, "job": job}
    server.stop()


@pytest.fixture
def local_job7(s3: dict[str, Any], tmp_path: Path) -> Path:
    folder = tmp_path / "job-7"
    s3["fs"].get("dumps/job-7", str(folder), recursive=True)
    return folder


@pytest.mark.parametrize("fixture", ["cascade_4rank", "tutorial_json"])
def test_s3_fixture_identical_to_local_folder(
    client: Any, s3: dict[str, Any], fixture: str
) -> None:
    url = f"s3://dumps/{fixture}/"
    local = _report(frtrace.analyze(frtrace.load(str(FIXTURES / fixture))))
    from_s3 = _report(
        frtrace.analyze(
            frtrace.load(url, engine="dask", client=client, storage_options=s3["options"])
        )
    )
    local_from_s3 = _report(frtrace.analyze(frtrace.load(url, storage_options=s3["options"])))
    for report in (from_s3, local_from_s3):
        report["inputs"]["trace_dir"] = local["inputs"]["trace_dir"]
    assert from_s3 == local
    assert local_from_s3 == local


def test_s3_prefix_ranks_and_bad_object(client: Any, s3: dict[str, Any], local_job7: Path) -> None:
    url = "s3://dumps/job-7"
    trace = frtrace.load(url, engine="dask", client=client, storage_options=s3["options"])
    assert trace.prefix == "fr_"
    assert trace.ranks == [0, 1, 2, 3]
    assert [(Path(s.file).name, s.reason) for s in trace.skipped] == [
        ("fr_node1-host_9", "corrupt pickle (invalid load key, 'n'.)")
    ]
    assert trace.skipped[0].file == "s3://dumps/job-7/node1/fr_node1-host_9"
    local = frtrace.load(str(local_job7))
    assert [s.reason for s in local.skipped] == [s.reason for s in trace.skipped]
    a, b = frtrace.analyze(local), frtrace.analyze(trace)
    assert a.root_cause is not None and b.root_cause is not None
    assert (a.root_cause.kind, a.root_cause.culprit_ranks) == (
        b.root_cause.kind,
        b.root_cause.culprit_ranks,
    )
    explicit = frtrace.load(
        url, prefix="fr_node0", engine="dask", client=client, storage_options=s3["options"]
    )
    assert explicit.ranks == [0, 1]


def test_s3_object_or_two_jobs_are_one_line_as_for_a_folder(s3: dict[str, Any]) -> None:
    """An object's URL was listed as a folder of one object and inferred a prefix '' before
    `no dump files found in s3://.../trace_0`; a folder says `not a folder`."""
    with pytest.raises(FrtraceError) as err:
        frtrace.load("s3://dumps/cascade_4rank/trace_0", storage_options=s3["options"])
    assert str(err.value) == (
        "s3://dumps/cascade_4rank/trace_0: not a folder (give the folder that holds the dumps)"
    )
    with pytest.raises(FrtraceError) as err:
        frtrace.load("s3://dumps/", storage_options=s3["options"])
    assert str(err.value) == (
        "two files claim rank 0: s3://dumps/cascade_4rank/trace_0 and "
        "s3://dumps/tutorial_json/trace_0.json (two jobs' dumps? give the folder of one, "
        "e.g. s3://dumps/cascade_4rank)"
    )


def test_s3_listing_gives_the_dumps_size_for_the_memory_estimate(s3: dict[str, Any]) -> None:
    from frtrace.loading import locate
    from frtrace.loading.memory import dump_bytes

    found = locate("s3://dumps/cascade_4rank/", storage_options=s3["options"])
    assert dump_bytes(found) == sum(
        p.stat().st_size for p in (FIXTURES / "cascade_4rank").iterdir()
    )


def test_s3_cli_with_endpoint_from_environment(client: Any, s3: dict[str, Any]) -> None:
    env = {"FSSPEC_S3_ENDPOINT_URL": s3["endpoint"]}
    result = _cli(
        "s3://dumps/job-7/",
        "--engine",
        "dask",
        "--scheduler",
        client.scheduler.address,
        "--format",
        "json",
        env=env,
    )
    assert result.returncode == 1, result.stderr
    assert "skipped s3://dumps/job-7/node1/fr_node1-host_9: corrupt pickle" in result.stderr
    report = json.loads(result.stdout)
    assert report["inputs"]["trace_dir"] == "s3://dumps/job-7"
    local = _cli("s3://dumps/job-7/", "--format", "json", env=env)
    assert local.returncode == 1, local.stderr
    assert json.loads(local.stdout) == report


def test_s3_hostile_objects_skipped_alike(client: Any, s3: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    folder = tmp_path / "dumps"
    _hostile_folder(folder, marker)
    for path in sorted(folder.iterdir()):
        s3["fs"].pipe(f"dumps/hostile/{path.name}", path.read_bytes())
    url = "s3://dumps/hostile/"
    with _no_faulthandler():
        local = _report(frtrace.analyze(frtrace.load(str(folder))))
    remote = _report(
        frtrace.analyze(
            frtrace.load(url, engine="dask", client=client, storage_options=s3["options"])
        )
    )
    assert [(Path(s["file"]).name, s["reason"]) for s in remote["inputs"]["skipped"]] == [
        (Path(s["file"]).name, s["reason"]) for s in local["inputs"]["skipped"]
    ]
    assert remote["root_cause"] == local["root_cause"]
    assert remote["findings"] == local["findings"]
    assert not marker.exists()


def test_s3_raw_parquet_written_to_the_store(client: Any, s3: dict[str, Any]) -> None:
    """Dumps read from S3 by the workers, entries written back to S3 by the workers."""
    pq = _require("pyarrow.parquet")
    env = {"FSSPEC_S3_ENDPOINT_URL": s3["endpoint"]}
    local = _cli(str(FIXTURES / "cascade_4rank"), "-j")
    address = client.scheduler.address
    result = _cli(
        "s3://dumps/cascade_4rank/",
        "-j",
        "--engine",
        "dask",
        "--scheduler",
        address,
        "--raw-output",
        "s3://dumps/raw-out/",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    table = pq.read_table("dumps/raw-out", filesystem=s3["fs"])
    assert table.to_pylist() == json.loads(local.stdout)


def test_s3_raw_parquet_from_a_folder_reaches_the_clients_store(
    client: Any, s3: dict[str, Any]
) -> None:
    """Dumps in a folder, entries to S3: the workers were started without the endpoint, which
    only the client's environment names."""
    pq = _require("pyarrow.parquet")
    local = _cli(str(FIXTURES / "cascade_4rank"), "-j")
    result = _cli(
        str(FIXTURES / "cascade_4rank"),
        "-j",
        "--engine",
        "dask",
        "--scheduler",
        client.scheduler.address,
        "--raw-output",
        "s3://dumps/raw-from-folder/",
        env={"FSSPEC_S3_ENDPOINT_URL": s3["endpoint"]},
    )
    assert result.returncode == 0, result.stderr
    table = pq.read_table("dumps/raw-from-folder", filesystem=s3["fs"])
    assert table.to_pylist() == json.loads(local.stdout)


def test_s3_settings_of_the_client_reach_workers_started_without_them(
    s3: dict[str, Any], tmp_path: Path
) -> None:
    """Credentials given to the client as fsspec settings ($FSSPEC_S3_KEY, ...): workers
    without any of their own read with those, as the client listed the store with them."""
    env = {
        "FSSPEC_S3_ENDPOINT_URL": s3["endpoint"],
        "FSSPEC_S3_KEY": "testing",
        "FSSPEC_S3_SECRET": "testing",
    }
    local = _cli(str(FIXTURES / "cascade_4rank"), "--format", "json")
    with _workers_that(NO_CREDENTIALS, tmp_path) as c:
        url = "s3://dumps/cascade_4rank/"
        out = _cli(
            url, "--format", "json", "--engine", "dask", "--scheduler", c.scheduler.address, env=env
        )
    assert out.returncode == local.returncode == 1, out.stderr
    report, expected = json.loads(out.stdout), json.loads(local.stdout)
    assert report["inputs"]["trace_dir"] == "s3://dumps/cascade_4rank"
    report["inputs"]["trace_dir"] = expected["inputs"]["trace_dir"]
    assert report == expected


def test_s3_objects_over_the_file_budget_are_skipped_unread_by_both_engines(
    client: Any, s3: dict[str, Any]
) -> None:
    """The store's size is checked before any byte is read; ranks 0 and 1 (2,165 bytes) are
    over a budget of 2,100, ranks 2 and 3 are analyzed."""
    env = {"FSSPEC_S3_ENDPOINT_URL": s3["endpoint"], "FRTRACE_BUDGETS": "max_file_bytes=2100"}
    url = "s3://dumps/cascade_4rank/"
    for engine in ([], ["--engine", "dask", "--scheduler", client.scheduler.address]):
        out = _cli(url, *engine, env=env)
        skipped = [line for line in out.stderr.splitlines() if line.startswith("skipped")]
        assert skipped == [
            f"skipped {url}trace_{r}: 2,165 bytes, above the budget max_file_bytes (2,100)"
            for r in (0, 1)
        ], out.stderr
        assert out.returncode in (0, 1) and "no usable dump" not in out.stderr


def test_s3_missing_bucket_is_one_line(s3: dict[str, Any]) -> None:
    result = _cli("s3://no-such-bucket/x/", env={"FSSPEC_S3_ENDPOINT_URL": s3["endpoint"]})
    assert result.returncode == 2
    assert result.stderr.startswith("frtrace: error: ")
    assert "Traceback" not in result.stderr


def test_read_dump_bytes_same_as_file(tmp_path: Path) -> None:
    from frtrace.dumps.limits import Budgets
    from frtrace.dumps.read import read_dump, read_dump_bytes
    from frtrace.errors import DumpError

    path = next(p for p in (FIXTURES / "tutorial").iterdir() if p.is_file())
    assert read_dump_bytes(path.read_bytes(), path.name).data == read_dump(path).data
    with pytest.raises(DumpError, match="max_file_bytes"):
        read_dump_bytes(b"\x80" * 100, "x", Budgets(max_file_bytes=10))
    with pytest.raises(DumpError, match="refused"):
        read_dump_bytes(pickle.dumps(shutil.rmtree), "x")


def test_sigterm_while_reading_a_store_leaves_no_spool_folder(
    s3: dict[str, Any], tmp_path: Path
) -> None:
    """The local engine spools a store's objects to a private folder; a stop signal ends the
    run at once (os._exit), and the folder must go with it."""
    import signal
    import time

    from hostile_cases import dict_with_key, laughs_tuple

    for rank in range(4):  # each burns its CPU budget: the run is mid-parse when stopped
        s3["fs"].pipe(f"dumps/slow/trace_{rank}", dict_with_key(laughs_tuple(60)))
    spool = tmp_path / "tmp"
    spool.mkdir()
    env = {**os.environ, "FSSPEC_S3_ENDPOINT_URL": s3["endpoint"], "TMPDIR": str(spool)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "frtrace", "s3://dumps/slow/"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    deadline = time.monotonic() + 60
    while not list(spool.glob("frtrace-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(spool.glob("frtrace-*")), "the run never spooled"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert list(spool.iterdir()) == []
