"""What `frtrace collect` says: the manifest (collect.json), the summary on stdout and the
lines on stderr. Every sentence about a collection is here; the collector returns facts."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from frtrace.collect.dumps import FreshResult
from frtrace.collect.run import MANIFEST_NAME, Collected
from frtrace.ranks import rank_ranges
from frtrace.report.fmt import safe
from frtrace.version import __version__

SCHEMA_ID = "frtrace.collect/1"

_STACK_FAILURES = {
    "gone": "the process is gone",
    "not_python": "py-spy found no Python in it",
    "timeout": "py-spy did not answer",
    "failed": "py-spy failed",
    "denied": "py-spy may not attach to it",
}
UNAVAILABLE = (
    "the job enabled no on-demand dump (run it under torch.distributed.elastic."
    "control_plane.worker_main() with TORCH_WORKER_SERVER_SOCKET set, or, with NCCL, set "
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE)"
)
_METHODS = {"worker_server": "worker server", "pipe": "NCCL debug-info pipe"}


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _local(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def manifest_dict(done: Collected) -> dict[str, Any]:
    """collect.json: what was found and written, and what failed (docs/collect.md)."""
    return {
        "schema": SCHEMA_ID,
        "frtrace": __version__,
        "host": done.host,
        "time": _iso(done.started),
        "pyspy": done.pyspy,
        "processes": _manifest_processes(done),
        "searched_prefixes": done.searched,
        "files": _manifest_files(done),
        "failures": _manifest_failures(done),
    }


def _manifest_processes(done: Collected) -> list[dict[str, Any]]:
    """Every training process found, with how taking its stack and fresh dump went."""
    stacks = {p.pid: s for p, s in done.stacks}
    fresh = {p.pid: r for p, r in done.fresh}
    return [
        {
            "rank": p.rank,
            "local_rank": p.local_rank,
            "pid": p.pid,
            "world_size": p.world_size,
            "job": p.job,
            "helpers": list(p.helpers),
            "command": p.command,
            "stack": None if p.pid not in stacks else (stacks[p.pid].failure or "ok"),
            "fresh_dump": None if p.pid not in fresh else _fresh_outcome(fresh[p.pid]),
        }
        for p in done.found.processes
    ]


def _fresh_outcome(result: FreshResult) -> str:
    """One word for asking a process for a fresh dump: ok, unavailable (the job enabled no
    way to ask) or failed."""
    if result.failure is None:
        return "ok"
    return "unavailable" if result.method is None else "failed"


def _manifest_files(done: Collected) -> list[dict[str, Any]]:
    """The files written into OUT: the stacks, the dumps copied, the fresh dumps."""
    files: list[dict[str, Any]] = []
    if done.stacks_file is not None:
        files.append({"name": done.stacks_file, "kind": "stacks"})
    files += [
        {
            "name": c.name,
            "kind": "dump",
            "rank": c.rank,
            "source": c.source,
            "bytes": c.size,
            "mtime": _iso(c.mtime) if c.mtime is not None else None,
            "stale": c.stale,
        }
        for c in done.dumps
        if c.name is not None
    ]
    files += [
        {
            "name": r.file,
            "kind": "fresh_dump",
            "rank": p.rank,
            "method": r.method,
            "handler": r.handler,
        }
        for p, r in done.fresh
        if r.file is not None
    ]
    return files


def _manifest_failures(done: Collected) -> list[dict[str, Any]]:
    """What could not be taken, one record each: stacks, py-spy itself, copies, fresh dumps."""
    failures = [
        _failure("stack", proc.rank, proc.pid, stack.failure, stack.detail)
        for proc, stack in done.stacks
        if stack.failure is not None
    ]
    if done.found.processes and done.pyspy is None:
        failures.append(_failure("stack", None, None, "no_pyspy", "py-spy is not installed"))
    failures += [
        _failure("dump", c.rank, None, "copy_failed", f"{c.source}: {c.failure}")
        for c in done.dumps
        if c.failure is not None
    ]
    failures += [
        _failure(
            "fresh_dump",
            proc.rank,
            proc.pid,
            "unavailable" if result.method is None else "failed",
            UNAVAILABLE if result.method is None else result.failure,
        )
        for proc, result in done.fresh
        if result.failure is not None
    ]
    return failures


def _failure(
    what: str, rank: int | None, pid: int | None, reason: str, detail: str | None
) -> dict[str, Any]:
    """One record of collect.json's `failures` (every record has every key)."""
    return {"what": what, "rank": rank, "pid": pid, "reason": reason, "detail": detail}


