"""The training processes of this node, found from the `RANK` in their environment.

torchrun sets `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `GROUP_RANK`, `MASTER_ADDR`, `MASTER_PORT`
and `TORCHELASTIC_RUN_ID` in every worker's environment before it starts it
(torch/distributed/elastic/agent/server/local_elastic_agent.py, `_start_workers`), so
`/proc/<pid>/environ` (the environment a process was started with; later changes made by the
program itself are not visible there) maps a pid to its rank. Processes started by a rank
inherit that environment (data-loader workers, compile workers), so for each rank of a job
the topmost Python process holding it is the rank; the ones below it are recorded as its
helpers. Environments are read bounded, from regular files only, and a process whose
environment cannot be read (another user's, gone) is skipped. Only the variables collect
needs are kept: environments hold secrets.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Bytes read of one /proc/<pid>/environ; Linux keeps a process's initial environment and
#: arguments within a quarter of its stack limit (8 MiB by default), so 4 MiB holds any
#: usual one, and a larger one is parsed up to there.
ENVIRON_LIMIT = 4 << 20
CMDLINE_LIMIT = 4096

#: The variables kept from a process's environment (never the whole environment).
KEPT_VARS = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "GROUP_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCHELASTIC_RUN_ID",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "TORCH_FR_DUMP_TEMP_FILE",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "TORCH_FR_DUMP_DYNAMIC_FILE_NAME",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
        "TORCH_WORKER_SERVER_SOCKET",
        "TORCH_FR_BUFFER_SIZE",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "HOME",
        "XDG_CACHE_HOME",
    }
)
#: What tells two jobs on one node apart (two jobs both have a rank 0).
JOB_VARS = ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID")
_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*$")


@dataclass(frozen=True)
class TrainingProcess:
    """One rank's process on this node."""

    pid: int
    rank: int
    local_rank: int | None
    world_size: int | None
    job: str
    env: Mapping[str, str]
    command: str
    helpers: tuple[int, ...] = ()
    #: when it started (seconds since the epoch), None when unknown
    started: float | None = None

    def cwd(self, proc: Path = Path("/proc")) -> Path | None:
        """Its working folder (relative paths in its environment are relative to it)."""
        try:
            return Path(os.readlink(proc / str(self.pid) / "cwd"))
        except OSError:
            return None


@dataclass
class Found:
    """The training processes of this node, and what stood out while looking."""

    processes: list[TrainingProcess] = field(default_factory=list)
    #: (job, rank, pids): several unrelated processes of one job claim one rank
    duplicates: list[tuple[str, int, list[int]]] = field(default_factory=list)
    #: job labels, when more than one job runs here
    jobs: list[str] = field(default_factory=list)
    #: processes with the rank variable whose value is not a rank (pid, value)
    bad_ranks: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Candidate:
    pid: int
    ppid: int
    env: dict[str, str]
    command: str
    python: bool
    started_ticks: int | None


def read_environ(path: Path, limit: int = ENVIRON_LIMIT) -> dict[str, str] | None:
    """The kept variables of one environ file, or None when it cannot be read.

    Opened without blocking and read only if it is a regular file (procfs files are), at
    most `limit` bytes; permission errors and vanished processes are None, not errors.
    """
    data = _read_small(path, limit)
    if data is None:
        return None
    env: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if not sep:
            continue
        key = name.decode("ascii", "replace")
        if key in KEPT_VARS:
            env[key] = value.decode("utf-8", "surrogateescape")
    return env


def _read_small(path: Path, limit: int) -> bytes | None:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_int(value: str | None) -> int | None:
    """A non-negative decimal integer of at most 9 digits, else None."""
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        return None
    return int(text)


def _stat(proc_dir: Path) -> tuple[int, int | None] | None:
    """(ppid, start time in clock ticks after boot) from /proc/<pid>/stat (proc(5))."""
    data = _read_small(proc_dir / "stat", 4096)
    if not data:
        return None
    # "pid (comm) state ppid ... starttime(22nd) ...": comm may hold spaces and parentheses.
    fields = data.rpartition(b")")[2].split()
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    start = int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None
    return int(fields[1]), start


def _boot_time(proc: Path) -> float | None:
    """Seconds since the epoch at boot (`btime` of /proc/stat)."""
    data = _read_small(proc / "stat", 1 << 20) or b""
    for line in data.splitlines():
        if line.startswith(b"btime "):
            value = line.split()[1]
            return float(value) if value.isdigit() else None
    return None


def _command(proc_dir: Path) -> tuple[str, bool]:
    """The command line (cut) and whether the process looks like a Python interpreter."""
    raw = _read_small(proc_dir / "cmdline", CMDLINE_LIMIT) or b""
    argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    names = [os.path.basename(argv[0])] if argv else []
    with contextlib.suppress(OSError):
        names.append(os.path.basename(os.readlink(proc_dir / "exe")))
    python = any(_PYTHON_NAME.match(n) for n in names)
    return " ".join(argv)[:CMDLINE_LIMIT], python


