"""Each shape of evidence read as the tool that wrote it writes it: launcher prefixes, torch's
log headers, torchelastic's and slurm's lines, DETAIL's checks, NCCL's groups. The lines are
copied from real torch 2.13 runs on gloo (or built from the cited format where a GPU is
needed); what is asserted is who each line is said to be from and what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES
from log_builders import nccl_dump_signal_line, nccl_warn_line, nccl_watchdog_lines

import frtrace
from frtrace.analysis.findings import Finding, Kind
from frtrace.analysis.logs import all_members, log_findings, member_global, member_range
from frtrace.evidence.gather import DumpHost, dump_host, gather
from frtrace.evidence.logs import host_from_path, parse_log
from frtrace.evidence.prefixes import clock_seconds, looks_labelled, peel
from frtrace.evidence.records import Evidence, PyFrame
from frtrace.report.wording import detail

# --- who wrote a line ------------------------------------------------------------------------


def test_an_srun_label_torchrun_header_and_rank_tag_are_all_peeled() -> None:
    peeled = peel("12: [node17:1]:[rank3]: Traceback (most recent call last):", labelled=True)
    assert peeled.speaker.task == 12
    assert (peeled.speaker.role, peeled.speaker.number, peeled.speaker.rank) == ("node17:", 1, 3)
    assert peeled.rest == "Traceback (most recent call last):"


def test_a_padded_srun_label_is_the_task_id() -> None:
    assert peel(" 3: hello", labelled=True).speaker.task == 3
    assert peel(" 3: hello", labelled=False).speaker.task is None


def test_srun_labels_are_told_by_most_lines_carrying_them() -> None:
    assert looks_labelled(["0: a", "1: b", "srun: error: x", "1: c"])
    assert not looks_labelled(["step 1: loss 0.2", "hello", "world"])


def test_torchs_python_log_header_states_the_writers_pid_and_whether_it_is_the_agent() -> None:
    agent = peel(
        "W1128 12:58:51.576000 8007 torch/distributed/elastic/multiprocessing/api.py:1028] "
        "Sending process 8132 closing signal SIGTERM",
        labelled=False,
    )
    assert (agent.pid, agent.agent) == (8007, True)
    assert agent.rest == "Sending process 8132 closing signal SIGTERM"
    worker = peel(
        "[rank2]:W1128 12:58:51.576000 8131 torch/distributed/c10d_logger.py:83] x", False
    )
    assert (worker.pid, worker.agent, worker.speaker.rank) == (8131, False, 2)


def test_a_torchelastic_summary_entry_is_not_taken_for_a_header() -> None:
    peeled = peel("[0]:", labelled=False)
    assert peeled.speaker.number is None and peeled.rest == "[0]:"


# --- where a file says it comes from ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "host"),
    [
        ("trace-node17.out", "node17"),
        ("pyspy_node42.txt", "node42"),
        ("nodeB.pyspy.txt", "nodeB"),
        ("slurm-7384194.out", ""),
        ("rank3.log", ""),
        ("train-a3-highgpu-8g-248.log", "train-a3-highgpu-8g-248"),
    ],
)
def test_a_files_name_gives_its_node_without_the_collecting_words(name: str, host: str) -> None:
    assert host_from_path(Path(name), None) == host


def test_torchruns_redirect_layout_names_the_node_folder_not_the_run_folder(tmp_path: Path) -> None:
    path = tmp_path / "node17" / "torchelastic" / "job_x1" / "attempt_0" / "1" / "stdout.log"
    path.parent.mkdir(parents=True)
    path.write_text("[rank3]: hello\n")
    parsed = parse_log(path, tmp_path)
    assert (parsed.host, parsed.file_local) == ("node17", 1)


def test_a_rank_a_redirected_worker_states_is_its_local_ranks_and_owns_its_stderr_dump(
    tmp_path: Path,
) -> None:
    """torchrun --redirects, cancelled: no summary ties a local rank's folder to a global
    rank, but the worker's own `rank 5 pid 29357` line in its stdout.log does, and the
    faulthandler dump in the stderr.log beside it is then rank 5's."""
    logs = []
    for local, rank, pid in ((0, 4, 29354), (1, 5, 29357)):
        folder = tmp_path / "node231" / "torchelastic" / "run_x1" / "attempt_0" / str(local)
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_text(f"rank {rank} pid {pid} on node231\n")
        (folder / "stderr.log").write_text(
            "Current thread 0x00007f94ae631b80 (most recent call first):\n"
            '  File "/job/main.py", line 78 in ' + ("get_batch" if rank == 5 else "step") + "\n"
            '  File "/job/main.py", line 275 in <module>\n'
        )
        logs += [parse_log(folder / name, tmp_path) for name in ("stdout.log", "stderr.log")]
    ev = gather(logs, [])

    def innermost(rank: int) -> str:
        stack = ev.ranks[rank].stack
        assert stack is not None and stack.main is not None
        return stack.main.frames[0].function

    assert (innermost(4), innermost(5)) == ("step", "get_batch")
    assert not ev.unmatched


def test_a_prefix_inferred_into_the_hosts_names_gives_back_the_whole_host() -> None:
    name = Path("nccl_trace_rank_train-a3-highgpu-8g-248.example.internal_2")
    assert (
        dump_host(name, "nccl_trace_rank_train-", None)
        == "train-a3-highgpu-8g-248.example.internal"
    )


# --- torchelastic, slurm, DETAIL ------------------------------------------------------------


def _log(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _pyspy(pid: int, frames: list[str]) -> str:
    """One worker's `py-spy dump --pid` output (innermost frame first)."""
    body = "".join(f"    {f}\n" for f in frames)
    return (
        f"Process {pid}: /venv/bin/python -u /job/pretrain.py\n"
        f"Python v3.11.7 (/usr/bin/python3.11)\n\n"
        f'Thread {pid} (idle): "MainThread"\n{body}'
    )


_AGENT_API = "torch/distributed/elastic/multiprocessing/api.py"


def _timed_out_node(rank: int, host: str, pid: int) -> str:
    """A node's log (one worker, torchrun --tee 3 without a role) whose worker timed out in
    gloo, with torchelastic's summary naming it."""
    return (
        "[default0]:[step 0] loss=1.001\n"
        f"[default0]:[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete\n"
        f"E1129 12:53:34.800000 12892 {_AGENT_API}:1002] failed (exitcode: 1) local_rank: 0 "
        f"(pid: {pid}) of binary: /venv/bin/python\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_12:53:34\n"
        f"  host      : {host}\n  rank      : {rank} (local_rank: 0)\n"
        f"  exitcode  : 1 (pid: {pid})\n  error_file: <N/A>\n"
    )


def _silent_node(pid: int) -> str:
    """A node's log whose one worker printed nothing with its rank; its agent ended it."""
    return (
        "[default0]:[step 0] loss=1.002\n"
        f"W1129 12:53:35.514000 12896 {_AGENT_API}:1028] Sending process {pid} closing "
        "signal SIGTERM\n"
    )


_WAITING = ["all_reduce (torch/distributed/distributed_c10d.py:3252)", "run (pretrain.py:261)"]
_STUCK = ["Queue.get (queue.py:171)", "get_batch (pretrain.py:78)", "run (pretrain.py:261)"]
_TORCHRUN = (
    "Process {pid}: /venv/bin/python /venv/bin/torchrun --nnodes 2 pretrain.py\n"
    "Python v3.11.7 (/usr/bin/python3.11)\n\n"
    'Thread {pid} (idle): "MainThread"\n'
    "    SimpleElasticAgent._invoke_run (torch/distributed/elastic/agent/server/api.py:923)\n"
)


def _two_nodes_one_unnamed(tmp_path: Path, stated_world: int | None) -> Finding | None:
    """Two nodes of one worker each, py-spy'd with every python process (the torchrun agents
    too): rank 1 timed out; the other node's worker printed nothing with its rank and sits
    in get_batch (the agents and the DataLoader worker beside it are no workers)."""
    (tmp_path / "pyspy_compute-5-49.txt").write_text(
        _TORCHRUN.format(pid=12892) + _pyspy(12911, _WAITING)
    )
    (tmp_path / "pyspy_compute-5-78.txt").write_text(
        _TORCHRUN.format(pid=12896) + _pyspy(12912, _STUCK) + _pyspy(12990, _LOADER_WORKER)
    )
    roster = _roster("compute-5-49", [1], stated_world) if stated_world else ""
    (tmp_path / "trace-compute-5-49.out").write_text(
        roster + _timed_out_node(1, "compute-5-49", 12911)
    )
    (tmp_path / "trace-compute-5-78.out").write_text(_silent_node(12912))
    return frtrace.analyze(frtrace.load(tmp_path)).root_cause


def test_the_one_process_no_line_names_is_the_one_rank_no_line_names_in_a_stated_world(
    tmp_path: Path,
) -> None:
    """The agents' roster states a world of two: the unnamed process is rank 0."""
    root = _two_nodes_one_unnamed(tmp_path, stated_world=2)
    assert root is not None
    assert (root.culprit_ranks, root.culprit_processes) == ([0], [])


def test_the_one_process_no_line_names_keeps_its_host_and_pid_while_the_world_is_untold(
    tmp_path: Path,
) -> None:
    """No line states the world: a third node whose log and stacks were both lost would hold
    rank 0 or 2, so the stuck process is named by its host and pid, not taken for rank 0."""
    root = _two_nodes_one_unnamed(tmp_path, stated_world=None)
    assert root is not None
    assert (root.culprit_ranks, [(p.host, p.pid) for p in root.culprit_processes]) == (
        [],
        [("compute-5-78", 12912)],
    )


def test_a_node_whose_log_was_lost_still_counts_its_worker_from_its_stacks(
    tmp_path: Path,
) -> None:
    """As above, with a third node whose log was lost. Three py-spy files show three
    workers: ranks 0 and 2 are both unnamed, so the stuck process is named by host and pid,
    not taken to be rank 0."""
    (tmp_path / "pyspy_compute-5-13.txt").write_text(_pyspy(12909, _WAITING))
    (tmp_path / "pyspy_compute-5-49.txt").write_text(_pyspy(12911, _WAITING))
    (tmp_path / "pyspy_compute-5-78.txt").write_text(_pyspy(12912, _STUCK))
    (tmp_path / "trace-compute-5-49.out").write_text(_timed_out_node(1, "compute-5-49", 12911))
    (tmp_path / "trace-compute-5-78.out").write_text(_silent_node(12912))
    root = frtrace.analyze(frtrace.load(tmp_path)).root_cause
    assert root is not None
    assert (root.culprit_ranks, [(p.host, p.pid) for p in root.culprit_processes]) == (
        [],
        [("compute-5-78", 12912)],
    )


_GATHERING = ["all_gather (torch/distributed/distributed_c10d.py:4287)", "run (pretrain.py:263)"]


def test_an_untied_worker_waiting_with_one_side_of_a_skipped_collective_outvotes_the_other(
    tmp_path: Path,
) -> None:
    """Three nodes of one worker each: rank 0 waits in all_gather, rank 1 in all_reduce, and
    the third node's log was lost, but its py-spy file shows its worker in all_reduce too.
    That worker is no rank the logs show (each has its own stack): two against one, so
    rank 0 skipped the all_reduce, not undecidable one against one."""
    (tmp_path / "pyspy_nodeA.txt").write_text(_pyspy(200, _GATHERING))
    (tmp_path / "pyspy_nodeB.txt").write_text(_pyspy(201, _WAITING))
    (tmp_path / "pyspy_nodeC.txt").write_text(_pyspy(202, _WAITING))
    (tmp_path / "trace-nodeA.out").write_text(_timed_out_node(0, "nodeA", 200))
    (tmp_path / "trace-nodeB.out").write_text(_timed_out_node(1, "nodeB", 201))
    root = frtrace.analyze(frtrace.load(tmp_path)).root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.undecidable) == ("missing_ranks", [0], False)
    assert "as pid 202 on nodeC (rank not in the logs) does by its live stack" in detail(root)


def test_an_untied_worker_on_the_smaller_side_evens_the_count(tmp_path: Path) -> None:
    """Four nodes: ranks 0 and 1 wait in all_reduce, rank 2 in all_gather, and the fourth
    node's log was lost while its py-spy file shows its worker in all_gather: two against
    two, so which side skipped a call is undecidable, rather than rank 2 alone."""
    (tmp_path / "pyspy_nodeA.txt").write_text(_pyspy(200, _WAITING))
    (tmp_path / "pyspy_nodeB.txt").write_text(_pyspy(201, _WAITING))
    (tmp_path / "pyspy_nodeC.txt").write_text(_pyspy(202, _GATHERING))
    (tmp_path / "pyspy_nodeD.txt").write_text(_pyspy(203, _GATHERING))
    for rank, node in enumerate(("nodeA", "nodeB", "nodeC")):
        (tmp_path / f"trace-{node}.out").write_text(_timed_out_node(rank, node, 200 + rank))
    root = frtrace.analyze(frtrace.load(tmp_path)).root_cause
    assert root is not None
    assert (root.culprit_ranks, root.undecidable) == ([0, 1, 2], True)
    assert [(p.host, p.pid) for p in root.culprit_processes] == [("nodeD", 203)]


def test_an_untied_worker_that_may_be_a_seen_rank_is_not_counted_twice(tmp_path: Path) -> None:
    """nodeA's ranks 0 and 2 wait in all_gather (their pids stated); rank 1, on nodeB, timed
    out in all_reduce, its pid untold, and nodeB's py-spy file shows two workers in
    all_reduce: one of them is rank 1, so all_reduce has two ranks, as all_gather has, and
    which side skipped a call is undecidable."""
    (tmp_path / "pyspy_nodeA.txt").write_text(_pyspy(200, _GATHERING) + _pyspy(210, _GATHERING))
    (tmp_path / "pyspy_nodeB.txt").write_text(_pyspy(202, _WAITING) + _pyspy(204, _WAITING))
    (tmp_path / "trace-nodeA.out").write_text(
        "[default0]:INFO rank=0 pid=200 host=nodeA starting training\n"
        "[default1]:INFO rank=2 pid=210 host=nodeA starting training\n"
    )
    traceback = [
        "Traceback (most recent call last):",
        '  File "/job/pretrain.py", line 261, in run',
        "    dist.all_reduce(x)",
        '  File "/venv/torch/distributed/distributed_c10d.py", line 3252, in all_reduce',
        "    work.wait()",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
        "waiting 20000ms for recv operation to complete",
    ]
    (tmp_path / "trace-nodeB.out").write_text(
        "".join(f"[default0]:[rank1]: {x}\n" for x in traceback)
    )
    root = frtrace.analyze(frtrace.load(tmp_path)).root_cause
    assert root is not None
    assert (root.culprit_ranks, root.undecidable) == ([0, 1, 2], True)


# A DataLoader worker as `py-spy dump` shows it (captured from torch 2.13's DataLoader with
# num_workers=1 on Linux, where workers fork): the parent's frames down to the fork stay on
# its stack, so its outermost frame is the trainer's own `<module>`.
_LOADER_WORKER = [
    "D.__getitem__ (pretrain.py:6)",
    "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)",
    "_worker_loop (torch/utils/data/_utils/worker.py:374)",
    "BaseProcess.run (multiprocessing/process.py:108)",
    "BaseProcess._bootstrap (multiprocessing/process.py:314)",
    "Popen._launch (multiprocessing/popen_fork.py:71)",
    "Popen.__init__ (multiprocessing/popen_fork.py:19)",
    "BaseProcess.start (multiprocessing/process.py:121)",
    "_MultiProcessingDataLoaderIter.__init__ (torch/utils/data/dataloader.py:1176)",
    "DataLoader.__iter__ (torch/utils/data/dataloader.py:505)",
    "run (pretrain.py:8)",
    "<module> (pretrain.py:11)",
]


def _two_nodes_waiting(tmp_path: Path, extra: str) -> Finding | None:
    """Ranks 0 (nodeA) and 1 (nodeB) timed out in all_reduce, where their stacks wait too;
    `extra` is more of nodeB's py-spy output (every python process of the node)."""
    (tmp_path / "pyspy_nodeA.txt").write_text(_pyspy(200, _WAITING))
    (tmp_path / "pyspy_nodeB.txt").write_text(_pyspy(201, _WAITING) + extra)
    (tmp_path / "trace-nodeA.out").write_text(_timed_out_node(0, "nodeA", 200))
    (tmp_path / "trace-nodeB.out").write_text(_timed_out_node(1, "nodeB", 201))
    return frtrace.analyze(frtrace.load(tmp_path)).root_cause


def test_a_forked_dataloader_worker_in_the_stacks_is_no_culprit(tmp_path: Path) -> None:
    """Beside the two waiting ranks, nodeB's DataLoader worker sits in `__getitem__`: a
    helper of a worker (its own code is the DataLoader's worker loop), not an untied worker
    stuck outside collectives while the others wait."""
    root = _two_nodes_waiting(tmp_path, _pyspy(290, _LOADER_WORKER))
    assert root is not None
    assert root.culprit_processes == []
    assert (root.kind, root.culprit_ranks) == ("stuck_collective", [0, 1])


def test_a_worker_started_by_mp_spawn_stuck_in_its_data_is_still_a_culprit(
    tmp_path: Path,
) -> None:
    """A third worker, started by torch.multiprocessing.spawn (its own code is spawn's
    `_wrap`), sits in its DataLoader's fetch with no loader workers: a rank's process
    outside collectives while the others wait, so it is named."""
    spawned = [
        "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)",
        "get_batch (pretrain.py:78)",
        "train (pretrain.py:231)",
        "_wrap (torch/multiprocessing/spawn.py:90)",
        "BaseProcess.run (multiprocessing/process.py:108)",
        "BaseProcess._bootstrap (multiprocessing/process.py:314)",
        "_main (multiprocessing/spawn.py:135)",
        "spawn_main (multiprocessing/spawn.py:122)",
        "<module> (<string>:1)",
    ]
    root = _two_nodes_waiting(tmp_path, _pyspy(202, spawned))
    assert root is not None
    assert [(p.host, p.pid) for p in root.culprit_processes] == [("nodeB", 202)]