def write_manifest(done: Collected) -> str:
    """Write collect.json into OUT; returns its name."""
    path = done.out / MANIFEST_NAME
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_text(json.dumps(manifest_dict(done), indent=2) + "\n")
    os.replace(tmp, path)
    return MANIFEST_NAME


def pyspy_problem(done: Collected) -> str | None:
    """The one line for py-spy missing or not allowed to attach, or None."""
    if done.found.processes and done.pyspy is None:
        return (
            "py-spy is not installed (pip install 'frtrace[collect]', or give its path with "
            "--py-spy); no stack taken"
        )
    denied = done.denied
    if denied:
        return (
            f"py-spy may not attach to {len(denied)} of {len(done.stacks)} training "
            "process(es) (ptrace not permitted): run as root, or as the job's user with "
            "kernel.yama.ptrace_scope=0; in a container add CAP_SYS_PTRACE"
        )
    return None


def stderr_lines(done: Collected) -> list[str]:
    """Warnings and per-item failures, one line each (the py-spy problem is said apart)."""
    lines: list[str] = []
    found = done.found
    if not found.processes:
        lines.append(
            "warning: no training process on this host (none with RANK in an environment "
            "this user can read)"
        )
        if done.searched:
            where = ", ".join(safe(p) for p in done.searched)
            lines.append(f"note: copied every dump found at {where}")
    for pid, value in found.bad_ranks:
        lines.append(f"warning: pid {pid} has RANK={safe(value)!r}, not a rank; skipped")
    for job, rank, pids in found.duplicates:
        lines.append(
            f"warning: rank {rank} of job {safe(job)} is claimed by {len(pids)} processes "
            f"(pids {', '.join(map(str, pids))}); each stack is written"
        )
    if found.jobs:
        lines.append(
            f"warning: {len(found.jobs)} jobs run here ({'; '.join(safe(j) for j in found.jobs)})"
            ": give --under PID to take one"
        )
    for proc, stack in done.stacks:
        if stack.failure is not None and stack.failure != "denied":
            lines.append(
                f"stack of rank {proc.rank} (pid {proc.pid}) not taken: "
                f"{_STACK_FAILURES[stack.failure]} ({safe(stack.detail)})"
            )
    started = {p.rank: p.started for p in found.processes}
    for copy in done.dumps:
        began = started.get(copy.rank)
        if copy.stale and copy.mtime is not None and began is not None:
            lines.append(
                f"warning: the dump of rank {copy.rank} at {safe(copy.source)} was written "
                f"{_local(copy.mtime)}, before its process started ({_local(began)}): left by "
                "an earlier run? (copied all the same)"
            )
        if copy.failure is not None:
            lines.append(
                f"dump of rank {copy.rank} not copied: {safe(copy.source)}: {safe(copy.failure)}"
            )
    for proc, result in done.fresh:
        lines.append(fresh_line(proc.rank, result))
    return lines


def fresh_line(rank: int, result: Any) -> str:
    """What asking rank `rank` for a fresh dump did."""
    if result.method is None:
        return f"fresh dump of rank {rank}: not possible: {UNAVAILABLE}"
    method = _METHODS[result.method]
    if result.failure is not None:
        return f"fresh dump of rank {rank}: {method} failed: {safe(result.failure)}"
    via = f"{method}, {result.handler}" if result.handler else method
    return f"fresh dump of rank {rank}: wrote {result.file} ({via})"


def summary(done: Collected) -> str:
    """The result line on stdout."""
    procs = done.found.processes
    ranks = rank_ranges(sorted({p.rank for p in procs})) if procs else "-"
    taken = sum(1 for _p, s in done.stacks if s.text is not None)
    copied = sum(1 for c in done.dumps if c.name is not None)
    fresh = sum(1 for _p, r in done.fresh if r.file is not None)
    parts = [f"{taken} stack(s)" + (f" in {done.stacks_file}" if done.stacks_file else "")]
    parts.append(f"{copied} dump(s)")
    if done.fresh:
        parts.append(f"{fresh} fresh dump(s)")
    return (
        f"frtrace collect: host {done.host}, {len(procs)} training process(es) (ranks {ranks}): "
        f"{', '.join(parts)}; in {safe(str(done.out))} with {MANIFEST_NAME}"
    )
