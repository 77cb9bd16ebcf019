"""Scenarios of hung (or healthy) NCCL jobs as their logs show them, with ground truth.

    python scripts/nccl_log_jobs.py --out DIR --split tune|heldout --count N [--first K]

Each scenario comes from one seeded RNG (`tune` seeds from 0, `heldout` from 1000): a
Megatron-style job is simulated (frtrace.synth), faulted or not, and the logs its processes
would have written are rendered (frtrace.synth.logs) into `DIR/nccl-<split>-<seed>/evidence/`
(what frtrace is pointed at; with the job's Flight Recorder dumps beside the logs or not), with
the ground truth in `DIR/nccl-<split>-<seed>/expected.json`.

Axes drawn per scenario (all written to expected.json's "style"):
- layout: tp x dp x pp from {1, 2, 4, 8} x {1, 2, 4, 8} x {1, 2, 4}, 8 to 64 ranks; steps,
  microbatches, layers; pipeline p2p batched (batch_isend_irecv) or not; dp buckets coalesced;
- nodes of 4 or 8 ranks; node names short (`nodeA`), numbered (`node17`, `gpu042`) or long
  (`gpu-st-p4d-24xlarge-17.cluster.internal`); agent and worker pids;
- fault: missing_ranks in a tp, dp or pp group (the rank stops before a call: its peers wait),
  size_mismatch (tp or dp; the culprit's NumelIn differs), stuck_collective (tp or dp; every
  member waits inside it, optionally with a NET/IB WARN naming another member's host),
  order_cycle (tp or dp; the culprit calls another group's next op first), or healthy;
- timing: the CPU time each work item may add (spreads how far apart ranks block, so how many
  time out before the job comes down), TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (a failed watchdog
  sleeps 4x that before the abort) and when the scheduler ends the job after the first abort
  (`window_s`); which ranks' timeouts reach the logs follows (style.logged_ranks);
- launcher: torchrun `--tee 3` with role `<host>:`, `<digits>:` (the node's index) or
  `default`, or no torchrun headers; files: one `slurm-<jobid>.out` (srun `--label` or not),
  one file per node (`<host>.log`, or `trace-<host>.out` with or without labels), or one per
  rank (`rank<N>.log`, the agents' output in `slurm-<jobid>.out`);
- INFO levels: TORCH_CPP_LOG_LEVEL=INFO or not, NCCL_DEBUG unset, WARN or INFO; faulthandler
  on or off in the workers; torchrun's OMP_NUM_THREADS warning; the summary's host name;
- dumps beside the logs or not, flat (`nccl_trace_rank_<rank>`) or in per-host folders.

Held-out only (the tune split never draws these; about 40% of held-out scenarios are forced
into one of them, the rest drawn like tune):
- `long-names-labelled-slurm`: long node names with srun --label, all nodes in one slurm file;
- `digits-role-4-per-node`: torchrun role `<digits>:` on nodes of 4 ranks;
- `order-cycle-per-rank-files`: an order_cycle fault with one log file per rank;
- `pp-missing-nccl-info-no-dumps`: a missing rank in a pp group, NCCL_DEBUG=INFO, no dumps.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
import shutil
import sys
from pathlib import Path
from typing import Any

from frtrace.synth import Fault, JobSpec, Layout, SyntheticJob, simulate, write_job
from frtrace.synth.logs import Cluster, LogStyle, Rendered, render

SPLIT_SEED = {"tune": 0, "heldout": 1000}
FAULTS = ("missing_ranks", "size_mismatch", "stuck_collective", "order_cycle", "healthy")
FAULT_WEIGHTS = (0.34, 0.16, 0.16, 0.14, 0.20)
HELD_OUT = (
    "long-names-labelled-slurm",
    "digits-role-4-per-node",
    "order-cycle-per-rank-files",
    "pp-missing-nccl-info-no-dumps",
)
_LAYOUTS = [
    (tp, dp, pp)
    for tp in (1, 2, 4, 8)
    for dp in (1, 2, 4, 8)
    for pp in (1, 2, 4)
    if 8 <= tp * dp * pp <= 64 and sum(x > 1 for x in (tp, dp, pp)) >= 2
]
_LETTERS = "ABCDEFGHIJKLMNOP"


def held_out_combo(style: dict[str, Any]) -> str | None:
    """The held-out-only combination a drawn style falls in, if any."""
    if style["naming"] == "long" and style["files"] == "slurm" and style["srun_label"]:
        return HELD_OUT[0]
    if style["launcher"] == "torchrun-tee" and style["role"] == "digits" and style["per_node"] == 4:
        return HELD_OUT[1]
    if style["fault"] == "order_cycle" and style["files"] == "per_rank":
        return HELD_OUT[2]
    if (
        style["fault"] == "missing_ranks"
        and style["fault_group"] == "pp"
        and style["nccl_debug"] == "INFO"
        and not style["dumps"]
    ):
        return HELD_OUT[3]
    return None


def _groups_for(fault: str, layout: tuple[int, int, int]) -> list[str]:
    tp, dp, pp = layout
    sizes = {"tp": tp, "dp": dp, "pp": pp}
    kinds = ("tp", "dp", "pp") if fault == "missing_ranks" else ("tp", "dp")
    return [k for k in kinds if sizes[k] > 1]


def draw_style(rng: random.Random) -> dict[str, Any]:
    """Every axis of one scenario (before the held-out rule)."""
    fault = rng.choices(FAULTS, FAULT_WEIGHTS)[0]
    layouts = [lay for lay in _LAYOUTS if fault == "healthy" or _groups_for(fault, lay)]
    layout = rng.choice(layouts)
    files = rng.choice(("slurm", "per_node", "per_rank"))
    node_file = rng.choice(("{host}.log", "trace-{host}.out"))
    launcher = rng.choice(("torchrun-tee", "torchrun-tee", "torchrun-plain"))
    labelled = files == "slurm" or (files == "per_node" and node_file.startswith("trace-"))
    nccl_debug = rng.choice((None, None, "WARN", "INFO"))
    style: dict[str, Any] = {
        "fault": fault,
        "fault_group": rng.choice(_groups_for(fault, layout)) if fault != "healthy" else None,
        "layout": {"tp": layout[0], "dp": layout[1], "pp": layout[2]},
        "steps": rng.choice((2, 3)),
        "microbatches": rng.choice((2, 4)),
        "layers": rng.choice((1, 2)),
        "batch_p2p": rng.random() < 0.5,
        "coalesce_dp": rng.random() < 0.6,
        "per_node": rng.choice((4, 8)),
        "naming": rng.choice(("short", "numbered", "long")),
        "jitter_ns": int(10 ** rng.uniform(9, math.log10(5e10))),
        "window_s": round(10 ** rng.uniform(-0.3, math.log10(600)), 3),
        "dump_wait_ms": rng.choice((15_000, 15_000, 15_000, 1_000, 2_000, 5_000)),
        "launcher": launcher,
        "role": rng.choice(("host", "digits", "default")) if launcher == "torchrun-tee" else None,
        "files": files,
        "node_file": node_file if files == "per_node" else None,
        "srun_label": labelled and rng.random() < 0.5,
        "dumps": rng.random() < 0.5,
        "dump_layout": rng.choice(("flat", "per_host")),
        "torch_info": rng.random() < 0.35,
        "nccl_debug": nccl_debug,
        "net_warn": fault == "stuck_collective" and rng.random() < 0.5,
        "faulthandler": rng.random() < 0.3,
        "omp_warning": rng.random() < 0.7,
        "summary_host": rng.choice(("host", "host", "localhost")),
        "iface": rng.choice(("eth0", "ens1f0", "bond0", "ib0")),
        "jobid": rng.randrange(100_000, 9_999_999),
    }
    if style["net_warn"] and style["nccl_debug"] is None:
        style["nccl_debug"] = "WARN"  # NCCL prints no WARN without NCCL_DEBUG
    return style


def _force(style: dict[str, Any], combo: str, rng: random.Random) -> None:
    """Make a drawn style one of the held-out-only combinations."""
    if combo == HELD_OUT[0]:
        style.update(naming="long", files="slurm", node_file=None, srun_label=True)
    elif combo == HELD_OUT[1]:
        style.update(launcher="torchrun-tee", role="digits", per_node=4)
    elif combo == HELD_OUT[2]:
        style.update(fault="order_cycle", files="per_rank", node_file=None, srun_label=False)
        style.update(net_warn=False)
        if not _groups_for("order_cycle", _layout_of(style)):
            style["layout"] = dict(zip(("tp", "dp", "pp"), rng.choice(_LAYOUTS), strict=True))
        style["fault_group"] = rng.choice(_groups_for("order_cycle", _layout_of(style)))
    else:
        layouts = [lay for lay in _LAYOUTS if lay[2] > 1]
        style.update(fault="missing_ranks", fault_group="pp", nccl_debug="INFO", dumps=False)
        style.update(net_warn=False)
        style["layout"] = dict(zip(("tp", "dp", "pp"), rng.choice(layouts), strict=True))


def _layout_of(style: dict[str, Any]) -> tuple[int, int, int]:
    lay = style["layout"]
    return lay["tp"], lay["dp"], lay["pp"]


def sample(seed: int, split: str) -> dict[str, Any]:
    """The style of scenario `seed` of `split`: tune never falls in a held-out combination."""
    rng = random.Random(seed)
    style = draw_style(rng)
    if split == "tune":
        while held_out_combo(style) is not None:
            style = draw_style(rng)
    elif rng.random() < 0.4:
        _force(style, rng.choice(HELD_OUT), rng)
    style["held_out_combo"] = held_out_combo(style)
    return style


def host_names(style: dict[str, Any], nodes: int, rng: random.Random) -> list[str]:
    if style["naming"] == "short":
        return [f"node{_LETTERS[i]}" for i in range(nodes)]
    start = rng.randrange(1, 200)
    if style["naming"] == "numbered":
        prefix, width = rng.choice((("node", 0), ("node", 2), ("gpu", 3), ("dgx", 2)))
        return [f"{prefix}{start + i:0{width}d}" for i in range(nodes)]
    kind = rng.choice(("gpu-st-p4d-24xlarge", "gpu-st-p5-48xlarge", "a3mega-a3meganodeset"))
    domain = rng.choice(("cluster.internal", "ec2.internal", "c.example-project.internal"))
    return [f"{kind}-{start + i}.{domain}" for i in range(nodes)]


def _fault(style: dict[str, Any], layout: Layout, steps: int, rng: random.Random) -> Fault:
    group = style["fault_group"]
    return Fault(
        style["fault"],
        rng.randrange(layout.world),
        group=group,
        step=rng.randrange(1, steps),
        index=rng.randrange(0, 3 if group == "pp" else 4),
    )


def simulate_style(style: dict[str, Any], rng: random.Random) -> SyntheticJob:
    """The scenario's job: a fault placed at random, re-placed until it hangs the job as asked
    (a place the simulator refuses, or one that does not hang it, is drawn again)."""
    tp, dp, pp = _layout_of(style)
    layout = Layout(tp=tp, dp=dp, pp=pp)
    base = {
        "steps": style["steps"],
        "microbatches": style["microbatches"],
        "layers": style["layers"],
        "batch_p2p": style["batch_p2p"],
        "coalesce_dp": style["coalesce_dp"],
        "jitter_ns": style["jitter_ns"],
        "seed": rng.randrange(2**31),
    }
    if style["fault"] == "healthy":
        return simulate(JobSpec(layout, **base))
    for _ in range(200):
        fault = _fault(style, layout, style["steps"], rng)
        try:
            job = simulate(JobSpec(layout, fault=fault, **base))
        except (ValueError, RuntimeError):
            continue
        if job.expected is not None and job.hung:
            style["fault_rank"] = fault.rank
            style["fault_step"] = fault.step
            style["fault_index"] = fault.index
            return job
    raise RuntimeError(f"no {style['fault']} fault in {style['fault_group']} hangs {layout}")


def log_files(
    rendered: Rendered, cluster: Cluster, style: dict[str, Any]
) -> dict[str, list[tuple[int, int, str]]]:
    """File name -> its lines (time, order, text), as the launcher style lays them out."""
    nodes = len(cluster.hosts)
    width = len(str(max(nodes - 1, 0)))  # src/api/step_io.c _wid(num_tasks)

    def label(node: int, text: str) -> str:
        # slurm src/common/write_labelled_message.c _build_label: "%*d: " (task id, width of
        # the largest id); one srun task per node, so the task id is the node's index.
        return f"{node:>{width}d}: {text}" if style["srun_label"] else text

    def header(rank: int) -> str:
        # torch/distributed/elastic/multiprocessing/tail_log.py TailLog.start: every line of a
        # teed worker file gets f"[{name}{local_rank}]:", name being torchrun's --role.
        if style["launcher"] != "torchrun-tee":
            return ""
        p = cluster.procs[rank]
        role = {"host": f"{p.host.split('.', 1)[0]}:", "digits": f"{p.node}:", "default": "default"}
        return f"[{role[style['role']]}{p.local_rank}]:"

    files: dict[str, list[tuple[int, int, str]]] = {}
    slurm = f"slurm-{style['jobid']}.out"
    for node in range(nodes):
        if style["files"] == "per_node":
            name = style["node_file"].format(host=cluster.hosts[node])
        else:
            name = slurm
        out = files.setdefault(name, [])
        out.extend((t, n, label(node, text)) for t, n, text in rendered.agent[node])
        for p in cluster.procs:
            if p.node != node:
                continue
            if style["files"] == "per_rank":
                own = files.setdefault(f"rank{p.rank}.log", [])
                own.extend(rendered.worker[p.rank])
            else:
                head = header(p.rank)
                out.extend(
                    (t, n, label(node, head + text)) for t, n, text in rendered.worker[p.rank]
                )
    for lines in files.values():
        lines.sort(key=lambda line: (line[0], line[1]))
    return files


def write_dumps(job: SyntheticJob, cluster: Cluster, evidence: Path, per_host: bool) -> None:
    """Each rank's dump as torch's default writer names it (`nccl_trace_rank_<rank>`): flat,
    by frtrace.synth.write_job; or in one folder per host of this cluster (write_job's own
    per-host folders assume its host names), pickled the same way (protocol 2)."""
    if not per_host:
        write_job(job, evidence)
        return
    for rank in sorted(job.dumps):
        if rank in job.omit_ranks:
            continue
        folder = evidence / cluster.procs[rank].host if per_host else evidence
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"nccl_trace_rank_{rank}").write_bytes(
            pickle.dumps(job.dumps.peek(rank), protocol=2)
        )


def expected(
    sid: str, split: str, seed: int, style: dict[str, Any], job: SyntheticJob, cluster: Cluster,
    rendered: Rendered,
) -> dict[str, Any]:  # fmt: skip
    ranks = {
        str(p.rank): {"host": p.host, "local_rank": p.local_rank, "pid": p.pid}
        for p in cluster.procs
    }
    truth = job.expected
    culprit = None
    if truth is not None:
        rank = style["fault_rank"]
        seq = truth["collective_seq_id"]
        culprit = {
            "rank": rank,
            "host": cluster.procs[rank].host,
            "pid": cluster.procs[rank].pid,
            "function": None,
            "exception": None,
            "signal": None,
            "waits_in": None,
            "group": truth["pg_name"],
            "group_desc": truth["pg_desc"],
            "seq": seq if seq is not None else truth["p2p_seq_id"],
            "ranks": list(truth["culprit_ranks"]),
        }
    out_style = dict(style)
    out_style["waiting_ranks"] = rendered.waiting_ranks
    out_style["logged_ranks"] = rendered.logged_ranks
    out_style["first_timeout_rank"] = rendered.first_rank
    out_style["summary_nodes"] = [cluster.hosts[n] for n in rendered.summary_nodes]
    out_style["exit_codes"] = {str(r): c for r, c in sorted(rendered.exit_codes.items())}
    out_style["net_warn_at"] = rendered.net_warn
    if style["fault"] == "stuck_collective":
        out_style["undecidable_from_logs"] = True
    return {
        "schema": "frtrace.evidence-job/1",
        "id": sid,
        "split": split,
        "seed": seed,
        "source": "rendered-nccl",
        "fault": style["fault"],
        "style": out_style,
        "evidence": "evidence",
        "world_size": len(cluster.procs),
        "ranks": ranks,
        "culprit": culprit,
        "hung": bool(job.hung),
        "expect_exit": [1] if job.hung else [0, 4],
    }


def build(seed: int, split: str) -> tuple[dict[str, Any], SyntheticJob, Cluster, Rendered]:
    """Scenario `seed` of `split`: its style, job, cluster and rendered lines."""
    style = sample(seed, split)
    rng = random.Random(f"{split}-{seed}-job")
    job = simulate_style(style, rng)
    world = job.spec.layout.world if job.spec is not None else 0
    nodes = world // style["per_node"]
    cluster = Cluster.build(host_names(style, nodes, rng), style["per_node"], rng)
    log_style = LogStyle(
        torch_info=style["torch_info"],
        nccl_debug=style["nccl_debug"],
        faulthandler=style["faulthandler"],
        omp_warning=style["omp_warning"],
        net_warn=style["net_warn"],
        window_s=style["window_s"],
        dump_wait_ms=style["dump_wait_ms"],
        summary_host=style["summary_host"],
        iface=style["iface"],
    )
    rendered = render(job, cluster, log_style, rng.randrange(2**31))
    return style, job, cluster, rendered


def write_scenario(root: Path, split: str, seed: int) -> Path:
    sid = f"nccl-{split}-{seed:04d}"
    style, job, cluster, rendered = build(seed, split)
    where = root / sid
    if where.exists():
        shutil.rmtree(where)
    evidence = where / "evidence"
    evidence.mkdir(parents=True)
    for name, lines in log_files(rendered, cluster, style).items():
        (evidence / name).write_text("".join(text + "\n" for _, _, text in lines))
    if style["dumps"]:
        write_dumps(job, cluster, evidence, style["dump_layout"] == "per_host")
    truth = expected(sid, split, seed, style, job, cluster, rendered)
    (where / "expected.json").write_text(json.dumps(truth, indent=2) + "\n")
    return where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--split", required=True, choices=sorted(SPLIT_SEED))
    parser.add_argument("--count", required=True, type=int)
    parser.add_argument("--first", type=int, default=0, help="skip the first K scenarios")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = SPLIT_SEED[args.split]
    for seed in range(base + args.first, base + args.first + args.count):
        where = write_scenario(args.out, args.split, seed)
        print(where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
