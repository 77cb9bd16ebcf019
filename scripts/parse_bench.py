#!/usr/bin/env python3
"""CPU time per entry of reading one rank's dump: the C fast path, pickle.load, pickle.load +
columnize. One cached synthetic rank file per stack depth; a quick run (seconds), not a job.

    .venv/bin/python scripts/parse_bench.py --entries 2000 --stack-depth 4 16

The three are timed interleaved (best of many, process CPU time, cyclic GC paused as the
workers run), so a burst of load on a shared machine hits all three alike.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frtrace.dumps.read import load_pickle  # noqa: E402
from frtrace.synth import Layout, simulate, spec_for_entries  # noqa: E402
from frtrace.tables.columns import columnize, columnize_fast, fast_path_available  # noqa: E402

CACHE = REPO / ".bench-cache" / "parse"


def dump_bytes(entries: int, depth: int) -> bytes:
    """Rank 0 of a tp=2, dp=2, pp=2 job whose ring buffer of `entries` has wrapped."""
    path = CACHE / f"rank0-e{entries}-d{depth}.pkl"
    if not path.exists():
        spec = spec_for_entries(
            Layout(tp=2, dp=2, pp=2), entries, batch_p2p=True, stack_depth=depth
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(simulate(spec).dumps[0], protocol=2))
    return path.read_bytes()


def best(run: Callable[[], Any], reps: int) -> float:
    fastest = float("inf")
    for _ in range(reps):
        gc.disable()
        start = time.process_time()
        result = run()
        fastest = min(fastest, time.process_time() - start)
        del result
        gc.enable()
    return fastest


def measure(blob: bytes, rounds: int) -> dict[str, float]:
    """Best CPU seconds of each way to read `blob`, the three interleaved."""
    runs: dict[str, Callable[[], Any]] = {
        "fast path": lambda: columnize_fast(blob, 0),
        "pickle.load": lambda: load_pickle(blob),
        "load+columnize": lambda: columnize(load_pickle(blob), 0),
    }
    times = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            times[name] = min(times[name], best(run, 2))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--stack-depth", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    if not fast_path_available():
        print("frtrace.tables._fastdump is not built (pip install -e . with a C compiler)")
        return 1
    for depth in args.stack_depth:
        blob = dump_bytes(args.entries, depth)
        n = len(pickle.loads(blob)["entries"])
        assert columnize_fast(blob, 0) is not None, "the fast path declined this file"
        times = measure(blob, args.rounds)
        cells = ", ".join(f"{name} {t / n * 1e6:.2f}" for name, t in times.items())
        print(f"{depth:>2} frames, {n} entries, {len(blob) / 1e6:.2f} MB: us/entry: {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
