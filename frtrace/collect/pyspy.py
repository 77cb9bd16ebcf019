"""Each training process's Python stack, from `py-spy dump --pid PID`.

py-spy prints, per process, `Process <pid>: <command line>`, `Python v<version> (<path>)`,
then one block per thread, `Thread <tid> (idle|active)` (with `: "<name>"` for a named
thread) followed by its frames innermost first, `    <function> (<file>:<line>)`; `--native`
interleaves C/C++ frames. The output never says the rank, so each block is written after a
label line that does (`label`). Errors go to py-spy's stderr, and are sorted here into the
few a user acts on differently: py-spy may not attach (ptrace), the process is gone, it is
not a Python process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: At most this many py-spy processes at once (a node runs 8 ranks or so).
PARALLEL = 8
#: Bytes kept of one py-spy output (deep stacks of many threads stay far below).
OUTPUT_LIMIT = 16 << 20

Failure = Literal["denied", "gone", "not_python", "timeout", "failed"]


@dataclass(frozen=True)
class Stack:
    """py-spy's output for one pid, or why there is none."""

    pid: int
    text: str | None
    failure: Failure | None = None
    detail: str = ""


def find_pyspy(explicit: str | None = None) -> str | None:
    """The py-spy executable: the one given, else on PATH, else next to this Python (a
    virtual environment's bin/ that is not on PATH)."""
    if explicit is not None:
        path = shutil.which(explicit)
        return path
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if os.access(beside, os.X_OK) else None


def label(rank: int, local_rank: int | None, host: str, pid: int) -> str:
    """The line written before each process's py-spy output; parsers rely on its exact form.
    An unknown local rank is -1."""
    local = -1 if local_rank is None else local_rank
    return f"# frtrace-collect rank={rank} local_rank={local} host={host} pid={pid}"


def classify(stderr: str) -> tuple[Failure, str]:
    """Why py-spy failed, from its stderr, and the line that says so."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    text = "\n".join(lines)
    first = next((line for line in lines if line.startswith(("Error", "Permission"))), "")
    first = first or (lines[0] if lines else "no output")
    if "Permission Denied" in text or "Operation not permitted" in text:
        return "denied", first
    if "Failed to get process executable name" in text or "No such process" in text:
        return "gone", first
    if "Failed to find python version" in text:
        return "not_python", first
    return "failed", first


def dump_one(pyspy: str, pid: int, native: bool, subprocesses: bool, timeout: float) -> Stack:
    """One process's stack (py-spy pauses it while it reads)."""
    cmd = [pyspy, "dump", "--pid", str(pid)]
    if native:
        cmd.append("--native")
    if subprocesses:
        cmd.append("--subprocesses")
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "RUST_BACKTRACE": "0"},
        )
    except subprocess.TimeoutExpired:
        return Stack(pid, None, "timeout", f"no answer within {timeout:g} s")
    except OSError as exc:
        return Stack(pid, None, "failed", f"cannot run {pyspy}: {exc.strerror or exc}")
    out = done.stdout[:OUTPUT_LIMIT].decode("utf-8", "replace")
    if done.returncode == 0 and out.strip():
        return Stack(pid, out)
    failure, detail = classify(done.stderr[:65536].decode("utf-8", "replace"))
    return Stack(pid, None, failure, detail)


def dump_stacks(
    pyspy: str,
    pids: Sequence[int],
    *,
    native: bool = False,
    subprocesses: bool = False,
    timeout: float = 60.0,
) -> list[Stack]:
    """Every pid's stack, py-spy run for several at once so the snapshots are close in time."""
    if not pids:
        return []
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(pids))) as pool:
        return list(pool.map(lambda pid: dump_one(pyspy, pid, native, subprocesses, timeout), pids))