def test_the_agents_roster_pairs_local_and_global_ranks_of_its_node(tmp_path: Path) -> None:
    head = "I1128 12:32:10.299000 14046 torch/distributed/elastic/agent/server/api.py:553]"
    roster = "\n".join(
        f"{head} {x}"
        for x in (
            "[node17:] Rendezvous complete for workers. Result:",
            "  restart_count=0",
            "  group_rank=1",
            "  group_world_size=2",
            "  local_ranks=[0, 1]",
            "  global_ranks=[2, 3]",
            "  global_world_sizes=[4, 4]",
            "",
        )
    )
    path = _log(tmp_path, "node17.log", roster + "\n[node17:1]:shard 17 loading\n")
    ev = gather([parse_log(path)], [])
    assert ev.ranks[3].host == "node17"
    assert ev.world_size == 4 and ev.ending.nodes == 2


def test_slurmsteps_cancel_line_names_the_node_of_the_task_it_is_labelled_with(
    tmp_path: Path,
) -> None:
    text = (
        "0: [rank0]: RuntimeError: boom\n"
        "1: [rank1]:step 3\n"
        "1: slurmstepd: error: *** STEP 8611515.0 ON a100-75 CANCELLED AT "
        "2026-11-29T00:13:19 ***\n"
        "slurmstepd: error: *** JOB 8611515 ON a100-74 CANCELLED AT 2026-11-29T00:13:19 ***\n"
    )
    ev = gather([parse_log(_log(tmp_path, "slurm-8611515.out", text))], [])
    assert (ev.ranks[1].host, ev.ranks[0].host) == ("a100-75", "")


def test_two_workers_lines_glued_together_are_two_claims(tmp_path: Path) -> None:
    """Workers printing to one file with no launcher prefix between them (torchrun without
    --tee, under srun --label) glue lines: each rank named claims what follows it."""
    text = "1: rank 4 pid 6380 on gpu051\n1: rank 3 pid 6379 on gpu051rank 5 pid 6381 on gpu051\n"
    ev = gather([parse_log(_log(tmp_path, "slurm-6227789.out", text))], [])
    assert {r: (ev.ranks[r].pid, ev.ranks[r].host) for r in ev.ranks} == {
        3: (6379, "gpu051"),
        4: (6380, "gpu051"),
        5: (6381, "gpu051"),
    }


def test_a_rank_the_job_says_runs_on_the_files_node_is_placed_there(tmp_path: Path) -> None:
    """`Initializing rank 5/6 on gpuB` in gpuB's file, with no prefix, pid or local rank:
    rank 5 runs on gpuB (a line naming another node places nothing)."""
    text = "Initializing rank 5/6 on gpuB\nInitializing rank 4/6 on gpuC\n"
    ev = gather([parse_log(_log(tmp_path, "trace-gpuB.out", text))], [])
    assert {r: ev.ranks[r].host for r in ev.ranks} == {5: "gpuB"}


def _gloo_timeout(rank: int, op: str = "all_reduce") -> str:
    """A rank's traceback of a collective that gloo timed out (real torch 2.13 lines)."""
    frames = (
        "Traceback (most recent call last):",
        '  File "/job/main.py", line 150, in communicate',
        f"    dist.{op}(x)",
        f'  File "/venv/torch/distributed/distributed_c10d.py", line 3252, in {op}',
        "    work.wait()",
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 16000ms for recv operation to complete",
    )
    return "".join(f"[rank{rank}]: {line}\n" for line in frames)


def test_every_rank_shown_waiting_is_a_hang_inside_the_collective(tmp_path: Path) -> None:
    text = "".join(_gloo_timeout(r) for r in range(4))
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "stuck_collective",
        [0, 1, 2, 3],
        True,
    )


def test_two_ranks_waiting_in_two_collectives_are_one_against_the_other(tmp_path: Path) -> None:
    """Rank 0 waits in broadcast, rank 1 in all_reduce: one of them skipped or added a call,
    and nothing says which."""
    text = _gloo_timeout(0, "broadcast") + _gloo_timeout(1)
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1], True)
    assert "rank 0 in broadcast and rank 1 in all_reduce" in detail(finding)


def test_the_one_rank_waiting_where_three_do_not_is_the_culprit(tmp_path: Path) -> None:
    text = "".join(_gloo_timeout(r) for r in range(3)) + _gloo_timeout(3, "broadcast")
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([3], False)


def test_ranks_shown_waiting_above_ranks_no_input_shows_wait_for_those(tmp_path: Path) -> None:
    """Ranks 2-5 wait; ranks 0 and 1 exist (ranks run from 0) and their node's log is lost:
    one of them is the rank the others wait for, or the hang is inside the collective."""
    text = "".join(_gloo_timeout(r) for r in range(2, 6))
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "missing_ranks",
        [0, 1],
        True,
    )
    assert "one of ranks 0-1, which no input shows" in detail(finding)


_AGENT = "torch/distributed/elastic/multiprocessing/api.py"


def _agents_and_dumps(
    tmp_path: Path, closed_on_b: tuple[int, ...], ranks_on_b: tuple[int, ...] = (1,)
) -> Evidence:
    """Two nodes, ranks placed by their dumps' folders (rank 0 on nodeA, `ranks_on_b` on
    nodeB), no line naming a rank: nodeA's agent saw its worker fail, nodeB's closed
    `closed_on_b`."""
    a = _log(
        tmp_path,
        "nodeA.log",
        f"E1128 23:53:55.291000 3840 {_AGENT}:1002] failed (exitcode: 1) local_rank: 0 "
        "(pid: 3872) of binary: /usr/bin/python3\n",
    )
    b = _log(
        tmp_path,
        "nodeB.log",
        "".join(
            f"W1128 23:53:55.733000 3845 {_AGENT}:1028] Sending process {pid} closing signal "
            "SIGTERM\n"
            for pid in closed_on_b
        ),
    )
    placed = [(0, "nodeA"), *((r, "nodeB") for r in ranks_on_b)]
    dumps = [DumpHost(r, str(tmp_path / f"trace_{r}"), h, ()) for r, h in placed]
    return gather([parse_log(a), parse_log(b)], [], dumps)


def test_a_nodes_one_worker_its_agent_names_is_its_one_rank(tmp_path: Path) -> None:
    ev = _agents_and_dumps(tmp_path, (3875,))
    assert (ev.ranks[0].pid, ev.ranks[1].pid, ev.ranks[1].closed) == (3872, 3875, "SIGTERM")


def test_agents_naming_more_workers_than_the_job_shows_ranks_tie_no_pid(tmp_path: Path) -> None:
    ev = _agents_and_dumps(tmp_path, (3875, 3876))
    assert (ev.ranks[0].pid, ev.ranks[1].pid, ev.ranks[1].closed) == (None, None, "")


def test_a_nodes_two_untied_workers_and_two_ranks_tie_neither(tmp_path: Path) -> None:
    ev = _agents_and_dumps(tmp_path, (3875, 3876), ranks_on_b=(1, 2))
    assert (ev.ranks[0].pid, ev.ranks[1].pid, ev.ranks[2].pid) == (3872, None, None)


def test_slurms_task_exit_names_the_node_of_a_labelled_task(tmp_path: Path) -> None:
    text = (
        "0: [default0]:[rank0]: RuntimeError: boom\n"
        "1: [default0]:step 3\n"
        "1: [default0]:step 4\n"
        "srun: error: gpu042: task 0: Exited with exit code 1\n"
    )
    ev = gather([parse_log(_log(tmp_path, "slurm-99.out", text))], [])
    assert ev.ranks[0].host == "gpu042"


