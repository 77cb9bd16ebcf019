"""Generate real hung, failed and healthy PyTorch jobs, with their evidence collected as
engineers collect it: frtrace's log and stack readers are tuned on one split and judged on the
other.

Usage::

    python scripts/evidence_jobs.py --out DIR --split tune|heldout --count N
        [--seed-base S] [--only ID...] [--keep-going]

Each scenario is drawn from ``random.Random(seed)`` (``draw``), run as a real job, and written
to ``DIR/<id>/`` (ids ``real-<split>-<seed:04d>``; tune seeds start at 0, heldout seeds at 1000,
``--seed-base`` moves the start):

- ``evidence/``: what the engineer collected, and nothing else (frtrace is pointed at it);
- ``expected.json``: the ground truth, recorded by the workers themselves (schema below).

``DIR/summary.json`` lists every scenario run (ok or failed, seconds, attempts and why).

The job
-------
2 or 3 ``torchrun`` agents on this machine stand for nodes (1 to 3 workers each, at most 6 in
all), ``--rdzv-backend c10d --rdzv-endpoint 127.0.0.1:<free port> --local-addr 127.0.0.1``.
Each agent runs in its own UTS and mount namespaces (``unshare --uts --mount sh -c 'hostname
NAME && mount --bind <hosts> /etc/hosts && exec torchrun ...'``), so ``hostname``, torchelastic's
``host :`` field and the workers' ``socket.gethostname()`` are the node's name, and a private
``/etc/hosts`` resolves every node's name (``127.0.1.<n>``, the node's own line first) as a
cluster's would, so gloo binds to the node's address without a warning. Without root
(``unshare`` refused) nothing is renamed and the real host name is recorded.

The training program (scripts/evidence_worker.py, copied into a private work folder
as ``train.py``, ``pretrain.py``, ... with the culprit's function names drawn per job) runs a
few steps of collectives on gloo (all_reduce, with broadcast, all_gather, barrier and in some
jobs an all_reduce on a ``new_group`` sub-group) with a 15-25 s process-group timeout (at least
18 s when stacks are taken or the job is cancelled, so that the timeout never fires first). The
culprit (any global rank) carries the fault at a drawn step:

- ``stuck_loader``: sleeps in a function of its own (name drawn: ``read_shard``, ...);
- ``blocked_queue``: its main thread waits on ``queue.Queue.get()`` in a function of its own
  while the producer thread (function and thread name drawn) sleeps;
- ``exception``: raises (ValueError, RuntimeError, KeyError, AssertionError,
  FileNotFoundError; message drawn);
- ``sigkill``: SIGKILLs itself, as the OOM killer would;
- ``skipped_collective``: skips the step's all_reduce and waits in the step's next collective
  (barrier, broadcast or all_gather) instead;
- ``healthy``: every rank completes every step and exits 0.

A job that does not reach its intended state (a rank not in place before py-spy looks, a
timeout that fires early, an exit code that is not the one expected) is retried once on
another port, then recorded as failed in ``summary.json`` and not written.

Axes (``style`` in expected.json)
---------------------------------
- ``launcher``: ``role_host`` (``--role <host>: --tee 3``, lines ``[node17:1]:``, local rank),
  ``role_digits`` (``--role <digits of hostname -s>: --tee 3``, ``[17:1]:``), ``no_role``
  (``--tee 3``, ``[default1]:``), ``no_tee`` (worker lines unprefixed), ``redirects``
  (``--redirects 3 --log-dir <per-node folder>``: torchrun's per-worker
  ``<run-id>_*/attempt_0/<local_rank>/stdout.log|stderr.log``, the whole tree collected),
  ``prefix_template`` (``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``: ``[${role_name}${rank}]:``,
  ``[${rank}]:`` or ``[${role_name}-${rank}]:``, the GLOBAL rank). ``role`` says the role given.
- ``loglevel``: ``default`` or ``info`` (``LOGLEVEL=INFO``: "Rendezvous complete ...
  local_ranks=.. global_ranks=..").
- ``detail``: ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` with ``TORCH_CPP_LOG_LEVEL=INFO``.
- ``layout``: ``per_node`` (one file per node: ``<host>.log``, ``node-<host>.out`` or slurm's
  ``trace-%N.out`` naming, at the top or in ``logs/``; ``log_name``, ``log_dir``) or
  ``srun_label`` (every agent's stdout+stderr through an emulated ``srun --label`` into one
  ``slurm-<jobid>.out``, with the lines srun and slurmstepd add, rendered from slurm's format
  strings: see ``_slurm_*``). ``slurm_lines`` says whether slurm's own lines are in the logs;
  ``slurm_version`` which slurmstepd format they follow.
- ``loader_workers``: 0, 1 or 2 forked DataLoader workers per rank, alive for the whole run
  (py-spy of every python process shows them beside the ranks); drawn from its own RNG.
- ``pyspy`` (real py-spy while the job hangs, one file per node, ``pyspy_files``):
  ``none``; ``native_all`` (every python process of the node, the agent included, ``py-spy
  dump --native --pid``); ``children`` (``pgrep -P <agent> | xargs -I {} py-spy dump --pid
  {}``); ``locals`` (``py-spy dump --locals`` of the agent's children; ``rank_locals`` says
  whether ``rank``/``local_rank`` or ``RANK``/``LOCAL_RANK`` are locals of the main function);
  ``labelled`` (the real ``frtrace collect OUT/%h --under <agent pid>`` run in the node's
  namespace: ``# frtrace-collect rank=R local_rank=L host=H pid=P`` before each block);
  ``faulthandler`` (no py-spy: the trainer calls ``faulthandler.register(signal.SIGUSR1,
  all_threads=True)`` and the on-call runs ``pkill -USR1 -P <agent>`` on every node, so each
  worker writes its threads' stacks to its own stderr, into the logs as the launcher
  carries them; no file of its own).
- ``cancelled`` (hung faults only): after the stacks (and dumps) are taken, the on-call ends
  the job before the timeout fires (no torchelastic summary); ``cancel_mode``: ``term_kill``
  (scancel: SIGTERM to every process of the job, SIGKILL to what is left after 5 s),
  ``kill`` (SIGKILL to every process at once) or ``term_agents`` (SIGTERM to each torchrun
  agent by hand, which stops its workers; no slurm cancel lines). Otherwise the gloo timeout
  fires and torchelastic writes its summary; when the culprit's node then goes on hanging (its
  agent stops a worker group that looks healthy only if the rendezvous store it uses went
  away), the on-call scancels what is left 12 s after the last agent ended (``late_cancel``).
- ``dumps``: Flight Recorder dumps (``frtrace.capture``), in ``dump_layout`` ``per_node``
  (``<host>/nccl_trace_rank_<host>_<rank>``), ``dumps_dir`` (``dumps/<host>/trace_<rank>``)
  or ``flat`` (``trace_<rank>``); ``dumps_when``: ``on_failure`` (the culprit before its
  fault, the others after their collective failed, everyone at the end of a healthy job) or,
  for cancelled jobs, ``on_request`` (every live rank dumps when the on-call asks, before the
  cancel). A killed rank leaves none.
- ``survives``: ``all``; ``drop_node_log`` (one node's log, ``dropped``); ``drop_culprit_pyspy``
  (the culprit's node's py-spy file); ``pyspy_only``; ``logs_only``.
- ``names``: ``short`` (``nodeA``, ``trn1``), ``numbered`` (``node17``, ``gpu042``,
  ``compute-3-12``), ``long`` (``gpu-st-p4d-24xlarge-17.cluster.internal``, at most 64 chars).
- ``trainer_lines``: ``none``, or a line pairing the rank with its pid and/or host: ``plain``
  (``rank 3 pid 1234 on node17``), ``bracket`` (``[RANK=3] host=node17 pid=1234 starting``),
  ``logging`` (Python logging ``2026-11-28 12:00:00,123 INFO rank=3 pid=1234 host=...``),
  ``pid_only``, ``host_only``; ``progress`` says which ranks print step lines.

Held-out combinations (``HELD_OUT``): ``tune`` never draws them; about 40% of ``heldout``
seeds are forced to one of them, the rest are drawn freely:

1. ``srun_label`` layout with ``role_digits`` roles and the ``native_all`` py-spy recipe;
2. ``redirects`` launcher with ``detail``;
3. ``long`` names with the ``prefix_template`` launcher.

expected.json
-------------
::

    {"schema": "frtrace.evidence-job/1", "id": "real-tune-0007", "split": "tune", "seed": 7,
     "source": "real-gloo", "fault": "stuck_loader", "style": {...}, "evidence": "evidence",
     "world_size": 6, "ranks": {"0": {"host": ..., "local_rank": 0, "pid": ...}, ...},
     "culprit": {"rank", "host", "pid", "function", "exception", "signal", "waits_in"},
     "hung": true, "expect_exit": [1]}

``culprit`` is null for healthy jobs (``hung`` false, ``expect_exit`` [0, 4]). ``function`` is
the culprit's own function its main thread is in (stuck_loader, blocked_queue), ``exception``
the type raised, ``signal`` ``SIGKILL``, ``waits_in`` the collective a skipping culprit waits in;
each null when it does not apply.

Only the worker imports torch; this module uses the standard library alone.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

SCHEMA = "frtrace.evidence-job/1"
REPO = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().with_name("evidence_worker.py")

# --- the axes --------------------------------------------------------------------------------

FAULTS = ("stuck_loader", "blocked_queue", "exception", "sigkill", "skipped_collective", "healthy")
FAULT_WEIGHTS = (3.0, 2.0, 2.0, 2.0, 2.0, 1.5)
HUNG_FAULTS = ("stuck_loader", "blocked_queue", "skipped_collective")
LAUNCHERS = ("role_host", "role_digits", "no_role", "no_tee", "redirects", "prefix_template")
TEMPLATES = ("[${role_name}${rank}]:", "[${rank}]:", "[${role_name}-${rank}]:")
LAYOUTS = ("per_node", "srun_label")
#: {host}: `hostname`; {short}: `hostname -s`, slurm's node name (%N)
LOG_NAMES = ("{host}.log", "node-{short}.out", "trace-{short}.out")
SLURM_LOG_NAMES = ("node-{short}.out", "trace-{short}.out")  # srun --output=...-%N.out
PYSPY = ("none", "native_all", "children", "locals", "labelled", "faulthandler")
PYSPY_NAMES = ("trace-{short}.out", "pyspy_{short}.txt", "{host}.pyspy.txt")
NAMES = ("short", "numbered", "long")
SURVIVES = ("all", "drop_node_log", "drop_culprit_pyspy", "pyspy_only", "logs_only")
SURVIVES_WEIGHTS = (4.0, 1.0, 1.0, 1.0, 1.0)
TRAINER_LINES = ("none", "plain", "bracket", "logging", "pid_only", "host_only")
PROGRESS = ("none", "rank0", "all", "local0")
PROGRESS_FORMATS = (
    "step {step} loss {loss:.4f}",
    "[step {step}] loss={loss:.3f}",
    "Step {step}: loss {loss:.5f}",
    "it {step} | loss {loss:.4f}",
)
DUMP_LAYOUTS = ("per_node", "dumps_dir", "flat")
#: term_kill: scancel (slurm signals every process of the step SIGTERM, SIGKILL after KillWait,
#: here a few seconds); kill: SIGKILL to every process at once (scancel -s KILL, a reboot);
#: term_agents: `kill <torchrun pid>` on each node by hand (torchelastic stops its workers).
CANCEL_MODES = ("term_kill", "kill", "term_agents")
LOGLEVELS = ("default", "info")
RANK_LOCALS = ("lower", "upper", "env")
SLURM_VERSIONS = ("24.11", "25.05")

#: (axis, value) sets that tune never draws and heldout is partly forced to.
HELD_OUT: tuple[dict[str, Any], ...] = (
    {"layout": "srun_label", "launcher": "role_digits", "pyspy": "native_all"},
    {"launcher": "redirects", "detail": True},
    {"names": "long", "launcher": "prefix_template"},
)
HELD_OUT_FORCED = 0.4

#: Names the worker's functions take per job (the first of each is the name in the template).
STUCK_FUNCTIONS = (
    "slow_data_loader",
    "read_shard",
    "fetch_batch",
    "wait_for_checkpoint",
    "load_next_sample",
    "stream_tokens",
    "open_remote_file",
    "decode_images",
)
QUEUE_FUNCTIONS = ("next_batch", "get_batch", "wait_for_batch", "dequeue_sample", "pull_samples")
PRODUCER_FUNCTIONS = (
    "prefetch_worker",
    "producer_loop",
    "fill_queue",
    "read_ahead",
    "background_reader",
)
PRODUCER_THREADS = ("prefetch", "loader-0", "data-producer", "reader")
HOLD_FUNCTIONS = ("forward_backward", "train_step", "compute_loss", "optimizer_step")
RAISE_FUNCTIONS = ("validate_batch", "check_inputs", "collate", "tokenize_batch")
TRAIN_FUNCTIONS = ("train", "training_loop", "fit", "run_training")
MAIN_FUNCTIONS = ("main", "run", "main_worker", "launch")
SCRIPTS = ("train.py", "pretrain.py", "main.py", "run_ddp.py", "train_lm.py")
SCRIPT_ARGS = ((), ("--config", "configs/base.yaml"), ("--steps", "5"), ("--batch-size", "32"))
EXCEPTIONS: dict[str, tuple[str, ...]] = {
    "ValueError": ("bad batch at step {step}", "sample 48213 has 0 tokens (step {step})"),
    "RuntimeError": ("loss is NaN at step {step}", "shape mismatch in batch at step {step}"),
    "KeyError": ("input_ids", "labels"),
    "AssertionError": ("batch size 0 at step {step}", "sequence longer than 4096"),
    "FileNotFoundError": (
        "[Errno 2] No such file or directory: '/data/shards/shard-00017.bin'",
        "checkpoint shard not found: /ckpt/step_{step}/model_03.pt",
    ),
}
SHARDS = ("s3://corpus/shard-00017", "/lustre/data/part-0042", "gs://tokens/train-0003")
RDZV_IDS = ("job{jobid}", "pretrain-{jobid}", "ddp-run", "llm-{jobid}")

#: Per-job limits (seconds).
JOB_DEADLINE_S = 90.0
READY_DEADLINE_S = 65.0
SETTLE_S = 2.0
TERM_GRACE_S = 5.0
STALL_S = 12.0


# --- the draw ----------------------------------------------------------------------------------


def _hosts(rng: random.Random, kind: str, n: int) -> list[str]:
    """n distinct node names of the kind."""
    if kind == "short":
        family = rng.choice(("letters", "trn", "host", "dgx", "w"))
        if family == "letters":
            prefix = rng.choice(("node", "n", "gpu"))
            return [f"{prefix}{chr(ord('A') + i)}" for i in range(n)]
        start = rng.randint(1, 7)
        return [f"{family}{start + i}" for i in range(n)]
    if kind == "numbered":
        family = rng.choice(("node", "gpu", "compute", "nid", "a100"))
        nums = sorted(rng.sample(range(1, 128), n))
        if rng.random() < 0.5:
            nums = [nums[0] + i for i in range(n)]
        if family == "node":
            return [f"node{k}" for k in nums]
        if family == "gpu":
            return [f"gpu{k:03d}" for k in nums]
        if family == "compute":
            rack = rng.randint(1, 9)
            return [f"compute-{rack}-{k}" for k in nums]
        if family == "nid":
            return [f"nid{k:06d}" for k in nums]
        return [f"a100-{k:02d}" for k in nums]
    family = rng.choice(("p4d", "ec2", "gcp", "edu"))
    nums = sorted(rng.sample(range(1, 256), n))
    if family == "p4d":
        return [f"gpu-st-p4d-24xlarge-{k}.cluster.internal" for k in nums]
    if family == "ec2":
        a, b = rng.randint(0, 31), rng.randint(0, 255)
        return [f"ip-10-{a}-{b}-{k}.us-west-2.compute.internal" for k in nums]
    if family == "gcp":
        return [f"train-a3-highgpu-8g-{k:03d}.us-central1-c.c.ml-research.internal" for k in nums]
    return [f"node-{k:03d}.hpc.example-university.edu" for k in nums]


def short_name(host: str) -> str:
    """``hostname -s``."""
    return host.split(".")[0]


def host_digits(host: str) -> str:
    """``hostname -s | tr -dc 0-9``: the role some jobs give torchrun."""
    return re.sub(r"\D", "", short_name(host))


def _program(rng: random.Random, fault: str, world: int) -> dict[str, Any]:
    """The steps' collectives, the sub-group, the fault's step and the culprit."""
    steps = rng.randint(3, 5)
    fault_step = rng.randint(1, steps - 1)
    subgroup: list[int] = []
    if world >= 3 and rng.random() < 0.35:
        subgroup = sorted(rng.sample(range(world), rng.randint(2, world - 1)))
    ops: list[list[str]] = []
    for step in range(steps):
        step_ops = ["all_reduce"]
        if rng.random() < 0.5:
            step_ops.append(rng.choice(("broadcast", "all_gather", "barrier")))
        if subgroup and rng.random() < 0.5:
            step_ops.append("sub_all_reduce")
        if step == steps - 1 and "barrier" not in step_ops:
            step_ops.append("barrier")
        ops.append(step_ops)
    waits_in = None
    if fault == "skipped_collective":
        waits_in = rng.choice(("barrier", "broadcast", "all_gather"))
        step_ops = ops[fault_step]
        if len(step_ops) > 1 and step_ops[1] in ("barrier", "broadcast", "all_gather"):
            waits_in = step_ops[1]
        else:
            step_ops.insert(1, waits_in)
    return {
        "ops": ops,
        "fault_step": fault_step,
        "subgroup": subgroup,
        "culprit": rng.randrange(world),
        "waits_in": waits_in,
    }


def _draw_once(rng: random.Random, force: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    s["fault"] = rng.choices(FAULTS, FAULT_WEIGHTS)[0]
    s["nodes"] = rng.choice((2, 3))
    s["nproc"] = rng.randint(1, 6 // s["nodes"])
    s["names"] = rng.choice(NAMES)
    s["launcher"] = rng.choice(LAUNCHERS)
    s["template"] = rng.choice(TEMPLATES)
    s["role_form"] = rng.choice(("host", "short", "none"))
    s["layout"] = rng.choice(LAYOUTS)
    s["log_name"] = rng.choice(LOG_NAMES)
    s["log_dir"] = rng.choice(("", "logs/"))
    s["loglevel"] = rng.choice(LOGLEVELS)
    s["detail"] = rng.random() < 0.25
    s["pyspy"] = rng.choice(PYSPY)
    s["pyspy_name"] = rng.choice(PYSPY_NAMES)
    s["pyspy_dir"] = rng.choice(("", "stacks/", "pyspy/"))
    s["pyspy_native"] = rng.random() < 0.5  # labelled: `frtrace collect --native`
    s["cancelled"] = rng.random() < 0.4
    s["cancel_mode"] = rng.choice(CANCEL_MODES)
    s["dumps"] = rng.random() < 0.5
    s["dump_layout"] = rng.choice(DUMP_LAYOUTS)
    s["survives"] = rng.choices(SURVIVES, SURVIVES_WEIGHTS)[0]
    s["trainer_lines"] = rng.choices(TRAINER_LINES, (3, 1.4, 1.4, 1.4, 1.4, 1.4))[0]
    s["progress"] = rng.choice(PROGRESS)
    s["progress_format"] = rng.choice(PROGRESS_FORMATS)
    s["rank_locals"] = rng.choice(RANK_LOCALS)
    s["node_rank_arg"] = rng.random() < 0.3
    s["slurm_version"] = rng.choice(SLURM_VERSIONS)
    s["jobid"] = rng.randint(100000, 9999999)
    s["script"] = rng.choice(SCRIPTS)
    s["script_args"] = list(rng.choice(SCRIPT_ARGS))
    s["rdzv_id"] = rng.choice(RDZV_IDS).format(jobid=s["jobid"])
    s["functions"] = {
        "slow_data_loader": rng.choice(STUCK_FUNCTIONS),
        "next_batch": rng.choice(QUEUE_FUNCTIONS),
        "prefetch_worker": rng.choice(PRODUCER_FUNCTIONS),
        "forward_backward": rng.choice(HOLD_FUNCTIONS),
        "validate_batch": rng.choice(RAISE_FUNCTIONS),
        "train": rng.choice(TRAIN_FUNCTIONS),
        "main_" + s["rank_locals"]: rng.choice(MAIN_FUNCTIONS),
    }
    s["producer_thread"] = rng.choice(PRODUCER_THREADS)
    s["shard"] = rng.choice(SHARDS)
    s["exception"] = rng.choice(sorted(EXCEPTIONS))
    s["exception_message"] = rng.choice(EXCEPTIONS[s["exception"]])
    s["timeout_s"] = rng.randint(15, 20)
    s["drop_node"] = rng.randrange(s["nodes"])
    s.update(force)
    world = s["nodes"] * s["nproc"]
    s["hosts"] = _hosts(rng, s["names"], s["nodes"])
    s.update(_program(rng, s["fault"], world))
    _settle(s, rng)
    return s


def _settle(s: dict[str, Any], rng: random.Random) -> None:
    """Values that follow from others."""
    fault, launcher = s["fault"], s["launcher"]
    s["world_size"] = s["nodes"] * s["nproc"]
    form = s["role_form"]
    if form == "short" and s["names"] != "long":
        form = "host"  # `hostname -s` differs from the name only for long names
    if launcher == "role_host":
        s["role"] = "host" if form == "none" else form
    elif launcher == "role_digits":
        s["role"] = "digits"
    elif launcher in ("redirects", "prefix_template"):
        s["role"] = form
    else:
        s["role"] = "none"
    if launcher != "prefix_template":
        s["template"] = None
    # a job that ends by itself within a second or two of the fault leaves no time for stacks
    fast = fault in ("exception", "sigkill") or (fault == "skipped_collective" and s["detail"])
    if fast:
        s["pyspy"] = "none"
    if fault not in HUNG_FAULTS or fast:
        s["cancelled"] = False
    if not s["cancelled"]:
        s["cancel_mode"] = None
    s["hold"] = fault == "healthy" and s["pyspy"] != "none"
    if s["pyspy"] != "none" or s["cancelled"]:
        s["timeout_s"] = max(s["timeout_s"], 18) + rng.randint(0, 5)
    s["timeout_s"] = min(s["timeout_s"], 25)
    if s["pyspy"] in ("none", "faulthandler"):
        s["pyspy_name"] = s["pyspy_dir"] = None
    elif s["pyspy"] == "labelled":
        s["pyspy_name"] = "pyspy_{short}.txt"
        s["pyspy_dir"] = s["pyspy_dir"] or "collect/"
    elif s["pyspy"] == "children":
        s["pyspy_name"] = "pyspy_{short}.txt"
    if s["layout"] == "srun_label":
        s["log_name"] = "slurm-{jobid}.out"
    s["slurm_lines"] = s["layout"] == "srun_label" or s["log_name"] in SLURM_LOG_NAMES
    if not s["slurm_lines"]:
        s["slurm_version"] = None
    if not s["dumps"]:
        s["dump_layout"] = None
    s["dumps_when"] = None if not s["dumps"] else "on_request" if s["cancelled"] else "on_failure"
    if s["survives"] != "drop_node_log":
        s["drop_node"] = None
    if fault != "exception":
        s["exception"] = s["exception_message"] = None


def _valid(s: dict[str, Any]) -> bool:
    """The draw's axes fit together."""
    if s["launcher"] == "role_digits":
        digits = [host_digits(h) for h in s["hosts"]]
        if not all(digits) or len(set(digits)) != len(digits):
            return False
    survives = s["survives"]
    if survives == "drop_node_log" and s["layout"] != "per_node":
        return False
    files = s["pyspy"] not in ("none", "faulthandler")  # stacks in files of their own
    if survives == "drop_culprit_pyspy" and (not files or s["fault"] == "healthy"):
        return False
    if survives == "pyspy_only" and not files:
        return False
    if survives == "logs_only" and not files and not s["dumps"]:
        return False
    if files and s["layout"] == "per_node":
        log_path = s["log_dir"] + s["log_name"]
        if log_path == s["pyspy_dir"] + s["pyspy_name"]:
            return False
    return not (s["dumps"] and s["dump_layout"] == "flat" and s["pyspy_dir"] == "")


