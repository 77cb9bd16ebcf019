"""File what the logs, stacks and dump names say under global ranks, and name hosts.

A log line is a rank's when it carries a rank tag (`[rank3]:`); a torchrun header names only
the local rank on a node, so `(node, local rank)` is matched to a global rank wherever both
appear on one line or in torchelastic's summary (which names both). A node whose one local
rank is never matched, when exactly one global rank is unaccounted for, is that rank. py-spy
processes are matched by their `# frtrace-collect` label, else by pid (torchelastic's
summary and NCCL's WARN lines give pids), else, on a node, the one process outside
collectives to the one rank the logs show not waiting. What cannot be matched is kept and
said, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from frtrace.dumps.discover import strip_suffixes
from frtrace.evidence.logs import ParsedLog, Speaker, collective_of, same_folder
from frtrace.evidence.pyspy import ParsedStacks
from frtrace.evidence.records import Evidence, ProcessStack, RankEvidence


@dataclass(frozen=True)
class DumpHost:
    """A dump file, its rank, and the host its name or folder gives ('' if none)."""

    rank: int
    path: str
    host: str


def dump_host(path: Path, prefix: str, root: Path | None) -> str:
    """The host in a dump's name (`nccl_trace_rank_node03-host_27` -> node03-host), else its
    sub-folder of `root` (one folder per node), else ''."""
    stem = strip_suffixes(path.name)
    middle = stem[len(prefix) :] if prefix and stem.startswith(prefix) else ""
    middle = middle.rstrip("0123456789").rstrip("_-.")
    if middle:
        return middle
    if root is not None and not same_folder(path.parent, root) and path.parent.name:
        return path.parent.name
    return ""


def in_collective(stack: ProcessStack) -> str | None:
    """The collective the process's main thread is in ('' when in torch.distributed but the
    op is not told), None when it is outside collectives or nothing is known."""
    main = stack.main
    if main is None or not main.frames:
        return None
    op, _site = collective_of(main.frames)
    if op:
        return op
    for frame in main.frames:
        path = frame.file.replace("\\", "/")
        if path.endswith(".py"):
            return "" if "torch/distributed/" in path else None
    return None


def gather(
    logs: Iterable[ParsedLog], stacks: Iterable[ParsedStacks], dumps: Iterable[DumpHost] = ()
) -> Evidence:
    """The evidence of every input, by global rank."""
    ev = Evidence()
    logs, stacks = list(logs), list(stacks)
    for d in dumps:
        r = ev.rank(d.rank)
        r.add_file(d.path)
        r.host = r.host or d.host
        ev.dump_files += 1
    ev.files.extend(log.input for log in logs)
    slots = _slots(logs, ev)
    for log in logs:
        ev.workers |= {(s.host, s.local) for s in log.speakers if s.local is not None}
        ev.workers |= {(s.host, s.local) for s, _e in log.exits if s.local is not None}
    for log in logs:
        _file_lines(ev, log, slots)
    _file_warnings(ev, logs, slots)
    _match_stacks(ev, stacks)
    return ev


def _slots(logs: list[ParsedLog], ev: Evidence) -> dict[tuple[str, int], int]:
    """(node, local rank) -> global rank: what the logs' lines and torchelastic's summaries
    pair, and the one pair left to infer (see _infer_last_slot)."""
    slots: dict[tuple[str, int], int] = {}
    for log in logs:
        slots.update(log.slots)
        for speaker, _exited in log.exits:
            if speaker.local is not None and speaker.rank is not None:
                slots[(speaker.host, speaker.local)] = speaker.rank
    _infer_last_slot(logs, slots, ev)
    return slots


def _owner(
    ev: Evidence, slots: dict[tuple[str, int], int], log: ParsedLog, speaker: Speaker
) -> RankEvidence | None:
    """The rank a line's writer is (its rank tag, its node's local rank, or the per-rank
    file's rank), filed with what the line says of its node; None when not known."""
    if speaker.rank is not None:
        rank: int | None = speaker.rank
    elif speaker.local is not None:
        rank = slots.get((speaker.host, speaker.local))
    else:
        rank, speaker = log.file_rank, Speaker(log.host, None, None)
    return None if rank is None else _place(ev, rank, speaker, log.input.path)


