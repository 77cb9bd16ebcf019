"""The logs' and stacks' evidence in reports: what was read, and what it shows of a culprit.

Shared by the text, JSON and HTML reports so that they say the same thing. Strings come from
untrusted files: the text report escapes its whole output, the JSON report is JSON-escaped,
the HTML page sets them as text only.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from frtrace.analysis.analyze import Analysis
from frtrace.analysis.findings import ProcessRef
from frtrace.evidence.gather import in_collective
from frtrace.evidence.records import Evidence, ProcessStack, RankEvidence
from frtrace.report.fmt import process_text, ranks_text

STACK_FRAMES = 3  # live frames shown per culprit in the text report
THREADS_SHOWN = 3  # other threads of a culprit's live stack named in the text report


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def inputs_summary(analysis: Analysis) -> str:
    """`4 dumps, 2 logs (nodeA, nodeB), 8 py-spy stacks`: what the run read."""
    trace = analysis.ctx.trace
    ev = analysis.evidence
    parts = [_plural(len(trace.file_table), "dump", "dumps")]
    if ev is not None and ev.logs:
        hosts = sorted({f.host for f in ev.logs if f.host})
        named = f" ({', '.join(hosts[:6])}{', ...' if len(hosts) > 6 else ''})" if hosts else ""
        parts.append(_plural(len(ev.logs), "log", "logs") + named)
    if ev is not None and ev.stack_files:
        parts.append(_plural(ev.stacks, "py-spy stack", "py-spy stacks"))
    return ", ".join(parts)


def known_ranks(analysis: Analysis) -> list[int]:
    """Ranks with a dump or named by the logs and stacks."""
    ranks = set(analysis.ctx.trace.ranks)
    if analysis.evidence is not None:
        ranks |= set(analysis.evidence.ranks)
    return sorted(ranks)


def rank_count(analysis: Analysis) -> int:
    """How many ranks the inputs show: dumps, ranks the logs name, or worker processes they
    show without naming their rank (a healthy job's logs)."""
    ev = analysis.evidence
    workers = len(ev.workers) if ev is not None else 0
    return max(len(known_ranks(analysis)), workers)


def ranks_seen(analysis: Analysis) -> str:
    """The ranks for a header: their list, else how many workers the logs show."""
    known = known_ranks(analysis)
    ev = analysis.evidence
    if known or ev is None or not (ev.workers or ev.unmatched):
        return f"ranks {ranks_text(known)}"
    count = max(len(ev.workers), len(ev.unmatched))
    return f"{count} workers (their ranks not named)"


def _name(path: str, root: str) -> str:
    """A file as the user named it: relative to the trace folder when inside it."""
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def rank_evidence(analysis: Analysis, rank: int) -> RankEvidence | None:
    ev = analysis.evidence
    return None if ev is None else ev.ranks.get(rank)


def hosts_of(analysis: Analysis, ranks: list[int]) -> list[str]:
    ev: Evidence | None = analysis.evidence
    return [] if ev is None else ev.hosts(ranks)


def culprit_rows(analysis: Analysis, rank: int, frames: int | None) -> list[tuple[str, str]]:
    """(label, text) rows saying what the inputs show of one culprit rank."""
    rev = rank_evidence(analysis, rank)
    if rev is None:
        return []
    root = analysis.ctx.trace.trace_dir
    rows: list[tuple[str, str]] = []
    who = f"rank {rank}" + (f" on {rev.host}" if rev.host else "")
    if rev.pid is not None:
        who += f", pid {rev.pid}"
    rows.append(("culprit", who))
    if rev.files:
        rows.append(("files", ", ".join(_name(p, root) for p in rev.files)))
    if rev.raised:
        exc = rev.raised[-1]
        at = f" ({_name(exc.where.file, root)}{f':{exc.where.line}' if exc.where.line else ''})"
        rows.append(("exception", f"{exc.type}: {exc.message or '-'}{at}"))
        if exc.frames:
            f0 = exc.frames[0]
            rows.append(("raised in", f"{f0.function}  {f0.file}:{f0.line}"))
    exited = rev.exit
    if exited is not None and (exited.signal or exited.exitcode):
        what = exited.signal or f"exit code {exited.exitcode}"
        if exited.signal:
            what += f" (exit code {exited.exitcode})"
        rows.append(("ended by", what + " per torchelastic's summary"))
    if rev.stack is not None:
        rows += _live_rows(rev.stack, frames)
    if rev.last_lines and not (rev.raised or rev.stack):
        where, text = rev.last_lines[-1]
        at = f" ({_name(where.file, root)}{f':{where.line}' if where.line else ''})"
        rows.append(("last line", f"{text}{at}"))
    step = next_step(rev) if from_logs(rev) else ""  # a dump's name alone says no more
    if step:
        rows.append(("next step", step))
    return rows


def _live_rows(stack: ProcessStack, frames: int | None) -> list[tuple[str, str]]:
    """A live stack as report rows: where it is, then its innermost frames."""
    if stack.main is None:
        return []
    op = in_collective(stack)
    where = f"inside {op or 'a collective'}" if op is not None else "outside collectives"
    live = stack.main.python_frames
    own = stack.main.own_frames
    if frames is not None and own and live.index(own[0]) >= frames:  # the job's own frame
        live = (live[0], *own)  # after the waiting call it made, past the library's
    shown = live if frames is None else live[:frames]
    rows = [("live stack", f"{where} ({stack.source}, innermost first):")]
    rows += [("", f"  {f.function}  {f.file}{f':{f.line}' if f.line else ''}") for f in shown]
    others = [t for t in stack.threads if t is not stack.main and t.own_frames]
    if others:  # a worker thread may hold what the main thread waits for
        said = [f"{t.name or t.tid}: {t.own_frames[0].text()}" for t in others[:THREADS_SHOWN]]
        more = len(others) - THREADS_SHOWN
        rows.append(("other threads", "; ".join(said) + (f"; {more} more" if more > 0 else "")))
    return rows


def process_of(analysis: Analysis, ref: ProcessRef) -> ProcessStack | None:
    """The live stack of a process the evidence names without its rank."""
    ev = analysis.evidence
    if ev is None:
        return None
    at = ref.at
    return next(
        (
            p
            for p in ev.unmatched
            if p.pid == ref.pid
            and p.host == ref.host
            and (at is None or (p.where.file, p.where.line) == at)
        ),
        None,
    )


def process_rows(analysis: Analysis, ref: ProcessRef, frames: int | None) -> list[tuple[str, str]]:
    """(label, text) rows saying what the stacks show of a culprit process whose rank no
    evidence states."""
    why = "no log or label ties it to a rank"
    if ref.pid is None:
        why = f"its stack names no pid, and {why}"
    rows = [("culprit", f"{process_text(ref.pid, ref.host)} ({why})")]
    proc = process_of(analysis, ref)
    if proc is not None:
        rows.append(("files", _name(proc.where.file, analysis.ctx.trace.trace_dir)))
        rows += _live_rows(proc, frames)
    if step := _process_step(ref):
        rows.append(("next step", step))
    return rows


def _process_step(ref: ProcessRef) -> str:
    """py-spy on the process, or on every worker of its host where no pid is known."""
    host = shlex.quote(ref.host) if ref.host else ""
    if ref.pid is not None:
        return (f"ssh {host} " if host else "") + f"py-spy dump --pid {ref.pid}  (if it still runs)"
    if host:
        return f"ssh {host} 'pgrep -P $(pgrep -o python) | xargs -I {{}} py-spy dump --pid {{}}'"
    return ""


def process_evidence(analysis: Analysis, ref: ProcessRef) -> dict[str, Any]:
    """What the stacks show of a culprit process, for the JSON report (`rank` null)."""
    proc = process_of(analysis, ref)
    shown: list[dict[str, Any]] = []
    if proc is not None and proc.main is not None:
        shown.append(_live_stack(proc))
    return {
        "rank": None,
        "host": ref.host or None,
        "local_rank": None,
        "pid": ref.pid,
        "files": [proc.where.file] if proc is not None else [],
        "evidence": shown,
        "next_step": _process_step(ref) or None,
    }


def _live_stack(stack: ProcessStack) -> dict[str, Any]:
    assert stack.main is not None
    return {
        "source": stack.source,
        "file": stack.where.file,
        "line": stack.where.line,
        "shows": "live_stack",
        "pid": stack.pid,
        "in_collective": in_collective(stack),
        "frames": [f.text() for f in stack.main.frames],
        "threads": [
            {"name": t.name or t.tid, "frames": [f.text() for f in t.frames]}
            for t in stack.threads
            if t is not stack.main
        ][:16],
    }


def from_logs(rev: RankEvidence) -> bool:
    """Whether logs or stacks say anything of the rank (beyond a dump's name)."""
    return bool(rev.waits or rev.raised or rev.exits or rev.warnings or rev.stack)


def next_step(rev: RankEvidence) -> str:
    """The command or place to look at next for this rank, as concrete as the inputs allow."""
    host = shlex.quote(rev.host) if rev.host else ""
    exited = rev.exit
    if exited is not None and exited.signal == "SIGKILL" and not rev.raised:
        return (f"ssh {host} " if host else "") + "dmesg -T | grep -i -e oom -e 'killed process'"
    if rev.raised:
        exc = rev.raised[-1]
        line = f":{exc.where.line}" if exc.where.line else ""
        return f"its traceback in {exc.where.file}{line}"  # the file as it was found
    if rev.pid is not None:
        return (f"ssh {host} " if host else "") + f"py-spy dump --pid {rev.pid}  (if it still runs)"
    if host:
        return f"ssh {host} 'pgrep -P $(pgrep -o python) | xargs -I {{}} py-spy dump --pid {{}}'"
    return ""


def culprit_evidence(analysis: Analysis, rank: int) -> dict[str, Any] | None:
    """What the inputs show of one culprit, for the JSON report: host, pid, files, and each
    piece of evidence with its source, file and line."""
    rev = rank_evidence(analysis, rank)
    if rev is None:
        return None
    shown: list[dict[str, Any]] = []
    for wait in rev.waits[-3:]:
        shown.append(
            {
                "source": "log",
                "file": wait.where.file,
                "line": wait.where.line,
                "shows": "wait",
                "how": wait.how,
                "op": wait.op,
                "pg_name": wait.pg_name,
                "pg_desc": wait.pg_desc,
                "seq": wait.seq,
                "timeout_ms": wait.timeout_ms,
            }
        )
    for exc in rev.raised[-3:]:
        shown.append(
            {
                "source": "log",
                "file": exc.where.file,
                "line": exc.where.line,
                "shows": "exception",
                "exception": exc.type,
                "message": exc.message,
                "frames": [f.text() for f in exc.frames[: STACK_FRAMES * 2]],
            }
        )
    for exited in rev.exits[-1:]:
        shown.append(
            {
                "source": "torchelastic",
                "file": exited.where.file,
                "line": exited.where.line,
                "shows": "signal" if exited.signal else "exit",
                "signal": exited.signal or None,
                "exitcode": exited.exitcode,
                "pid": exited.pid,
            }
        )
    for warned in rev.warnings[-3:]:
        shown.append(
            {
                "source": "nccl",
                "file": warned.where.file,
                "line": warned.where.line,
                "shows": "warning",
                "message": warned.message,
            }
        )
    if rev.stack is not None and rev.stack.main is not None:
        shown.append(_live_stack(rev.stack))
    for where, text in rev.last_lines[-3:]:
        shown.append(
            {"source": "log", "file": where.file, "line": where.line, "shows": "line", "text": text}
        )
    return {
        "rank": rank,
        "host": rev.host or None,
        "local_rank": rev.local_rank,
        "pid": rev.pid,
        "files": list(rev.files),
        "evidence": shown,
        "next_step": (next_step(rev) if from_logs(rev) else "") or None,
    }