def test_a_monitored_barrier_names_the_rank_that_never_came(tmp_path: Path) -> None:
    text = (
        "[gpu-node-00:0]:[rank0]:[E1128 12:32:34.372760128 ProcessGroupGloo.cpp:2901] [Rank 0]: "
        "Rank 3 failed to pass monitoredBarrier in 10000 ms\n"
        "[gpu-node-00:1]:[rank1]: RuntimeError: Rank 1 successfully reached monitoredBarrier, "
        "but received errors while waiting for send/recv from rank 0. Please check rank 0 logs "
        "for faulty rank.\n"
    )
    ev = gather([parse_log(_log(tmp_path, "gpu-node-00.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, finding.reason, finding.undecidable) == (
        [3],
        "named_by_check",
        False,
    )


_IN_STEP = '  File "/job/train.py", line 40, in step'


def _raised(
    rank: int,
    error: str,
    frame: str = '  File "/job/train.py", line 88, in <module>',
    head: str = "",
) -> list[str]:
    """A rank's uncaught exception as torch's `[rankN]:` prefix writes it: the traceback's
    head, one frame, the error."""
    tag = f"{head}[rank{rank}]:"
    return [f"{tag} Traceback (most recent call last):", f"{tag} {frame}", f"{tag} {error}"]


def _roster(node: str, ranks: list[int], world: int) -> str:
    head = "I1128 21:21:41.825000 16232 torch/distributed/elastic/agent/server/api.py:553]"
    lines = (
        f"[{node}:] Rendezvous complete for workers. Result:",
        f"  local_ranks={list(range(len(ranks)))}",
        f"  global_ranks={ranks}",
        f"  global_world_sizes={[world] * len(ranks)}",
        "",
    )
    return "".join(f"{head} {x}\n" for x in lines)


def _reached(node: str, local: int, rank: int, group_rank: int | None = None) -> str:
    """The line a rank other than 0 writes when rank 0 never answers its monitored barrier
    (real torch 2.13, gloo, TORCH_DISTRIBUTED_DEBUG=DETAIL)."""
    said = rank if group_rank is None else group_rank
    return (
        f"[{node}:{local}]:[rank{rank}]:[E1128 21:21:46.082591904 ProcessGroupGloo.cpp:67] Rank "
        f"{said} successfully reached monitoredBarrier, but received errors while waiting for "
        "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
    )


def _unanswered_barrier_decides(tmp_path: Path, text: str) -> bool:
    ev = gather([parse_log(_log(tmp_path, "job.log", text))], [])
    return any(
        f.facts.get("decided_by") == "monitored_barrier_unanswered" for f in log_findings(ev)
    )


def test_rank_0_is_the_culprit_when_every_other_rank_reached_its_unanswered_barrier(
    tmp_path: Path,
) -> None:
    # rank 0's node log was lost: the others say they reached the barrier rank 0 times
    text = _roster("nodeB", [2, 3], 4) + "".join(_reached("nodeB", r - 2, r) for r in (2, 3))
    text += _roster("nodeC", [1], 4) + _reached("nodeC", 0, 1)
    ev = gather([parse_log(_log(tmp_path, "job.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, finding.undecidable) == ([0], False)
    assert "rank 0 alone never said it reached it" in detail(finding)


def test_a_rank_that_never_said_it_reached_the_barrier_leaves_it_undecided(
    tmp_path: Path,
) -> None:
    # rank 3 said nothing: it may be the straggler rank 0 timed out on, or rank 0 failed
    text = _roster("nodeB", [2, 3], 4) + _reached("nodeB", 0, 2) + _reached("nodeC", 0, 1)
    assert not _unanswered_barrier_decides(tmp_path, text)


def test_a_subgroups_unanswered_barrier_names_no_global_rank(tmp_path: Path) -> None:
    # ranks 2 and 3 number themselves 1 and 2 in the barrier's group: its rank 0 is not rank 0
    text = _roster("nodeB", [2, 3], 4) + _reached("nodeB", 0, 2, 1) + _reached("nodeB", 1, 3, 2)
    text += _reached("nodeC", 0, 1)
    assert not _unanswered_barrier_decides(tmp_path, text)


def test_the_reached_barrier_decides_nothing_where_no_input_states_the_world(
    tmp_path: Path,
) -> None:
    # ranks 1 and 2 reached it; rank 3 or above may exist and be the straggler
    text = _reached("nodeC", 0, 1) + _reached("nodeC", 1, 2)
    assert not _unanswered_barrier_decides(tmp_path, text)


def test_a_candidate_that_failed_by_itself_is_the_culprit_of_the_unanswered_barrier(
    tmp_path: Path,
) -> None:
    # rank 3 never reached it and raised on its own; rank 0's log is lost
    text = _roster("nodeB", [2, 3], 4) + _reached("nodeB", 0, 2) + _reached("nodeC", 0, 1)
    raised = _raised(3, "AssertionError: batch size 0 at step 3", _IN_STEP, "[nodeB:1]:")
    text += "".join(f"{line}\n" for line in raised)
    ev = gather([parse_log(_log(tmp_path, "job.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, finding.undecidable) == ([3], False)
    assert finding.facts["decided_by"] == "monitored_barrier_unanswered"
    assert "of ranks 0,3, which never said they reached it, only rank 3 failed" in detail(finding)


def _fingerprint(me: int, other: int, mine: str, theirs: str) -> str:
    return (
        f"[rank{me}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {me} is "
        f"running collective: CollectiveFingerPrint(SequenceNumber=2, OpType={mine}), but Rank "
        f"{other} is running collective: CollectiveFingerPrint(SequenceNumber=2OpType={theirs})."
        f"Collectives differ in the following aspects: \t Op type: {mine}vs {theirs}\n"
    )


def test_the_rank_most_fingerprint_checks_name_is_the_culprit(tmp_path: Path) -> None:
    text = "".join(_fingerprint(r, 3, "ALLREDUCE", "BARRIER") for r in (0, 1, 2))
    text += _fingerprint(3, 0, "BARRIER", "ALLREDUCE")
    ev = gather([parse_log(_log(tmp_path, "job.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "type_mismatch",
        [3],
        False,
    )


def test_two_ranks_naming_each_other_are_undecidable(tmp_path: Path) -> None:
    text = _fingerprint(0, 1, "ALLREDUCE", "BARRIER") + _fingerprint(1, 0, "BARRIER", "ALLREDUCE")
    ev = gather([parse_log(_log(tmp_path, "job.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1], True)


def _three_ranks_checked(tmp_path: Path, text: str) -> Finding:
    """The finding of a 3-rank job's fingerprint reports `text` (each rank logs a step)."""
    text += "".join(f"[rank{r}]:step 3 done\n" for r in range(3))
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    return finding


def test_a_fingerprint_check_naming_rank_2_says_rank_1_agrees_with_its_writer(
    tmp_path: Path,
) -> None:
    """Rank 0 names rank 2 and rank 2 names rank 0 (rank 1's log lost). Each rank checks the
    others in rank order and raises at the first that differs: rank 0 found rank 1 like
    itself, so two of three ranks made one call, and rank 2 is the odd one."""
    text = _fingerprint(0, 2, "ALLREDUCE", "ALLGATHER") + _fingerprint(
        2, 0, "ALLGATHER", "ALLREDUCE"
    )
    finding = _three_ranks_checked(tmp_path, text)
    assert (finding.culprit_ranks, finding.undecidable, finding.facts["agree"]) == ([2], False, 2)
    assert "2 ranks, rank 0's side, made one call" in detail(finding)


def test_a_writer_above_the_rank_it_names_is_on_rank_0s_side(tmp_path: Path) -> None:
    """Rank 2 names rank 1, so rank 0 agrees with rank 2; rank 1 names rank 0: two of three
    made one call, and rank 1 is the odd one."""
    text = _fingerprint(2, 1, "ALLREDUCE", "BARRIER") + _fingerprint(1, 0, "BARRIER", "ALLREDUCE")
    finding = _three_ranks_checked(tmp_path, text)
    assert (finding.culprit_ranks, finding.undecidable) == ([1], False)


def test_fingerprint_checks_that_leave_rank_0s_side_no_majority_decide_nothing(
    tmp_path: Path,
) -> None:
    """Rank 0 names rank 1 and rank 1 names rank 0: rank 2's call is unknown, one against
    one."""
    text = _fingerprint(0, 1, "ALLREDUCE", "ALLGATHER") + _fingerprint(
        1, 0, "ALLGATHER", "ALLREDUCE"
    )
    finding = _three_ranks_checked(tmp_path, text)
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1], True)


def test_a_fingerprint_check_naming_a_rank_past_the_world_decides_nothing(
    tmp_path: Path,
) -> None:
    """Rank 0 names rank 7 in a world of three: a line from elsewhere, and nothing is
    inferred from the order the check runs in."""
    finding = _three_ranks_checked(tmp_path, _fingerprint(0, 7, "ALLREDUCE", "ALLGATHER"))
    assert "agree" not in finding.facts


def test_fingerprint_checks_against_the_check_order_decide_nothing(tmp_path: Path) -> None:
    """Rank 0 names rank 2 (so rank 1 agrees with it), yet rank 1 names rank 0: the reports
    contradict the order the check runs in, and nothing is inferred from it."""
    text = _fingerprint(0, 2, "ALLREDUCE", "ALLGATHER") + _fingerprint(
        1, 0, "ALLGATHER", "ALLREDUCE"
    )
    finding = _three_ranks_checked(tmp_path, text)
    assert finding.undecidable and "agree" not in finding.facts


# --- NCCL's groups ----------------------------------------------------------------------------


def test_a_member_between_two_contiguous_members_is_the_rank_between() -> None:
    assert member_global({4: 0, 6: 2}, 1) == 5


def test_a_member_of_evenly_spaced_members_is_as_far_as_its_group_rank_says() -> None:
    assert member_global({1: 0, 9: 1, 25: 3}, 2) == 17


def test_a_member_with_room_for_several_ranks_is_not_guessed() -> None:
    assert member_global({6: 3}, 0) is None
    assert member_range({6: 3}, 0, 7) == (0, 3)


def test_the_one_rank_below_the_only_member_shown_is_group_rank_zero() -> None:
    assert member_global({1: 1}, 0) == 0


def _two_pairs_stuck(clocked: bool) -> str:
    """Two tp pairs each wait whole in their all_reduce, and a pp peer waits for a member of
    each: equally waited on. Pair (2, 3) logs first, but pair (0, 1) began 30 s earlier
    (`ran for` is measured from when the work was enqueued). The other members of the pp
    groups never log a timeout there."""

    def lines(rank: int, grank: int, seq: int, op: str, uid: str, desc: str, at: str, ran: int):
        pg_id = 1 if desc == "mesh_tp" else 2
        clock = f"1127 {at}" if clocked else None
        return nccl_watchdog_lines(
            rank, seq, group_rank=grank, op=op, pg_id=pg_id, pg_uid=uid, pg_desc=desc,
            clock=clock, ran_ms=ran,
        )  # fmt: skip

    groups = [("2", "mesh_tp", (2, 3)), ("8", "mesh_tp", (0, 1))]
    groups += [("19", "mesh_pp", (0, 2)), ("20", "mesh_pp", (1, 3))]
    out = [  # ProcessGroupNCCL's constructor states each member's group rank and the size
        f"[rank{rank}]:[I1127 09:59:00.000000000 ProcessGroupNCCL.cpp:905] [PG ID "
        f"{1 if desc == 'mesh_tp' else 2} PG GUID {uid}({desc}) Rank {grank}] ProcessGroupNCCL "
        f"initialization options: size: 2, global rank: {rank}, TIMEOUT(ms): 600000"
        for uid, desc, members in groups
        for grank, rank in enumerate(members)
    ]
    out += [
        *lines(2, 0, 21, "ALLREDUCE", "2", "mesh_tp", "10:10:30.500000000", 600_000),
        *lines(3, 1, 21, "ALLREDUCE", "2", "mesh_tp", "10:10:31.000000000", 600_400),
        *lines(0, 0, 19, "ALLREDUCE", "8", "mesh_tp", "10:10:40.000000000", 640_000),
        *lines(1, 1, 19, "ALLREDUCE", "8", "mesh_tp", "10:10:41.000000000", 640_900),
        *lines(0, 0, 20, "RECV", "19", "mesh_pp", "10:10:50.000000000", 600_000),
        *lines(3, 1, 20, "RECV", "20", "mesh_pp", "10:10:55.000000000", 600_000),
    ]
    return "\n".join(out) + "\n"


def test_of_two_collectives_equally_waited_on_the_one_that_began_first_is_the_hang(
    tmp_path: Path,
) -> None:
    ev = gather([parse_log(_log(tmp_path, "job.log", _two_pairs_stuck(clocked=True)))], [])
    (finding,) = log_findings(ev)
    assert (finding.kind, finding.pg_name, finding.collective_seq_id) == (
        "stuck_collective",
        "8",
        19,
    )
    assert finding.culprit_ranks == [0, 1]
    assert "also_stuck" not in finding.facts


def test_without_clocks_two_collectives_equally_waited_on_are_both_named(tmp_path: Path) -> None:
    ev = gather([parse_log(_log(tmp_path, "job.log", _two_pairs_stuck(clocked=False)))], [])
    (finding,) = log_findings(ev)
    named = {(finding.pg_name, finding.collective_seq_id)} | {
        (a["pg"], a["seq"]) for a in finding.facts.get("also_stuck", [])
    }
    assert named == {("2", 21), ("8", 19)}
    assert finding.undecidable


def test_a_logs_speakers_are_listed_in_the_order_the_file_shows_them(tmp_path: Path) -> None:
    """The joining step files ranks in this order, and ties downstream keep it: a set's
    order would follow the interpreter's hash seed, and the verdict with it."""
    ranks = [11, 3, 7, 0, 9, 2, 14, 5, 1, 12, 8, 4]
    text = "".join(f"[node{r % 3}:{r}]:[rank{r}]: step 1 done\n" for r in ranks)
    log = parse_log(_log(tmp_path, "job.log", text))
    assert [s.rank for s in log.speakers] == ranks


def _timed_out(rank: int, uid: str, desc: str, grank: int, seq: int, began_s: int) -> list[str]:
    """A rank's watchdog lines for work of group `uid` that began `began_s` seconds after
    10:00:00 and ran 600 s."""
    pg_id = {"default_pg": 0, "mesh_tp": 1, "mesh_pp": 2, "mesh_dp": 3}[desc]
    clock = f"1127 10:{10 + began_s // 60:02d}:{began_s % 60:02d}.000000000"
    return nccl_watchdog_lines(
        rank, seq, group_rank=grank, pg_id=pg_id, pg_uid=uid, pg_desc=desc, clock=clock,
        ran_ms=600_000,
    )  # fmt: skip


def _init_line(rank: int, uid: str, desc: str, grank: int, size: int) -> str:
    """ProcessGroupNCCL's constructor line: the member's group rank and the group's size."""
    return (
        f"[rank{rank}]:[I1127 09:59:00.000000000 ProcessGroupNCCL.cpp:905] [PG ID 1 PG GUID "
        f"{uid}({desc}) Rank {grank}] ProcessGroupNCCL initialization options: size: {size}, "
        f"global rank: {rank}, TIMEOUT(ms): 600000"
    )


def _comm_line(rank: int, comm_rank: int, nranks: int, comm_id: str) -> str:
    """NCCL's `Init COMPLETE` line (src/init.cc) of the process of `rank`, pid 100 + rank."""
    return (
        f"[rank{rank}]:nodeA:{100 + rank}:{200 + rank} [{rank}] NCCL INFO ncclCommInitRankConfig "
        f"comm 0x55d0{rank:08x} rank {comm_rank} nranks {nranks} cudaDev {rank} nvmlDev {rank} "
        f"busId 1a000 commId 0x{comm_id} - Init COMPLETE"
    )


def _log_findings(tmp_path: Path, lines: list[str]) -> list[Finding]:
    return log_findings(gather([parse_log(_log(tmp_path, "nodeA.log", "\n".join(lines)))], []))


def test_nccls_communicators_name_the_member_no_watchdog_line_shows(tmp_path: Path) -> None:
    """8 ranks in tp pairs; only rank 2 times out, as group rank 0 of its pair: the
    communicator it shares with rank 3 (one commId) says who its pair is."""
    lines = [_comm_line(r, r, 8, "aaaa") for r in range(8)]
    lines += [_comm_line(r, r % 2, 2, f"b{r // 2}") for r in range(8)]
    lines += _timed_out(2, "5", "mesh_tp", 0, 9, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "missing_ranks",
        [3],
        False,
    )


def test_a_group_where_a_collective_timed_out_has_another_member(tmp_path: Path) -> None:
    """Rank 0 alone logs a timeout, as group rank 0: it waited for somebody (a group of one
    waits for nobody), so it is not stuck alone inside the collective."""
    lines = [*_timed_out(0, "9", "mesh_dp", 0, 4, 0), "[rank1]:step 3 done"]
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks) == ("missing_ranks", [1])


def test_a_whole_group_whose_member_was_already_waiting_elsewhere_is_not_where_it_stopped(
    tmp_path: Path,
) -> None:
    """tp pairs (0,1), (2,3), pp pairs (0,2), (1,3). Rank 2 stopped. Rank 0 waited for it in
    pp from 10:00:00, then with rank 1 in their tp all_reduce from 10:00:10: that pair is
    whole there, but rank 0 was stuck before it began."""
    lines = [_init_line(r, uid, desc, g, 2) for r, uid, desc, g in _FOUR_RANKS]
    lines += _timed_out(0, "7", "mesh_pp", 0, 4, 0)
    lines += _timed_out(3, "8", "mesh_pp", 1, 4, 3)
    lines += _timed_out(3, "6", "mesh_tp", 1, 9, 5)
    lines += _timed_out(0, "5", "mesh_tp", 0, 9, 10)
    lines += _timed_out(1, "5", "mesh_tp", 1, 9, 11)
    kept = [ln for ln in lines if "[rank2]" not in ln or "initialization options" in ln]
    found = _log_findings(tmp_path, kept)
    assert found[0].culprit_ranks == [2]


def test_one_processs_own_lines_order_its_works_begun_within_a_second(tmp_path: Path) -> None:
    """As above, but rank 0's two works began 0.3 s apart, in one wall second. c10's header
    states the second and CLOCK_MONOTONIC's fraction (.95, then .20): by those the tp work
    began first. Rank 0's own lines say otherwise: its pp timeout was written first and its
    work had run longer, so the pp work began first and rank 0 was stuck there."""
    lines = [_init_line(r, uid, desc, g, 2) for r, uid, desc, g in _FOUR_RANKS]
    pp_first = ("1127 10:10:00.950000000", 600_400)
    tp_next = ("1127 10:10:00.200000000", 600_100)
    lines += nccl_watchdog_lines(
        0, 4, group_rank=0, pg_id=2, pg_uid="7", pg_desc="mesh_pp", clock=pp_first[0],
        ran_ms=pp_first[1],
    )  # fmt: skip
    lines += _timed_out(3, "8", "mesh_pp", 1, 4, 3)
    lines += _timed_out(3, "6", "mesh_tp", 1, 9, 5)
    lines += nccl_watchdog_lines(
        0, 9, group_rank=0, pg_id=1, pg_uid="5", pg_desc="mesh_tp", clock=tp_next[0],
        ran_ms=tp_next[1],
    )  # fmt: skip
    lines += _timed_out(1, "5", "mesh_tp", 1, 9, 0)
    found = _log_findings(tmp_path, lines)
    assert (found[0].kind, found[0].culprit_ranks) == ("missing_ranks", [2])


def test_a_c10_headers_clock_is_its_whole_second() -> None:
    """c10/util/Logging.cpp writes the wall clock's second and CLOCK_MONOTONIC's nanoseconds."""
    line = "[rank0]:[E1106 15:05:25.878581962 ProcessGroupNCCL.cpp:757] [Rank 0] x"
    assert peel(line, labelled=False).clock == clock_seconds("1106 15:05:25")


_FOUR_RANKS = [  # (rank, group, description, group rank) of 2x2 tp and pp pairs
    (0, "5", "mesh_tp", 0), (1, "5", "mesh_tp", 1), (2, "6", "mesh_tp", 0), (3, "6", "mesh_tp", 1),
    (0, "7", "mesh_pp", 0), (2, "7", "mesh_pp", 1), (1, "8", "mesh_pp", 0), (3, "8", "mesh_pp", 1),
]  # fmt: skip


def test_a_mesh_dimensions_siblings_give_its_spacing_to_a_group_showing_one_member(
    tmp_path: Path,
) -> None:
    """tp pairs of 8 ranks: the pair (6, 7) shows its spacing; rank 5 alone times out, as
    group rank 1 of its pair: group rank 0 is rank 4 (a mesh dimension's groups are evenly
    spaced alike)."""
    lines = [_init_line(6, "4", "mesh_tp", 0, 2), _init_line(7, "4", "mesh_tp", 1, 2)]
    lines += [f"[rank{r}]:step 3 done" for r in range(8)]
    lines += _timed_out(5, "3", "mesh_tp", 1, 9, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.culprit_ranks, finding.undecidable) == ([4], False)


def test_a_mesh_dimensions_size_is_the_one_its_step_and_the_world_leave(tmp_path: Path) -> None:
    """8 ranks; dp groups spaced by 2. Ranks 1, 3, 5 time out as group ranks 0-2, rank 7 is
    silent: a slice of 3 spaced by 2 does not tile 8 ranks, one of 4 does, so rank 7 is the
    fourth member, not a whole group of three waiting inside."""
    lines = [f"[rank{r}]:step 3 done" for r in range(8)]
    for grank, rank in enumerate((1, 3, 5)):
        lines += _timed_out(rank, "10", "mesh_dp", grank, 4, grank)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks) == ("missing_ranks", [7])


def test_a_mesh_dimensions_slice_begins_at_its_first_coordinate(tmp_path: Path) -> None:
    """48 ranks; ranks 12-18 time out as group ranks 0-6 of a dp group spaced by 1, ranks
    19-23 are silent. Slices of 8 from rank 12 would fit in the world, but a mesh's slice
    begins where the dimension's coordinate is 0: 12 is a multiple of 12 alone (of 8, 12, 16
    and 24), so the group has 12 members and all five silent ranks are missing from it."""
    lines = [f"[rank{r}]:step 3 done" for r in range(48)]
    for grank, rank in enumerate(range(12, 19)):
        lines += _timed_out(rank, "10", "mesh_dp", grank, 4, grank)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.not_issued_by) == ("missing_ranks", [19, 20, 21, 22, 23])


def test_a_mesh_dimensions_size_the_world_leaves_open_is_at_least_the_least_it_can_be(
    tmp_path: Path,
) -> None:
    """32 ranks; ranks 16-21 time out as group ranks 0-5 of a dp group spaced by 1, ranks
    22 and 23 are silent. Its size is 8 or 16 (either tiles the world): either way ranks 22
    and 23 are members, and neither joined."""
    lines = [f"[rank{r}]:step 3 done" for r in range(32)]
    for grank, rank in enumerate(range(16, 22)):
        lines += _timed_out(rank, "10", "mesh_dp", grank, 4, grank)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.not_issued_by) == ("missing_ranks", [22, 23])


def test_a_size_the_groups_state_wins_over_the_mesh_inference(tmp_path: Path) -> None:
    """16 ranks; a hand-built dp group of 3 spaced by 4 states its size: its members all
    waiting is the whole group, not a fourth member (rank 13) missing."""
    lines = [f"[rank{r}]:step 3 done" for r in range(16)]
    lines += [_init_line(r, "10", "mesh_dp", g, 3) for g, r in enumerate((1, 5, 9))]
    for grank, rank in enumerate((1, 5, 9)):
        lines += _timed_out(rank, "10", "mesh_dp", grank, 4, grank)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks) == ("stuck_collective", [1, 5, 9])


def _timed_at(
    rank: int, uid: str, desc: str, grank: int, seq: int, began: float, ran_ms: int = 600_000
) -> list[str]:
    """As `_timed_out`, the line written `began` seconds (fractions allowed) after 10:10:00,
    for work that ran `ran_ms`."""
    pg_id = {"mesh_tp": 1, "mesh_pp": 2, "mesh_dp": 3}[desc]
    whole, frac = divmod(began, 1)
    clock = f"1127 10:10:{int(whole):02d}.{round(frac * 1e9):09d}"
    return nccl_watchdog_lines(
        rank, seq, group_rank=grank, pg_id=pg_id, pg_uid=uid, pg_desc=desc, clock=clock,
        ran_ms=ran_ms,
    )  # fmt: skip


def test_a_pipeline_stages_own_order_holds_for_a_member_whose_clock_cannot_tell(
    tmp_path: Path,
) -> None:
    """16 ranks, tp 4 x dp 2 x pp 2; rank 5 never joins its tp all_reduce. Stage 0's tp
    peers 6 and 7 began it 2 s before their send to stage 1; stage 1 receives before its
    own tp all_reduce (each stage: recv, forward, send). Rank 4's two works began too close
    for its clock, and it waits in its send with its receiver 12: a whole pair, but rank 4
    is held in the all_reduce its stage began first. Rank 5 is the culprit, not the pair."""
    lines = []
    for r in range(16):
        pp, dp, tp = r // 8, (r // 4) % 2, r % 4
        lines.append(_init_line(r, f"t{r // 4}", "mesh_tp", tp, 4))
        lines.append(_init_line(r, f"d{pp}{tp}", "mesh_dp", dp, 2))
        lines.append(_init_line(r, f"p{r % 8}", "mesh_pp", pp, 2))
    for r in (6, 7):
        lines += _timed_at(r, "t1", "mesh_tp", r % 4, 5, 1) + _timed_at(
            r, f"p{r}", "mesh_pp", 0, 3, 3
        )
    # 1.01 s apart by the lines, or 0.01 s: less the 50 ms longer run, either order
    lines += _timed_at(4, "t1", "mesh_tp", 0, 5, 1.3)
    lines += _timed_at(4, "p4", "mesh_pp", 0, 3, 2.31, 600_050)
    for r in (12, 13, 14, 15):
        lines += _timed_at(r, f"p{r % 8}", "mesh_pp", 1, 3, 2)
        lines += _timed_at(r, "t3", "mesh_tp", r % 4, 5, 4)
    for r in (0, 1, 2, 3, 8, 9, 10, 11):  # their dp peers wait for the stuck ranks
        lines += _timed_at(r, f"d{r // 8}{r % 4}", "mesh_dp", 0, 5, 6)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks, finding.pg_name) == ("missing_ranks", [5], "t1")


def test_a_whole_group_whose_wait_began_before_every_other_is_where_the_job_stopped(
    tmp_path: Path,
) -> None:
    """tp pair (2, 3) waits whole in its all_reduce from 10:00:00; ranks 0 and 1 wait later
    in pp sends to them, then in their own tp all_reduce: the hang began inside the first."""
    lines = [_init_line(r, uid, desc, g, 2) for r, uid, desc, g in _FOUR_RANKS if desc == "mesh_tp"]
    lines += _timed_out(2, "6", "mesh_tp", 0, 17, 0) + _timed_out(3, "6", "mesh_tp", 1, 17, 0)
    lines += _timed_out(0, "7", "mesh_pp", 0, 10, 9) + _timed_out(1, "8", "mesh_pp", 0, 10, 9)
    lines += _timed_out(0, "5", "mesh_tp", 0, 21, 12) + _timed_out(1, "5", "mesh_tp", 1, 21, 12)
    _assert_stuck_in_tp_pair_2_3(tmp_path, lines)


def test_a_whole_group_waited_on_is_not_the_stop_where_an_absentee_failed_by_itself(
    tmp_path: Path,
) -> None:
    """As above, with a third tp pair (4, 5): rank 5 waits in it for rank 4, which raised an
    exception of its own. That failure, not the pair waiting inside its all_reduce, is the
    cause."""
    lines = [_init_line(r, uid, desc, g, 2) for r, uid, desc, g in _FOUR_RANKS if desc == "mesh_tp"]
    lines += [_init_line(4, "9", "mesh_tp", 0, 2), _init_line(5, "9", "mesh_tp", 1, 2)]
    lines += _timed_out(2, "6", "mesh_tp", 0, 17, 0) + _timed_out(3, "6", "mesh_tp", 1, 17, 0)
    lines += _timed_out(0, "7", "mesh_pp", 0, 10, 9) + _timed_out(1, "8", "mesh_pp", 0, 10, 9)
    lines += _timed_out(5, "9", "mesh_tp", 1, 17, 5)
    lines += _raised(4, "KeyError: 'labels'")
    found = _log_findings(tmp_path, lines)
    assert (found[0].kind, found[0].culprit_ranks) == ("missing_ranks", [4])


def _assert_stuck_in_tp_pair_2_3(tmp_path: Path, lines: list[str]) -> None:
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.culprit_ranks) == (
        "stuck_collective",
        "6",
        [2, 3],
    )


def test_a_whole_group_is_where_the_job_stopped_when_no_wait_began_surely_before_it(
    tmp_path: Path,
) -> None:
    """tp pair (2, 3) waits whole in its all_reduce from 10:00:00; ranks 0 and 1 began their
    pp sends to them within that second (c10's clocks cannot order them), 2 and 3 the
    matching receives 12 s later, 0 and 1 their own tp all_reduce later still. No wait
    surely began before the pair's: the hang began inside it."""
    lines = [_init_line(r, uid, desc, g, 2) for r, uid, desc, g in _FOUR_RANKS]
    lines += _timed_out(2, "6", "mesh_tp", 0, 17, 0) + _timed_out(3, "6", "mesh_tp", 1, 17, 0)
    for rank, uid, frac in ((0, "7", "5"), (1, "8", "6")):
        lines += nccl_watchdog_lines(
            rank, 10, group_rank=0, pg_id=2, pg_uid=uid, pg_desc="mesh_pp",
            clock=f"1127 10:10:00.{frac}00000000", ran_ms=600_000,
        )  # fmt: skip
    lines += _timed_out(2, "7", "mesh_pp", 1, 10, 12) + _timed_out(3, "8", "mesh_pp", 1, 10, 12)
    lines += _timed_out(0, "5", "mesh_tp", 0, 21, 20) + _timed_out(1, "5", "mesh_tp", 1, 21, 20)
    _assert_stuck_in_tp_pair_2_3(tmp_path, lines)


def test_a_whole_group_is_where_the_job_stopped_though_a_later_ones_first_member_began_before(
    tmp_path: Path,
) -> None:
    """tp pair (0, 1) waits whole in its all_reduce from 10:00:05, then in pp sends to ranks
    2 and 3 from 10:00:10. Ranks 2 and 3 began those pp receives at 10:00:00, before
    anything else, then their own tp all_reduce. The pp pairs could not stop the job before
    their senders came (10 s): the hang began inside the tp pair (0, 1)."""
    lines = [_init_line(r, uid, desc, g, 2) for r, uid, desc, g in _FOUR_RANKS]
    lines += _timed_out(0, "5", "mesh_tp", 0, 17, 5) + _timed_out(1, "5", "mesh_tp", 1, 17, 5)
    lines += _timed_out(0, "7", "mesh_pp", 0, 10, 10) + _timed_out(1, "8", "mesh_pp", 0, 10, 10)
    lines += _timed_out(2, "7", "mesh_pp", 1, 10, 0) + _timed_out(3, "8", "mesh_pp", 1, 10, 0)
    lines += _timed_out(2, "6", "mesh_tp", 0, 21, 20) + _timed_out(3, "6", "mesh_tp", 1, 21, 20)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.culprit_ranks) == (
        "stuck_collective",
        "5",
        [0, 1],
    )


def test_a_group_of_unknown_size_may_have_members_above_the_highest_shown(
    tmp_path: Path,
) -> None:
    """Eight ranks; rank 5 alone logs, a timeout in its tp group as group rank 1. Neither
    the group's size nor its spacing is known: the member it waits for may be any silent
    rank, below it (group rank 0) or above it (group ranks 2 and up)."""
    lines = [f"[rank{r}]:step 3 done" for r in range(8)]
    lines += _timed_out(5, "9", "mesh_tp", 1, 4, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert finding.undecidable
    assert {0, 1, 2, 3, 4, 6, 7} <= set(finding.culprit_ranks)


def test_a_group_of_stated_size_has_no_members_above_its_size(tmp_path: Path) -> None:
    """As above, but rank 5's tp group states its size, two: its other member is below it."""
    lines = [f"[rank{r}]:step 3 done" for r in range(8)]
    lines += [_init_line(5, "9", "mesh_tp", 1, 2), *_timed_out(5, "9", "mesh_tp", 1, 4, 0)]
    (finding,) = _log_findings(tmp_path, lines)
    assert finding.undecidable
    assert {0, 1, 2, 3, 4} <= set(finding.culprit_ranks) <= {0, 1, 2, 3, 4, 5}


def test_a_rank_above_waiting_in_another_group_is_no_unseen_member(tmp_path: Path) -> None:
    """Twelve ranks; rank 5 logs a timeout in its tp group, as group rank 1, of a size no
    line states; rank 7 one in its dp group. The member rank 5 waits for may be any silent
    rank, below it or above it; not 7, which waits elsewhere."""
    lines = [f"[rank{r}]:step 3 done" for r in range(12)]
    lines += _timed_out(5, "9", "mesh_tp", 1, 4, 0) + _timed_out(7, "30", "mesh_dp", 1, 2, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert {6, 8, 9, 10, 11} <= set(finding.culprit_ranks) and 7 not in finding.culprit_ranks


def test_a_whole_group_whose_members_the_mesh_layout_puts_in_waiting_groups_is_waited_on(
    tmp_path: Path,
) -> None:
    """Eight ranks, tp pairs and dp groups of four (0, 2, 4, 6 and 1, 3, 5, 7). Ranks 0-5
    wait in their dp all_reduce from 10:00:10; tp pair (6, 7) waits whole in its all_reduce
    from 10:00:30, and never logs a dp line. The dp groups' spacing and the world put 6 and 7
    in them: the dp groups wait for the pair, where the hang is, though their waits began
    first."""
    lines = _timed_out(6, "13", "mesh_tp", 0, 4, 30) + _timed_out(7, "13", "mesh_tp", 1, 4, 30)
    for rank in range(6):
        lines += _timed_out(rank, f"2{rank % 2}", "mesh_dp", rank // 2, 3, 10)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.culprit_ranks) == (
        "stuck_collective",
        "13",
        [6, 7],
    )


def test_silent_ranks_dp_peers_waiting_for_them_do_not_single_them_out(tmp_path: Path) -> None:
    """16 ranks: tp groups 0-7 and 8-15, dp pairs (r, r + 8). Ranks 0, 2, 4, 6, 7 wait in
    their tp all_reduce; 1, 3, 5 are silent. Their dp peers wait for them in the dp
    collective, as 8, 10, 12, 14, 15 wait for ranks held in the tp one; 11 logged nothing.
    So the dp call comes after the tp one, and a silent rank's dp peer waiting for it says
    nothing more than that it was not yet past the tp call: 1, 3 and 5 stay alike."""
    lines = [f"[rank{r}]:step 3 done" for r in range(16)]
    for rank in (0, 2, 4, 6, 7):
        lines += _timed_out(rank, "1", "mesh_tp", rank, 12, rank)
    for rank in (8, 9, 10, 12, 13, 14, 15):
        lines += _timed_out(rank, str(20 + rank % 8), "mesh_dp", 1, 5, rank)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.not_issued_by, finding.undecidable) == (
        "missing_ranks",
        "1",
        [1, 3, 5],
        True,
    )


def test_silent_ranks_missing_from_several_dp_pairs_are_held_in_their_tp_call(
    tmp_path: Path,
) -> None:
    """16 ranks: tp groups 0-7 and 8-15, dp pairs (r, r + 8). Rank 6 alone waits in its tp
    all_reduce; 0-5 and 7 are silent. Ranks 8-11 wait in their dp collective for 0-3, which
    are therefore each absent from two calls. One culprit keeps 0-3 out of the dp call only
    by holding them in the tp call (had it come after, they would have passed it without
    the culprit): the tp call is where the job stopped, and any of its silent members may be
    the one that never came (here rank 7, missing from no dp pair)."""
    lines = [_init_line(r, str(1 + r // 8), "mesh_tp", r % 8, 8) for r in range(16)]
    lines += _timed_out(6, "1", "mesh_tp", 6, 9, 0)
    for rank in (8, 9, 10, 11):
        lines += _timed_out(rank, str(20 + rank % 8), "mesh_dp", 1, 5, 34)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.not_issued_by, finding.undecidable) == (
        "missing_ranks",
        "1",
        [0, 1, 2, 3, 4, 5, 7],
        True,
    )


def test_one_silent_rank_missing_from_two_calls_is_named_alone(tmp_path: Path) -> None:
    """8 ranks: tp group 0-3, dp pairs (r, r + 4). Ranks 0 and 1 wait in the tp all_reduce,
    2 and 3 are silent; rank 7 waits in its dp collective for 3. One absentee is no reason
    to put the dp call after the tp one (3 may have stopped before both): rank 3, absent
    from both, explains the most and is named alone."""
    lines = [_init_line(r, str(1 + r // 4), "mesh_tp", r % 4, 4) for r in range(8)]
    lines += [_init_line(r, str(20 + r % 4), "mesh_dp", r // 4, 2) for r in range(8)]
    lines += _timed_out(0, "1", "mesh_tp", 0, 9, 0) + _timed_out(1, "1", "mesh_tp", 1, 9, 0)
    lines += _timed_out(7, "23", "mesh_dp", 1, 5, 3)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.culprit_ranks, finding.undecidable) == ([3], False)


def test_the_silent_absentees_are_named_in_the_call_that_holds_the_others(
    tmp_path: Path,
) -> None:
    """16 ranks, dp groups of the evens and of the odds. Ranks 0, 4, 10, 14 wait in the evens'
    dp collective, 2, 6, 8, 12 are silent; the odd ranks passed theirs and wait in the
    default group's collective. The dp call comes first (0 waits there, absent from the
    default group's), so it is where 2, 6, 8, 12 are missing, or where all eight wait inside:
    its members are named, not the default group's waiters."""
    lines = [_init_line(r, str(33 + r % 2), "mesh_dp", r // 2, 8) for r in range(16)]
    for rank in (0, 4, 10, 14):
        lines += _timed_out(rank, "33", "mesh_dp", rank // 2, 3, 0)
    for rank in range(1, 16, 2):
        lines += _timed_out(rank, "0", "default_pg", rank, 2, 5)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.pg_name, finding.culprit_ranks, finding.undecidable) == (
        "33",
        list(range(0, 16, 2)),
        True,
    )


def test_a_call_a_rank_began_after_its_pp_wait_does_not_blame_its_silent_members(
    tmp_path: Path,
) -> None:
    """8 ranks: tp groups 0-3 and 4-7, pp pairs (r, r + 4). Rank 5 began its pp receive
    from rank 1 at 10:10:00 and its tp all_reduce 5 s later; rank 7 waits in that all_reduce
    too, and 4 and 6 are silent. The pp call comes first in the program, so 4 and 6 may be
    held in theirs, torn down before they logged; rank 1, missing from its pair, is the one
    the logs blame."""
    lines = [f"[rank{r}]:step 3 done" for r in range(8)]
    lines += [_init_line(1, "4", "mesh_pp", 0, 2), _init_line(5, "4", "mesh_pp", 1, 2)]
    lines += _timed_out(5, "4", "mesh_pp", 1, 19, 0)
    lines += _timed_out(5, "2", "mesh_tp", 1, 37, 5) + _timed_out(7, "2", "mesh_tp", 3, 37, 2)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.culprit_ranks, finding.undecidable) == (
        "missing_ranks",
        "4",
        [1],
        False,
    )


def test_where_only_later_calls_show_silent_absentees_they_are_named_undecidable(
    tmp_path: Path,
) -> None:
    """16 ranks: dp groups 0-7 and 8-15. Rank 0 waits in a pp receive whose peer no line
    names, and is missing from its dp collective, so the pp call comes first. The dp groups
    wait for silent ranks 2, 3, 5, 6 and 8, 11, 14: the pp call names nobody, so the silent
    ranks of the dp group most ranks wait in are named, undecidable, not as all missing."""
    lines = [f"[rank{r}]:step 3 done" for r in range(16)]
    lines += _timed_out(0, "30", "mesh_pp", 0, 7, 0)
    for rank in (1, 4, 7):
        lines += _timed_out(rank, "1", "mesh_dp", rank, 3, 5)
    for rank in (9, 10, 12, 13, 15):
        lines += _timed_out(rank, "2", "mesh_dp", rank - 8, 3, 5)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.not_issued_by, finding.undecidable) == (
        "missing_ranks",
        [8, 11, 14],
        True,
    )


def _dp_pairs_and_a_barrier(first_to_barrier: list[int], ranks: int = 8) -> list[str]:
    """`ranks` ranks in dp pairs (r, r + ranks/2), every one pending in its pair's collective
    (seq 3) and in the default group's (seq 2): those in `first_to_barrier` began the default
    group's first (at 0 s, the dp one at 2 s), the others the dp one first (1 s, then 3 s)."""
    half = ranks // 2
    lines = [_init_line(r, str(10 + r % half), "mesh_dp", r // half, 2) for r in range(ranks)]
    for r in range(ranks):
        early = r in first_to_barrier
        lines += _timed_out(r, "0", "default_pg", r, 2, 0 if early else 3)
        lines += _timed_out(r, str(10 + r % half), "mesh_dp", r // half, 3, 2 if early else 1)
    return lines


@pytest.mark.parametrize(
    ("enqueued", "kind", "culprits"),
    [(5, "stuck_collective", [0, 1, 2, 3]), (4, "missing_ranks", [3])],
)
def test_a_silent_ranks_monitor_status_says_whether_it_joined_the_collective(
    tmp_path: Path, enqueued: int, kind: str, culprits: list[int]
) -> None:
    """Ranks 0-2 time out in the default group's collective 5; rank 3's watchdog did not
    fire, but its heartbeat monitor logged the group's last enqueued and completed work with
    the dump signal: enqueued 5 (and 4 completed), it waits inside with the others; enqueued
    4, it never called it."""
    lines = [_init_line(r, "0", "default_pg", r, 4) for r in range(4)]
    for rank in range(3):
        lines += _timed_out(rank, "0", "default_pg", rank, 5, rank)
    lines.append(nccl_dump_signal_line(3, enqueued, 4))
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks) == (kind, culprits)


def test_the_rank_that_called_the_default_groups_collective_first_breaks_the_order(
    tmp_path: Path,
) -> None:
    (finding,) = _log_findings(tmp_path, _dp_pairs_and_a_barrier([1]))
    assert (finding.kind, finding.reason, finding.culprit_ranks, finding.pg_name) == (
        "order_cycle",
        "order_differs",
        [1],
        "0",
    )


def test_two_ranks_each_waiting_for_the_other_across_groups_are_both_named(
    tmp_path: Path,
) -> None:
    """8 ranks in dp pairs (r, r + 4). Rank 6 began the default group's all_reduce, then 4 s
    later its dp collective; its dp peer 2 waits in that dp collective and never called the
    default group's. Ranks 0, 1, 3, 4, 7 wait in the default group's alone (they may have
    passed their dp one or not called it yet), and rank 5 logged nothing. Each of 2 and 6
    waits for the other, which 5's silence does not explain; one rank's order against one
    other's cannot say whose is the program's: both are named, undecidable."""
    (finding,) = _log_findings(tmp_path, _dp_pair_crossed())
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "order_cycle",
        [2, 6],
        True,
    )
    assert "too few ranks show either order" in detail(finding)


@pytest.mark.parametrize(
    ("world", "rank", "grank", "could"),
    [(8, 0, 0, [1, 2, 4]), (16, 9, 1, [1, 8])],
)
def test_a_mesh_member_no_line_shows_is_one_of_the_ranks_the_layout_leaves(
    tmp_path: Path, world: int, rank: int, grank: int, could: list[int]
) -> None:
    """A rank waits in its dp collective, in a pair whose other member no line shows, and
    never called the default group's collective (its monitor: enqueued 2); every other rank
    waits in that default one. Along a DeviceMesh dimension of size 2 the pair's other
    member is a rank the layout leaves: in a world of 8, rank 0's partner is 1, 2 or 4
    (steps 1, 2, 4); in a world of 16, rank 9 at group rank 1 is at (9 // step) % 2 == 1,
    so step 1 or 8, and its partner 8 or 1. They are named, undecidable, rather than
    nobody."""
    lines = [_init_line(r, "0", "default_pg", r, world) for r in range(world)]
    lines += _timed_out(rank, "5", "mesh_dp", grank, 11, 0)
    lines.append(nccl_dump_signal_line(rank, 2, 2))
    for other in range(world):
        if other != rank:
            lines += _timed_out(other, "0", "default_pg", other, 3, 4)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.pg_name, finding.culprit_ranks, finding.undecidable) == ("5", could, True)
    assert "could be it" in detail(finding)


def test_a_crossed_pair_yields_to_a_silent_rank_that_failed_by_itself(tmp_path: Path) -> None:
    """As above, but rank 5 raised an exception of its own: its failure explains the
    default group's wait, and an order two ranks show may be harmless (hooks on another
    thread): rank 5 is named."""
    found = _log_findings(tmp_path, _dp_pair_crossed() + _raised(5, "KeyError: 'labels'"))
    assert (found[0].kind, found[0].culprit_ranks) == ("missing_ranks", [5])


def _dp_pair_crossed() -> list[str]:
    """8 ranks in dp pairs (r, r + 4): rank 6 began the default group's all_reduce (3 s),
    then its dp collective (7 s); its dp peer 2 waits in that dp collective (from 0 s) and
    never called the default group's; 0, 1, 3, 4, 7 wait in the default group's; 5 is
    silent."""
    lines = [_init_line(r, str(10 + r % 4), "mesh_dp", r // 4, 2) for r in range(8)]
    for rank in (0, 1, 3, 4, 6, 7):
        lines += _timed_out(rank, "0", "default_pg", rank, 2, 3)
    return lines + _timed_out(6, "12", "mesh_dp", 1, 3, 7) + _timed_out(2, "12", "mesh_dp", 0, 3, 0)


def test_a_silent_absentee_is_the_culprit_before_any_order_that_differs(tmp_path: Path) -> None:
    """Rank 7 logs only its groups' init lines while its dp pair waits for it: that explains
    the hang, and a rank whose calls reached NCCL in another order (backward hooks run on
    another thread) is not blamed for it."""
    lines = [
        line
        for line in _dp_pairs_and_a_barrier([1])
        if "[rank7]" not in line or "initialization options" in line
    ]
    found = _log_findings(tmp_path, lines)
    assert (found[0].kind, found[0].culprit_ranks) == ("missing_ranks", [7])


def _rank7_silent_in_the_default_group_alone() -> list[str]:
    """`_dp_pairs_and_a_barrier([1])` where dp pair (3, 7) finished its collective and rank 7
    logged nothing; the default group's size (8) is stated."""
    lines = [line for line in _dp_pairs_and_a_barrier([1]) if "[rank7]" not in line]
    lines = [line for line in lines if not ("[rank3]" in line and "mesh_dp" in line)]
    lines = [line for line in lines if "GUID 13(mesh_dp)" not in line]
    return lines + [_init_line(r, "0", "default_pg", r, 8) for r in range(7)]


def test_a_silent_rank_missing_from_the_default_collective_alone_does_not_hide_the_order(
    tmp_path: Path,
) -> None:
    """Rank 1 called the default group's collective first, ranks 0, 2, 4, 5 and 6 their dp
    pair's; ranks 3 and 7 finished theirs and wait in the default group's only, where rank
    7, ended before its watchdog fired, logged nothing. The order holds every rank in the
    default collective: rank 7's silence there explains nothing more."""
    found = _log_findings(tmp_path, _rank7_silent_in_the_default_group_alone())
    assert (found[0].kind, found[0].culprit_ranks) == ("order_cycle", [1])


def test_a_rank_missing_from_the_default_collective_that_failed_by_itself_is_the_culprit(
    tmp_path: Path,
) -> None:
    """As above, but rank 7 raised an exception of its own: that explains the default
    collective's hang, whatever order rank 1 called it in."""
    lines = _rank7_silent_in_the_default_group_alone()
    lines += _raised(7, "KeyError: 'labels'")
    found = _log_findings(tmp_path, lines)
    assert (found[0].kind, found[0].culprit_ranks) == ("missing_ranks", [7])


def test_an_order_most_ranks_do_not_outnumber_three_to_one_blames_nobody_for_it(
    tmp_path: Path,
) -> None:
    """Three of eight ranks in the other order: the rest is no clear majority."""
    found = _log_findings(tmp_path, _dp_pairs_and_a_barrier([1, 5, 6]))
    assert all(f.kind != "order_cycle" for f in found)


def test_one_ranks_fingerprint_report_alone_decides_nothing(tmp_path: Path) -> None:
    text = _fingerprint(3, 0, "BARRIER", "ALLREDUCE")
    ev = gather([parse_log(_log(tmp_path, "job.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 3], True)


def test_a_short_role_is_the_one_host_whose_digits_it_is(tmp_path: Path) -> None:
    """`--role 17:` lines in a job-wide file, and py-spy output collected as
    `pyspy_node17.txt`: the same node, so the job's own `pid` line ties the stack."""
    log = _log(
        tmp_path,
        "job.out",
        "[17:0]:[rank0]: rank 0 pid 4242 starting\n[18:0]:[rank1]: rank 1 pid 4343 starting\n",
    )
    spy = _log(
        tmp_path,
        "pyspy_node17.txt",
        "Process 4242: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 4242 (idle): "MainThread"\n    read_shard (train.py:66)\n',
    )
    from frtrace.evidence.pyspy import parse_pyspy

    ev = gather([parse_log(log)], [parse_pyspy(spy)])
    assert ev.ranks[0].host == "node17"
    assert ev.ranks[0].stack is not None and ev.ranks[0].stack.pid == 4242


def test_a_job_wide_file_keeps_each_agents_summary_on_its_own_host(tmp_path: Path) -> None:
    """Every node's agent writing into one file without labels or roles: each summary entry
    is on the host it names, not every rank on one node."""
    entry = (
        "[0]:\n  host      : {host}\n  rank      : {rank} (local_rank: 0)\n"
        "  exitcode  : -15 (pid: {pid})  (SIGTERM)\n"
        "------------------------------------------------------------\n"
    )
    text = "".join(
        "Failures:\n" + entry.format(host=h, rank=r, pid=100 + r)
        for h, r in (("gpu041", 0), ("gpu042", 1))
    )
    ev = gather([parse_log(_log(tmp_path, "slurm-1.out", text))], [])
    assert (ev.ranks[0].host, ev.ranks[1].host) == ("gpu041", "gpu042")


def test_a_node_is_named_by_its_most_qualified_spelling(tmp_path: Path) -> None:
    """NCCL's lines give the short hostname, torchelastic's summary socket.getfqdn()."""
    nccl = [_comm_line(r, r, 2, "aaaa").replace("nodeA", "gpu-st-162") for r in range(2)]
    summary = (
        "Root Cause (first observed failure):\n[0]:\n  host      : gpu-st-162.cluster.internal\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -6 (pid: 101)  (SIGABRT)\n"
        "------------------------------------------------------------\n"
    )
    text = "\n".join(nccl * 3) + "\n" + summary
    ev = gather([parse_log(_log(tmp_path, "slurm-1.out", text))], [])
    assert ev.ranks[1].host == "gpu-st-162.cluster.internal"


def test_a_bare_number_for_a_role_names_no_host(tmp_path: Path) -> None:
    """`--role $SLURM_NODEID:` gives `[0:1]:`: node 0 of the allocation, not a host to ssh to."""
    text = "[0:1]:[rank1]: step 3 done\n[1:0]:[rank2]: step 3 done\n"
    ev = gather([parse_log(_log(tmp_path, "slurm-1.out", text))], [])
    assert (ev.ranks[1].host, ev.ranks[2].host) == ("", "")


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("[nodeB:1]:", "nodeB"),  # --role nodeB:
        ("[compute-4-48:-1]:", "compute-4-48"),  # --role compute-4-48: + [${role_name}-${rank}]
        ("[compute-4-48-1]:", "compute-4-48"),  # --role compute-4-48 + [${role_name}-${rank}]
        ("[default-1]:", ""),  # torchrun's default role, templated
        ("[default1]:", ""),
        ("[nodeB1]:", ""),  # no separator: node1 + rank B? nothing is told
        ("[1]:", ""),  # `[${rank}]:`: no role at all
    ],
)
def test_a_role_that_ends_at_a_separator_names_the_node(header: str, host: str) -> None:
    assert peel(f"{header}[rank1]: step 3 done", labelled=False).speaker.node_role == host


def test_a_templated_role_names_the_host_of_the_rank(tmp_path: Path) -> None:
    text = "[compute-4-47:-1]:[rank1]: step 3 done\n[compute-4-48:-2]:[rank2]: step 3 done\n"
    ev = gather([parse_log(_log(tmp_path, "slurm-1.out", text))], [])
    assert (ev.ranks[1].host, ev.ranks[2].host) == ("compute-4-47", "compute-4-48")


def test_a_rank_named_on_the_writers_own_node_is_its_local_rank(tmp_path: Path) -> None:
    text = (
        "[node17:1]:Initializing rank 3/4 on node17\n"
        "[node17:0]:waiting for rank 0 on node18\n"
        "[node17:0]:hello\n"
    )
    ev = gather([parse_log(_log(tmp_path, "node17.log", text))], [])
    assert (ev.ranks[3].host, ev.ranks[3].local_rank) == ("node17", 1)
    assert 0 not in ev.ranks  # a rank named on another node is not the writer


def test_a_nodes_other_local_ranks_follow_the_one_its_lines_tie(tmp_path: Path) -> None:
    """torchrun numbers a node's workers from its first rank on: local rank 1 is rank 3, so
    local rank 0, which never states its rank, is rank 2 (no world size needed)."""
    text = "[node17:1]:Initializing rank 3/4 on node17\n[node17:0]:hello\n"
    ev = gather([parse_log(_log(tmp_path, "node17.log", text))], [])
    assert (ev.ranks[2].host, ev.ranks[2].local_rank) == ("node17", 0)


def test_a_nodes_local_ranks_that_disagree_on_its_first_rank_tie_no_other(tmp_path: Path) -> None:
    """Local rank 1 says rank 3 and local rank 2 says rank 7: no one numbering holds, so
    local rank 0 is given no rank."""
    text = (
        "[node17:1]:Initializing rank 3/8 on node17\n"
        "[node17:2]:Initializing rank 7/8 on node17\n"
        "[node17:0]:hello\n"
    )
    ev = gather([parse_log(_log(tmp_path, "node17.log", text))], [])
    assert 2 not in ev.ranks and 5 not in ev.ranks


def test_a_collective_waiting_in_c10d_is_told_from_native_frames_alone(tmp_path: Path) -> None:
    """`py-spy dump --native` of a rank in a DETAIL check: its C++ frames fill the budget
    before the first Python one."""
    native = "".join(f"    c10d::ProcessGroupGloo::frame{i} (libtorch_cpu.so)\n" for i in range(20))
    spy = _log(
        tmp_path,
        "node17.pyspy.txt",
        "Process 4242: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 4242 (idle): "MainThread"\n'
        "    pthread_cond_timedwait (libc.so.6)\n" + native + "    all_reduce "
        "(torch/distributed/distributed_c10d.py:3252)\n    step (train.py:40)\n",
    )
    from frtrace.evidence.gather import in_collective
    from frtrace.evidence.pyspy import parse_pyspy

    (proc,) = parse_pyspy(spy).processes
    assert in_collective(proc) is not None


def test_a_node_prefix_before_a_host_name_is_a_collecting_word() -> None:
    assert host_from_path(Path("node-gpu005.out"), None) == "gpu005"
    assert host_from_path(Path("node-17.log"), None) == "node-17"  # a name of its own


_PEER_LOST = (
    "[{r}]:[rank{r}]: Traceback (most recent call last):\n"
    "[{r}]:[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] "
    "Connection closed by peer [127.0.0.1]:40211. This is typically caused by a remote "
    "worker crashing.\n"
)


def test_a_rank_its_agent_sent_the_closing_signal_is_not_the_peer_that_died(
    tmp_path: Path,
) -> None:
    """No summary (its agent died too), but the agent's `Sending process P closing signal
    SIGTERM` and the job's own line tie P to rank 0: alive after the peer died."""
    text = "[0]:rank 0 pid 41233 starting\n" + "".join(_PEER_LOST.format(r=r) for r in (1, 2))
    text += (
        "W1128 14:15:47.849000 15793 torch/distributed/elastic/multiprocessing/api.py:1028] "
        "Sending process 41233 closing signal SIGTERM\n"
    )
    ev = gather([parse_log(_log(tmp_path, "node88.log", text))], [])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, ev.ranks[0].closed) == ([], "SIGTERM")


def test_the_jobs_last_untied_process_is_its_last_rank_without_a_stack(tmp_path: Path) -> None:
    """The agents' rosters say the job has ranks 0-1; rank 0's stack is tied by its pid; the
    one other worker process, in a file that names no node, is rank 1's (a note says so)."""
    head = "I1128 12:32:10.299000 14046 torch/distributed/elastic/agent/server/api.py:553]"

    def roster(rank: int) -> str:
        fields = (
            "[x:] Rendezvous complete for workers. Result:",
            f"  group_rank={rank}",
            "  group_world_size=2",
            "  local_ranks=[0]",
            f"  global_ranks=[{rank}]",
            "  global_world_sizes=[2]",
            "",
        )
        return "".join(f"{head} {x}\n" for x in fields)

    a = _log(tmp_path, "nodeA.log", roster(0) + "[nodeA:0]:rank 0 pid 100 on nodeA\n")
    b = _log(tmp_path, "nodeB.log", roster(1))
    block = (
        "Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread {pid} (idle): "MainThread"\n    {fn} ({file}:40)\n'
    )
    tied = _log(
        tmp_path,
        "nodeA.pyspy.txt",
        block.format(pid=100, fn="all_reduce", file="torch/distributed/distributed_c10d.py"),
    )
    untied = _log(tmp_path, "stacks.txt", block.format(pid=555, fn="read_shard", file="t.py"))
    from frtrace.evidence.pyspy import parse_pyspy

    ev = gather([parse_log(a), parse_log(b)], [parse_pyspy(tied), parse_pyspy(untied)])
    stack = ev.ranks[1].stack
    assert stack is not None and stack.pid == 555


_IN_WORKER = (
    PyFrame("all_reduce", "/venv/torch/distributed/distributed_c10d.py", 3245),
    PyFrame("wrapper", "/venv/torch/distributed/c10d_logger.py", 83),
    PyFrame("worker", "/work/scripts/make_log_fixtures.py", 110),
)
_BARRIER = (
    PyFrame("barrier", "/venv/torch/distributed/distributed_c10d.py", 5349),
    PyFrame("worker", "/work/scripts/make_log_fixtures.py", 120),
)


def _stuck_node_b(
    tmp_path: Path, rank3_last_call: tuple[PyFrame, ...], third_waiter: bool = False
) -> Evidence:
    """Node B of the real stuck job (fixtures/logs/stuck): its py-spy file (pid 5800 waits in
    all_reduce called from worker:110, pid 5802 sits in slow_data_loader) and its two dumps
    (ranks 2 and 3), with rank 3's last recorded call given; no log ties a pid to a rank.
    `third_waiter` adds rank 1 on the node, waiting like rank 2 (pid 5803)."""
    from frtrace.evidence.pyspy import parse_pyspy

    text = (FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text()
    if third_waiter:
        first = text[: text.index("Process 5802")]
        text += first.replace("5800", "5803")
    spy = tmp_path / "nodeB.pyspy.txt"
    spy.write_text(text)
    dumps = [
        DumpHost(2, str(tmp_path / "trace_2"), "nodeB", _IN_WORKER),
        DumpHost(3, str(tmp_path / "trace_3"), "nodeB", rank3_last_call),
    ]
    if third_waiter:
        dumps.append(DumpHost(1, str(tmp_path / "trace_1"), "nodeB", _IN_WORKER))
    return gather([], [parse_pyspy(spy)], dumps)


def test_a_process_inside_the_call_a_ranks_dump_recorded_last_is_that_rank(
    tmp_path: Path,
) -> None:
    """Rank 3's last recorded call is a barrier elsewhere: pid 5800, inside all_reduce at
    worker:110 where rank 2's dump ends, is rank 2, and the other process is rank 3."""
    ev = _stuck_node_b(tmp_path, _BARRIER)
    assert {r: ev.ranks[r].pid for r in (2, 3)} == {2: 5800, 3: 5802}
    assert not ev.unmatched


def test_ranks_whose_dumps_end_where_as_many_processes_wait_leave_the_one_outside(
    tmp_path: Path,
) -> None:
    """Ranks 1 and 2 both last recorded all_reduce at worker:110 and two processes wait
    there: which is which is unknown, but both wait, so the process outside collectives is
    rank 3, whose dump ends at a barrier elsewhere."""
    ev = _stuck_node_b(tmp_path, _BARRIER, third_waiter=True)
    assert (ev.ranks[3].pid, ev.ranks[1].pid, ev.ranks[2].pid) == (5802, None, None)
    assert sorted(p.pid or 0 for p in ev.unmatched) == [5800, 5803]


def test_two_ranks_whose_dumps_end_at_the_same_call_tie_no_process(tmp_path: Path) -> None:
    """Both dumps end in all_reduce at worker:110 (a loop's one collective): which process
    is which is unknown, and no rank is guessed."""
    same = (
        PyFrame("all_reduce", "/venv/torch/distributed/distributed_c10d.py", 3245),
        PyFrame("worker", "/work/scripts/make_log_fixtures.py", 110),
    )
    ev = _stuck_node_b(tmp_path, same)
    assert ev.ranks[2].pid is None and ev.ranks[3].pid is None
    assert sorted(p.pid or 0 for p in ev.unmatched) == [5800, 5802]


def test_the_dumps_verdict_ties_nothing_where_two_ranks_of_the_host_wait_in_none(
    tmp_path: Path,
) -> None:
    """Node B's dumps show neither rank 2 nor rank 3 waiting: which of them is the process
    outside collectives is unknown, and neither is named."""
    from frtrace.evidence.gather import tie_by_waits

    same = (_IN_WORKER[0], _IN_WORKER[2])
    ev = _stuck_node_b(tmp_path, same)
    tie_by_waits(ev, waiting=set(), known={2, 3})
    assert ev.ranks[2].pid is None and ev.ranks[3].pid is None
    tie_by_waits(ev, waiting={2}, known={2, 3})
    assert (ev.ranks[3].pid, ev.ranks[2].pid) == (5802, None)


def test_the_dumps_verdict_ties_nothing_where_a_rank_of_the_host_left_no_dump(
    tmp_path: Path,
) -> None:
    """Rank 2 waits per the dumps, but rank 3's state is unknown (no dump of it was read):
    it may be waiting too, so the process outside collectives is not taken to be it."""
    from frtrace.evidence.gather import tie_by_waits

    same = (_IN_WORKER[0], _IN_WORKER[2])
    ev = _stuck_node_b(tmp_path, same)
    tie_by_waits(ev, waiting={2}, known={2})
    assert ev.ranks[2].pid is None and ev.ranks[3].pid is None


def test_the_dumps_verdict_ties_the_jobs_lone_idle_process_where_no_input_names_hosts(
    tmp_path: Path,
) -> None:
    """The dumps lie in one folder, so no rank has a host; of the job's two py-spy'd
    processes one is outside collectives, and of its two ranks the dumps show one waiting."""
    from frtrace.evidence.gather import tie_by_waits
    from frtrace.evidence.pyspy import parse_pyspy

    spy = tmp_path / "pyspy_nodeB.txt"
    spy.write_text((FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text())
    same = (_IN_WORKER[0], _IN_WORKER[2])
    dumps = [DumpHost(r, str(tmp_path / f"trace_{r}"), "", same) for r in (2, 3)]
    ev = gather([], [parse_pyspy(spy)], dumps)
    assert ev.ranks[2].host == "" and ev.ranks[3].host == ""
    tie_by_waits(ev, waiting={2}, known={2, 3})
    assert (ev.ranks[3].pid, ev.ranks[3].host, ev.ranks[2].pid) == (5802, "nodeB", None)


def test_the_jobs_lone_idle_process_is_not_a_rank_known_on_another_host(
    tmp_path: Path,
) -> None:
    """Rank 3, the one not waiting, is on nodeA by its dump's folder; the process outside
    collectives runs on nodeB: not the same process."""
    from frtrace.evidence.gather import tie_by_waits
    from frtrace.evidence.pyspy import parse_pyspy

    spy = tmp_path / "pyspy_nodeB.txt"
    spy.write_text((FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text())
    same = (_IN_WORKER[0], _IN_WORKER[2])
    dumps = [
        DumpHost(2, str(tmp_path / "trace_2"), "", same),
        DumpHost(3, str(tmp_path / "trace_3"), "nodeA", same),
    ]
    ev = gather([], [parse_pyspy(spy)], dumps)
    tie_by_waits(ev, waiting={2}, known={2, 3})
    assert ev.ranks[3].pid is None and ev.ranks[2].pid is None


def _hosts_with_ranks_and_waiters(tmp_path: Path, waiters_on_b: int) -> Evidence:
    """Ranks 0-1 on nodeA and 2-3 on nodeB, by the job's own lines; nodeB's py-spy file (no
    ranks in it) holds `waiters_on_b` processes inside all_reduce; nodeA has none."""
    from frtrace.evidence.pyspy import parse_pyspy

    text = (FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text()
    one = text[: text.index("Process 5802")]
    spy = tmp_path / "nodeB.pyspy.txt"
    spy.write_text("".join(one.replace("5800", str(5800 + i)) for i in range(waiters_on_b)))
    logs = [
        _log(
            tmp_path,
            f"trace-{node}.out",
            "".join(f"Initializing rank {r}/4 on {node}\n" for r in ranks),
        )
        for node, ranks in (("nodeA", (0, 1)), ("nodeB", (2, 3)))
    ]
    return gather([parse_log(p) for p in logs], [parse_pyspy(spy)])


def test_a_hosts_ranks_wait_where_all_its_untied_processes_wait(tmp_path: Path) -> None:
    """Which of nodeB's two waiting processes is rank 2 is unknown, but both wait: ranks 2
    and 3 wait, and the ranks the others wait for are nodeA's."""
    (finding,) = log_findings(_hosts_with_ranks_and_waiters(tmp_path, 2))
    assert (finding.culprit_ranks, finding.waiting_ranks) == ([0, 1], [2, 3])


def test_a_hosts_ranks_do_not_wait_where_fewer_of_its_processes_are_seen(
    tmp_path: Path,
) -> None:
    (finding,) = log_findings(_hosts_with_ranks_and_waiters(tmp_path, 1))
    assert finding.waiting_ranks == []


def test_a_rank_that_raised_is_not_taken_to_wait_with_its_hosts_processes(
    tmp_path: Path,
) -> None:
    """The py-spy dump was taken before rank 3 raised: its own exception says more than
    its host's processes all waiting then."""
    from frtrace.evidence.pyspy import parse_pyspy

    _hosts_with_ranks_and_waiters(tmp_path, 2)  # writes the two nodes' files and nodeB's stacks
    raised = "".join(f"{line}\n" for line in _raised(3, "ValueError: bad shard", _IN_STEP))
    paths = [tmp_path / "trace-nodeA.out", tmp_path / "trace-nodeB.out"]
    paths.append(_log(tmp_path, "job.log", raised))
    ev = gather([parse_log(p) for p in paths], [parse_pyspy(tmp_path / "nodeB.pyspy.txt")])
    (finding,) = log_findings(ev)
    assert (finding.culprit_ranks, finding.undecidable) == ([3], False)


def test_a_hosts_untied_rank_waits_beside_its_tied_rank_stuck_outside(tmp_path: Path) -> None:
    """nodeB's pid 5802, in slow_data_loader, is rank 2 by the job's line; its other process,
    inside all_reduce, is then rank 3's, which waits."""
    from frtrace.evidence.pyspy import parse_pyspy

    spy = tmp_path / "nodeB.pyspy.txt"
    spy.write_text((FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text())
    text = "rank 2 pid 5802 on nodeB\nInitializing rank 3/4 on nodeB\n"
    log = _log(tmp_path, "trace-nodeB.out", text)
    (finding,) = log_findings(gather([parse_log(log)], [parse_pyspy(spy)]))
    assert (finding.culprit_ranks, finding.waiting_ranks) == ([2], [3])


def test_the_dumps_verdict_ties_nothing_on_a_host_with_more_processes_than_known_ranks(
    tmp_path: Path,
) -> None:
    """Only rank 2's dump says it is on node B, which shows two processes: the one outside
    collectives may be a rank the evidence never placed there, so rank 2 stays untied."""
    from frtrace.evidence.gather import tie_by_waits
    from frtrace.evidence.pyspy import parse_pyspy

    spy = tmp_path / "nodeB.pyspy.txt"
    spy.write_text((FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text())
    ev = gather([], [parse_pyspy(spy)], [DumpHost(2, str(tmp_path / "trace_2"), "nodeB")])
    tie_by_waits(ev, waiting=set(), known={2})
    assert ev.ranks[2].pid is None


def test_a_numbered_nodes_full_name_keeps_its_node_prefix() -> None:
    """`node-214.hpc.example.edu`: the first label is a bare number once `node-` is cut, so
    `node-` is part of the name (it was `214.hpc.example.edu`, a host no evidence names)."""
    assert host_from_path(Path("node-214.hpc.example.edu.log"), None) == "node-214.hpc.example.edu"


# TORCH_DISTRIBUTED_DEBUG=DETAIL's line for each collective a rank enters, as torch 2.13 wrote
# it in a real gloo job here (ProcessGroupWrapper.cpp:710, runCollectiveChecks)
_RUNNING_LINE = (
    "[rank{g}]:[I1128 16:26:43.2{seq}2473065 ProcessGroupWrapper.cpp:710] [Rank {r}] Running "
    "collective: CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, TensorShape=[8], "
    "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, "
    "layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), "
    "memory_format=(nullopt)))"
)


def _entered_log(
    tmp_path: Path,
    last: dict[int, int],
    group_rank: dict[int, int] | None = None,
    last_op: dict[int, str] | None = None,
    unlogged: tuple[int, ...] = (),
) -> Path:
    """nodeA.log: each rank's DETAIL lines for collectives #0 to its `last` (all_reduce, or
    `last_op` for its last), but those of `unlogged`, which no rank's line states."""
    lines = [
        _RUNNING_LINE.format(
            g=g,
            r=(group_rank or {}).get(g, g),
            seq=seq,
            op=(last_op or {}).get(g, "ALLREDUCE") if seq == last[g] else "ALLREDUCE",
        )
        for seq in range(max(last.values()) + 1)
        for g in sorted(last)
        if seq <= last[g] and seq not in unlogged
    ]
    return _log(tmp_path, "nodeA.log", "\n".join(lines) + "\n")


def test_detail_logs_name_the_rank_that_never_entered_the_collective_the_others_did(
    tmp_path: Path,
) -> None:
    (f,) = log_findings(gather([parse_log(_entered_log(tmp_path, {0: 3, 1: 3, 2: 2}))], []))
    assert (f.kind, f.culprit_ranks, f.waiting_ranks) == ("missing_ranks", [2], [0, 1])
    assert (f.collective_seq_id, f.op, f.undecidable) == (3, "all_reduce", False)


def test_detail_logs_with_a_number_no_rank_logged_still_name_the_rank_behind(
    tmp_path: Path,
) -> None:
    """No rank logged #2 (a real torch 2.13 gloo run's `dist.barrier()` under DETAIL): each
    rank's lines still run on past it."""
    log = _entered_log(tmp_path, {0: 4, 1: 3, 2: 4}, unlogged=(2,))
    (f,) = log_findings(gather([parse_log(log)], []))
    assert (f.culprit_ranks, f.waiting_ranks, f.collective_seq_id) == ([1], [0, 2], 4)


def test_detail_logs_name_a_rank_behind_though_a_nodes_ranks_are_unseen(tmp_path: Path) -> None:
    """Ranks 2 and 3 (their node's log lost) are in no input; of the ranks seen, 0, 1 and 5
    entered #3 and rank 4 stopped after #2: it never entered #3, whatever 2 and 3 did."""
    (f,) = log_findings(gather([parse_log(_entered_log(tmp_path, {0: 3, 1: 3, 4: 2, 5: 3}))], []))
    assert (f.kind, f.culprit_ranks, f.waiting_ranks) == ("missing_ranks", [4], [0, 1, 5])
    assert (f.collective_seq_id, f.undecidable, f.facts["unseen"]) == (3, False, [2, 3])
    assert "ranks 2-3, which no input shows, may not have entered it either" in detail(f)


def test_detail_logs_decide_nothing_where_a_seen_rank_logged_none(tmp_path: Path) -> None:
    """Rank 3 is seen (a line of its own) but logged no DETAIL line: where it stands is
    unknown, and rank 2 being behind the others explains nothing alone."""
    log = _entered_log(tmp_path, {0: 3, 1: 3, 2: 2})
    log.write_text(log.read_text() + "[rank3]:step 3 done\n")
    ev = gather([parse_log(log)], [])
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def test_detail_logs_decide_nothing_where_most_of_the_world_is_unseen(tmp_path: Path) -> None:
    """The agent's roster states 5000 ranks; three are seen: past the unseen ranks a report
    names, the seen few say nothing of where the job stopped."""
    head = "I1128 12:32:10.299000 14046 torch/distributed/elastic/agent/server/api.py:553]"
    roster = "".join(
        f"{head} {x}\n"
        for x in (
            "[nodeA:] Rendezvous complete for workers. Result:",
            "  restart_count=0",
            "  group_rank=0",
            "  group_world_size=1667",
            "  local_ranks=[0, 1, 2]",
            "  global_ranks=[0, 1, 2]",
            "  global_world_sizes=[5000, 5000, 5000]",
            "",
        )
    )
    log = _entered_log(tmp_path, {0: 3, 1: 3, 2: 2})
    log.write_text(roster + log.read_text())
    ev = gather([parse_log(log)], [])
    assert ev.world_size == 5000
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def test_detail_logs_two_collectives_behind_decide_nothing(tmp_path: Path) -> None:
    """Entering #2 took every rank through #1's monitored barrier: a rank whose last line is
    #1 while others entered #3 says its lines are lost, not where it stopped."""
    ev = gather([parse_log(_entered_log(tmp_path, {0: 3, 1: 3, 2: 1}))], [])
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def test_detail_logs_of_a_subgroup_decide_nothing(tmp_path: Path) -> None:
    """Rank 2 numbered 0 in its line: a subgroup's sequence, which the world's cannot be
    compared with."""
    log = _entered_log(tmp_path, {0: 3, 1: 3, 2: 2}, group_rank={2: 0})
    ev = gather([parse_log(log)], [])
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def _detail_log(tmp_path: Path, runs: dict[int, list[tuple[int, int]]]) -> Path:
    """nodeA.log: each rank's DETAIL lines, (group rank, seq) of all_reduces in its order."""
    lines = [
        _RUNNING_LINE.format(g=rank, r=grank, seq=seq, op="ALLREDUCE")
        for rank, run in sorted(runs.items())
        for grank, seq in run
    ]
    return _log(tmp_path, "nodeA.log", "\n".join(lines) + "\n")


# 4 ranks and a subgroup of ranks 0, 2, 3 (group ranks 0, 1, 2), whose #0 follows the world's
# #1. Rank 0 is group rank 0 in both: its subgroup line reads like a world line.
_SUB_AFTER_1 = {
    0: [(0, 0), (0, 1), (0, 0), (0, 2)],
    1: [(1, 0), (1, 1), (1, 2)],
    2: [(2, 0), (2, 1), (1, 0), (2, 2)],
}


def test_detail_logs_follow_the_worlds_group_between_a_subgroups_lines(tmp_path: Path) -> None:
    """Rank 3 entered the subgroup's #0 with ranks 0 and 2, who went on to the world's #2;
    rank 3 never did."""
    runs = {**_SUB_AFTER_1, 3: [(3, 0), (3, 1), (2, 0)]}
    (f,) = log_findings(gather([parse_log(_detail_log(tmp_path, runs))], []))
    assert (f.kind, f.culprit_ranks, f.waiting_ranks) == ("missing_ranks", [3], [0, 1, 2])
    assert (f.collective_seq_id, f.facts["decided_by"]) == (2, "entered")


def test_detail_logs_follow_the_world_where_a_subgroups_first_calls_match_its_own(
    tmp_path: Path,
) -> None:
    """Rank 0 is group rank 0 of the world and of a subgroup (ranks 0 and 2) whose #0 and #1
    each follow the world's: its first lines could be either group's, but the two runs are
    alike so far, so either reading gives the same runs. Rank 2 never entered the world's #3."""
    runs = {
        0: [(0, 0), (0, 0), (0, 1), (0, 1), (0, 2), (0, 3)],
        1: [(1, 0), (1, 1), (1, 2), (1, 3)],
        2: [(2, 0), (1, 0), (2, 1), (1, 1), (2, 2)],
        3: [(3, 0), (3, 1), (3, 2), (3, 3)],
    }
    (f,) = log_findings(gather([parse_log(_detail_log(tmp_path, runs))], []))
    assert (f.culprit_ranks, f.collective_seq_id, f.facts["decided_by"]) == ([2], 3, "entered")


def test_detail_logs_of_a_rank_waiting_in_a_subgroup_collective_decide_nothing(
    tmp_path: Path,
) -> None:
    """Rank 3's last line is the subgroup's #1, which ranks 0 and 2 never entered: it waits
    there (for them, while they wait in the world's #2 for it), not outside collectives."""
    runs = {**_SUB_AFTER_1, 3: [(3, 0), (3, 1), (2, 0), (2, 1)]}
    ev = gather([parse_log(_detail_log(tmp_path, runs))], [])
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def test_detail_logs_follow_the_world_past_several_subgroup_collectives(tmp_path: Path) -> None:
    """A subgroup of ranks 1-3 (group ranks 0-2) runs #0 and #1 between the world's #1 and
    #2; rank 3 stops after them."""
    world, sub = [(1, 0), (1, 1)], [(0, 0), (0, 1)]
    runs = {
        0: [(0, 0), (0, 1), (0, 2)],
        1: [*world, *sub, (1, 2)],
        2: [(2, 0), (2, 1), (1, 0), (1, 1), (2, 2)],
        3: [(3, 0), (3, 1), (2, 0), (2, 1)],
    }
    (f,) = log_findings(gather([parse_log(_detail_log(tmp_path, runs))], []))
    assert (f.culprit_ranks, f.collective_seq_id) == ([3], 2)


def test_detail_lines_that_could_continue_two_groups_decide_nothing(tmp_path: Path) -> None:
    """Rank 0 is group rank 0 of the world and of a subgroup (ranks 0, 2, 3). Its last line,
    #4, follows the world's #3 and the subgroup's #3: either group's. As the world's, rank 0
    is one behind the others (at #5); as the subgroup's, its world line is #3, two behind,
    and says nothing. Which is unknown: nothing is decided."""
    world = [(0, seq) for seq in range(4)]
    sub = [(0, seq) for seq in range(4)]
    runs = {
        0: [*world, *sub, (0, 4)],
        1: [(1, seq) for seq in range(6)],
        2: [(2, 0), (2, 1), (2, 2), (2, 3), *[(1, q) for q in range(4)], (2, 4), (2, 5)],
        3: [(3, 0), (3, 1), (3, 2), (3, 3), *[(2, q) for q in range(4)], (3, 4), (3, 5)],
    }
    ev = gather([parse_log(_detail_log(tmp_path, runs))], [])
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def test_detail_logs_tie_the_one_process_outside_collectives_to_the_rank_they_name(
    tmp_path: Path,
) -> None:
    from frtrace.evidence.pyspy import parse_pyspy

    text = (FIXTURES / "logs" / "stuck" / "nodeB.pyspy.txt").read_text()
    text += text[: text.index("Process 5802")].replace("5800", "5803")
    spy = tmp_path / "nodeA.pyspy.txt"
    spy.write_text(text)
    ev = gather([parse_log(_entered_log(tmp_path, {0: 3, 1: 3, 2: 2}))], [parse_pyspy(spy)])
    (f,) = log_findings(ev)
    assert (f.culprit_ranks, ev.ranks[2].pid) == ([2], 5802)


def test_detail_logs_where_the_ranks_ahead_entered_different_ops_decide_nothing(
    tmp_path: Path,
) -> None:
    """Ranks 0 and 1 entered #3 as all_reduce and broadcast: their own mismatch, which the
    fingerprint check reports; rank 2 being behind does not explain it."""
    log = _entered_log(tmp_path, {0: 3, 1: 3, 2: 2}, last_op={1: "BROADCAST"})
    ev = gather([parse_log(log)], [])
    assert not any(f.facts.get("decided_by") == "entered" for f in log_findings(ev))


def _tp_quads_one_rank_early(
    tp: int = 4, peers_too: bool = False, in_tp: tuple[int, ...] = ()
) -> list[str]:
    """8 ranks in tp groups of `tp`. Rank 1 began the default group's all_reduce (seq 2, at
    0 s) before its tp group's (seq 3, at 2 s); its tp peers wait in that tp collective
    (from 1 s) and never reached the default group's (`peers_too`: they did, from 3 s);
    every other rank finished its tp collective and waits in the default group's (from 3 s),
    but those of `in_tp`, which wait in their own tp group's (from 1 s)."""
    lines = [_init_line(r, str(10 + r // tp), "mesh_tp", r % tp, tp) for r in range(8)]
    peers = [r for r in range(tp) if r != 1]
    for r in range(8):
        uid, grank = str(10 + r // tp), r % tp
        if r == 1:
            lines += _timed_out(r, "0", "default_pg", r, 2, 0)
            lines += _timed_out(r, uid, "mesh_tp", grank, 3, 2)
        elif r in peers or r in in_tp:
            lines += _timed_out(r, uid, "mesh_tp", grank, 3, 1)
            if peers_too and r in peers:
                lines += _timed_out(r, "0", "default_pg", r, 2, 3)
        else:
            lines += _timed_out(r, "0", "default_pg", r, 2, 3)
    return lines


def test_the_rank_in_the_default_collective_its_tp_peers_wait_for_broke_the_order(
    tmp_path: Path,
) -> None:
    """The default group's absentees (ranks 0, 2, 3) are not stuck elsewhere by themselves:
    they wait in their tp collective for rank 1, which went to the default group's first."""
    (finding,) = _log_findings(tmp_path, _tp_quads_one_rank_early())
    assert (finding.kind, finding.reason, finding.culprit_ranks) == (
        "order_cycle",
        "order_differs",
        [1],
    )


def test_one_ranks_order_against_one_peers_blames_neither_alone(tmp_path: Path) -> None:
    """tp pairs: rank 1 against its one peer, rank 0, is one order against another; each
    waits for the other, so both are named, undecidable."""
    (finding,) = _log_findings(tmp_path, _tp_quads_one_rank_early(tp=2))
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "order_cycle",
        [0, 1],
        True,
    )


def test_a_rank_whose_tp_peers_reached_the_default_collective_too_is_not_cut_off(
    tmp_path: Path,
) -> None:
    """Rank 1's tp peers wait in the default group's collective as well, so rank 1 holds
    none of them; ranks 4-6 wait in their tp collective for rank 7, which logs only its
    groups' init lines: the silent absentee is the culprit."""
    lines = _tp_quads_one_rank_early(peers_too=True, in_tp=(4, 5, 6, 7))
    lines = [
        line for line in lines if not line.startswith("[rank7]") or "initialization options" in line
    ]
    (finding, *_) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks) == ("missing_ranks", [7])


def test_a_cut_off_rank_beside_one_other_in_the_default_collective_is_not_singled_out(
    tmp_path: Path,
) -> None:
    """Only rank 4 besides rank 1 waits in the default group's collective (ranks 5-7 logged
    nothing): the default group's waiters are no majority keeping the usual order, so
    rank 1 and the tp peers it waits for (and that wait for it) are all named, undecidable."""
    lines = _tp_quads_one_rank_early()
    lines = [line for line in lines if not line.startswith(("[rank5]", "[rank6]", "[rank7]"))]
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "order_cycle",
        [0, 1, 2, 3],
        True,
    )


def test_a_silent_member_beside_a_crossed_one_does_not_explain_their_groups_wait(
    tmp_path: Path,
) -> None:
    """16 ranks in tp groups of 4; only three logged. Ranks 0 and 2 wait in their tp
    all_reduce (seq 12); rank 3, of their group, waits in the default group's all_reduce
    with no tp work pending (its oldest timed out first); rank 1 and every other rank are
    silent. Rank 3 is surely absent from the tp collective its peers wait in, and its order
    explains that; rank 1 may only have been ended before its watchdog fired. Too few show
    either order: ranks 0, 2 and 3 are named, undecidable, rather than rank 1 alone."""
    lines = []
    for r in range(16):
        lines.append(_init_line(r, "0", "default_pg", r, 16))
        lines.append(_init_line(r, f"t{r // 4}", "mesh_tp", r % 4, 4))
    lines += _timed_out(0, "t0", "mesh_tp", 0, 12, 1) + _timed_out(2, "t0", "mesh_tp", 2, 12, 1)
    lines += _timed_out(3, "0", "default_pg", 3, 2, 5)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "order_cycle",
        [0, 2, 3],
        True,
    )


def _tp_quads_dp_pairs_one_silent(
    tp_began: dict[int, int], dp_began: dict[int, int] | None = None
) -> list[str]:
    """8 ranks: tp groups 0-3 and 4-7, dp pairs (r, r + 4). Rank 6 logs only its groups'
    init lines, no timeout: its tp peers wait in their tp collective (seq 12, begun at
    `tp_began`) and in their dp one (seq 5, at 2 s unless `dp_began` says), ranks 0-3 in the
    dp one (at 1 s)."""
    dp_began = {4: 2, 5: 2, 7: 2} | (dp_began or {})
    lines = []
    for r in range(8):
        lines += [_init_line(r, str(10 + r // 4), "mesh_tp", r % 4, 4)]
        lines += [_init_line(r, str(20 + r % 4), "mesh_dp", r // 4, 2)]
        if r == 6:
            continue
        if r >= 4:
            lines += _timed_out(r, str(10 + r // 4), "mesh_tp", r % 4, 12, tp_began[r])
        lines += _timed_out(r, str(20 + r % 4), "mesh_dp", r // 4, 5, dp_began.get(r, 1))
    return lines


def test_a_dp_pair_whose_member_began_its_tp_collective_too_close_to_tell_waits_behind_it(
    tmp_path: Path,
) -> None:
    """Ranks 5 and 7 surely began the tp collective before the dp one (at 3 s and 5 s); rank
    4 began both at 3 s, too close for the clock, as ranks 0-3 began the dp one. One program:
    rank 4 did as they did, so its dp pair is no group stuck by itself, and the silent rank
    6, missing from both, is the culprit."""
    began = {0: 3, 1: 3, 2: 3, 3: 3, 4: 3, 5: 5, 7: 5}
    lines = _tp_quads_dp_pairs_one_silent({4: 3, 5: 3, 7: 3}, began)
    (finding, *_) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.culprit_ranks) == ("missing_ranks", [6])


def test_an_order_two_ranks_show_differently_says_nothing_of_a_third(tmp_path: Path) -> None:
    """Rank 5 began the tp collective first (at 2 s, its dp one at 4 s), rank 7 the dp one
    (at 2 s, its tp one at 4 s): the program's order is not shown, and rank 4's dp pair,
    begun with rank 4's tp collective, is where the job may have stopped (with rank 7's)."""
    lines = _tp_quads_dp_pairs_one_silent({4: 2, 5: 2, 7: 4}, {5: 4})
    (finding, *_) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name, finding.collective_seq_id) == (
        "stuck_collective",
        "20",
        5,
    )


def test_a_groups_unshown_members_are_derived_where_few_are_unshown() -> None:
    assert all_members({0: 0, 1: 1, 3: 3}, 4, None) == {0, 1, 2, 3}
    assert all_members({4: 1, 12: 3}, 4, 4) == {0, 4, 8, 12}
    # a size read from an untrusted line derives nobody past the bound
    assert all_members({0: 0, 1: 1}, 10**9, None) == {0, 1}


def test_a_rank_in_the_default_collective_that_never_entered_its_peers_tp_one_broke_the_order(
    tmp_path: Path,
) -> None:
    """Rank 5 waits in the default group's all_reduce and never entered its tp group's, where
    its three peers wait; the other tp group waits in its own: seven ranks went to their tp
    collective first, rank 5 to the default group's (its line in the tp group is never
    written, so its membership is derived from its peers' group ranks)."""
    lines = [_init_line(r, str(10 + r // 4), "mesh_tp", r % 4, 4) for r in range(8) if r != 5]
    for r in range(8):
        if r == 5:
            lines += _timed_out(r, "0", "default_pg", r, 2, 0)
        else:
            lines += _timed_out(r, str(10 + r // 4), "mesh_tp", r % 4, 3, 1)
    # every pp pair waits in its pp collective too: rank 5's peer there, rank 1, is one
    # rank waiting for it, against three in its tp group
    lines += [_init_line(r, str(20 + r % 4), "mesh_pp", r // 4, 2) for r in range(8)]
    for r in (0, 1, 2, 3, 4, 6, 7):
        lines += _timed_out(r, str(20 + r % 4), "mesh_pp", r // 4, 4, 1)
    (finding, *_) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.reason, finding.culprit_ranks) == (
        "order_cycle",
        "order_differs",
        [5],
    )
    assert finding.facts["other"] == {"pg": "11", "seq": 3, "desc": "mesh_tp"}
    assert finding.facts["same_order"] == 7


def _tp_pairs_sizes(numel: dict[int, int], logged: tuple[int, ...] = tuple(range(8))) -> list[str]:
    """8 ranks in tp pairs, those `logged` waiting in their pair's all_reduce (seq 5) with
    `numel` elements (1024 unless said)."""
    lines = [_init_line(r, str(10 + r // 2), "mesh_tp", r % 2, 2) for r in range(8)]
    for r in logged:
        lines += nccl_watchdog_lines(
            r, 5, group_rank=r % 2, pg_id=1, pg_uid=str(10 + r // 2), pg_desc="mesh_tp",
            numel=numel.get(r, 1024),
        )  # fmt: skip
    return lines


def test_a_pair_split_on_the_size_is_told_apart_by_its_sibling_groups(tmp_path: Path) -> None:
    """Ranks 2 and 3 disagree, one against one; the other tp pairs all waited with 1024
    elements at the same seq: rank 2's 2048 is the odd call."""
    (finding,) = _log_findings(tmp_path, _tp_pairs_sizes({2: 2048}))
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "size_mismatch",
        [2],
        False,
    )
    assert (finding.reason, finding.facts["siblings"]) == ("siblings_differ", ["10", "12", "13"])


def test_a_pair_split_on_the_size_stays_undecidable_where_its_siblings_disagree(
    tmp_path: Path,
) -> None:
    (finding,) = _log_findings(tmp_path, _tp_pairs_sizes({2: 2048, 6: 4096, 7: 4096}))
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "size_mismatch",
        [2, 3],
        True,
    )


def test_one_sibling_rank_alone_does_not_tell_a_pair_split_on_the_size_apart(
    tmp_path: Path,
) -> None:
    lines = _tp_pairs_sizes({2: 2048}, logged=(0, 2, 3))
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.culprit_ranks, finding.undecidable) == ([2, 3], True)


def test_a_member_alone_with_a_size_no_sibling_group_used_is_the_odd_call(
    tmp_path: Path,
) -> None:
    """Rank 3 logged nothing; rank 2 waited with 2048 elements where every other tp pair
    waited with 1024 at the same seq: rank 2's call is the odd one, not rank 3's absence."""
    logged = (0, 1, 2, 4, 5, 6, 7)
    (finding,) = _log_findings(tmp_path, _tp_pairs_sizes({2: 2048}, logged=logged))
    assert (finding.kind, finding.culprit_ranks, finding.undecidable) == (
        "size_mismatch",
        [2],
        False,
    )
    assert "rank 3 of the group logged nothing" in detail(finding)


def test_a_member_alone_with_the_usual_size_is_no_size_mismatch(tmp_path: Path) -> None:
    logged = (0, 1, 2, 4, 5, 6, 7)
    (finding,) = _log_findings(tmp_path, _tp_pairs_sizes({}, logged=logged))
    assert finding.kind != "size_mismatch"


def test_a_mesh_dimensions_step_is_the_one_its_members_group_ranks_leave(
    tmp_path: Path,
) -> None:
    """8 ranks; no tp group shows two members. Rank 1 is group rank 1 of its group (an init
    line), rank 5 times out as group rank 1 of its own: on a mesh laid over ranks in order,
    only step 1 puts both at group rank 1, so rank 5's missing peer is rank 4."""
    lines = [_init_line(1, "1", "mesh_tp", 1, 2)]
    lines += [f"[rank{r}]:step 3 done" for r in range(8)]
    lines += _timed_out(5, "3", "mesh_tp", 1, 9, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.culprit_ranks, finding.undecidable) == ([4], False)


def test_a_mesh_dimensions_step_and_size_tile_the_world(tmp_path: Path) -> None:
    """18 ranks; rank 12 alone times out, as group rank 2 of a dp group. Along a mesh
    dimension of size n and step s, n x s divides the world: 3 x 6 does, so the group is
    ranks 0, 6 and 12. Step 2 would put rank 12 at group rank 2 only in groups of 4, and
    4 x 2 does not divide 18: no such dimension exists, and nothing else is named."""
    lines = [f"[rank{r}]:step 3 done" for r in range(18)]
    lines += _timed_out(12, "3", "mesh_dp", 2, 9, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.not_issued_by) == ("missing_ranks", [0, 6])
    assert set(finding.culprit_ranks) <= {0, 6, 12}


def test_a_folder_of_files_named_by_two_ip_addresses_collects_two_nodes(tmp_path: Path) -> None:
    """`10.0.0.5.log` and `10.0.0.6.log` are two nodes (an address is compared whole, not
    by its first label), so their folder names no node."""
    from frtrace.evidence.logs import shared_folders

    files = [tmp_path / "evidence" / "10.0.0.5.log", tmp_path / "evidence" / "10.0.0.6.log"]
    assert shared_folders(files, tmp_path) == {"evidence"}


def test_a_roster_claiming_a_billion_ranks_still_gives_the_groups_verdict(tmp_path: Path) -> None:
    """A log is untrusted: a world of 999,999,999 ranks in a roster must not be walked rank
    by rank (a DeviceMesh dimension's sizes and steps come from the world's divisors)."""
    head = "I1128 12:32:10.299000 14046 torch/distributed/elastic/agent/server/api.py:553]"
    roster = [
        f"{head} {x}"
        for x in (
            "[node17:] Rendezvous complete for workers. Result:",
            "  group_rank=0",
            "  local_ranks=[0, 1]",
            "  global_ranks=[0, 1]",
            "  global_world_sizes=[999999999, 999999999]",
            "",
        )
    ]
    lines = roster + _timed_out(1, "3", "mesh_tp", 1, 9, 0)
    (finding,) = _log_findings(tmp_path, lines)
    assert (finding.kind, finding.pg_name) == ("missing_ranks", "3")


def test_the_peer_that_died_is_one_of_the_ranks_below_those_the_logs_show(
    tmp_path: Path,
) -> None:
    """No world size is stated; ranks 3-5 lost a peer and the node log of ranks 0-2 is
    missing: ranks run from 0, so 0-2 exist and the one that died is among them (or past
    5, were there more): named, undecidable."""
    text = "".join(_PEER_LOST.format(r=r) for r in (3, 4, 5))
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "node32.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1, 2], True)
    assert "(one of ranks 0-2, which no input shows, or rank 6 or above)" in detail(finding)


def test_the_peer_that_died_is_one_of_the_ranks_of_the_stated_world_no_input_shows(
    tmp_path: Path,
) -> None:
    """The roster states a world of 4; ranks 0-2 all lost a peer: the rank that died is in
    no input, one of those the logs never show (rank 3), named undecidable."""
    head = "I1128 12:32:10.299000 14046 torch/distributed/elastic/agent/server/api.py:553]"
    roster = "".join(
        f"{head} {x}\n"
        for x in (
            "[node88:] Rendezvous complete for workers. Result:",
            "  local_ranks=[0, 1, 2]",
            "  global_ranks=[0, 1, 2]",
            "  global_world_sizes=[4, 4, 4]",
            "",
        )
    )
    text = roster + "".join(_PEER_LOST.format(r=r) for r in (0, 1, 2))
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "node88.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([3], True)


_PYSPY_BLOCK = (
    "Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
    'Thread {pid} (idle): "MainThread"\n    {fn} (torch/distributed/distributed_c10d.py:40)\n'
    "    step (train.py:12)\n"
)


def _untied_stacks(tmp_path: Path, fns: list[str], logs: tuple[str, ...] = ()) -> list[Finding]:
    """One py-spy file per node, one untied worker in each (pid 100, 101, ...), in the
    collective `fns` names; `logs`: the job's log lines beside them."""
    from frtrace.evidence.pyspy import parse_pyspy

    stacks = [
        parse_pyspy(_log(tmp_path, f"pyspy_node{i}.txt", _PYSPY_BLOCK.format(pid=100 + i, fn=fn)))
        for i, fn in enumerate(fns)
    ]
    parsed = [parse_log(_log(tmp_path, "node0.log", "".join(logs)))] if logs else []
    return log_findings(gather(parsed, stacks))


def test_one_untied_worker_in_barrier_and_one_in_all_reduce_are_both_named_undecidable(
    tmp_path: Path,
) -> None:
    """py-spy alone: one worker waits in barrier, the other in all_reduce. Which skipped or
    added a call is unknown: both processes are named, undecidable, each with its collective."""
    (finding,) = _untied_stacks(tmp_path, ["barrier", "all_reduce"])
    assert finding.undecidable
    assert sorted(p.pid or 0 for p in finding.culprit_processes) == [100, 101]
    assert {p["pid"]: p["op"] for p in finding.facts["split_processes"]} == {
        100: "barrier",
        101: "all_reduce",
    }
    said = detail(finding)
    assert "pid 100 on node0 (rank not in the logs) in barrier" in said
    assert "pid 101 on node1 (rank not in the logs) in all_reduce" in said
    assert "undecidable" in said


def test_two_untied_workers_in_barrier_outnumber_the_one_in_all_reduce(tmp_path: Path) -> None:
    (finding,) = _untied_stacks(tmp_path, ["barrier", "barrier", "all_reduce"])
    assert (finding.undecidable, [p.pid for p in finding.culprit_processes]) == (False, [102])


def test_a_tied_rank_waiting_counts_against_an_untied_worker_in_another_collective(
    tmp_path: Path,
) -> None:
    """Rank 0 (its pid in the job's log) and one untied worker wait in barrier, one untied
    worker in all_reduce: two against one, so the one in all_reduce is named."""
    tied = ("[node0:0]:rank 0 pid 100 on node0\n",)
    (finding,) = _untied_stacks(tmp_path, ["barrier", "barrier", "all_reduce"], tied)
    assert (finding.undecidable, [p.pid for p in finding.culprit_processes]) == (False, [102])


# Two workers' real faulthandler dumps (`faulthandler.register(signal.SIGUSR1,
# all_threads=True)`, then `kill -USR1`), one after the other in the stderr they share: the
# newest thread first, the signalled main thread (`Current thread`) last.
_TWO_FAULTHANDLER_DUMPS = """\
Thread 0x00007f02fa56c6c0 (most recent call first):
  File "/tmp/fh.py", line 8 in producer
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 982 in run
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f02fab33b80 (most recent call first):
  File "/tmp/fh.py", line 4 in stream_tokens
  File "/tmp/fh.py", line 11 in <module>
Current thread 0x00007f926f40ab80 (most recent call first):
  File "/tmp/fh.py", line 6 in all_reduce
  File "/tmp/fh.py", line 13 in <module>
"""


def test_two_workers_faulthandler_dumps_in_one_stream_are_two_processes(tmp_path: Path) -> None:
    text = "".join(f"0: {line}\n" for line in _TWO_FAULTHANDLER_DUMPS.splitlines())
    log = parse_log(_log(tmp_path, "slurm-77.out", text))
    stacks = [stack for _speaker, stack in log.stacks]
    assert [[t.frames[0].function for t in s.threads] for s in stacks] == [
        ["producer", "stream_tokens"],
        ["all_reduce"],
    ]
    assert [s.main.frames[0].function for s in stacks if s.main] == ["stream_tokens", "all_reduce"]


def test_a_nodes_faulthandler_dumps_no_label_ties_stay_on_its_node_untied(tmp_path: Path) -> None:
    """srun's task label names the node (its `Exited` line), not the rank: the workers' dumps
    are that node's untied processes, for the analysis to tie by elimination."""
    text = "".join(f"0: {line}\n" for line in _TWO_FAULTHANDLER_DUMPS.splitlines())
    text += "srun: error: gpu7: task 0: Exited with exit code 1\n"
    ev = gather([parse_log(_log(tmp_path, "slurm-77.out", text))], [])
    assert sorted((p.host, p.threads[-1].frames[0].function) for p in ev.unmatched) == [
        ("gpu7", "all_reduce"),
        ("gpu7", "stream_tokens"),
    ]


def test_a_thread_after_the_current_one_and_an_empty_line_is_the_same_process(
    tmp_path: Path,
) -> None:
    """CPython writes an empty line before every thread of a dump but the first: where the
    signal landed on a thread other than the oldest, threads follow the current one."""
    dump = _TWO_FAULTHANDLER_DUMPS.split("Current thread 0x00007f926f40ab80")[0]
    dump += (
        '\nThread 0x00007f02fa56d000 (most recent call first):\n  File "/tmp/fh.py", line 2 in x\n'
    )
    log = parse_log(_log(tmp_path, "node.log", dump))
    (stack,) = [stack for _speaker, stack in log.stacks]
    assert [t.frames[0].function for t in stack.threads] == ["producer", "stream_tokens", "x"]


def test_dumps_whose_empty_lines_were_dropped_still_split_only_after_the_current_thread(
    tmp_path: Path,
) -> None:
    """A log pipeline that drops empty lines: a worker's helper thread stays with its main
    thread (the `Current thread`, last), not a process of its own outside collectives."""
    text = "".join(f"{line}\n" for line in _TWO_FAULTHANDLER_DUMPS.splitlines() if line)
    log = parse_log(_log(tmp_path, "node.log", text))
    stacks = [stack for _speaker, stack in log.stacks]
    assert [[t.frames[0].function for t in s.threads] for s in stacks] == [
        ["producer", "stream_tokens"],
        ["all_reduce"],
    ]


def test_torchruns_own_faulthandler_dump_is_its_agent_not_a_worker(tmp_path: Path) -> None:
    """The agent shares the node's stream too; its main thread runs torchrun's code (its
    console script, torch/distributed/run.py, the elastic agent's `_invoke_run`)."""
    from frtrace.evidence.gather import worker_processes

    venv = "/venv/lib/python3.11/site-packages/torch/distributed"
    agent = (
        "Current thread 0x00007f00aa000000 (most recent call first):\n"
        f'  File "{venv}/elastic/agent/server/api.py", line 923 in _invoke_run\n'
        f'  File "{venv}/run.py", line 1019 in run\n'
        '  File "/venv/bin/torchrun", line 8 in <module>\n'
    )
    text = "".join(f"0: {line}\n" for line in (_TWO_FAULTHANDLER_DUMPS + agent).splitlines())
    text += "srun: error: gpu7: task 0: Exited with exit code 1\n"
    ev = gather([parse_log(_log(tmp_path, "slurm-77.out", text))], [])
    assert len(ev.unmatched) == 3
    assert sorted(p.threads[-1].frames[0].function for p in worker_processes(ev)) == [
        "all_reduce",
        "stream_tokens",
    ]


def test_a_role_of_zero_is_not_a_host_without_digits(tmp_path: Path) -> None:
    """`--role <node index>:` gives node 0 `[0:2]:`; a host with no digits at all (`nodeB`,
    from node 1's summary) is not the one whose digits `0` are, so node 0's untagged lines
    stay with node 0's ranks."""
    node_a = _log(
        tmp_path,
        "trace-nodeA.out",
        "0: [0:2]:[rank2]: step 3 done\n0: [0:2]:untagged line of local rank 2\n",
    )
    summary = (
        "1: Root Cause (first observed failure):\n1: [0]:\n1:   host      : nodeB\n"
        "1:   rank      : 10 (local_rank: 2)\n1:   exitcode  : -6 (pid: 310)  (SIGABRT)\n"
        "1: ------------------------------------------------------------\n"
    )
    node_b = _log(tmp_path, "trace-nodeB.out", "1: [1:2]:[rank10]: step 3 done\n" + summary)
    ev = gather([parse_log(node_a), parse_log(node_b)], [])
    texts = {r: [t for _w, t in ev.ranks[r].last_lines] for r in (2, 10)}
    assert any("untagged line" in t for t in texts[2])
    assert not any("untagged line" in t for t in texts[10])


def test_two_ranks_claiming_one_group_rank_do_not_stop_the_analysis(tmp_path: Path) -> None:
    """Logs of two jobs in one folder, or a join gone wrong: ranks 2 and 10 both say they
    are group rank 2 of `mesh_tp` 1. The analysis goes on (it divided by the gap between
    group ranks) and names the member that claims the group and logged no timeout."""
    lines = [_init_line(r, "1", "mesh_tp", r % 4, 4) for r in (0, 1, 2, 10)]
    for r in (0, 1, 2):
        lines += _timed_out(r, "1", "mesh_tp", r, 7, 0)
    found = _log_findings(tmp_path, lines)
    assert found and (found[0].kind, found[0].waiting_ranks) == (Kind.MISSING_RANKS, [0, 1, 2])
    assert 10 in found[0].culprit_ranks


def test_a_labelled_file_of_one_task_is_that_nodes_file(tmp_path: Path) -> None:
    """`srun --label --output=trace-%N.out`: one file per node, every line `0: `; the file's
    name names node 0, while a labelled file of several tasks names none."""
    one = "0: [default2]:[rank2]: step 3 done\n0: [default3]:[rank3]: step 3 done\n"
    ev = gather([parse_log(_log(tmp_path, "trace-gpu017.out", one))], [])
    assert (ev.ranks[2].host, ev.ranks[3].host) == ("gpu017", "gpu017")
    both = one + "1: [default0]:[rank4]: step 3 done\n"
    (tmp_path / "b").mkdir()
    ev = gather([parse_log(_log(tmp_path / "b", "trace-gpu017.out", both))], [])
    assert (ev.ranks[2].host, ev.ranks[4].host) == ("", "")


def _tp_quad_one_logged(silent: tuple[int, ...]) -> list[str]:
    """A tp group of four, ranks 0-3: rank 2 timed out in its 9th collective; the ranks of
    `silent` logged nothing, the others timed out beside rank 2."""
    lines = [_init_line(r, "5", "mesh_tp", r, 4) for r in range(4)]
    for r in range(4):
        if r not in silent:
            lines += _timed_out(r, "5", "mesh_tp", r, 9, 0)
    return lines


def test_several_silent_members_may_all_wait_inside_so_the_waiting_rank_is_named_too(
    tmp_path: Path,
) -> None:
    """Three of four members logged nothing: they never joined, or the whole group is stuck
    inside the collective and their watchdogs had not fired yet when the job came down."""
    (found,) = _log_findings(tmp_path, _tp_quad_one_logged((0, 1, 3)))
    assert (found.culprit_ranks, found.undecidable) == ([0, 1, 2, 3], True)
    assert found.not_issued_by == [0, 1, 3]
    text = detail(found)
    assert "rank 2 waited in all_reduce at mesh_tp#9 (pg 5)" in text
    assert "ranks 0-1,3 never joined it, or all of them wait inside it" in text


def test_members_that_failed_by_themselves_are_named_without_the_waiting_ones(
    tmp_path: Path,
) -> None:
    lines = _tp_quad_one_logged((0, 1, 3)) + _raised(0, "RuntimeError: CUDA error")
    (found,) = _log_findings(tmp_path, lines + _raised(3, "RuntimeError: CUDA error"))
    assert (found.culprit_ranks, found.undecidable) == ([0, 3], True)


def test_one_silent_member_among_waiting_ones_is_named_alone(tmp_path: Path) -> None:
    (found,) = _log_findings(tmp_path, _tp_quad_one_logged((1,)))
    assert (found.culprit_ranks, found.undecidable) == ([1], False)


def test_a_hosts_one_faulthandler_dump_outside_collectives_is_its_rank_not_waiting(
    tmp_path: Path,
) -> None:
    """torchrun without --tee under `srun --label`, one worker per node: rank 0 timed out in
    gloo on gpu7; on gpu8 rank 1 waits in nothing and the one dump (no pid, no rank) is
    outside collectives: that dump is rank 1's live stack."""
    idle = (
        "Current thread 0x00007f02fab33b80 (most recent call first):\n"
        '  File "/job/main.py", line 67 in fetch_batch\n'
        '  File "/job/main.py", line 221 in fit\n'
    )
    text = "".join(f"0: {line}\n" for line in _gloo_timeout(0).splitlines())
    text += "1: worker started: rank=1 pid=4343\n"
    text += "".join(f"1: {line}\n" for line in idle.splitlines())
    text += "srun: error: gpu7: task 0: Exited with exit code 1\n"
    text += "slurmstepd: error: *** STEP 77.0 ON gpu8 CANCELLED AT 2026-11-29T04:31:09 ***\n"
    text = text.replace("slurmstepd:", "1: slurmstepd:")
    ev = gather([parse_log(_log(tmp_path, "slurm-77.out", text))], [])
    rank1 = ev.ranks[1]
    assert rank1.host == "gpu8" and rank1.stack is not None
    assert rank1.stack.main is not None and rank1.stack.main.frames[0].function == "fetch_batch"
    assert not ev.unmatched


def test_only_the_agents_rendezvous_connection_error_is_a_lost_store(tmp_path: Path) -> None:
    """torchrun's agent dies of RendezvousConnectionError (c10d_rendezvous_backend.py,
    `_call_store`); another unlabelled traceback, chained or not, is no lost store."""
    tb = 'Traceback (most recent call last):\n  File "/x/run.py", line 9, in main\n'
    other = tb + "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes.\n"
    lost = tb + (
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection "
        "to the C10d store has failed. See inner exception for details.\n"
    )
    events = [
        [e.event for _s, e in parse_log(_log(tmp_path, f"n{i}.log", text)).agent]
        for i, text in enumerate((other, lost))
    ]
    assert events == [[], ["store_lost"]]


def _three_nodes_one_stackless(tmp_path: Path, third_log: str, hostless: str = "") -> list[Finding]:
    """Three nodes of one worker each, cancelled (torch 2.13, gloo): ranks 0 and 1's
    labelled py-spy stacks wait in all_reduce; the third node's stacks were lost and its
    log is `third_log`; `hostless`, a log no node's. Every agent logged the SIGTERM it sent
    its worker."""
    from frtrace.evidence.pyspy import parse_pyspy

    agent = (
        "W1129 07:17:11.810000 {apid} .venv/lib/python3.11/site-packages/torch/distributed/"
        "elastic/multiprocessing/api.py:1028] Sending process {pid} closing signal SIGTERM\n"
    )
    logs, stacks = [], []
    for rank, host, pid in ((0, "node-131", 7806), (1, "node-178", 7807)):
        logs.append(parse_log(_log(tmp_path, f"node-{host}.out", agent.format(apid=7785, pid=pid))))
        spy = _log(
            tmp_path,
            f"pyspy_{host}.txt",
            f"# frtrace-collect rank={rank} local_rank=0 host={host} pid={pid}\n"
            f"Process {pid}: python -u train_lm.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            f'Thread {pid} (idle): "MainThread"\n'
            "    all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
            "    communicate (train_lm.py:151)\n",
        )
        stacks.append(parse_pyspy(spy))
    logs.append(parse_log(_log(tmp_path, "node-node-213.out", third_log)))
    if hostless:
        logs.append(parse_log(_log(tmp_path, "slurm-7384194.out", hostless)))
    return log_findings(gather(logs, stacks))


def test_a_worker_its_agent_names_that_is_no_seen_rank_is_the_unseen_rank(
    tmp_path: Path,
) -> None:
    """The third node's agent names its worker, pid 7805, which is neither rank seen: the
    world has a third rank, the one 0 and 1 wait for, and that is its process."""
    third = (
        "W1129 07:17:11.811000 7792 .venv/lib/python3.11/site-packages/torch/distributed/"
        "elastic/multiprocessing/api.py:1028] Sending process 7805 closing signal SIGTERM\n"
    )
    (finding,) = _three_nodes_one_stackless(tmp_path, third)
    assert (finding.kind, finding.culprit_ranks) == ("missing_ranks", [2])
    assert [(p.host, p.pid) for p in finding.culprit_processes] == [("node-213", 7805)]
    assert "its agent names its process: pid 7805 on node-213" in detail(finding)


def test_an_agent_named_worker_that_may_be_a_seen_rank_adds_no_rank(tmp_path: Path) -> None:
    """As above, but the third node's log shows rank 2 there, timed out in all_reduce like
    the others, and its agent names two workers (7805, and 7809 of an earlier attempt):
    either may be rank 2, so neither is a rank more. Every rank waits in the collective:
    the hang is inside it, and no process is named for a rank unseen."""
    closing = (
        "W1129 07:17:11.811000 7792 .venv/lib/python3.11/site-packages/torch/distributed/"
        "elastic/multiprocessing/api.py:1028] Sending process {pid} closing signal SIGTERM\n"
    )
    third = closing.format(pid=7809) + closing.format(pid=7805) + _gloo_timeout(2)
    (finding,) = _three_nodes_one_stackless(tmp_path, third)
    assert (finding.kind, finding.culprit_processes) == ("stuck_collective", [])


def test_an_agent_named_worker_adds_no_rank_while_a_seen_rank_has_no_host(tmp_path: Path) -> None:
    """As the first, but rank 2's timeout is in a log no node's: it may be the worker the
    third node's agent names, so that worker is no rank more."""
    third = (
        "W1129 07:17:11.811000 7792 .venv/lib/python3.11/site-packages/torch/distributed/"
        "elastic/multiprocessing/api.py:1028] Sending process 7805 closing signal SIGTERM\n"
    )
    (finding,) = _three_nodes_one_stackless(tmp_path, third, hostless=_gloo_timeout(2))
    assert (finding.kind, finding.culprit_processes) == ("stuck_collective", [])


# --- less evidence never gives a more confident answer ---------------------------------------


def _ended(rank: int, host: str, pid: int, exitcode: int, first: bool = False) -> str:
    """torchelastic's summary entry of one worker (real torch 2.13 lines): exit code 1 with
    no traceback kept, or -15, the agent's SIGTERM after another worker failed."""
    signal = "  (SIGTERM)" if exitcode == -15 else " "
    trace = (
        f"Signal 15 (SIGTERM) received by PID {pid}"
        if exitcode == -15
        else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    )
    return (
        ("Root Cause (first observed failure):\n" if first else "Failures:\n")
        + f"[0]:\n  time      : 2026-11-29_13:54:03\n  host      : {host}\n"
        f"  rank      : {rank} (local_rank: 0)\n  exitcode  : {exitcode} (pid: {pid}){signal}\n"
        f"  error_file: <N/A>\n  traceback : {trace}\n"
    )


def test_an_error_exit_without_its_traceback_beside_a_silent_rank_names_both(
    tmp_path: Path,
) -> None:
    """Rank 2 timed out in all_reduce; rank 1 exited with code 1, its traceback not kept;
    rank 0 said nothing and was ended by its agent. A rank that timed out exits with code 1
    as well: rank 1 may be a victim of rank 0, and nothing tells which holds the job."""
    text = (
        _gloo_timeout(2)
        + _ended(1, "nodeB", 301, 1, first=True)
        + _ended(0, "nodeA", 300, -15)
        + _ended(2, "nodeC", 302, 1)
    )
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1], True)
    assert "rank 1 may be a victim of the silent" in detail(finding)


def test_an_error_exit_without_its_traceback_is_the_culprit_while_every_other_rank_waits(
    tmp_path: Path,
) -> None:
    """The same without a silent rank: ranks 0 and 2 timed out, so rank 1's exit is the
    failure they waited on."""
    text = (
        _gloo_timeout(0)
        + _gloo_timeout(2)
        + _ended(1, "nodeB", 301, 1, first=True)
        + _ended(0, "nodeA", 300, 1)
        + _ended(2, "nodeC", 302, 1)
    )
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([1], False)


def test_a_rank_no_input_shows_is_named_beside_the_silent_one(tmp_path: Path) -> None:
    """Ranks 0 and 1 timed out in all_reduce; rank 4 said nothing; ranks 2 and 3 exist
    (ranks run from 0) but their node's log is lost: they are no less absent than rank 4."""
    text = _gloo_timeout(0) + _gloo_timeout(1) + _ended(4, "nodeC", 304, -15)
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([2, 3, 4], True)
    assert "ranks 2-3, which no input shows, may be absent as well" in detail(finding)


def test_a_rank_waiting_elsewhere_beside_a_silent_one_leaves_every_side_named(
    tmp_path: Path,
) -> None:
    """Rank 0 waits in broadcast, rank 1 in all_reduce, rank 2 said nothing: a silent rank
    explains no split, and if rank 2 stands with rank 1, rank 0 is the side that is wrong."""
    text = _gloo_timeout(0, "broadcast") + _gloo_timeout(1) + _ended(2, "nodeC", 302, -15)
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1, 2], True)
    assert "waited elsewhere: one side skipped or added a call" in detail(finding)


def test_a_rank_waiting_elsewhere_where_most_wait_names_it_beside_the_silent_one(
    tmp_path: Path,
) -> None:
    """Ranks 0-2 wait in all_reduce, rank 3 in broadcast, rank 4 said nothing: rank 3's side
    is the smaller whichever side rank 4 stands on; the waiting three are not named."""
    text = (
        "".join(_gloo_timeout(r) for r in range(3))
        + _gloo_timeout(3, "broadcast")
        + _ended(4, "nodeE", 304, -15)
    )
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([3, 4], True)


def test_an_error_exit_beside_a_silent_rank_is_a_finding_though_nobody_waits(
    tmp_path: Path,
) -> None:
    """No rank is seen waiting: rank 1 exited with code 1, its traceback not kept, and rank 0
    was ended by its agent. The job failed, so that is a finding naming both, not none."""
    text = _ended(1, "nodeB", 301, 1, first=True) + _ended(0, "nodeA", 300, -15)
    (finding,) = log_findings(gather([parse_log(_log(tmp_path, "job.log", text))], []))
    assert (finding.culprit_ranks, finding.undecidable) == ([0, 1], True)


def test_the_one_process_no_line_names_keeps_its_host_and_pid_in_a_larger_stated_world(
    tmp_path: Path,
) -> None:
    """The roster states three ranks, two nodes are seen: ranks 0 and 2 are both unnamed."""
    root = _two_nodes_one_unnamed(tmp_path, stated_world=3)
    assert root is not None
    assert root.culprit_ranks != [0] and [p.pid for p in root.culprit_processes] == [12912]


# --- NCCL's host:pid ---------------------------------------------------------------------------


def _localhost_summary_and_warn(tmp_path: Path, extra: str = "") -> Evidence:
    """One job-wide file without labels: torchelastic's summary says `localhost` for ranks 2
    and 5, and NCCL's WARN line names the host of pid 777."""
    text = (
        _ended(2, "localhost", 777, -6, first=True)
        + _ended(5, "localhost", 780, -15)
        + nccl_warn_line("dgx14", 777, "NET/IB : Got completion from peer 10.1.1.7<43090>")
        + "\n"
        + extra
    )
    return gather([parse_log(_log(tmp_path, "slurm-1.out", text))], [])


def test_nccls_host_of_a_pid_places_the_rank_a_localhost_summary_gives_that_pid(
    tmp_path: Path,
) -> None:
    ev = _localhost_summary_and_warn(tmp_path)
    assert ev.ranks[2].host == "dgx14"
    assert [w.pid for w in ev.ranks[2].warnings] == [777]
    assert not ev.ranks[5].host


def test_a_pid_two_summary_entries_share_ties_no_host(tmp_path: Path) -> None:
    ev = _localhost_summary_and_warn(tmp_path, _ended(9, "localhost", 777, -15))
    assert not ev.ranks[2].host and not ev.ranks[9].host


def test_a_pid_nccl_names_on_two_hosts_ties_no_host(tmp_path: Path) -> None:
    other = nccl_warn_line("dgx15", 777, "NET/IB : Got completion from peer 10.1.1.8<43091>")
    ev = _localhost_summary_and_warn(tmp_path, other + "\n")
    assert not ev.ranks[2].host