def _file_lines(ev: Evidence, log: ParsedLog, slots: dict[tuple[str, int], int]) -> None:
    """File one log's speakers, waits, exceptions and exits under the ranks they are."""
    if log.file_rank is not None:  # a per-rank file, even one that names nothing
        _place(ev, log.file_rank, Speaker(log.host, None, None), log.input.path)
    for speaker in log.speakers:
        _owner(ev, slots, log, speaker)
    for speaker, wait in log.waits:
        if (waiter := _owner(ev, slots, log, speaker)) is not None:
            waiter.waits.append(wait)
    for speaker, raised in log.raised:
        if (raiser := _owner(ev, slots, log, speaker)) is not None:
            raiser.raised.append(raised)
    for speaker, exited in log.exits:
        if speaker.rank is None:
            continue
        ended = _place(ev, speaker.rank, speaker, log.input.path)
        ended.exits.append(exited)
        ended.pid = ended.pid or exited.pid


def _file_warnings(ev: Evidence, logs: list[ParsedLog], slots: dict[tuple[str, int], int]) -> None:
    """File NCCL's WARN lines under the rank whose pid they give (known once every exit
    is filed), else under the line's writer."""
    by_pid = {(r.host, r.pid): r.rank for r in ev.ranks.values() if r.pid is not None}
    for log in logs:
        for speaker, warned in log.warnings:
            mapped = by_pid.get((log.host, warned.pid))
            warner = (
                _place(ev, mapped, speaker, log.input.path)
                if mapped is not None
                else _owner(ev, slots, log, speaker)
            )
            if warner is not None:
                warner.warnings.append(warned)


def _place(ev: Evidence, rank: int, speaker: Speaker, path: str) -> RankEvidence:
    r = ev.rank(rank)
    r.add_file(path)
    if speaker.host and not r.host:
        r.host = speaker.host
    if speaker.local is not None and r.local_rank is None:
        r.local_rank = speaker.local
    return r


def _infer_last_slot(
    logs: list[ParsedLog], slots: dict[tuple[str, int], int], ev: Evidence
) -> None:
    """One (node, local rank) never matched and one rank never named (ranks run from 0 to at
    least the number of workers the logs show): the same process (a rank that printed
    nothing with its rank on it, often the stuck one)."""
    seen = {(s.host, s.local) for log in logs for s in log.speakers if s.local is not None}
    unmatched = sorted(
        (host, local) for host, local in seen if local is not None and (host, local) not in slots
    )
    named = set(slots.values()) | {
        s.rank for log in logs for s in log.speakers if s.rank is not None
    }
    named |= set(ev.ranks)
    if not named:
        return
    # ranks are 0..W-1, and W is at least every worker the logs show
    world = max(max(named) + 1, len(seen | set(slots)))
    missing = sorted(set(range(world)) - named)
    if len(unmatched) == 1 and len(missing) == 1:
        host, local = unmatched[0]
        slots[(host, local)] = missing[0]
        ev.notes.append(
            f"rank {missing[0]} is taken to be {host}'s local rank {local}: the one process "
            "the logs never name with its rank"
        )


def _match_stacks(ev: Evidence, stacks: list[ParsedStacks]) -> None:
    by_pid: dict[tuple[str, int], int] = {}
    for r in ev.ranks.values():
        if r.pid is not None:
            by_pid[(r.host, r.pid)] = r.rank
    left: dict[str, list[ProcessStack]] = defaultdict(list)
    for file in stacks:
        ev.files.append(file.input)
        for proc in file.processes:
            if proc.is_agent:
                continue
            label = proc.label
            rank = label.rank if label is not None else None
            if rank is None:
                rank = by_pid.get((proc.host, proc.pid))
            if rank is None:
                left[proc.host].append(proc)
                continue
            r = ev.rank(rank)
            r.stack = proc
            r.add_file(file.input.path)
            r.host = r.host or proc.host
            r.pid = r.pid or proc.pid
            if label is not None and label.local_rank is not None and r.local_rank is None:
                r.local_rank = label.local_rank
    for host, procs in left.items():
        ranks = [r for r in ev.ranks.values() if r.host == host and r.stack is None]
        outside = [p for p in procs if in_collective(p) is None]
        idle = [r for r in ranks if not r.waits]
        if len(outside) == 1 and len(idle) == 1:
            proc, r = outside[0], idle[0]
            r.stack, r.pid = proc, r.pid or proc.pid
            r.add_file(proc.where.file)
            procs.remove(proc)
            ev.notes.append(
                f"py-spy process {proc.pid} on {host} is taken to be rank {r.rank}: the one "
                "process outside collectives, and the one rank on that host not waiting"
            )
        ev.unmatched.extend(procs)
