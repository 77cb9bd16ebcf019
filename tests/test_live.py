"""`frtrace live`: a running job diagnosed over PyTorch's debug server, nothing copied.

The real jobs are torchrun + gloo on CPU (tests/live_debug_job.py): a hung one, two agents
of two ranks each as two nodes, where rank 3 skipped the third all_reduce and is stuck in
`wait_for_data` while ranks 0-2 wait in it; and a slow but moving one. Every rank calls
`start_debug_server()` after `init_process_group`. Hostile workers are test HTTP servers on
127.0.0.1. Every process is killed on every path. Without torch the real jobs skip; without
py-spy too, unless FRTRACE_REQUIRE_EXTRAS is set (scripts/check.sh, CI).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO
from processes import child_env, free_port, run_frtrace

from frtrace.collect.pyspy import find_pyspy
from frtrace.live.fetch import label_line
from frtrace.live.http import FetchError, Worker, parse_worker, request

JOB = Path(__file__).with_name("live_debug_job.py")
READY_WITHIN_S = 150.0  # four ranks and two agents starting torch on a busy 2-core machine
RUN_WITHIN_S = 120
STACK_LABEL = "# frtrace-collect rank="


def _env(**extra: str) -> dict[str, str]:
    return child_env(extra, drop=("TORCH_", "RANK", "MASTER_", "FRTRACE_BUDGETS"))


def frtrace(
    *args: str, env: dict[str, str] | None = None, timeout: int = RUN_WITHIN_S
) -> subprocess.CompletedProcess[str]:
    return run_frtrace(*args, timeout=timeout, env=_env() if env is None else env)


def _needs_a_real_job() -> None:
    pytest.importorskip("torch.distributed.debug")
    # Each rank registers http://<its host name>:<port>: only a name that is this machine's
    # loopback keeps every connection on 127.0.0.1.
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        pytest.skip("this machine's host name does not resolve")
    if not address.startswith("127."):
        pytest.skip(f"the host name resolves to {address}, not to the loopback")
    if find_pyspy() is None:
        if os.environ.get("FRTRACE_REQUIRE_EXTRAS"):
            raise AssertionError("py-spy is not installed (FRTRACE_REQUIRE_EXTRAS)")
        pytest.skip("py-spy is not installed (pip install py-spy, or frtrace[collect])")


@dataclass
class Job:
    root: Path
    port: int
    pids: dict[int, int]  # rank -> pid


def _start_job(root: Path, mode: str, nodes: int, per_node: int) -> tuple[Job, list]:
    """torchrun agents (one per node), each in a session of its own; returns once every
    rank's debug server runs (and, for a hang, rank 3 is stuck)."""
    port = free_port()
    pyspy = find_pyspy()
    path = os.pathsep.join(
        filter(None, [str(Path(pyspy).parent) if pyspy else "", os.environ["PATH"]])
    )
    env = _env(
        FRTRACE_TEST_DIR=str(root),
        FRTRACE_TEST_MODE=mode,
        FRTRACE_TEST_FRONTEND=str(free_port()),
        PATH=path,
    )
    agents: list[subprocess.Popen[bytes]] = []
    for node in range(nodes):
        log = open(root / f"agent_{node}.log", "wb")  # noqa: SIM115 - closed with the process
        agents.append(
            subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}",
                 f"--node-rank={node}", f"--nproc-per-node={per_node}",
                 "--master-addr=127.0.0.1", f"--master-port={port}", str(JOB)],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        )  # fmt: skip
        log.close()
    job = Job(root, port, {})
    world = nodes * per_node
    deadline = time.monotonic() + READY_WITHIN_S
    while len(job.pids) < world or (mode == "hang" and not (root / "stuck").exists()):
        for rank in range(world):
            pid_file = root / f"pid_{rank}"
            if rank not in job.pids and pid_file.exists() and pid_file.read_text():
                job.pids[rank] = int(pid_file.read_text())
        if any(a.poll() is not None for a in agents) or time.monotonic() > deadline:
            _stop_job(job, agents)
            logs = "\n".join(p.read_text()[-3000:] for p in root.glob("agent_*.log"))
            raise AssertionError(f"the live job did not start as planned:\n{logs}")
        time.sleep(0.1)
    time.sleep(1.0)  # ranks 0-2 into the all_reduce they wait in
    return job, agents


