"""Make frtrace's real log fixtures: torchrun jobs on gloo (CPU), two agents as two nodes.

Usage: ``python scripts/make_log_fixtures.py [--out fixtures/logs] [--only SCENARIO...]``

Each scenario is a real program run by two ``torchrun`` agents on this machine, ``nodeA`` and
``nodeB`` (``--nnodes 2 --nproc-per-node 2 --role nodeA: --tee 3 --rdzv-backend c10d``), each
agent's output redirected to its own file (``nodeA.log``, ``nodeB.log``), as Slurm writes one
file per node. Global rank 3 carries the fault, wherever the rendezvous places it:

- ``stuck``: rank 3 sleeps in ``slow_data_loader`` before its third all_reduce; the others
  time out in it (gloo); ``py-spy dump`` of every worker is taken while the job hangs.
- ``raise``: rank 3 raises ``ValueError`` before its third all_reduce.
- ``kill``: rank 3 is killed with SIGKILL before its third all_reduce.
- ``skip``: rank 3 skips its third all_reduce and goes to the final barrier; py-spy stacks
  are taken while the job hangs, with the ``# frtrace-collect`` label line before each block.
- ``healthy``: three all_reduces and a barrier on every rank.
- ``pyspy``: not a job; one Python process (a main thread in ``slow_data_loader``, a
  ``prefetch`` thread) dumped with ``py-spy dump --native`` and ``--locals``.

Every rank also records a Flight Recorder dump (``frtrace.capture``) into a sub-folder named
after its node (``nodeB/nccl_trace_rank_nodeB_3``): the stuck rank before it sleeps, a rank
that raises before it raises, the others after their collective failed; a killed rank leaves
none. The logs are those of the same run, so "logs alone" is the folder without the dump
sub-folders. ``expected.json`` holds the ground truth the workers wrote (rank, node, pid).

The script re-runs itself as the job (``--worker SCENARIO``): torch is imported only there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIOS = ("stuck", "raise", "kill", "skip", "healthy")
FORMATS = "pyspy"  # not a job: one process dumped with `--native` and with `--locals`
CULPRIT = 3  # the global rank that carries the fault
NODES = ("nodeA", "nodeB")
NPROC = 2
#: Process-group timeout of the scenarios whose stacks are taken during the hang (seconds):
#: long enough for py-spy to see every rank in place on a busy 2-core machine.
HANG_TIMEOUT_S = 40
#: ... and of the others.
SHORT_TIMEOUT_S = 6
#: A job that runs longer than this is killed and the capture fails.
JOB_DEADLINE_S = 240
#: Seconds to wait after every rank said it is in place, before py-spy looks.
SETTLE_S = 4.0
STACKS = {"stuck": "plain", "skip": "labelled"}  # scenarios whose stacks are taken, and how


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the job (run by torchrun as `make_log_fixtures.py --worker SCENARIO`) ----------------


def slow_data_loader(marker: Path) -> None:
    """The stuck rank's own code: waiting on a data source that never answers."""
    marker.touch()
    time.sleep(3600)


def worker(scenario: str) -> None:
    """One rank of the job; its fault depends on the scenario (global rank 3 only)."""
    from datetime import timedelta

    from frtrace.capture import dump_flight_recorder, enable_flight_recorder

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    node = os.environ.get("ROLE_NAME", "").rstrip(":")
    out = Path(os.environ["FRTRACE_FIXTURE_OUT"])
    work = Path(os.environ["FRTRACE_FIXTURE_WORK"])
    truth = {"rank": rank, "local_rank": local_rank, "host": node, "pid": os.getpid()}
    (work / f"truth_{rank}.json").write_text(json.dumps(truth))
    enable_flight_recorder(buffer_size=2000, dump_on_timeout=False)
    import torch
    import torch.distributed as dist

    timeout = int(os.environ["FRTRACE_FIXTURE_TIMEOUT"])
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    dump = out / node / f"nccl_trace_rank_{node}_{rank}"
    dump.parent.mkdir(parents=True, exist_ok=True)
    x = torch.ones(4)
    faulty = rank == CULPRIT
    try:
        for step in range(3):
            if step == 2 and not (faulty and scenario == "stuck"):
                (work / f"ready_{rank}").touch()
            if step == 2 and faulty:
                if scenario == "stuck":
                    dump_flight_recorder(str(dump))
                    slow_data_loader(work / f"ready_{rank}")
                elif scenario == "raise":
                    dump_flight_recorder(str(dump))
                    raise ValueError("bad batch at step 2")
                elif scenario == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                elif scenario == "skip":
                    continue
            dist.all_reduce(x)
        dist.barrier()
    except RuntimeError:
        dump_flight_recorder(str(dump))
        raise
    dump_flight_recorder(str(dump))
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


