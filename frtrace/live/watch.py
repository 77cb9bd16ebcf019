"""`frtrace live --watch`: one round's analysis, compared with the previous round's as
`frtrace DIR --since OLDER` compares two snapshots (frtrace.analysis.snapshots), and when to
stop watching.

A round is analyzed from the folder its fetch wrote, by the same loading and analysis as
`frtrace DIR`. The watch stops with its verdict once it is settled: no rank issued anything
new since the previous round and the root cause is the same one (kind, group, sequence
number, culprits), so waiting longer would only say the same again. A job that moves never
settles; the rounds say so until Ctrl-C or `--rounds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from frtrace.analysis.analyze import Analysis, analyze
from frtrace.live.fetch import PREFIX
from frtrace.loading import load_found, locate
from frtrace.tables.trace import Trace


@dataclass
class Round:
    """One round of a watch: its folder, what was read and concluded there."""

    number: int
    folder: Path
    trace: Trace
    analysis: Analysis
    elapsed: float  # seconds since the first round was asked


def analyze_round(
    folder: Path, world_size: int | None, older: Trace | None
) -> tuple[Trace, Analysis]:
    """The round's folder loaded and analyzed as `frtrace DIR` does, with what moved since
    the older round's trace when there is one."""
    trace = load_found(locate(str(folder), PREFIX))
    if world_size is not None:
        trace = trace.with_world(world_size)
    analysis = analyze(trace)
    if older is not None:
        analysis.since(older)
    return trace, analysis


def cause(analysis: Analysis) -> tuple[object, ...] | None:
    """What identifies the root cause from one round to the next."""
    f = analysis.root_cause
    if f is None:
        return None
    return (f.kind, f.pg_name, f.collective_seq_id, f.p2p_seq_id, tuple(f.culprit_ranks))


def settled(before: Analysis, after: Analysis) -> bool:
    """Nothing moved between the two rounds and the root cause stayed the same."""
    moved = after.progress
    if moved is None or moved.advanced or moved.restarted:
        return False
    return cause(before) == cause(after)
