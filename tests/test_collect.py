"""`frtrace collect` on a live, hung gloo job: labeled py-spy stacks, copied and fresh dumps,
the manifest, and the one line a user gets when py-spy is missing or may not attach.

The job (tests/live_job.py) runs two ranks started with RANK etc. in their environment, as
torchrun starts workers: rank 0 stuck in `slow_data_loader` outside collectives, rank 1
blocked in an all_reduce. It is started once for the module and always stopped. These tests
need py-spy; without it they skip, unless FRTRACE_REQUIRE_EXTRAS is set (scripts/check.sh,
CI), where a missing py-spy fails them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES
from processes import child_env, free_port, run_frtrace

from frtrace.collect.dumps import fresh_from_worker_server, fresh_through_pipe
from frtrace.collect.procs import find_training_processes
from frtrace.collect.pyspy import find_pyspy
from frtrace.collect.run import expand_out, short_host

LIVE_JOB = Path(__file__).with_name("live_job.py")
READY_WITHIN_S = 150.0  # starting torch twice on a busy 2-core machine
COLLECT_WITHIN_S = 180
LABEL = re.compile(r"^# frtrace-collect rank=(\d+) local_rank=(-?\d+) host=(\S+) pid=(\d+)$")


def _require_pyspy() -> str:
    found = find_pyspy()
    if found is None:
        if os.environ.get("FRTRACE_REQUIRE_EXTRAS"):
            raise AssertionError("py-spy is not installed (FRTRACE_REQUIRE_EXTRAS)")
        pytest.skip("py-spy is not installed (pip install py-spy, or frtrace[collect])")
    return found


def _env(**extra: str) -> dict[str, str]:
    return child_env(extra)


def frtrace(
    *args: str, env: dict[str, str] | None = None, timeout: int = COLLECT_WITHIN_S
) -> subprocess.CompletedProcess[str]:
    return run_frtrace(*args, timeout=timeout, env=_env() if env is None else env)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for proc in procs:
        proc.wait(timeout=30)


@dataclass
class Job:
    root: Path
    pids: list[int]


@pytest.fixture(scope="module")
def live_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    pytest.importorskip("torch")
    _require_pyspy()
    root = tmp_path_factory.mktemp("job")
    port = str(free_port())
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(2):
            env = _env(
                RANK=str(rank),
                LOCAL_RANK="0",  # as torchrun --virtual-local-rank sets it for every worker
                WORLD_SIZE="2",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
                TORCH_FR_DUMP_TEMP_FILE=str(root / "trace_"),
                TORCH_WORKER_SERVER_SOCKET=str(root / f"ws_{rank}.sock"),
            )
            log = open(root / f"log_{rank}", "wb")  # noqa: SIM115 - closed with the process
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(LIVE_JOB)], env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
            log.close()
        deadline = time.monotonic() + READY_WITHIN_S
        while not all((root / f"ready_{r}").exists() for r in range(2)):
            dead = [p.args for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join((root / f"log_{r}").read_text()[-2000:] for r in range(2))
                raise AssertionError(f"live job did not get stuck as planned:\n{logs}")
            time.sleep(0.1)
        yield Job(root, [p.pid for p in procs])
    finally:
        _stop(procs)


@dataclass
class Run:
    out: Path
    result: subprocess.CompletedProcess[str]
    blocks: dict[int, tuple[list[str], str]]  # rank -> (label fields, block text)
    manifest: dict


@pytest.fixture(scope="module")
def collected(live_job: Job, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("incident") / "%h"
    result = frtrace("collect", str(out), "--under", str(os.getpid()), "--fresh-dump")
    out = expand_out(str(out), short_host())
    blocks: dict[int, tuple[list[str], str]] = {}
    text = (out / f"pyspy_{short_host()}.txt").read_text()
    for block in re.split(r"(?m)^(?=# frtrace-collect )", text):
        if block.strip():
            head, _, body = block.partition("\n")
            match = LABEL.match(head)
            assert match, head
            blocks[int(match.group(1))] = (list(match.groups()), body)
    return Run(out, result, blocks, json.loads((out / "collect.json").read_text()))


def test_each_ranks_stack_follows_a_label_with_its_rank_local_rank_host_and_pid(
    collected: Run, live_job: Job
) -> None:
    assert collected.result.returncode == 0, collected.result.stderr
    assert sorted(collected.blocks) == [0, 1]
    for rank, (fields, body) in collected.blocks.items():
        assert fields == [str(rank), "0", short_host(), str(live_job.pids[rank])]
        assert body.startswith(f"Process {live_job.pids[rank]}: "), body[:200]


def test_rank_0s_block_shows_the_stuck_function_and_rank_1s_the_all_reduce(
    collected: Run,
) -> None:
    stuck, waiting = collected.blocks[0][1], collected.blocks[1][1]
    assert "slow_data_loader (live_job.py:" in stuck
    assert "all_reduce" not in stuck.split("slow_data_loader")[0]
    assert "all_reduce (" in waiting and "slow_data_loader" not in waiting


def test_dumps_of_both_ranks_are_copied_and_analyze_to_the_hang(collected: Run) -> None:
    assert sorted(p.name for p in collected.out.glob("trace_*")) == ["trace_0", "trace_1"]
    report = json.loads(frtrace(str(collected.out), "-p", "trace_", "--format", "json").stdout)
    root = report["root_cause"]
    assert (root["kind"], root["collective_seq_id"], root["waiting_ranks"]) == (
        "missing_ranks",
        3,
        [1],
    )


def test_frtrace_reads_what_collect_wrote_and_shows_the_culprits_stuck_function(
    collected: Run,
) -> None:
    """The whole round trip: collect's labeled stacks and copied dumps, read by frtrace."""
    result = frtrace(str(collected.out), "-p", "trace_")
    assert result.returncode == 1, result.stderr
    root = result.stdout.split("ROOT CAUSE", 1)[1].split("WHERE RANKS WAIT", 1)[0]
    assert "culprit ranks   0" in root
    assert "slow_data_loader" in root
    report = json.loads(frtrace(str(collected.out), "-p", "trace_", "--format", "json").stdout)
    shown = json.dumps(report["root_cause"].get("culprit_evidence", []))
    assert "slow_data_loader" in shown