# --- running it ----------------------------------------------------------------------------


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is needed for the stacks: pip install py-spy")
    return found


def _children(pid: int) -> list[int]:
    """The worker processes an agent started (what `pgrep -P AGENT` lists)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return sorted(int(p) for p in out.stdout.split())


def _take_stacks(agents: dict[str, subprocess.Popen[bytes]], out: Path, labels: bool) -> None:
    """On each node, `py-spy dump` of every worker into one file per node, as the chapter's
    `pgrep -P $(pgrep -o python) | xargs -I {} py-spy dump --pid {}` does; `labels` writes the
    `# frtrace-collect rank=R local_rank=L host=H pid=P` line before each block, read from the
    worker's environment as `frtrace collect` does."""
    spy = _py_spy()
    for node, agent in agents.items():
        agent_py = _children(agent.pid)  # `timeout` -> the agent's python
        pids = [c for a in agent_py for c in _children(a)]
        with open(out / f"{node}.pyspy.txt", "wb") as f:
            for pid in pids:
                if labels:
                    env = _environ(pid)
                    f.write(
                        f"# frtrace-collect rank={env.get('RANK', '?')} "
                        f"local_rank={env.get('LOCAL_RANK', '?')} host={node} pid={pid}\n".encode()
                    )
                f.flush()
                subprocess.run([spy, "dump", "--pid", str(pid)], stdout=f, stderr=f)


def _environ(pid: int) -> dict[str, str]:
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        return dict(
            kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv
        )
    return {}


def run_scenario(scenario: str, out: Path) -> dict[str, object]:
    """Run one scenario's job on two agents; logs, stacks and dumps go to `out`."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix=f"frtrace-logs-{scenario}-"))
    hang = scenario in STACKS
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    env["FRTRACE_FIXTURE_OUT"] = str(out)
    env["FRTRACE_FIXTURE_WORK"] = str(work)
    env["FRTRACE_FIXTURE_TIMEOUT"] = str(HANG_TIMEOUT_S if hang else SHORT_TIMEOUT_S)
    env.pop("TORCH_FR_DUMP_TEMP_FILE", None)
    port = _free_port()
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    agents: dict[str, subprocess.Popen[bytes]] = {}
    logs = {node: open(out / f"{node}.log", "wb") for node in NODES}  # noqa: SIM115
    try:
        for node_rank, node in enumerate(NODES):
            cmd = [
                "timeout", str(JOB_DEADLINE_S), torchrun,
                "--nnodes", "2", "--node_rank", str(node_rank),
                "--nproc-per-node", str(NPROC), "--role", f"{node}:", "--tee", "3",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                "--rdzv-id", f"frtrace-{scenario}",
                str(Path(__file__).resolve()), "--worker", scenario,
            ]  # fmt: skip
            agents[node] = subprocess.Popen(
                cmd, stdout=logs[node], stderr=subprocess.STDOUT, env=env, cwd=repo
            )
        if hang:
            world = len(NODES) * NPROC
            deadline = time.monotonic() + JOB_DEADLINE_S
            while len(list(work.glob("ready_*"))) < world and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(SETTLE_S)
            _take_stacks(agents, out, labels=STACKS[scenario] == "labelled")
        codes = {node: agent.wait() for node, agent in agents.items()}
    finally:
        for agent in agents.values():
            if agent.poll() is None:
                agent.kill()
        for f in logs.values():
            f.close()
    truths = [json.loads(p.read_text()) for p in sorted(work.glob("truth_*.json"))]
    shutil.rmtree(work, ignore_errors=True)
    by_rank = {t["rank"]: t for t in truths}
    culprit = by_rank.get(CULPRIT, {})
    expected = {
        "scenario": scenario,
        "healthy": scenario == "healthy",
        "culprit_rank": None if scenario == "healthy" else CULPRIT,
        "culprit_host": None if scenario == "healthy" else culprit.get("host"),
        "culprit_pid": None if scenario == "healthy" else culprit.get("pid"),
        "hosts": {str(r): t["host"] for r, t in sorted(by_rank.items())},
        "pids": {str(r): t["pid"] for r, t in sorted(by_rank.items())},
        "agent_exit_codes": codes,
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    return expected


_FORMATS_PROGRAM = """
import sys, threading, time
def slow_data_loader():
    time.sleep(600)