def held_out_combo(s: dict[str, Any]) -> int | None:
    """The index in HELD_OUT of the combination the draw holds, or None."""
    for i, combo in enumerate(HELD_OUT):
        if all(s.get(k) == v for k, v in combo.items()):
            return i
    return None


def draw(split: str, seed: int, forced: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scenario of a seed: the same seed, the same draw (`forced`: axes set by hand, for
    the fixtures that show one shape of evidence)."""
    if split not in ("tune", "heldout"):
        raise ValueError(split)
    rng = random.Random(seed)
    force: dict[str, Any] = {}
    if split == "heldout" and rng.random() < HELD_OUT_FORCED:
        force = dict(rng.choice(HELD_OUT))
    force.update(forced or {})
    for _ in range(10000):
        s = _draw_once(rng, force)
        if not _valid(s):
            continue
        if split == "tune" and held_out_combo(s) is not None:
            continue
        s["id"] = f"real-{split}-{seed:04d}"
        s["split"] = split
        s["seed"] = seed
        s["held_out"] = held_out_combo(s)
        # drawn apart, so that the axes above stay what each seed drew before this one came
        s["loader_workers"] = (forced or {}).get(
            "loader_workers", random.Random(f"loader-{seed}").choice((0, 1, 2))
        )
        return s
    raise RuntimeError(f"no valid draw for seed {seed}")


def first_seed(split: str) -> int:
    return 0 if split == "tune" else 1000


# --- the worker program ------------------------------------------------------------------------


def worker_source(functions: dict[str, str]) -> str:
    """evidence_worker.py with the identifiers in `functions` renamed (whole names only)."""
    text = WORKER.read_text()
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in functions:
            edits.append((tok.start[0], tok.start[1], tok.string, functions[tok.string]))
    for row, col, old, new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old) :]
    source = "".join(lines)
    # the job's main function is called directly, as a trainer's script does
    main = next(new for old, new in functions.items() if old.startswith("main_"))
    source, n = re.subn(r'(?m)^    # the copy calls.*\n    \{"lower": .*$', f"    {main}()", source)
    if n != 1:
        raise AssertionError("evidence_worker.py's __main__ block changed")
    return source


# --- processes -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out.extend(int(p) for p in (task / "children").read_text().split())
    return sorted(set(out))


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return sorted(found)


def _with_token(token: str) -> list[int]:
    """Every process started for this job (its environment holds the job's token)."""
    needle = f"EVJOB_TOKEN={token}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
    return pids


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _can_unshare() -> bool:
    try:
        probe = subprocess.run(
            [
                "unshare",
                "--uts",
                "--mount",
                "sh",
                "-c",
                "hostname evjob-probe && mount --bind /etc/hosts /etc/hosts",
            ],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is needed for the stacks: pip install py-spy")
    return found


# --- slurm's own lines ---------------------------------------------------------------------------
# Rendered from slurm's format strings (github.com/SchedMD/slurm, read at commit 284c3b95,
# 2026-08); srun and slurmstepd print through src/common/log.c `_log_msg`, which writes
# "%s: %s%s" (argv0, "error: " for error(), "" for info()) to stderr for commands.


def _slurm_label(task_id: int, width: int) -> str:
    # src/common/write_labelled_message.c, _write_label: xstrfmtcat(buf, "%*d: ", width, id)
    return f"{task_id:>{width}}: "


def _slurm_task_exit(host: str, task_id: int, code: int) -> str:
    if code < 0:
        # src/srun/launch.c, launch_common_task_finish / _task_finish: error("%s: %s %s: %s%s",
        # hosts, task_str, tasks, strsignal(WTERMSIG(status)), core_str) when the step was not
        # cancelled (a cancelled step's signals are only verbose()).
        return f"srun: error: {host}: task {task_id}: {signal.strsignal(-code)}\n"
    # src/srun/launch.c, _task_finish: error("%s: %s %s: Exited with exit code %d", ...)
    return f"srun: error: {host}: task {task_id}: Exited with exit code {code}\n"


def _slurm_step_aborted() -> str:
    # src/api/step_launch.c, slurm_step_launch_wait_finish: info("Job step aborted: Waiting up
    # to %d seconds for job step to finish.", slurm_conf.kill_wait + STEP_ABORT_TIME), with
    # STEP_ABORT_TIME 2 and the default KillWait 30 (src/common/read_config.h DEFAULT_KILL_WAIT).
    return "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"


def _slurm_cancelled(entity: str, node: str, sig: int, version: str) -> str:
    """slurmstepd's line when the job is cancelled (entity: "STEP 1234.0" or "JOB 1234").

    src/slurmd/slurmstepd/req.c, _handle_signal_container: up to 24.11
    error("*** %s ON %s CANCELLED AT %s ***", entity, step->node_name, time_str), written by
    log.c as "slurmstepd: error: ..." (mgr.c, _slurmd_job_log_init: argv0 "slurmstepd", stderr
    dup'ed onto the first task's stderr); from 25.05 (commit f7bc53fb) "*** %s ON %s CANCELLED AT
    %s DUE to SIGNAL %s ***" with strsignal(sig), and log.c writes daemons' stderr as "[%M] %s%s"
    (ISO 8601 time with milliseconds, then "error: "). time_str is slurm_make_time_str's default
    "%FT%T".
    """
    now = time.time()
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    if version == "24.11":
        return f"slurmstepd: error: *** {entity} ON {node} CANCELLED AT {when} ***\n"
    stamp = f"{when}.{int(now * 1000) % 1000:03d}"
    what = signal.strsignal(sig)
    return f"[{stamp}] error: *** {entity} ON {node} CANCELLED AT {when} DUE to SIGNAL {what} ***\n"


# --- one job ------------------------------------------------------------------------------------


class JobFailed(Exception):
    """The job did not reach its intended state."""


@dataclass
class Node:
    index: int
    host: str
    proc: subprocess.Popen[bytes]
    log: IO[bytes] | None = None
    reader: threading.Thread | None = None
    code: int | None = None
    ended: float | None = None
    descendants: list[int] = field(default_factory=list)


class Job:
    """One run of a scenario: its agents, its work folder, its evidence."""

    def __init__(self, s: dict[str, Any], case: Path, port: int, rename: bool) -> None:
        self.s = s
        self.case = case
        self.evidence = case / "evidence"
        self.port = port
        self.rename = rename
        self.token = uuid.uuid4().hex
        self.work = Path(tempfile.mkdtemp(prefix="evjob-"))
        self.nodes: list[Node] = []
        self.lock = threading.Lock()
        self.srun_log: IO[bytes] | None = None
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.hosts = list(s["hosts"])  # without renaming, still the files' and roles' names
        self.pyspy_files: dict[str, str] = {}
        self.pyspy_done: float | None = None
        self.timing: dict[str, float] = {}
        self.scancelled = False
        self.late_cancel = False

    # -- paths

    def log_path(self, host: str) -> Path:
        name = self.s["log_name"].format(host=host, short=short_name(host), jobid=self.s["jobid"])
        return self.evidence / (self.s["log_dir"] + name)

    def pyspy_path(self, host: str) -> Path:
        if self.s["pyspy"] == "labelled":  # frtrace collect OUT/%h: its own file name
            if not self.rename:  # every node has this machine's name: OUT/<drawn name>
                real = short_name(socket.gethostname())
                return self.evidence / self.s["pyspy_dir"] / short_name(host) / f"pyspy_{real}.txt"
            short = short_name(host)
            return self.evidence / self.s["pyspy_dir"] / short / f"pyspy_{short}.txt"
        name = self.s["pyspy_name"].format(host=host, short=short_name(host))
        return self.evidence / (self.s["pyspy_dir"] + name)

    def dump_pattern(self) -> str | None:
        layout = self.s["dump_layout"]
        if layout == "per_node":
            rel = "{host}/nccl_trace_rank_{host}_{rank}"
        elif layout == "dumps_dir":
            rel = "dumps/{host}/trace_{rank}"
        elif layout == "flat":
            rel = "trace_{rank}"
        else:
            return None
        return str(self.evidence / rel)

    def role(self, host: str) -> str | None:
        role = self.s["role"]
        if role == "host":
            return host
        if role == "short":
            return short_name(host)
        if role == "digits":
            return host_digits(host)
        return None

    # -- start

    def start(self) -> None:
        s = self.s
        self.evidence.mkdir(parents=True)
        script = self.work / s["script"]
        script.write_text(worker_source(s["functions"]))
        spec = {
            "work": str(self.work),
            "fault": s["fault"],
            "culprit": s["culprit"],
            "fault_step": s["fault_step"],
            "ops": s["ops"],
            "subgroup": s["subgroup"],
            "timeout_s": s["timeout_s"],
            "dumps": s["dumps"],
            "dump_pattern": self.dump_pattern(),
            "dump_on_request": s["dumps_when"] == "on_request",
            "trainer_lines": s["trainer_lines"],
            "progress": s["progress"],
            "progress_format": s["progress_format"],
            "rank_locals": s["rank_locals"],
            "exception": s["exception"],
            "exception_message": s["exception_message"],
            "shard": s["shard"],
            "producer_thread": s["producer_thread"],
            "hold": s["hold"],
            "faulthandler": s["pyspy"] == "faulthandler",
            "loader_workers": s.get("loader_workers", 0),
        }
        (self.work / "spec.json").write_text(json.dumps(spec))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TORCH", "NCCL", "GLOO"))
            and k not in ("LOGLEVEL", "OMP_NUM_THREADS", "RANK", "LOCAL_RANK", "WORLD_SIZE")
        }
        env["PYTHONPATH"] = str(REPO)
        # torchrun keeps its workers' output under $TMPDIR/torchelastic_*: in the work folder
        (self.work / "tmp").mkdir()
        env["TMPDIR"] = str(self.work / "tmp")
        env["EVJOB_SPEC"] = str(self.work / "spec.json")
        env["EVJOB_TOKEN"] = self.token
        if s["loglevel"] == "info":
            env["LOGLEVEL"] = "INFO"
        if s["detail"]:
            env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
            env["TORCH_CPP_LOG_LEVEL"] = "INFO"
        if s["template"]:
            env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = s["template"]
        if s["pyspy"] == "labelled":
            # frtrace collect copies the dumps at a rank's prefix: point it at an empty private
            # prefix so that no earlier run's dump in /tmp or ~/.cache is copied in
            env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = str(self.work / "no_dump_")
        if s["layout"] == "srun_label":
            path = self.log_path("")
            path.parent.mkdir(parents=True, exist_ok=True)
            self.srun_log = open(path, "wb")  # noqa: SIM115
        torchrun = str(Path(sys.executable).with_name("torchrun"))
        width = len(str(s["nodes"] - 1))
        for index, host in enumerate(self.hosts):
            cmd = [torchrun, "--nnodes", str(s["nodes"]), "--nproc-per-node", str(s["nproc"])]
            if s["node_rank_arg"]:
                cmd += ["--node-rank", str(index)]
            cmd += [
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{self.port}",
                "--rdzv-id", s["rdzv_id"], "--local-addr", "127.0.0.1",
            ]  # fmt: skip
            role = self.role(host)
            if role is not None:
                cmd += ["--role", f"{role}:"]
            if s["launcher"] == "redirects":
                cmd += ["--redirects", "3", "--log-dir", str(self.logdir(host))]
            elif s["launcher"] != "no_tee":
                cmd += ["--tee", "3"]
            cmd += [str(script), *s["script_args"]]
            if self.rename:
                # the node's name, and an /etc/hosts of its own that resolves every node's
                # name (127.0.1.<n>, as Debian names a host), bound in a private mount namespace
                hosts = self.work / f"hosts.{index}"
                hosts.write_text(self.hosts_file(index))
                shell = 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"'
                cmd = ["unshare", "--uts", "--mount", "sh", "-c", shell, host, str(hosts), *cmd]
            if self.srun_log is not None:
                proc = subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.work,
                    start_new_session=True,
                )
                node = Node(index, host, proc)
                node.reader = threading.Thread(target=self._label, args=(node, width), daemon=True)
                node.reader.start()
            else:
                path = self.log_path(host)
                path.parent.mkdir(parents=True, exist_ok=True)
                log = open(path, "ab")  # noqa: SIM115
                proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.work,
                    start_new_session=True,
                )  # fmt: skip
                node = Node(index, host, proc, log=log)
            self.nodes.append(node)
            threading.Thread(target=self._wait, args=(node,), daemon=True).start()

    def hosts_file(self, index: int) -> str:
        """/etc/hosts on node `index`: its own line first (what getfqdn finds), then the rest."""
        lines = []
        order = [index] + [i for i in range(len(self.hosts)) if i != index]
        for i in order:
            host = self.hosts[i]
            names = host if short_name(host) == host else f"{host} {short_name(host)}"
            lines.append(f"127.0.1.{i + 1}\t{names}")
        lines.insert(1, "127.0.0.1\tlocalhost")
        return "\n".join(lines) + "\n"

    def logdir(self, host: str) -> Path:
        return self.evidence / host / "torchelastic"

    def _label(self, node: Node, width: int) -> None:
        """srun --label: each line of the task's output, prefixed with its task id."""
        assert node.proc.stdout is not None and self.srun_log is not None
        label = _slurm_label(node.index, width).encode()
        for line in iter(node.proc.stdout.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            with self.lock:
                self.srun_log.write(label + line)
                self.srun_log.flush()

    def _wait(self, node: Node) -> None:
        code = node.proc.wait()
        if node.reader is not None:
            node.reader.join(timeout=15)
        node.ended = time.monotonic()
        node.code = code
        if self.srun_log is not None and code != 0 and not self.scancelled:
            with self.lock:
                line = _slurm_task_exit(short_name(node.host), node.index, code)
                self.srun_log.write(line.encode())
                self.srun_log.flush()

    # -- while it runs

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def check_deadline(self) -> None:
        if self.elapsed() > JOB_DEADLINE_S:
            raise JobFailed(f"job still running after {JOB_DEADLINE_S:.0f}s")

    def markers(self, kind: str) -> dict[int, float]:
        out = {}
        for p in self.work.glob(f"{kind}_*"):
            with contextlib.suppress(OSError, ValueError):
                out[int(p.name.split("_")[1].split(".")[0])] = p.stat().st_mtime
        return out

    def wait_ready(self) -> None:
        """Until every rank is in place (its marker), or fail."""
        world = self.s["world_size"]
        while len(self.markers("ready")) < world:
            if self.elapsed() > READY_DEADLINE_S:
                raise JobFailed(f"ranks in place: {sorted(self.markers('ready'))} of {world}")
            if any(n.code is not None for n in self.nodes):
                raise JobFailed("an agent ended before every rank was in place")
            if self.markers("failed"):
                raise JobFailed("a collective failed before every rank was in place")
            time.sleep(0.2)
        self.timing["in_place_s"] = round(self.elapsed(), 1)
        time.sleep(SETTLE_S)
        for node in self.nodes:
            node.descendants = _descendants(node.proc.pid)

    def worker_pids(self, node: Node) -> list[int]:
        """What `pgrep -P <agent pid>` lists."""
        out = subprocess.run(["pgrep", "-P", str(node.proc.pid)], capture_output=True, text=True)
        return sorted(int(p) for p in out.stdout.split())

    def take_stacks(self) -> None:
        """py-spy on every node, the way the draw says, while the job hangs."""
        s = self.s
        if s["pyspy"] == "faulthandler":
            self._signal_stacks()
            return
        spy = _py_spy()
        for node in self.nodes:
            path = self.pyspy_path(node.host)
            path.parent.mkdir(parents=True, exist_ok=True)
            if s["pyspy"] == "labelled":
                self._collect(node, spy)
            else:
                if s["pyspy"] == "native_all":
                    pids = [node.proc.pid, *node.descendants]
                    flags = ["--native"]
                else:
                    pids = self.worker_pids(node)
                    flags = ["--locals"] if s["pyspy"] == "locals" else []
                with open(path, "wb") as f:
                    for pid in pids:
                        f.flush()
                        subprocess.run(
                            [spy, "dump", *flags, "--pid", str(pid)],
                            stdout=f,
                            stderr=f if s["pyspy"] == "native_all" else subprocess.DEVNULL,
                            timeout=30,
                        )
            self.pyspy_files[node.host] = str(path.relative_to(self.evidence))
        self.pyspy_done = time.time()
        self.timing["stacks_taken_s"] = round(self.elapsed(), 1)

    def _signal_stacks(self) -> None:
        """`pkill -USR1 -P <agent>` on every node: each worker's faulthandler writes its
        threads' stacks to its stderr (the trainer registered it for SIGUSR1)."""
        for node in self.nodes:
            _signal_all(self.worker_pids(node), signal.SIGUSR1)
        time.sleep(1.0)
        self.pyspy_done = time.time()
        self.timing["stacks_taken_s"] = round(self.elapsed(), 1)

    def _collect(self, node: Node, spy: str) -> None:
        """The real `frtrace collect OUT/%h --under <agent>`, inside the node's namespace."""
        out = str(self.pyspy_path(node.host).parent if not self.rename else "")
        out = out or str(self.evidence / self.s["pyspy_dir"]) + "/%h"
        cmd = [sys.executable, "-m", "frtrace", "collect", out, "--under", str(node.proc.pid)]
        cmd += ["--py-spy", spy] + (["--native"] if self.s["pyspy_native"] else [])
        if self.rename:
            cmd = ["nsenter", "--uts", "--target", str(node.proc.pid), "--", *cmd]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        if done.returncode not in (0, 1):
            raise JobFailed(f"frtrace collect: {done.returncode} {done.stderr.strip()[-300:]}")

    def check_stacks(self) -> None:
        """Every worker's stack is in its node's file, each where it should be."""
        s = self.s
        if s["pyspy"] == "faulthandler":
            return  # in the logs, read once the job has ended (the launcher may buffer them)
        truth = self.truth()
        culprit_fn = {
            "stuck_loader": s["functions"]["slow_data_loader"],
            "blocked_queue": s["functions"]["next_batch"],
        }.get(s["fault"])
        for rank, t in truth.items():
            node = next(n for n in self.nodes if n.index == t["node"])
            text = (self.evidence / self.pyspy_files[node.host]).read_text(errors="replace")
            block = _process_block(text, t["pid"])
            if block is None:
                raise JobFailed(f"no py-spy block for rank {rank} (pid {t['pid']})")
            if s["fault"] == "healthy":
                want = s["functions"]["forward_backward"]
            elif rank != s["culprit"]:
                want = "distributed_c10d.py"
            elif culprit_fn is not None:
                want = f"{culprit_fn} ("
            else:
                want = f"{s['waits_in']} ("
            if want not in block:
                raise JobFailed(f"rank {rank}'s stack lacks {want!r}")
            if s["fault"] == "blocked_queue" and rank == s["culprit"]:
                producer = s["functions"]["prefetch_worker"]
                if f"{producer} (" not in block:
                    raise JobFailed(f"rank {rank}'s stack lacks the producer {producer!r}")

    def request_dumps(self) -> None:
        (self.work / "dump_now").touch()
        world = self.s["world_size"]
        deadline = time.monotonic() + 15
        while len(self.markers("dumped")) < world and time.monotonic() < deadline:
            time.sleep(0.2)
        if len(self.markers("dumped")) < world:
            raise JobFailed(f"dumps on request: {sorted(self.markers('dumped'))} of {world}")

    def cancel(self, mode: str) -> None:
        """The on-call cancels the job (cancel_mode)."""
        s = self.s
        if self.markers("failed") and not self.late_cancel:
            raise JobFailed("a timeout fired before the cancel")
        sig = signal.SIGKILL if mode == "kill" else signal.SIGTERM
        if mode in ("term_kill", "kill"):  # scancel: srun reports no more task exits
            self.scancelled = True
            if s["slurm_lines"]:
                self._slurm_cancel_lines(sig)
        nodes = [n for n in self.nodes if n.code is None]
        pids = [p for n in nodes for p in [n.proc.pid, *_descendants(n.proc.pid)]]
        if mode == "term_agents":
            _signal_all([n.proc.pid for n in nodes], sig)
        else:
            _signal_all(pids, sig)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + TERM_GRACE_S
            while time.monotonic() < deadline and any(_alive(p) for p in pids):
                time.sleep(0.1)
            _signal_all([p for p in pids if _alive(p)], signal.SIGKILL)

    def _slurm_cancel_lines(self, sig: int) -> None:
        s = self.s
        version = s["slurm_version"]
        step = f"STEP {s['jobid']}.0"
        # slurmstepd says so on the nodes whose step still runs (req.c: step->state <
        # SLURMSTEPD_STEP_ENDING); the batch step runs on the first node until srun returns
        alive = [n for n in self.nodes if n.code is None]
        if self.srun_log is not None:
            width = len(str(s["nodes"] - 1))
            with self.lock:
                self.srun_log.write(_slurm_step_aborted().encode())
                first = short_name(self.nodes[0].host)
                line = _slurm_cancelled(f"JOB {s['jobid']}", first, sig, version)
                self.srun_log.write(line.encode())
                for node in alive:
                    text = _slurm_label(node.index, width)
                    text += _slurm_cancelled(step, short_name(node.host), sig, version)
                    self.srun_log.write(text.encode())
                self.srun_log.flush()
        else:
            for node in alive:
                assert node.log is not None
                node.log.write(_slurm_cancelled(step, short_name(node.host), sig, version).encode())
                node.log.flush()

    def wait_end(self, limit: float) -> None:
        """Until every agent ended. A node whose agent outlives the others by STALL_S (the
        culprit's node, alone with its stuck rank: torchelastic stops a healthy-looking worker
        group only when the rendezvous store it uses goes away) is cancelled by the on-call, as
        it would hang until the job's time limit (``late_cancel``)."""
        while any(n.code is None for n in self.nodes):
            self.check_deadline()
            if self.elapsed() > limit:
                raise JobFailed(f"job still running after {limit:.0f}s")
            ended = [n.ended for n in self.nodes if n.ended is not None]
            if ended and time.monotonic() - max(ended) > STALL_S and not self.s["cancelled"]:
                if self.s["fault"] not in HUNG_FAULTS:
                    raise JobFailed("a node outlived the others")
                self.late_cancel = True
                self.cancel("term_kill")
            time.sleep(0.2)

    # -- after

    def truth(self) -> dict[int, dict[str, Any]]:
        out = {}
        for p in self.work.glob("truth_*.json"):
            t = json.loads(p.read_text())
            out[int(t["rank"])] = t
        for t in out.values():
            t["node"] = self.hosts.index(t["host"]) if t["host"] in self.hosts else None
        if not self.rename:
            # without renaming, the node is the agent whose descendants hold the pid
            for t in out.values():
                for n in self.nodes:
                    if t["pid"] in n.descendants:
                        t["node"] = n.index
        return out

    def close(self) -> None:
        """Kill whatever is left, close the logs, drop the work folder."""
        pids = _with_token(self.token)
        for n in self.nodes:
            pids += [n.proc.pid, *_descendants(n.proc.pid)]
        _signal_all(sorted(set(pids)), signal.SIGKILL)
        for n in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                n.proc.wait(timeout=10)
            if n.reader is not None:
                n.reader.join(timeout=5)
            if n.log is not None:
                n.log.close()
        if self.srun_log is not None:
            self.srun_log.close()
        shutil.rmtree(self.work, ignore_errors=True)


def _process_block(text: str, pid: int) -> str | None:
    """The lines of py-spy's block for `pid` (from `Process <pid>:` to the next process)."""
    start = re.search(rf"^Process {pid}: ", text, re.M)
    if start is None:
        return None
    end = re.search(r"^(Process \d+: |# frtrace-collect )", text[start.end() :], re.M)
    return text[start.start() : start.end() + (end.start() if end else len(text))]


def run_job(s: dict[str, Any], case: Path, port: int, rename: bool) -> dict[str, Any]:
    """Run the scenario once; its evidence and expected.json in `case`. JobFailed when the job
    did not go as drawn."""
    if case.exists():
        shutil.rmtree(case)
    job = Job(s, case, port, rename)
    try:
        job.start()
        fault = s["fault"]
        if fault in HUNG_FAULTS and not (fault == "skipped_collective" and s["detail"]):
            job.wait_ready()
            if s["pyspy"] != "none":
                job.take_stacks()
                job.check_stacks()
            if job.markers("failed"):
                raise JobFailed("a timeout fired before the stacks were taken")
            if s["cancelled"]:
                if s["dumps_when"] == "on_request":
                    job.request_dumps()
                job.cancel(s["cancel_mode"])
            job.wait_end(JOB_DEADLINE_S)
        elif s["hold"]:
            job.wait_ready()
            job.take_stacks()
            job.check_stacks()
            (job.work / "go").touch()
            job.wait_end(JOB_DEADLINE_S)
        else:
            job.wait_end(JOB_DEADLINE_S)
        time.sleep(0.3)
        expected = _check_and_expect(job)
        _apply_survival(job, expected)
        (case / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
        return expected
    finally:
        job.close()


def _check_and_expect(job: Job) -> dict[str, Any]:
    """The job's end is the one drawn; the ground truth."""
    s = job.s
    fault = s["fault"]
    truth = job.truth()
    world = s["world_size"]
    if sorted(truth) != list(range(world)):
        raise JobFailed(f"ranks that started: {sorted(truth)} of {world}")
    codes = [n.code for n in job.nodes]
    if fault == "healthy":
        if codes != [0] * len(codes) or len(job.markers("done")) != world:
            raise JobFailed(f"healthy job: agents {codes}, done {sorted(job.markers('done'))}")
    elif s["cancelled"]:
        if job.markers("failed"):
            raise JobFailed("a timeout fired although the job was cancelled")
    else:
        if any(c == 0 for c in codes):
            raise JobFailed(f"agents' exit codes {codes}")
        if fault == "exception" and s["culprit"] not in job.markers("raised"):
            raise JobFailed("the culprit did not raise")
        if fault == "sigkill" and s["culprit"] not in job.markers("killed"):
            raise JobFailed("the culprit did not kill itself")
        if fault in HUNG_FAULTS and not job.markers("failed"):
            raise JobFailed("no rank saw the timeout")
        done = job.markers("done")
        if done:
            raise JobFailed(f"ranks {sorted(done)} completed a failed job")
        if job.pyspy_done is not None and min(job.markers("failed").values()) < job.pyspy_done:
            raise JobFailed("a timeout fired before the stacks were taken")
    culprit = None
    if fault != "healthy":
        t = truth[s["culprit"]]
        function = None
        if fault == "stuck_loader":
            function = s["functions"]["slow_data_loader"]
        elif fault == "blocked_queue":
            function = s["functions"]["next_batch"]
        culprit = {
            "rank": s["culprit"],
            "host": t["host"],
            "pid": t["pid"],
            "function": function,
            "exception": s["exception"] if fault == "exception" else None,
            "signal": "SIGKILL" if fault == "sigkill" else None,
            "waits_in": s["waits_in"] if fault == "skipped_collective" else None,
        }
    style_keys = (
        "launcher", "layout", "pyspy", "names", "nodes", "nproc", "dumps", "cancelled",
        "survives", "detail", "loglevel", "trainer_lines", "role", "template", "log_name",
        "log_dir", "slurm_lines", "slurm_version", "pyspy_name", "pyspy_dir", "dump_layout",
        "dumps_when", "cancel_mode", "progress", "progress_format", "rank_locals",
        "node_rank_arg", "jobid", "rdzv_id", "script", "timeout_s", "ops", "fault_step",
        "subgroup", "held_out",
    )  # fmt: skip
    style: dict[str, Any] = {k: s[k] for k in style_keys}
    style["hosts"] = job.hosts
    style["renamed"] = job.rename
    style["pyspy_native"] = s["pyspy"] == "native_all" or (
        s["pyspy"] == "labelled" and s["pyspy_native"]
    )
    style["functions"] = {
        "train": s["functions"]["train"],
        "main": s["functions"]["main_" + s["rank_locals"]],
    }
    if fault == "blocked_queue":
        style["producer_function"] = s["functions"]["prefetch_worker"]
        style["producer_thread"] = s["producer_thread"]
    if fault == "exception":
        style["exception_message"] = s["exception_message"].format(step=s["fault_step"])
    if s["hold"]:
        style["hold_function"] = s["functions"]["forward_backward"]
    style["agent_exit_codes"] = {n.host: n.code for n in job.nodes}
    style["late_cancel"] = job.late_cancel
    failed = job.markers("failed")
    if failed:  # seconds since the start when the first rank saw its collective fail
        job.timing["first_failure_s"] = round(min(failed.values()) - job.started_wall, 1)
    job.timing["ended_s"] = round(max(n.ended or 0 for n in job.nodes) - job.started, 1)
    style["timing"] = job.timing
    return {
        "schema": SCHEMA,
        "id": s["id"],
        "split": s["split"],
        "seed": s["seed"],
        "source": "real-gloo",
        "fault": fault,
        "style": style,
        "evidence": "evidence",
        "world_size": world,
        "ranks": {
            str(r): {"host": t["host"], "local_rank": t["local_rank"], "pid": t["pid"]}
            for r, t in sorted(truth.items())
        },
        "culprit": culprit,
        "hung": fault != "healthy",
        "expect_exit": [0, 4] if fault == "healthy" else [1],
    }


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _apply_survival(job: Job, expected: dict[str, Any]) -> None:
    """Remove what did not survive; record the evidence's files."""
    s = job.s
    ev = job.evidence
    style = expected["style"]
    pyspy = {host: ev / rel for host, rel in job.pyspy_files.items()}
    if s["pyspy"] == "labelled":  # collect's whole folder per node (stacks and manifest)
        pyspy = {host: p.parent for host, p in pyspy.items()}
    logs: dict[str, list[Path]] = {}
    for node in job.nodes:
        if s["layout"] == "per_node":
            logs[node.host] = [job.log_path(node.host)]
        else:
            logs[node.host] = []
        if s["launcher"] == "redirects":
            logs[node.host].append(job.logdir(node.host))
    if s["layout"] == "srun_label":
        logs["*"] = [job.log_path("")]
    dump_pattern = job.dump_pattern()
    dumps = [] if dump_pattern is None else [Path(p) for p in _dump_files(job, dump_pattern)]
    dropped: list[str] = []

    def drop(path: Path) -> None:
        if path.is_dir():
            dropped.extend(str(p.relative_to(ev)) for p in path.rglob("*") if p.is_file())
            shutil.rmtree(path)
        elif path.exists():
            dropped.append(str(path.relative_to(ev)))
            path.unlink()

    survives = s["survives"]
    if survives == "drop_node_log":
        for p in logs[job.nodes[s["drop_node"]].host]:
            drop(p)
        style["dropped_node"] = job.nodes[s["drop_node"]].host
    elif survives == "drop_culprit_pyspy":
        node = job.truth()[s["culprit"]]["node"]
        drop(pyspy[job.hosts[node]])
    elif survives == "pyspy_only":
        for paths in logs.values():
            for p in paths:
                drop(p)
        for p in dumps:
            drop(p)
    elif survives == "logs_only":
        for p in pyspy.values():
            drop(p)
        for p in dumps:
            drop(p)
    for d in sorted((p for p in ev.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            d.rmdir()  # folders left empty
    style["dropped"] = sorted(dropped)
    files = _files(ev)
    style["pyspy_files"] = sorted(
        f for f in files if any(f.startswith(str(p.relative_to(ev))) for p in pyspy.values())
    )
    style["dump_files"] = sorted(str(p.relative_to(ev)) for p in dumps if p.exists())
    style["files"] = files


def _dump_files(job: Job, pattern: str) -> list[str]:
    out = []
    for rank, t in job.truth().items():
        path = pattern.format(host=t["host"], rank=rank)  # the worker's own name
        if Path(path).exists():
            out.append(path)
    return out


# --- the command --------------------------------------------------------------------------------


def describe(s: dict[str, Any]) -> str:
    parts = [
        f"{s['nodes']}x{s['nproc']}",
        s["launcher"],
        s["layout"],
        f"pyspy={s['pyspy']}",
        f"names={s['names']}",
        f"dumps={'y' if s['dumps'] else 'n'}",
        f"cancel={'y' if s['cancelled'] else 'n'}",
        f"survives={s['survives']}",
    ]
    if s["detail"]:
        parts.append("detail")
    if s["loglevel"] == "info":
        parts.append("INFO")
    if s["held_out"] is not None:
        parts.append(f"held_out={s['held_out']}")
    return " ".join(parts)


def run_scenario(
    s: dict[str, Any], out: Path, rename: bool, attempts: int = 2
) -> tuple[bool, list[str]]:
    reasons: list[str] = []
    for _ in range(attempts):
        try:
            run_job(s, out / s["id"], _free_port(), rename)
            return True, reasons
        except JobFailed as exc:
            reasons.append(str(exc))
            shutil.rmtree(out / s["id"], ignore_errors=True)
        except BaseException:
            shutil.rmtree(out / s["id"], ignore_errors=True)
            raise
    return False, reasons


def _ids(args: argparse.Namespace) -> list[tuple[int, str]]:
    if args.only:
        out = []
        for ident in args.only:
            m = re.fullmatch(rf"real-{args.split}-(\d+)", ident)
            if m is None:
                raise SystemExit(f"{ident}: not an id of the {args.split} split")
            out.append((int(m.group(1)), ident))
        return out
    base = first_seed(args.split) if args.seed_base is None else args.seed_base
    if args.split == "tune" and base >= 1000:
        raise SystemExit("tune seeds are below 1000 (heldout's start there)")
    if args.split == "heldout" and base < 1000:
        raise SystemExit("heldout seeds start at 1000")
    return [(seed, f"real-{args.split}-{seed:04d}") for seed in range(base, base + args.count)]


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", choices=("tune", "heldout"), required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--seed-base", type=int)
    parser.add_argument("--only", nargs="+", metavar="ID")
    parser.add_argument("--keep-going", action="store_true")
    parser.add_argument(
        "--force",
        nargs="+",
        default=[],
        metavar="AXIS=VALUE",
        help="set axes by hand (a JSON value or a word): the fixtures that show one shape",
    )
    # to try the path taken without root: nodes keep this machine's name
    parser.add_argument("--no-rename", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    args.out.mkdir(parents=True, exist_ok=True)
    rename = not args.no_rename and _can_unshare()
    if not rename:
        print("unshare --uts is not allowed here: nodes keep this machine's name", flush=True)
    summary_path = args.out / "summary.json"
    summary: dict[str, Any] = {}
    if summary_path.exists():
        with contextlib.suppress(ValueError):
            summary = json.loads(summary_path.read_text())
    failures = 0
    forced = dict(_axis(f) for f in args.force)
    for seed, ident in _ids(args):
        s = draw(args.split, seed, forced)
        assert s["id"] == ident
        started = time.monotonic()
        ok, reasons = run_scenario(s, args.out, rename)
        seconds = time.monotonic() - started
        summary[ident] = {
            "ok": ok,
            "fault": s["fault"],
            "seconds": round(seconds, 1),
            "attempts": len(reasons) + (1 if ok else 0),
            "failed_attempts": reasons,
            "style": describe(s),
        }
        summary_path.write_text(json.dumps(dict(sorted(summary.items())), indent=2) + "\n")
        status = "ok" if ok else "FAILED: " + " | ".join(reasons)
        print(f"{ident} {s['fault']} {describe(s)} {seconds:.0f}s {status}", flush=True)
        if not ok:
            failures += 1
            if not args.keep_going:
                return 1
    return 1 if failures else 0


def _axis(text: str) -> tuple[str, Any]:
    """`pyspy=native_all` -> ("pyspy", "native_all"); `dumps=false` -> ("dumps", False)."""
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


if __name__ == "__main__":
    sys.exit(main())
