"""Write fixtures/evidence: real torchrun + gloo jobs whose evidence shows one shape each.

Usage: ``python scripts/make_evidence_fixtures.py [--out fixtures/evidence] [--only NAME...]``

Each fixture is a job of ``scripts/evidence_jobs.py`` (real torchrun agents as nodes with
their own host names, real py-spy, real faults) with the axes that make its shape set by hand
(``--force``) and the rest drawn from its seed. Its ``evidence/`` folder is what a user would
hand frtrace; ``expected.json`` is what the job itself recorded. Needs root (the nodes' own
host names), torch and py-spy; takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import evidence_jobs

#: name -> (seed, forced axes, what it shows)
FIXTURES: dict[str, tuple[int, dict[str, object], str]] = {
    "slurm_pyspy_recipe": (
        7,
        {
            "fault": "stuck_loader", "layout": "srun_label", "launcher": "no_role",
            "pyspy": "native_all", "dumps": False, "cancelled": False, "survives": "all",
            "detail": False, "nodes": 3, "nproc": 2, "trainer_lines": "none",
        },
        "one `srun --label` job log and per-node py-spy files of every Python process "
        "(`--native`, the agents among them): the stuck rank, its host and its function",
    ),
    "cancelled_stacks_only": (
        11,
        {
            "fault": "stuck_loader", "layout": "per_node", "launcher": "no_tee",
            "pyspy": "native_all", "dumps": False, "cancelled": True, "cancel_mode": "term_kill",
            "survives": "all", "detail": False, "nodes": 3, "nproc": 2, "trainer_lines": "none",
        },
        "cancelled by the on-call (no summary, no timeout), no dump: five workers' stacks wait "
        "in a collective, one is elsewhere; nothing ties its pid to a rank",
    ),
    "short_roles": (
        3,
        {
            "fault": "exception", "layout": "per_node", "launcher": "role_digits",
            "pyspy": "none", "dumps": False, "survives": "all", "detail": False,
            "names": "numbered", "nodes": 2, "nproc": 2,
        },
        "`--role <the digits of the host name>:` headers (`[17:0]:`): the host is the node's name",
    ),
    "detail_monitored_barrier": (
        6,
        {
            "fault": "stuck_loader", "layout": "per_node", "launcher": "role_host",
            "pyspy": "none", "dumps": False, "survives": "all", "detail": True,
            "cancelled": False, "nodes": 2, "nproc": 2,
        },
        "TORCH_DISTRIBUTED_DEBUG=DETAIL: rank 0's monitored barrier names the stuck rank (not 0)",
    ),
    "detail_with_dumps": (
        16,
        {
            "fault": "stuck_loader", "layout": "srun_label", "launcher": "role_digits",
            "pyspy": "locals", "dumps": True, "dump_layout": "flat", "survives": "all",
            "detail": True, "cancelled": False, "nodes": 3, "nproc": 1,
        },
        "gloo's dumps under TORCH_DISTRIBUTED_DEBUG=DETAIL fold every group into an unnamed "
        "one (the wrapper's checks recorded beside the job's calls): the logs decide",
    ),
    "prefix_template": (
        9,
        {
            "fault": "sigkill", "layout": "per_node", "launcher": "prefix_template",
            "template": "[${rank}]:", "pyspy": "none", "dumps": False, "survives": "all",
            "detail": False, "names": "short", "nodes": 2, "nproc": 2,
        },
        "`TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[${rank}]:'`: headers carry global ranks",
    ),
    "healthy_info": (
        13,
        {
            "fault": "healthy", "layout": "per_node", "launcher": "role_host", "pyspy": "none",
            "dumps": False, "survives": "all", "detail": False, "loglevel": "info",
            "nodes": 2, "nproc": 2,
        },
        "a healthy job at `LOGLEVEL=INFO`: every agent logs that its workers finished: OK",
    ),
    "healthy_dumps_info": (
        17,
        {
            "fault": "healthy", "layout": "per_node", "launcher": "role_host", "pyspy": "none",
            "dumps": True, "survives": "all", "detail": False, "loglevel": "info",
            "nodes": 2, "nproc": 2,
        },
        "a healthy job with gloo dumps at `LOGLEVEL=INFO`: every rank's last call is not known "
        "to have completed (gloo records no states); the agents' lines show the job ended",
    ),
    "faulthandler_dumps": (
        19,
        {
            "fault": "blocked_queue", "layout": "per_node", "launcher": "no_tee",
            "pyspy": "faulthandler", "dumps": True, "dumps_when": "on_request",
            "cancelled": True, "cancel_mode": "term_agents", "survives": "all",
            "detail": False, "nodes": 2, "nproc": 3, "trainer_lines": "none",
        },
        "cancelled, each node's faulthandler stacks in its one log (no pids), gloo dumps taken "
        "on request: the ranks the dumps show waiting, the stuck process's live stack",
    ),
    "detail_entered": (
        21,
        {
            "fault": "stuck_loader", "layout": "per_node", "launcher": "role_host",
            "pyspy": "none", "dumps": False, "survives": "all", "detail": True,
            "cancelled": True, "cancel_mode": "term_kill", "nodes": 2, "nproc": 2,
            "trainer_lines": "plain",
        },
        "TORCH_DISTRIBUTED_DEBUG=DETAIL, cancelled before any timeout, no dump: each rank's "
        "`Running collective` lines show the one that never entered the collective the "
        "others did",
    ),
    "even_split_alive": (
        2001,
        {
            # held-out round 4's scenario 2001 as drawn (judged in an earlier round, now a
            # fixture): its ops leave the dumps' history no say
            "_split": "heldout",
        },
        "two ranks, one waits in a collective the other never issued: the dumps split evenly; "
        "the agent's `Sending process P closing signal SIGTERM` shows the other still running",
    ),
    "even_split_failed": (
        3458,
        {
            # held-out round 12's faulthandler scenario 3458 as drawn (judged, now a fixture)
            "_split": "heldout", "pyspy": "faulthandler",
        },
        "two ranks, one waits in a collective the other never issued: the dumps split evenly; "
        "the other's own exception (its traceback, torchelastic's summary) settles it (rank "
        "0's dump races its teardown: rerun until both dumps are there)",
    ),
    "store_lost": (
        3538,
        {
            # held-out round 13's scenario 3538 as drawn (judged, now a fixture)
            "_split": "heldout",
        },
        "two nodes, the killed rank's node log lost: the other node's torchrun agent dies of "
        "losing its rendezvous store (RendezvousConnectionError), so the rank no input shows "
        "is named",
    ),
}  # fmt: skip


def make(name: str, out: Path) -> dict[str, object]:
    seed, forced, _what = FIXTURES[name]
    forced = dict(forced)
    split = str(forced.pop("_split", "tune"))  # a scenario of a split's own draw
    work = Path(tempfile.mkdtemp(prefix=f"frtrace-evfix-{name}-"))
    try:
        args = ["--out", str(work), "--split", split, "--seed-base", str(seed), "--count", "1"]
        if forced:
            args += ["--force", *(f"{k}={json.dumps(v)}" for k, v in forced.items())]
        if evidence_jobs.main(args) != 0:
            raise SystemExit(f"{name}: the job did not reach its intended state")
        (made,) = [p for p in work.iterdir() if p.is_dir()]
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(made, target)
        truth: dict[str, object] = json.loads((target / "expected.json").read_text())
        return truth
    finally:
        shutil.rmtree(work, ignore_errors=True)


_README = """\
# Real jobs, one shape of evidence each