def _job(env: Mapping[str, str]) -> str:
    addr, port = env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")
    parts = [f"{addr}:{port}" if addr or port else ""]
    parts += [f"{k}={env[k]}" for k in JOB_VARS[2:] if env.get(k)]
    return " ".join(p for p in parts if p) or "-"


def find_training_processes(
    proc: Path = Path("/proc"),
    *,
    under: int | None = None,
    rank_var: str = "RANK",
    exclude: Iterable[int] = (),
) -> Found:
    """Every process of this node whose environment holds `rank_var`, one per rank and job.

    `under`: only that pid and the processes below it (a torchrun agent, a Slurm step).
    `exclude`: pids never taken (this process).
    """
    found = Found()
    scanned = _scan(proc, rank_var, set(exclude))
    if scanned is None:
        return found
    candidates, parents = scanned
    if under is not None:
        candidates = [c for c in candidates if c.pid == under or _below(c.pid, under, parents)]
    groups, found.bad_ranks = _by_job_and_rank(candidates, rank_var)
    boot = _boot_time(proc)
    hertz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for (job, rank), members in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        tops = _tops(members, parents)
        if len(tops) > 1:
            found.duplicates.append((job, rank, sorted(m.pid for m in tops)))
        for top in sorted(tops, key=lambda m: m.pid):
            helpers = sorted(
                m.pid for m in members if m.pid != top.pid and _below(m.pid, top.pid, parents)
            )
            found.processes.append(
                TrainingProcess(
                    pid=top.pid,
                    rank=rank,
                    local_rank=_local_rank(top.env),
                    world_size=parse_int(top.env.get("WORLD_SIZE")),
                    job=job,
                    env=dict(top.env),
                    command=top.command,
                    helpers=tuple(helpers),
                    started=None
                    if boot is None or top.started_ticks is None
                    else boot + top.started_ticks / hertz,
                )
            )
    jobs = sorted({p.job for p in found.processes})
    found.jobs = jobs if len(jobs) > 1 else []
    return found


def _scan(
    proc: Path, rank_var: str, skip: set[int]
) -> tuple[list[_Candidate], dict[int, int]] | None:
    """Every process holding `rank_var` (not in `skip`), and every process's parent (to
    tell ranks from their helpers); None when `proc` cannot be listed."""
    parents: dict[int, int] = {}
    candidates: list[_Candidate] = []
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return None
    for entry in entries:
        pid = int(entry)
        proc_dir = proc / entry
        info = _stat(proc_dir)
        if info is None:
            continue
        ppid, ticks = info
        parents[pid] = ppid
        if pid in skip:
            continue
        env = read_environ(proc_dir / "environ")
        if env is None or rank_var not in env:
            continue
        command, python = _command(proc_dir)
        candidates.append(_Candidate(pid, ppid, env, command, python, ticks))
    return candidates, parents


def _by_job_and_rank(
    candidates: list[_Candidate], rank_var: str
) -> tuple[dict[tuple[str, int], list[_Candidate]], list[tuple[int, str]]]:
    """The candidates by (job, rank) (two jobs on a node both have a rank 0), and those
    whose rank variable is not a rank (pid, value cut to 40 characters)."""
    groups: dict[tuple[str, int], list[_Candidate]] = {}
    bad: list[tuple[int, str]] = []
    for cand in candidates:
        rank = parse_int(cand.env[rank_var])
        if rank is None:
            bad.append((cand.pid, cand.env[rank_var][:40]))
            continue
        groups.setdefault((_job(cand.env), rank), []).append(cand)
    return groups, bad


def _tops(members: list[_Candidate], parents: Mapping[int, int]) -> list[_Candidate]:
    """The processes that are the rank: its topmost Python processes (the others inherited
    its environment); several mean several unrelated processes claim one rank."""
    pythons = [m for m in members if m.python] or members
    pids = {m.pid for m in pythons}
    return [m for m in pythons if not _ancestor_in(m.pid, pids, parents)]


def _local_rank(env: Mapping[str, str]) -> int | None:
    """LOCAL_RANK (torchrun), else SLURM_LOCALID (one task per rank under srun)."""
    value = parse_int(env.get("LOCAL_RANK"))
    return value if value is not None else parse_int(env.get("SLURM_LOCALID"))


def _below(pid: int, ancestor: int, parents: Mapping[int, int]) -> bool:
    seen = 0
    while pid in parents and seen < 4096:  # a bound, in case /proc changed under us
        pid = parents[pid]
        if pid == ancestor:
            return True
        seen += 1
    return False


def _ancestor_in(pid: int, pids: set[int], parents: Mapping[int, int]) -> bool:
    seen = 0
    while pid in parents and seen < 4096:
        pid = parents[pid]
        if pid in pids:
            return True
        seen += 1
    return False