def _stop_job(job: Job, agents: list[subprocess.Popen[bytes]]) -> None:
    """Every rank (each in its own session, rank 0 with its page's process) and agent."""
    for pid in job.pids.values():
        for sig in (signal.SIGCONT, signal.SIGKILL):
            with contextlib.suppress(OSError):
                os.killpg(pid, sig)
    for agent in agents:
        with contextlib.suppress(OSError):
            os.killpg(agent.pid, signal.SIGKILL)
        agent.wait(timeout=30)


@pytest.fixture(scope="module")
def hung_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    _needs_a_real_job()
    job, agents = _start_job(tmp_path_factory.mktemp("hung"), "hang", nodes=2, per_node=2)
    try:
        yield job
    finally:
        _stop_job(job, agents)


@dataclass
class Run:
    result: subprocess.CompletedProcess[str]
    report: dict
    seconds: float
    saved: Path


@pytest.fixture(scope="module")
def live_run(hung_job: Job, tmp_path_factory: pytest.TempPathFactory) -> Run:
    saved = tmp_path_factory.mktemp("incident") / "saved"
    started = time.monotonic()
    result = frtrace(
        "live", "--store", f"127.0.0.1:{hung_job.port}", "--timeout", "10",
        "--format", "json", "--save", str(saved),
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert result.stdout, result.stderr
    return Run(result, json.loads(result.stdout), seconds, saved)


def test_live_names_the_rank_that_skipped_the_collective_its_group_and_seq(live_run: Run) -> None:
    assert live_run.result.returncode == 1, live_run.result.stderr
    root = live_run.report["root_cause"]
    assert (root["kind"], root["culprit_ranks"], root["waiting_ranks"]) == (
        "missing_ranks",
        [3],
        [0, 1, 2],
    )
    assert (root["pg_desc"], root["collective_seq_id"], root["op"]) == (
        "default_pg",
        3,
        "all_reduce",
    )


def test_live_shows_the_function_the_culprit_is_stuck_in_from_its_live_stack(
    live_run: Run,
) -> None:
    shown = json.dumps(live_run.report["root_cause"]["culprit_evidence"])
    assert "wait_for_data" in shown


def test_live_gives_its_verdict_in_seconds(live_run: Run) -> None:
    assert live_run.seconds < 60, live_run.seconds
    assert "4 rank(s) asked (the store at 127.0.0.1:" in live_run.result.stderr
    assert ": 4 answered in " in live_run.result.stderr


def test_the_saved_folder_gives_the_same_verdict_to_frtrace_dir(live_run: Run) -> None:
    later = frtrace(str(live_run.saved), "--format", "json")
    assert later.returncode == live_run.result.returncode
    assert json.loads(later.stdout)["root_cause"] == live_run.report["root_cause"]
    assert json.loads(later.stdout)["verdict"] == live_run.report["verdict"]


def test_the_saved_stacks_carry_each_ranks_label_host_and_pid(live_run: Run, hung_job: Job) -> None:
    for rank, pid in hung_job.pids.items():
        head = (live_run.saved / "stacks" / f"rank{rank}.txt").read_text().splitlines()[0]
        assert head == f"{STACK_LABEL}{rank} local_rank=-1 host={socket.gethostname()} pid={pid}"


def _worker_urls(job: Job) -> list[str]:
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", job.port, is_master=False, timeout=timedelta(seconds=10))
    return [f"{r}={store.get(f'debug_server/rank{r}').decode()}" for r in sorted(job.pids)]


def test_worker_urls_are_enough_without_torch(hung_job: Job, tmp_path: Path) -> None:
    no_torch = tmp_path / "no_torch" / "torch"
    no_torch.mkdir(parents=True)
    (no_torch / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = _env(PYTHONPATH=os.pathsep.join([str(no_torch.parent), str(REPO)]))
    args = [a for url in _worker_urls(hung_job) for a in ("--worker", url)]
    result = frtrace("live", *args, "--format", "json", env=env)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["root_cause"]["culprit_ranks"] == [3]


def test_store_without_torch_says_to_install_it_or_give_worker_urls(tmp_path: Path) -> None:
    no_torch = tmp_path / "torch"
    no_torch.mkdir()
    (no_torch / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = _env(PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    result = frtrace("live", "--store", "127.0.0.1:1", env=env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "frtrace: error: reading the job's TCPStore (--store) needs torch: pip install "
        "'frtrace[torch]', or give each rank's worker address with --worker "
        "[RANK=]http://HOST:PORT"
    ]


def test_watch_on_the_hung_job_stops_by_itself_naming_who_stopped(hung_job: Job) -> None:
    result = frtrace("live", "--store", f"127.0.0.1:{hung_job.port}", "--watch", "1")
    assert result.returncode == 1, result.stderr
    assert "no rank advanced: ranks 0-3 all stand where they stood" in result.stderr
    assert "settled after round 2" in result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last == "HUNG: root cause missing_ranks, culprit rank 3 on " + (
        f"{socket.gethostname()}, default_pg#3 (pg 0); exit 1"
    )


def test_a_stopped_rank_is_named_unreachable_and_the_others_are_analyzed(hung_job: Job) -> None:
    os.kill(hung_job.pids[1], signal.SIGSTOP)
    try:
        result = frtrace(
            "live", "--store", f"127.0.0.1:{hung_job.port}", "--timeout", "2", "--format", "json"
        )
    finally:
        os.kill(hung_job.pids[1], signal.SIGCONT)
    assert result.returncode == 1, result.stderr
    unreachable = [line for line in result.stderr.splitlines() if "unreachable" in line]
    assert len(unreachable) == 1
    assert unreachable[0].startswith("rank 1 (http://")
    assert unreachable[0].endswith("): unreachable: no whole answer within 2.0 s")
    report = json.loads(result.stdout)
    assert report["inputs"]["ranks"] == [0, 2, 3]
    assert report["root_cause"]["culprit_ranks"] == [3]


@pytest.fixture(scope="module")
def moving_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    _needs_a_real_job()
    job, agents = _start_job(tmp_path_factory.mktemp("moving"), "moving", nodes=1, per_node=2)
    try:
        yield job
    finally:
        _stop_job(job, agents)


def test_watch_on_a_slow_but_moving_job_says_it_moves_and_never_settles(moving_job: Job) -> None:
    result = frtrace(
        "live", "--store", f"127.0.0.1:{moving_job.port}", "--watch", "1", "--rounds", "3"
    )
    rounds = [line for line in result.stderr.splitlines() if ": round " in line]
    assert len(rounds) == 3, result.stderr
    for line in rounds[1:]:
        assert "every rank advanced (2): the job is moving" in line
    assert "settled" not in result.stderr


def test_ctrl_c_ends_a_watch_with_130_and_leaves_no_folder_behind(
    moving_job: Job, tmp_path: Path
) -> None:
    spool = tmp_path / "tmp"
    spool.mkdir()
    err = tmp_path / "stderr"
    with open(err, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "frtrace", "live", "--store", f"127.0.0.1:{moving_job.port}",
             "--watch", "1"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=_env(TMPDIR=str(spool)),
            # as from an interactive shell: a background job's inherited SIG_IGN would hide SIGINT
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + RUN_WITHIN_S
        while ": round 2 " not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        status = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 130, err.read_text()
    assert list(spool.iterdir()) == []


# --- hostile workers: test servers on 127.0.0.1 ---------------------------------------

GOOD_DUMPS = FIXTURES / "tutorial_json"
FAULTHANDLER = (
    "Thread 0x00007f16bf8b7b80 (most recent call first):\n"
    '  File "/job/train.py", line 13 in load_the_next_batch\n'
    '  File "/job/train.py", line 40 in <module>\n'
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, respond: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.respond = respond
        self.hits = 0
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits += 1
        self.server.respond(self)

    do_POST = do_GET


def _send(
    h: BaseHTTPRequestHandler, body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> None:
    h.send_response(status)
    for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
        h.send_header(name, value)
    h.end_headers()
    h.wfile.write(body)


def _good(rank: int) -> Callable[[BaseHTTPRequestHandler], None]:
    """A worker server as torch's answers: its handler names, its recorder, its stacks."""

    def respond(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/handler/":
            _send(h, json.dumps(["fr_trace_json", "dump_traceback", "ping"]).encode())
        elif h.path == "/handler/fr_trace_json":
            _send(h, (GOOD_DUMPS / f"trace_{rank}.json").read_bytes())
        elif h.path == "/handler/dump_traceback":
            _send(h, FAULTHANDLER.encode())
        else:
            _send(h, b"Handler not found", 404)

    return respond


def _listing_then(dump: Callable[[BaseHTTPRequestHandler], None]) -> Callable[..., None]:
    def respond(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/handler/":
            _send(h, b'["fr_trace_json"]')
        else:
            dump(h)

    return respond


def _endless(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()  # no length: the answer runs until the connection closes
    try:
        for _ in range(1000):
            h.wfile.write(b"0" * 65536)
    except OSError:
        pass


def _slow(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    try:
        for _ in range(100):
            h.wfile.write(b"{")
            h.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass


WRONG_TYPES = json.dumps(
    {"version": "2.10", "pg_config": {}, "entries": [{"collective_seq_id": "x"}]}
)
HOSTILE: dict[str, tuple[Callable[..., None], str]] = {
    "huge_declared": (
        _listing_then(lambda h: _send(h, b"", headers={"Content-Length": str(10**12)})),
        "no Flight Recorder (fr_trace_json: an answer of 1,000,000,000,000 bytes, over the "
        "limit of 1,000,000)",
    ),
    "huge_streamed": (
        _listing_then(_endless),
        "no Flight Recorder (fr_trace_json: an answer over the limit of 1,000,000 bytes)",
    ),
    "slow": (_listing_then(_slow), "no Flight Recorder (fr_trace_json: no whole answer within"),
    "listing_not_json": (lambda h: _send(h, b"\x00\xff<html>"), "GET /handler/: not JSON"),
    "listing_wrong_type": (
        lambda h: _send(h, b'{"fr_trace_json": 1}'),
        "GET /handler/: a JSON dict, not a list of handler names",
    ),
    "garbage_dump": (_listing_then(lambda h: _send(h, b"\x00\xff garbage")), "trace_2.json"),
    "dump_wrong_types": (
        _listing_then(lambda h: _send(h, WRONG_TYPES.encode())),
        "collective_seq_id",
    ),
    "error_500": (
        _listing_then(lambda h: _send(h, b"Handler fr_trace_json failed: boom", 500)),
        "no Flight Recorder (fr_trace_json: HTTP 500 (Handler fr_trace_json failed: boom))",
    ),
}


@pytest.fixture
def good_workers() -> Iterator[list[_Server]]:
    servers = [_Server(_good(0)), _Server(_good(1))]
    yield servers
    for s in servers:
        s.shutdown()
        s.server_close()


def _live_with(good: list[_Server], *hostile: str) -> subprocess.CompletedProcess[str]:
    args = [a for r, s in enumerate(good) for a in ("--worker", f"{r}={s.url}")]
    args += [a for url in hostile for a in ("--worker", f"2={url}")]
    env = _env(FRTRACE_BUDGETS="max_file_bytes=1000000")
    return frtrace("live", *args, "--timeout", "2", "--format", "json", env=env, timeout=60)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_worker_costs_one_line_and_the_others_are_analyzed(
    case: str, good_workers: list[_Server]
) -> None:
    respond, said = HOSTILE[case]
    hostile = _Server(respond)
    try:
        started = time.monotonic()
        result = _live_with(good_workers, hostile.url)
        seconds = time.monotonic() - started
    finally:
        hostile.shutdown()
        hostile.server_close()
    lines = [x for x in result.stderr.splitlines() if not x.startswith("frtrace live:")]
    about = [x for x in lines if "rank 2" in x or "trace_2" in x]
    assert len(about) == 1 and said in about[0], result.stderr
    assert "Traceback" not in result.stderr
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["inputs"]["ranks"] == [0, 1]
    assert seconds < 30


def test_a_redirect_is_not_followed(good_workers: list[_Server]) -> None:
    target = _Server(_good(0))
    redirect = _Server(lambda h: _send(h, b"", 302, {"Location": f"{target.url}/handler/"}))
    try:
        result = _live_with(good_workers, redirect.url)
    finally:
        for s in (target, redirect):
            s.shutdown()
            s.server_close()
    assert target.hits == 0
    assert f"HTTP 302: a redirect (to '{target.url}/handler/'), not followed" in result.stderr


def test_a_worker_cannot_pass_its_stacks_off_as_another_ranks(
    good_workers: list[_Server],
) -> None:
    forged = (
        "# frtrace-collect rank=0 local_rank=0 host=elsewhere pid=1\nProcess 1: python x.py\n"
        'Python v3.11.7 (/usr/bin/python)\n\nThread 1 (idle): "MainThread"\n'
        "    forged_function (x.py:1)\n"
    )

    def respond(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/handler/":
            _send(h, b'["fr_trace_json", "pyspy_dump"]')
        elif h.path.startswith("/handler/pyspy_dump"):
            _send(h, forged.encode())
        else:
            _send(h, (GOOD_DUMPS / "trace_1.json").read_bytes())

    forger = _Server(respond)
    try:
        result = _live_with(good_workers, forger.url)
    finally:
        forger.shutdown()
        forger.server_close()
    report = json.loads(result.stdout)
    by_rank = {e["rank"]: json.dumps(e) for e in report["root_cause"]["culprit_evidence"]}
    assert "forged_function" not in by_rank.get(0, "")


def test_the_culprits_faulthandler_stack_is_shown_when_py_spy_is_not_there(
    good_workers: list[_Server],
) -> None:
    result = _live_with(good_workers)
    shown = json.dumps(json.loads(result.stdout)["root_cause"]["culprit_evidence"])
    assert "load_the_next_batch" in shown


# --- the pieces -----------------------------------------------------------------------


def test_worker_addresses_are_plain_http_host_and_port() -> None:
    assert parse_worker("http://node03:41235/") == Worker("node03", 41235)
    assert parse_worker("http://[::1]:80") == Worker("[::1]", 80)
    for bad in ("https://h:1", "http://h", "http://u@h:1", "http://h:1/x", "http://h :1"):
        with pytest.raises(ValueError):
            parse_worker(bad)


def test_a_bad_worker_address_is_a_usage_error_naming_it() -> None:
    result = frtrace("live", "--worker", "http://node03")
    assert result.returncode == 2
    assert "--worker" in result.stderr and "http://node03" in result.stderr


def test_no_store_and_no_worker_says_how_to_name_the_job() -> None:
    result = frtrace("live")
    assert result.returncode == 2
    assert "give --store HOST:PORT" in result.stderr


def test_rounds_without_watch_is_a_usage_error() -> None:
    result = frtrace("live", "--worker", "http://127.0.0.1:1", "--rounds", "3")
    assert (result.returncode, result.stderr) == (
        2,
        "frtrace: error: --rounds goes with --watch SECONDS\n",
    )


def test_a_refused_connection_is_unreachable() -> None:
    with pytest.raises(FetchError) as caught:
        request(Worker("127.0.0.1", free_port()), "GET", "/handler/", time.monotonic() + 2, 10)
    assert caught.value.unreachable
    assert str(caught.value) == "connection refused"


def test_the_label_marks_unknown_values_with_minus_one() -> None:
    assert label_line(3, "node03", None) == (
        b"# frtrace-collect rank=3 local_rank=-1 host=node03 pid=-1\n"
    )
