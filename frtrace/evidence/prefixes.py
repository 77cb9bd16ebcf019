"""Who wrote a log line, from the prefixes launchers and loggers put before it.

A worker's line can carry, in this order (each optional):
- srun's task label, with `srun --label`: the task id right-aligned to the width of the
  largest task id, then `: ` (`"%*d: "`), or `P<component> <id>: ` in a heterogeneous job
  (slurm src/common/write_labelled_message.c, `_write_label`). With one task per node (the
  usual way to start torchrun under slurm) the task is the node.
- torchrun's header, with `--tee`: `[<role><local_rank>]:` (torch/distributed/elastic/
  multiprocessing/tail_log.py, `TailLog.start`): `[default1]:` without `--role`, `[nodeB:1]:`
  with `--role nodeB:`, `[17:1]:` with `--role 17:`; with `TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`
  any text built from `${role_name}`, `${local_rank}` and `${rank}` (the global rank) instead
  (torch/distributed/elastic/agent/server/local_elastic_agent.py, `_start_workers`). Whether
  the number is the local or the global rank is decided for the whole job when joining.
- the global rank tag `[rank<N>]:` that torch writes before every line of a worker's uncaught
  exception (torch/distributed/distributed_c10d.py, `init_process_group`'s
  `_distributed_excepthook`) and before torch's Python log lines once the group is up
  (torch/_logging/_internal.py, `TorchLogsFormatter.format`: `record.rankprefix`).
- a log header: torch's Python one `<L><MMDD> <hh:mm:ss.uuuuuu> <pid> <path>:<line>]`
  (`TorchLogsFormatter.format`; the pid is the writing process's), or c10's C++ one
  `[<L><MMDD> <hh:mm:ss.nnnnnnnnn> <file>:<line>]` (c10/util/Logging.cpp).
"""

from __future__ import annotations

import functools
import re
from datetime import date
from typing import NamedTuple

from frtrace.evidence.records import Speaker

SRUN_LABEL = re.compile(r"(?:P(?P<pack>\d{1,6}) )? {0,7}(?P<task>\d{1,7}): ")
_HEADER = re.compile(r"\[(?P<body>[^\[\]\s]{1,128})\]:")
_NUMBERED = re.compile(r"(?P<role>.{0,127}?)(?P<num>\d{1,7})$")
_RANK_TAG = re.compile(r"\[rank(?P<rank>\d{1,7})\]:\s?")
_PY_HEADER = re.compile(
    r"(?:\[rank(?P<rank>\d{1,7})\]:)?[VIWEC](?P<clock>\d{4} \d\d:\d\d:\d\d\.\d{6}) "
    r"(?P<pid>\d{1,10}) "
    r"(?P<path>\S{1,512}):\d{1,9}\]\s?"
)
# torchrun's own modules: a line logged from these is the agent's (the path is as
# make_module_path_relative left it: relative to sys.path, or to the working folder)
_AGENT_PATHS = (
    "torch/distributed/elastic/",
    "torch/distributed/run.py",
    "torch/distributed/launcher/",
)
_C10_HEADER = re.compile(
    r"\[[VIWEF](?P<clock>\d{4} \d\d:\d\d:\d\d\.\d{1,9}) (?:\d{1,10} )?[^\]\s]{1,512}\]\s?"
)


class Peeled(NamedTuple):
    """A line without its prefixes: who wrote it, the pid torch's Python logging states (of
    the writing process; `agent`: logged by torchrun's own modules), and the message."""

    speaker: Speaker
    pid: int | None
    rest: str
    agent: bool = False
    logged: bool = False  # written by torch's or c10's logging (a log header was peeled)
    # the header's time, as `clock_seconds` reads it; a c10 header's in whole seconds (the
    # time is that or up to a second later)
    clock: float | None = None
    # a c10 header's fraction, CLOCK_MONOTONIC's nanoseconds in seconds: one clock for every
    # process of a host, so two lines of one host are that far apart (mod 1 s)
    mono: float | None = None


def clock_seconds(stamp: str) -> float | None:
    """Seconds since the year began of a log header's `MMDD hh:mm:ss.frac` (both headers
    carry no year and no zone: good for ordering one job's lines, nothing more); None
    for a date that does not exist."""
    try:
        days = _day_of_year(stamp[:4])
        hours, minutes, seconds = stamp[5:].split(":")
        return days * 86400.0 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except ValueError:
        return None


@functools.lru_cache(maxsize=400)
def _day_of_year(mmdd: str) -> int:
    """Days from Jan 1 to MMDD, in a leap year (0229 exists); ValueError for no such day."""
    return (date(2024, int(mmdd[:2]), int(mmdd[2:])) - date(2024, 1, 1)).days


def srun_task(line: str) -> tuple[int | None, str]:
    """(task, rest) of an `srun --label` line; (None, line) when it carries no label."""
    m = SRUN_LABEL.match(line)
    if m is None:
        return None, line
    task = int(m.group("task"))
    if m.group("pack") is not None:  # a heterogeneous job's component: its own task ids
        task += 100_000 * (1 + int(m.group("pack")))
    return task, line[m.end() :]


def peel(line: str, labelled: bool) -> Peeled:
    """The speaker and message of one line (`labelled`: the file carries srun labels)."""
    task: int | None = None
    if labelled:
        task, line = srun_task(line)
    role, number, rank = "", None, None
    if line[:1] == "[":
        m = _HEADER.match(line)
        if m is not None and not m.group("body").startswith("rank"):
            n = _NUMBERED.match(m.group("body"))
            if n is not None and line[m.end() :].strip():  # `[0]:` alone: a summary entry
                role, number = n.group("role"), int(n.group("num"))
                line = line[m.end() :]
        t = _RANK_TAG.match(line)
        if t is not None:
            rank = int(t.group("rank"))
            line = line[t.end() :]
    pid: int | None = None
    agent = logged = False
    clock: float | None = None
    mono: float | None = None
    first = line[:1]
    if first in "VIWEC[" and line:
        p = _PY_HEADER.match(line)
        if p is not None:
            pid, logged, clock = int(p.group("pid")), True, clock_seconds(p.group("clock"))
            path = p.group("path")
            agent = any(a in path for a in _AGENT_PATHS)  # relative to where it ran, or not
            if p.group("rank") is not None:
                rank = int(p.group("rank"))
            line = line[p.end() :]
        elif first == "[":
            c = _C10_HEADER.match(line)
            if c is not None:
                # whole seconds only: the fraction is CLOCK_MONOTONIC's tv_nsec, not the wall
                # clock's (c10/util/Logging.cpp, MessageLogger::MessageLogger: time() and
                # localtime_r for the rest, clock_gettime(CLOCK_MONOTONIC) for `ns`)
                stamp, frac = c.group("clock").split(".", 1)
                line, logged, clock = line[c.end() :], True, clock_seconds(stamp)
                mono = int(frac) / 10 ** len(frac)
    return Peeled(Speaker(task, role, number, rank), pid, line, agent, logged, clock, mono)


def looks_labelled(lines: list[str]) -> bool:
    """Whether a file's lines carry srun's task labels: most of its first non-empty lines do
    (slurm's own lines and the agent's, between them, do not)."""
    text = [line for line in lines if line.strip()]
    if not text:
        return False
    hits = sum(1 for line in text if SRUN_LABEL.match(line))
    return hits * 2 >= len(text)