Written by `scripts/make_evidence_fixtures.py` (do not edit by hand; rerun it), which runs
`scripts/evidence_jobs.py` with the axes below set by hand: torch {torch}, gloo on CPU, py-spy
{py_spy}, Python {python}; torchrun agents on one machine stand for the nodes, each in its own
UTS namespace with its own host name. `evidence/` is what a user would hand frtrace,
`expected.json` what the job itself recorded (the culprit's rank, host, pid, and the function,
exception or signal of its fault). `python scripts/score_evidence.py fixtures/evidence` judges
frtrace on them.

| fixture | fault | what it shows |
| --- | --- | --- |
{rows}
"""


def write_readme(out: Path) -> None:
    """fixtures/evidence/README.md, with the versions that wrote the fixtures."""
    import platform
    import subprocess

    import torch

    spy = subprocess.run([evidence_jobs._py_spy(), "--version"], capture_output=True, text=True)
    rows = []
    for name, (_seed, forced, what) in FIXTURES.items():
        written = out / name / "expected.json"
        fault = json.loads(written.read_text())["fault"] if written.exists() else forced["fault"]
        rows.append(f"| `{name}/` | {fault} | {what} |")
    text = _README.format(
        torch=torch.__version__,
        py_spy=spy.stdout.split()[-1],
        python=platform.python_version(),
        rows="\n".join(rows),
    )
    (out / "README.md").write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("fixtures/evidence"))
    parser.add_argument("--only", nargs="+", choices=sorted(FIXTURES))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or FIXTURES:
        truth = make(name, args.out)
        print(f"{name}: {truth['fault']}, culprit {truth.get('culprit')}", flush=True)
    write_readme(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