def test_fresh_dump_comes_from_each_ranks_worker_server(collected: Run) -> None:
    names = sorted(p.name for p in collected.out.glob("fresh_*"))
    assert names == ["fresh_trace_rank_0.json", "fresh_trace_rank_1.json"]
    for rank in range(2):
        line = f"fresh dump of rank {rank}: wrote fresh_trace_rank_{rank}.json (worker server, "
        assert line + "fr_trace_json)" in collected.result.stderr.splitlines()
    report = json.loads(frtrace(str(collected.out), "-p", "fresh_", "--format", "json").stdout)
    assert report["inputs"]["ranks"] == [0, 1]
    assert report["root_cause"]["waiting_ranks"] == [1]


def test_manifest_lists_each_process_and_file_and_no_failure(collected: Run, live_job: Job) -> None:
    manifest = collected.manifest
    assert (manifest["schema"], manifest["host"]) == ("frtrace.collect/1", short_host())
    procs = [(p["rank"], p["local_rank"], p["pid"], p["stack"]) for p in manifest["processes"]]
    assert procs == [(0, 0, live_job.pids[0], "ok"), (1, 0, live_job.pids[1], "ok")]
    kinds = sorted((f["kind"], f["name"]) for f in manifest["files"])
    assert kinds == [
        ("dump", "trace_0"),
        ("dump", "trace_1"),
        ("fresh_dump", "fresh_trace_rank_0.json"),
        ("fresh_dump", "fresh_trace_rank_1.json"),
        ("stacks", f"pyspy_{short_host()}.txt"),
    ]
    assert manifest["failures"] == []


