"""py-spy dump output as frtrace reads it: real dumps (fixtures/logs), `--native`, `--locals`,
colors, labels, and how processes are matched to ranks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from frtrace.evidence.gather import gather, in_collective, is_auxiliary
from frtrace.evidence.logs import parse_log
from frtrace.evidence.pyspy import parse_pyspy

LOGS = FIXTURES / "logs"


def _truth(scenario: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((LOGS / scenario / "expected.json").read_text())
    return data


def test_every_process_of_a_nodes_file_is_read_with_its_frames_innermost_first() -> None:
    parsed = parse_pyspy(LOGS / "stuck" / "nodeB.pyspy.txt")
    pids = _truth("stuck")["pids"]
    assert isinstance(pids, dict)
    assert sorted(p.pid or 0 for p in parsed.processes) == sorted([pids["2"], pids["3"]])
    by_pid = {p.pid: p for p in parsed.processes}
    waiting, stuck = by_pid[pids["2"]], by_pid[pids["3"]]
    assert waiting.main is not None and stuck.main is not None
    assert waiting.main.frames[0].function == "all_reduce"
    assert stuck.main.frames[0].function == "slow_data_loader"
    assert parsed.host == "nodeB"


def test_a_process_in_a_collective_is_told_from_one_outside() -> None:
    procs = parse_pyspy(LOGS / "stuck" / "nodeB.pyspy.txt").processes
    assert sorted(str(in_collective(p)) for p in procs) == ["None", "all_reduce"]


def test_native_frames_are_read_and_the_innermost_python_frame_found() -> None:
    (proc,) = parse_pyspy(LOGS / "pyspy" / "native.txt").processes
    assert proc.main is not None
    assert proc.main.frames[0].native
    assert proc.main.python_frames[0].function == "slow_data_loader"
    assert in_collective(proc) is None
    assert [t.name for t in proc.threads] == ["MainThread", "prefetch"]


def test_locals_blocks_are_not_taken_for_frames() -> None:
    (proc,) = parse_pyspy(LOGS / "pyspy" / "locals.txt").processes
    prefetch = next(t for t in proc.threads if t.name == "prefetch")
    assert [f.function for f in prefetch.frames] == [
        "<lambda>",
        "Thread.run",
        "Thread._bootstrap_inner",
        "Thread._bootstrap",
    ]


def test_colored_output_reads_like_plain(tmp_path: Path) -> None:
    """py-spy styles the pid, thread ids and frames (console's bold/green/cyan/dim) when it
    writes to a terminal; a capture through `script` keeps the escape codes."""
    plain = (LOGS / "stuck" / "nodeB.pyspy.txt").read_text()

    def paint(m: re.Match[str]) -> str:
        return f"\x1b[1;33m{m.group(0)}\x1b[0m"

    colored = re.sub(r"(?<=Process )\d+|(?<=Thread )\d+", paint, plain)
    colored = re.sub(
        r"^( {4})(\S+)", lambda m: f"{m.group(1)}\x1b[32m{m.group(2)}\x1b[0m", colored, flags=re.M
    )
    (tmp_path / "nodeB.txt").write_text(colored)
    a = parse_pyspy(LOGS / "stuck" / "nodeB.pyspy.txt").processes
    b = parse_pyspy(tmp_path / "nodeB.txt").processes
    assert [(p.pid, p.threads) for p in a] == [(p.pid, p.threads) for p in b]


def test_a_label_line_names_the_rank_of_the_process_after_it() -> None:
    procs = parse_pyspy(LOGS / "skip" / "nodeB.pyspy.txt").processes
    truth = _truth("skip")["pids"]
    assert isinstance(truth, dict)
    assert {p.label.rank: p.pid for p in procs if p.label} == {r: truth[str(r)] for r in (2, 3)}


def test_without_pids_the_one_process_outside_collectives_is_the_one_rank_not_waiting(
    tmp_path: Path,
) -> None:
    """The stack file's pids are unknown to the logs (another pid namespace, a container):
    on nodeB one process is outside collectives and one rank is not waiting."""
    text = (LOGS / "stuck" / "nodeB.pyspy.txt").read_text()
    moved = re.sub(
        r"^Process (\d+)", lambda m: f"Process {int(m.group(1)) + 100000}", text, flags=re.M
    )
    (tmp_path / "nodeB.pyspy.txt").write_text(moved)
    logs = [parse_log(LOGS / "stuck" / f"{n}.log") for n in ("nodeA", "nodeB")]
    ev = gather(logs, [parse_pyspy(tmp_path / "nodeB.pyspy.txt")])
    stack = ev.ranks[3].stack
    assert stack is not None and stack.main is not None
    assert stack.main.frames[0].function == "slow_data_loader"
    assert any("taken to be rank 3" in note for note in ev.notes)


def test_torchruns_agent_is_not_taken_for_a_worker(tmp_path: Path) -> None:
    agent = (
        "Process 41: /venv/bin/python /venv/bin/torchrun --nnodes 2 job.py\n"
        "Python v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 41 (idle): "MainThread"\n'
        "    SimpleElasticAgent._invoke_run (torch/distributed/elastic/agent/server/api.py:923)\n"
    )
    shutil.copy(LOGS / "stuck" / "nodeB.pyspy.txt", tmp_path / "nodeB.pyspy.txt")
    path = tmp_path / "nodeB.pyspy.txt"
    path.write_text(agent + path.read_text())
    logs = [parse_log(LOGS / "stuck" / f"{n}.log") for n in ("nodeA", "nodeB")]
    ev = gather(logs, [parse_pyspy(path)])
    assert 41 not in {e.stack.pid for e in ev.ranks.values() if e.stack}
    assert not ev.unmatched


def test_py_spy_errors_between_processes_are_skipped(tmp_path: Path) -> None:
    error = (
        "Error: Failed to find python version from target process\n\n"
        "Stack backtrace:\n   0: anyhow::error::<impl anyhow::Error>::msg\n"
    )
    text = (LOGS / "stuck" / "nodeB.pyspy.txt").read_text()
    (tmp_path / "nodeB.txt").write_text(error + text + error)
    assert len(parse_pyspy(tmp_path / "nodeB.txt").processes) == 2


def test_a_dump_of_a_million_threads_keeps_a_bounded_few(tmp_path: Path) -> None:
    from frtrace.evidence.pyspy import MAX_THREADS

    head = "Process 7: python job.py\nPython v3.11.7 (/usr/bin/python3)\n\n"
    threads = "".join(f'Thread {i} (idle): "t{i}"\n    f (job.py:{i})\n' for i in range(100_000))
    (tmp_path / "huge.txt").write_text(head + threads)
    (proc,) = parse_pyspy(tmp_path / "huge.txt").processes
    assert len(proc.threads) == MAX_THREADS


@pytest.mark.parametrize(
    ("frames", "helper"),
    [
        # multiprocessing's resource tracker: `python -c 'from multiprocessing...'`
        (["main (multiprocessing/resource_tracker.py:213)", "<module> (<string>:1)"], True),
        # torch.compile's compile worker, run as a module
        (["_async_compile_initializer (torch/_inductor/compile_worker/subproc_pool.py:30)",
          "<module> (torch/_inductor/compile_worker/__main__.py:61)"], True),
        # a DataLoader worker started by spawn: its target is the worker loop
        (["_worker_loop (torch/utils/data/_utils/worker.py:374)",
          "BaseProcess.run (multiprocessing/process.py:108)",
          "BaseProcess._bootstrap (multiprocessing/process.py:314)",
          "_main (multiprocessing/spawn.py:135)", "spawn_main (multiprocessing/spawn.py:122)",
          "<module> (<string>:1)"], True),
        # a torchrun worker inside its own DataLoader fetch (num_workers=0)
        (["_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)",
          "train (pretrain.py:231)", "<module> (pretrain.py:275)"], False),
    ],
)  # fmt: skip
def test_a_helper_process_is_told_by_the_code_it_was_started_to_run(
    tmp_path: Path, frames: list[str], helper: bool
) -> None:
    body = "".join(f"    {f}\n" for f in frames)
    (tmp_path / "node.txt").write_text(
        "Process 7: /venv/bin/python x\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        f'Thread 7 (idle): "MainThread"\n{body}'
    )
    (proc,) = parse_pyspy(tmp_path / "node.txt").processes
    assert is_auxiliary(proc) is helper
