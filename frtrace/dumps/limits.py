"""Budgets that bound what one dump may cost to read, whatever it claims.

Dumps are untrusted files on shared storage: a few bytes can ask for gigabytes (a gzip bomb,
a pickle memo index, a rank number), so every read is checked against these limits and a file
that exceeds one is skipped with the limit named. The defaults are far above what real dumps
need (torch keeps at most a few thousand entries per rank, stacks of a few dozen frames). To
change them, set FRTRACE_BUDGETS for the command line (`FRTRACE_BUDGETS=max_entries=100000,
max_frames=256 frtrace DIR`), or replace the process-wide value before loading:

    from frtrace.dumps import limits
    limits.set_budgets(limits.Budgets(max_entries=100_000))
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from frtrace.errors import FrtraceError

ENV_VAR = "FRTRACE_BUDGETS"


@dataclass(frozen=True)
class Budgets:
    """Limits on one dump file; exceeding one skips the file with the limit named."""

    max_file_bytes: int = 256 << 20  # on disk, checked with st_size before reading
    max_decompressed_bytes: int = 256 << 20  # gzip is inflated incrementally up to this
    max_parse_memory: int = 768 << 20  # address space a parse may add (worker rlimit)
    # CPU seconds a parse may take: base + per MiB on disk (real dumps need ~0.05 s per MiB);
    # a worker over it is stopped (SIGXCPU), and one stalled 3x as long in wall time too
    parse_seconds: float = 1.0
    parse_seconds_per_mib: float = 0.5
    max_entries: int = 20_000
    max_frames: int = 64  # per stack
    max_list_len: int = 4_096  # tensors per entry, dims per shape, dtypes per entry
    max_values: int = 5_000_000  # list elements per file in all (tensors, dims, frames)
    max_string_chars: int = 4_096  # longer strings are truncated with a note
    max_rank: int = 1_000_000  # world sizes up to this; ranks above it are refused
    max_groups: int = 100_000  # pg_config / pg_status keys per dump
    # Logs and py-spy stacks: bytes read per file (its head and tail when larger) and bytes
    # kept per line (a longer line is cut, the rest read and dropped).
    max_log_bytes: int = 32 << 20
    max_log_line: int = 16_384

    def parse_cpu_seconds(self, size: int) -> int:
        """The CPU-time budget for parsing a file of `size` bytes on disk."""
        return int(self.parse_seconds + self.parse_seconds_per_mib * size / (1 << 20)) + 1


def parse_budgets(text: str, base: Budgets | None = None) -> Budgets:
    """'max_entries=100000,max_frames=128' -> `base` (default Budgets()) with those replaced."""
    fields = {f.name: f for f in dataclasses.fields(Budgets)}
    changes: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = (x.strip() for x in part.partition("="))
        if not sep or name not in fields:
            known = ", ".join(fields)
            raise FrtraceError(f"{ENV_VAR}: unknown budget '{name}' (known: {known})")
        try:
            number: float | int = float(value) if fields[name].type == "float" else int(value)
        except ValueError as exc:
            raise FrtraceError(f"{ENV_VAR}: {name}={value} is not a number") from exc
        if number <= 0:
            raise FrtraceError(f"{ENV_VAR}: {name} must be positive")
        changes[name] = number
    return dataclasses.replace(base or Budgets(), **changes)


_CURRENT: Budgets | None = None


def budgets() -> Budgets:
    """The budgets in force for this process (and the parse workers it starts): the defaults
    with $FRTRACE_BUDGETS applied, unless set_budgets replaced them."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = parse_budgets(os.environ.get(ENV_VAR, ""))
    return _CURRENT


def set_budgets(new: Budgets) -> None:
    """Replace the budgets; workers started afterwards inherit them."""
    global _CURRENT
    _CURRENT = new