def test_missing_py_spy_is_one_line_exit_4_and_dumps_are_still_copied(
    live_job: Job, tmp_path: Path
) -> None:
    result = frtrace(
        "collect", str(tmp_path), "--under", str(os.getpid()), "--py-spy", "no-such-py-spy"
    )
    assert result.returncode == 4
    errors = [line for line in result.stderr.splitlines() if "py-spy" in line]
    assert errors == [
        "frtrace: error: py-spy is not installed (pip install 'frtrace[collect]', or give its "
        "path with --py-spy); no stack taken"
    ]
    assert sorted(p.name for p in tmp_path.glob("trace_*")) == ["trace_0", "trace_1"]
    assert not list(tmp_path.glob("pyspy_*"))


def test_ptrace_refused_is_one_line_for_all_processes_and_exit_4(
    live_job: Job, tmp_path: Path
) -> None:
    # What py-spy 0.4 prints when ptrace is refused (checked as an unprivileged user).
    fake = tmp_path / "py-spy"
    fake.write_text(
        '#!/bin/sh\necho "Permission Denied: Try running again with elevated permissions by '
        'going \'sudo env \\"PATH=\\$PATH\\" !!\'" >&2\n'
        "echo 'Error: Failed to find python version from target process' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    out = tmp_path / "out"
    result = frtrace("collect", str(out), "--under", str(os.getpid()), "--py-spy", str(fake))
    assert result.returncode == 4
    lines = [line for line in result.stderr.splitlines() if "py-spy" in line]
    assert len(lines) == 1
    assert lines[0].startswith("frtrace: error: py-spy may not attach to 2 of 2 training")
    assert [f["reason"] for f in json.loads((out / "collect.json").read_text())["failures"]] == [
        "denied",
        "denied",
    ]


def _sleeper(**env: str) -> subprocess.Popen[bytes]:
    """A Python process started with a rank in its environment."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=_env(**env))


class _FakeDumpPipe(threading.Thread):
    """torch's side of the NCCL debug-info pipe, as ProcessGroupNCCL.hpp's DumpPipe does it
    (mkfifo `<stem><rank>.pipe`, open it O_RDONLY|O_NONBLOCK, read up to 128 bytes per
    poll); on a read it writes a dump where torch's DebugInfoWriter would, a little later
    (torch polls every TORCH_NCCL_COORD_CHECK_MILSEC, 1 s, and dumps asynchronously)."""

    def __init__(self, pipe: Path, dump: Path, content: bytes) -> None:
        super().__init__(daemon=True)
        os.mkfifo(pipe, 0o666)
        self.fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
        self.dump, self.content, self.stop = dump, content, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                if os.read(self.fd, 128):
                    time.sleep(0.3)
                    self.dump.write_bytes(self.content)
            except BlockingIOError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.join()
        os.close(self.fd)


def test_fresh_dump_through_the_nccl_pipe_copies_the_dump_torch_rewrote(tmp_path: Path) -> None:
    _require_pyspy()
    content = (FIXTURES / "tutorial" / "trace_0").read_bytes()
    (tmp_path / "fr_5").write_bytes(b"the dump written at the timeout")
    reader = _FakeDumpPipe(tmp_path / "pipe_5.pipe", tmp_path / "fr_5", content)
    reader.start()
    proc = _sleeper(
        RANK="5",
        LOCAL_RANK="1",
        TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"),
        TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "pipe_"),
    )
    try:
        out = tmp_path / "out"
        result = frtrace("collect", str(out), "--under", str(proc.pid), "--fresh-dump")
    finally:
        _stop([proc])
        reader.close()
    assert result.returncode == 0, result.stderr
    assert "fresh dump of rank 5: wrote fresh_trace_rank_5 (NCCL debug-info pipe)" in (
        result.stderr
    )
    assert (out / "fresh_trace_rank_5").read_bytes() == content
    assert (out / "fr_5").read_bytes() == b"the dump written at the timeout"


def test_a_pipe_nobody_reads_says_the_heartbeat_monitor_is_not_running(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe_0.pipe")
    result = fresh_through_pipe(
        tmp_path / "pipe_0.pipe", tmp_path / "fr_0", 0, tmp_path, timeout=1.0
    )
    assert result.file is None
    assert result.failure is not None and "heartbeat monitor is not running" in result.failure


def test_a_job_without_an_on_demand_dump_says_so_and_exits_1(tmp_path: Path) -> None:
    _require_pyspy()
    proc = _sleeper(RANK="2", TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"))
    try:
        result = frtrace("collect", str(tmp_path / "out"), "--under", str(proc.pid), "--fresh-dump")
    finally:
        _stop([proc])
    assert result.returncode == 1
    assert "fresh dump of rank 2: not possible: the job enabled no on-demand dump" in (
        result.stderr
    )


def _fake_proc(root: Path, pid: int, ppid: int, environ: bytes | None, argv: str) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_text(f"{pid} (py thon) S {ppid} 1 1 0\n")
    (d / "cmdline").write_bytes(argv.replace(" ", "\0").encode() + b"\0")
    if environ is None:
        (d / "environ").mkdir()  # not a regular file: never read
    else:
        (d / "environ").write_bytes(environ)


def test_a_rank_is_its_topmost_python_process_and_its_children_are_helpers(
    tmp_path: Path,
) -> None:
    env = b"HOME=/root\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0SECRET_TOKEN=x\0"
    _fake_proc(tmp_path, 10, 1, b"RANK=3\0", "bash run.sh")  # a wrapper holding RANK
    _fake_proc(tmp_path, 11, 10, env, "python3.11 train.py")
    _fake_proc(tmp_path, 12, 11, env, "python3.11 -c dataloader")  # a data loader worker
    _fake_proc(tmp_path, 20, 1, None, "python3 other.py")  # environment not readable
    _fake_proc(tmp_path, 21, 1, b"RANK=oops\0", "python3 bad.py")
    found = find_training_processes(tmp_path)
    assert [(p.pid, p.rank, p.local_rank, p.helpers) for p in found.processes] == [
        (11, 3, 1, (12,))
    ]
    assert "SECRET_TOKEN" not in found.processes[0].env
    assert found.bad_ranks == [(21, "oops")]


def test_percent_h_in_out_is_the_short_host_name() -> None:
    assert expand_out("/shared/inc/%h/x%%", "node07") == Path("/shared/inc/node07/x%")


def test_dumps_left_by_dead_ranks_are_copied_from_the_prefix_given(tmp_path: Path) -> None:
    for rank in (0, 1, 12):
        shutil.copy(FIXTURES / "tutorial" / "trace_0", tmp_path / f"nccl_trace_rank_{rank}")
    (tmp_path / "nccl_trace_rank_notes").write_text("not a dump")
    out = tmp_path / "out"
    result = frtrace(
        "collect",
        str(out),
        "--rank-var",
        "FRTRACE_TEST_NO_SUCH_VAR",
        "--prefix",
        str(tmp_path / "nccl_trace_rank_"),
    )
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in out.iterdir() if p.name.startswith("nccl"))
    assert names == ["nccl_trace_rank_0", "nccl_trace_rank_1", "nccl_trace_rank_12"]
    assert "warning: no training process on this host" in result.stderr


def test_dumps_a_dead_torch_2_8_rank_left_at_its_default_place_are_copied(tmp_path: Path) -> None:
    """torch 2.7 and 2.8 wrote `$HOME/.cache/torch/nccl_trace_rank_<rank>` by default, 2.13
    `comm_lib_trace_rank_`: with no rank left to ask, every release's place is searched."""
    cache = tmp_path / "home" / ".cache" / "torch"
    cache.mkdir(parents=True)
    shutil.copy(FIXTURES / "tutorial" / "trace_0", cache / "nccl_trace_rank_3")
    env = _env(HOME=str(tmp_path / "home"))
    env.pop("XDG_CACHE_HOME", None)
    out = tmp_path / "out"
    result = frtrace("collect", str(out), "--rank-var", "FRTRACE_TEST_NO_SUCH_VAR", env=env)
    assert result.returncode == 0, result.stderr
    assert (out / "nccl_trace_rank_3").read_bytes() == (cache / "nccl_trace_rank_3").read_bytes()


def test_nothing_to_collect_exits_2(tmp_path: Path) -> None:
    result = frtrace(
        "collect",
        str(tmp_path / "out"),
        "--rank-var",
        "FRTRACE_TEST_NO_SUCH_VAR",
        "--prefix",
        str(tmp_path / "none_"),
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "frtrace: error: nothing to collect on this host: no training process and no dump"
    )


def test_a_dump_that_is_a_fifo_is_not_opened_and_is_said_not_copied(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "nccl_trace_rank_4")  # opening it to read would block
    out = tmp_path / "out"
    result = frtrace(
        "collect",
        str(out),
        "--rank-var",
        "FRTRACE_TEST_NO_SUCH_VAR",
        "--prefix",
        str(tmp_path / "nccl_trace_rank_"),
    )
    assert result.returncode == 1
    assert "dump of rank 4 not copied: " in result.stderr
    assert "not a regular file" in result.stderr
    assert not (out / "nccl_trace_rank_4").exists()


def test_a_dump_older_than_its_rank_process_is_copied_with_a_warning(tmp_path: Path) -> None:
    _require_pyspy()
    shutil.copy(FIXTURES / "tutorial" / "trace_0", tmp_path / "fr_7")
    # older than the process by far, newer than the machine's boot
    os.utime(tmp_path / "fr_7", (time.time() - 30, time.time() - 30))
    proc = _sleeper(RANK="7", TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"))
    try:
        result = frtrace("collect", str(tmp_path / "out"), "--under", str(proc.pid))
    finally:
        _stop([proc])
    assert result.returncode == 0, result.stderr
    assert "warning: the dump of rank 7 at " in result.stderr
    assert "before its process started" in result.stderr
    manifest = json.loads((tmp_path / "out" / "collect.json").read_text())
    assert [(f["name"], f["stale"]) for f in manifest["files"] if f["kind"] == "dump"] == [
        ("fr_7", True)
    ]


class _NcclWorkerServer(threading.Thread):
    """A worker server as an NCCL build of torch lists its handlers (WorkerServer.cpp's
    routes; the dump handlers of FlightRecorderCuda.cpp and control_plane/Handlers.cpp)."""

    def __init__(self, path: Path, dump: bytes) -> None:
        import http.server
        import socketserver

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                names = ["ping", "fr_trace_json", "dump_nccl_trace_json", "dump_nccl_trace_pickle"]
                self._answer(json.dumps(names).encode())

            def do_POST(self) -> None:
                self._answer(dump if self.path == "/handler/dump_nccl_trace_pickle" else b"{}")

            def log_message(self, *args: object) -> None:
                pass

            def address_string(self) -> str:  # a Unix socket has no client address
                return "local"

        self.server = socketserver.UnixStreamServer(str(path), Handler)
        super().__init__(target=self.server.serve_forever, daemon=True)


def test_a_worker_server_of_an_nccl_build_gives_its_nccl_pickle(tmp_path: Path) -> None:
    dump = (FIXTURES / "tutorial" / "trace_1").read_bytes()
    server = _NcclWorkerServer(tmp_path / "ws.sock", dump)
    server.start()
    try:
        result = fresh_from_worker_server(tmp_path / "ws.sock", 9, tmp_path, timeout=10.0)
    finally:
        server.server.shutdown()
        server.server.server_close()
    assert (result.file, result.handler, result.failure) == (
        "fresh_trace_rank_9",
        "dump_nccl_trace_pickle",
        None,
    )
    assert (tmp_path / "fresh_trace_rank_9").read_bytes() == dump