threading.Thread(target=lambda: time.sleep(600), name="prefetch", daemon=True).start()
print("ready", flush=True)
slow_data_loader()
"""


def py_spy_formats(out: Path) -> None:
    """`py-spy dump --native` and `--locals` of one sleeping process, for the parser."""
    out.mkdir(parents=True, exist_ok=True)
    spy = _py_spy()
    program = Path(tempfile.mkdtemp(prefix="frtrace-pyspy-")) / "loader.py"
    program.write_text(_FORMATS_PROGRAM)
    proc = subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        for flag, name in (("--native", "native.txt"), ("--locals", "locals.txt")):
            with open(out / name, "wb") as f:
                subprocess.run([spy, "dump", flag, "--pid", str(proc.pid)], stdout=f, check=True)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(program.parent, ignore_errors=True)


_README = """\
# Real logs and py-spy stacks

Written by `scripts/make_log_fixtures.py` (do not edit by hand; rerun it): torch {torch},
backend **gloo** on CPU, py-spy {py_spy}, Python {python}. Each job ran under two `torchrun`
agents on one machine standing for two nodes (`--nnodes 2 --nproc-per-node 2 --role nodeA:
--tee 3 --rdzv-backend c10d`), each agent's output in its own file (`nodeA.log`,
`nodeB.log`). The c10d rendezvous decides which node gets which global ranks; the fault is
always global rank 3, and `expected.json` says where it ran (node, pid), as the workers
recorded it. Every rank also wrote a Flight Recorder dump into its node's folder
(`nodeB/nccl_trace_rank_nodeB_3`) when it could; the folder without those sub-folders is the
same job's logs alone.

{table}

`pyspy/` holds `py-spy dump --native` and `--locals` of one process (a main thread sleeping in
`slow_data_loader`, a `prefetch` thread), for the parser.
"""


_ROWS = (
    ("folder", "what rank 3 did", "the others", "logs alone", "with dumps"),
    (
        "`stuck/`",
        "sleeps in `slow_data_loader` before its third all_reduce; py-spy stacks taken during "
        "the hang (`node*.pyspy.txt`, plain `py-spy dump` output, matched by pid through "
        "torchelastic's summary)",
        "time out in the all_reduce (gloo, 40 s); rank 3 is then ended with SIGTERM by its agent",
        "rank 3 on its node, stuck in `slow_data_loader`",
        "`missing_ranks` at `default_pg#3`, rank 3",
    ),
    (
        "`raise/`",
        "raises `ValueError: bad batch at step 2`",
        "time out or lose the peer in the all_reduce",
        "rank 3, `ValueError`",
        "`missing_ranks` at `default_pg#3`, rank 3",
    ),
    (
        "`kill/`",
        "SIGKILLs itself",
        "torn down; no dump from anyone, no summary from the other node",
        "rank 3, SIGKILL",
        "(no dump)",
    ),
    (
        "`skip/`",
        "skips its third all_reduce and waits in the final barrier; stacks with "
        "`# frtrace-collect` labels",
        "time out in the all_reduce",
        "rank 3, waiting in `barrier` instead",
        "`type_mismatch` at `default_pg#3`, rank 3",
    ),
    ("`healthy/`", "three all_reduces and a barrier", "the same", "OK", "OK"),
)


def write_readme(out: Path) -> None:
    """fixtures/logs/README.md, with the versions that wrote the fixtures."""
    import platform

    import torch

    spy = subprocess.run([_py_spy(), "--version"], capture_output=True, text=True).stdout
    rows = ["| " + " | ".join(row) + " |" for row in _ROWS]
    rows.insert(1, "|" + " --- |" * len(_ROWS[0]))
    text = _README.format(
        torch=torch.__version__,
        py_spy=spy.split()[-1],
        python=platform.python_version(),
        table="\n".join(rows),
    )
    (out / "README.md").write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("fixtures/logs"))
    parser.add_argument("--only", nargs="+", choices=(*SCENARIOS, FORMATS))
    parser.add_argument("--worker", choices=SCENARIOS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return
    for scenario in args.only or (*SCENARIOS, FORMATS):
        if scenario == FORMATS:
            py_spy_formats(args.out / FORMATS)
            print(f"{FORMATS}: written", flush=True)
            continue
        started = time.monotonic()
        expected = run_scenario(scenario, args.out / scenario)
        print(
            f"{scenario}: {time.monotonic() - started:.0f}s, culprit rank "
            f"{expected['culprit_rank']} on {expected['culprit_host']}",
            flush=True,
        )
    write_readme(args.out)


if __name__ == "__main__":
    main()
