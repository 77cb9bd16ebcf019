"""Read the logs and py-spy stacks a discovery found, and attach them to the job's Trace.

Dumps stay the job's tables; the evidence travels beside them (`Trace.evidence`). A folder
with logs or stacks but no usable dump still gives a Trace, without entries, so that the
same analysis and reports run on the logs alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from frtrace.dumps.discover import Discovery, rank_from_name, reclaim_text
from frtrace.errors import FrtraceError
from frtrace.evidence.gather import DumpHost, dump_host, gather
from frtrace.evidence.logs import LogReadError, ParsedLog, parse_log, shared_folders
from frtrace.evidence.pyspy import ParsedStacks, parse_pyspy
from frtrace.evidence.records import Evidence, PyFrame
from frtrace.tables.columns import columnize
from frtrace.tables.parse import NoUsableDumpError, Skipped
from frtrace.tables.repair import (
    add_global_peers,
    infer_memberships,
    pg_status_table,
    status_names,
)
from frtrace.tables.trace import Trace, file_table, merge_columns


def read_evidence(
    found: Discovery,
    skipped: list[Skipped] | None = None,
    dumped: Iterable[int] = (),
    last_calls: Mapping[int, tuple[PyFrame, ...]] | None = None,
) -> Evidence | None:
    """The evidence of the logs, stacks and dump names `found` holds (the dumps of the ranks
    `dumped` only: those that were usable, with the stack of each one's last entry in
    `last_calls`); None when they tell nothing (no log, no stacks, no host in a dump's name
    or folder). A file that cannot be read is added to `skipped`."""
    root = found.trace_dir
    usable = set(dumped)
    calls = last_calls or {}
    shared = shared_folders([*found.logs, *found.stacks], root)
    dumps = [
        DumpHost(
            f.rank,
            str(f.path),
            dump_host(f.path, found.prefix, root, shared),
            calls.get(f.rank, ()),
        )
        for f in found.files
        if f.rank in usable
    ]
    if not found.logs and not found.stacks and not any(d.host for d in dumps):
        return None
    logs: list[ParsedLog] = []
    stacks: list[ParsedStacks] = []
    for path in found.logs:
        try:
            logs.append(parse_log(path, root, shared))
        except LogReadError as exc:
            _skip(skipped, path, f"log: {exc}")
    for path in found.stacks:
        try:
            stacks.append(parse_pyspy(path, root, shared))
        except LogReadError as exc:
            _skip(skipped, path, f"py-spy stacks: {exc}")
    return gather(logs, stacks, dumps)


def last_calls(trace: Trace) -> dict[int, tuple[PyFrame, ...]]:
    """Each dumped rank's last entry's Python stack (FlightRecorder's `frames`, innermost
    first; entries are in each dump's order, oldest first), for tying a py-spy process that
    waits inside that very call to its rank."""
    table = trace.table
    if not len(table):
        return {}
    ranks = table["rank"]
    last = np.flatnonzero(np.append(ranks[1:] != ranks[:-1], True))
    out: dict[int, tuple[PyFrame, ...]] = {}
    for row, stack in zip(last.tolist(), table["stack_id"][last].tolist(), strict=True):
        if stack >= 0:
            out[int(ranks[row])] = tuple(
                PyFrame(n, f, int(line)) for n, f, line in trace.stacks[stack]
            )
    return out


def _skip(skipped: list[Skipped] | None, path: Path, reason: str) -> None:
    if skipped is not None:
        skipped.append(Skipped(str(path), reason))


def empty_trace(found: Discovery, skipped: list[Skipped] | None = None) -> Trace:
    """A Trace without entries (no usable dump): the analysis then runs on the evidence."""
    nothing = columnize({"version": "", "pg_config": {}, "pg_status": {}, "entries": []}, 0)
    entries, stacks = merge_columns([nothing])
    members = infer_memberships(entries, [], [])
    add_global_peers(entries, members.groups)
    status = pg_status_table([], status_names(entries))
    return Trace(
        trace_dir=str(found.trace_dir),
        prefix=found.prefix,
        table=entries,
        group_table=members.groups,
        status_table=status,
        stacks=stacks,
        file_table=file_table([]),
        skipped=list(skipped or []),
    )


def load_with_evidence(found: Discovery, parse: Callable[[], Trace]) -> Trace:
    """`parse()` the dumps `found` names, then attach the evidence of its logs and stacks; a
    folder of logs or stacks without any usable dump gives an empty Trace with the evidence."""
    if found.files or not (found.logs or found.stacks):
        try:
            trace = parse()
        except NoUsableDumpError as exc:
            left = reclaim_text(found, exc.skipped)  # logs named like dumps
            if not (found.logs or found.stacks):
                raise
            return _logs_only(found, left)
        trace.skipped[:] = reclaim_text(found, trace.skipped)
        trace.evidence = read_evidence(found, trace.skipped, trace.ranks, last_calls(trace))
        return trace
    return _logs_only(found, [Skipped(str(p), r) for p, r in found.skipped])


# a file named as a job's output: slurm's default `slurm-%j.out` (sbatch(1), --output: "By
# default both standard output and standard error are directed to a file of the name
# slurm-%j.out"), or a log's usual suffixes; other text (a README) says nothing of a job
_JOB_LOG_NAME = re.compile(r"^slurm-.*|\.(?:log|out|err)$", re.IGNORECASE)


def _logs_only(found: Discovery, skipped: list[Skipped]) -> Trace:
    """No usable dump: the Trace of the logs and stacks, if they name any rank at all."""
    trace = empty_trace(found, skipped)
    evidence = read_evidence(found, trace.skipped)
    if evidence is None or not (evidence.ranks or evidence.workers or evidence.job_seen):
        texts = [p for p in [*found.logs, *found.stacks] if rank_from_name(p.name) is not None]
        if not found.files and not found.skipped and not texts:  # nothing like a dump there
            if not any(_JOB_LOG_NAME.search(p.name) for p in found.logs):
                raise FrtraceError(f"no dump files found in {found.trace_dir}")
            trace.evidence = evidence  # the job's own log, saying nothing yet: it is unknown
            return trace
        named = {s.file for s in trace.skipped}
        for path in [*found.logs, *found.stacks]:
            if str(path) not in named:
                trace.skipped.append(Skipped(str(path), "text, not a dump, naming no rank"))
        raise NoUsableDumpError(
            f"no usable dump in {found.trace_dir}, and no log or py-spy stack naming a rank "
            f"({len(trace.skipped)} file(s) skipped)",
            trace.skipped,
        )
    trace.evidence = evidence
    return trace
