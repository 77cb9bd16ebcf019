"""The generator's command: write synthetic Flight Recorder dumps of a simulated job and print
the fault's ground truth as JSON (`python -m frtrace.synth`, or scripts/synth.py in a clone).

Example: python -m frtrace.synth /tmp/job --tp 8 --dp 4 --pp 2 --entries 2000 \\
             --fault missing_ranks --fault-rank 5 --fault-group tp --fault-step 1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from frtrace.synth.faults import FAULT_KINDS, Fault
from frtrace.synth.layout import Layout
from frtrace.synth.sim import JobSpec, simulate, spec_for_entries
from frtrace.synth.writer import write_job

_DESCRIPTION = (
    "Write synthetic Flight Recorder dumps of a simulated job and print the fault ground truth."
)


def build_parser() -> argparse.ArgumentParser:
    """The generator's options: a job's layout and size, one fault, and how files are written."""
    parser = argparse.ArgumentParser(prog="python -m frtrace.synth", description=_DESCRIPTION)
    parser.add_argument("out_dir", type=Path, help="directory to write the dumps into")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    parser.add_argument("--dp", type=int, default=1, help="data-parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    parser.add_argument(
        "--ep", type=int, default=1, help="MoE expert-parallel size (divides dp; uneven all_to_all)"
    )
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 2)")
    parser.add_argument(
        "--entries",
        type=int,
        default=None,
        help="fill every rank's ring buffer with exactly this many entries "
        "(picks --steps and --buffer-size)",
    )
    parser.add_argument(
        "--buffer-size", type=int, default=None, help="ring buffer size (default 2000)"
    )
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--window", type=int, default=2, help="issued-but-incomplete works a rank may have"
    )
    parser.add_argument("--fault", choices=FAULT_KINDS, default=None, help="fault to inject")
    parser.add_argument("--fault-rank", type=int, default=0)
    parser.add_argument(
        "--fault-group",
        choices=("tp", "dp", "pp", "ep", "default"),
        default=None,
        help="group of the faulted op (default: pp for p2p_mismatch, else tp)",
    )
    parser.add_argument("--fault-step", type=int, default=1)
    parser.add_argument("--fault-index", type=int, default=0)
    parser.add_argument(
        "--fault-partner",
        choices=("tp", "dp", "pp", "default"),
        default=None,
        help="order_cycle only: group whose op is issued too early",
    )
    parser.add_argument("--format", choices=("pickle", "json"), default="pickle")
    parser.add_argument("--gzip", action="store_true", help="gzip each dump (.gz suffix)")
    parser.add_argument(
        "--host-names", action="store_true", help="name files <prefix><host>_<rank>"
    )
    parser.add_argument("--host-dirs", action="store_true", help="one sub-folder per host")
    parser.add_argument("--prefix", default="nccl_trace_rank_")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers", type=int, default=1, help="processes writing dumps in parallel (POSIX fork)"
    )
    parser.add_argument("--no-stacks", action="store_true", help="record no python frames")
    parser.add_argument(
        "--no-timing",
        action="store_true",
        help="as without TORCH_NCCL_ENABLE_TIMING: no start times/durations",
    )
    parser.add_argument(
        "--only-active", action="store_true", help="dump only entries that are not completed"
    )
    parser.add_argument(
        "--batch-p2p", action="store_true", help="pipeline send/recv via batch_isend_irecv blocks"
    )
    parser.add_argument(
        "--extras",
        action="store_true",
        help="add a barrier, broadcast/reduce/gather/scatter and an uneven all_gather per step",
    )
    parser.add_argument(
        "--fault-drop-part",
        action="store_true",
        help="type_mismatch only: leave one part out of the coalesced block holding the op",
    )
    parser.add_argument(
        "--fault-mid-block",
        action="store_true",
        help="missing_ranks only: stall after the first parts of the coalesced block holding "
        "the op (it never ends the block)",
    )
    parser.add_argument(
        "--straggler",
        type=int,
        nargs=2,
        metavar=("RANK", "NS"),
        help="make RANK this many ns slower per work item (healthy, just slow)",
    )
    parser.add_argument(
        "--step-straggler",
        type=int,
        nargs=3,
        metavar=("RANK", "LO_NS", "HI_NS"),
        help="make RANK enqueue the first collective of every step LO_NS to HI_NS late "
        "(drawn per step: slow data loading; healthy, just slow)",
    )
    parser.add_argument(
        "--jitter-ns", type=int, default=20_000, help="random CPU time per work item, at most"
    )
    parser.add_argument(
        "--clock-skew-ms", type=int, default=0, help="offset each host's clock by up to this"
    )
    parser.add_argument(
        "--gpu-scale",
        type=int,
        default=1,
        help="multiply every GPU and network time (ms-long layers: pipeline bubbles)",
    )
    parser.add_argument(
        "--snapshot",
        type=float,
        default=None,
        metavar="FRACTION",
        help="healthy jobs: dump on demand at this fraction (0-1) of the run, work in flight",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the generator with `argv` (else the command line's); 0 once the dumps are written."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        layout = Layout(tp=args.tp, dp=args.dp, pp=args.pp, ep=args.ep)
        fault = None
        if args.fault is not None:
            group = args.fault_group or ("pp" if args.fault == "p2p_mismatch" else "tp")
            fault = Fault(
                args.fault,
                args.fault_rank,
                group=group,
                step=args.fault_step,
                index=args.fault_index,
                partner=args.fault_partner,
                drop_part=args.fault_drop_part,
                mid_block=args.fault_mid_block,
            )
        common = {
            "microbatches": args.microbatches,
            "layers": args.layers,
            "window": args.window,
            "seed": args.seed,
            "with_stacks": not args.no_stacks,
            "enable_timing": not args.no_timing,
            "only_active": args.only_active,
            "fault": fault,
            "batch_p2p": args.batch_p2p,
            "extras": args.extras,
            "straggler": tuple(args.straggler) if args.straggler else None,
            "step_straggler": tuple(args.step_straggler) if args.step_straggler else None,
            "snapshot": args.snapshot,
            "jitter_ns": args.jitter_ns,
            "clock_skew_ms": args.clock_skew_ms,
            "gpu_scale": args.gpu_scale,
        }
        if args.entries is not None:
            if args.steps is not None or args.buffer_size is not None:
                parser.error("--entries picks --steps and --buffer-size; do not combine them")
            spec = spec_for_entries(layout, args.entries, **common)
        else:
            spec = JobSpec(
                layout, steps=args.steps or 2, buffer_size=args.buffer_size or 2000, **common
            )
        job = simulate(spec)
        write_job(
            job,
            args.out_dir,
            prefix=args.prefix,
            fmt=args.format,
            compress=args.gzip,
            host_names=args.host_names,
            host_dirs=args.host_dirs,
            workers=args.workers,
        )
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(job.expected))
    return 0
