"""What was loaded: files, ranks, entry counts, versions, skipped files."""

from __future__ import annotations

from frtrace.report.fmt import Style, rank_ranges
from frtrace.tables.trace import Trace


def loaded_summary(trace: Trace, style: Style) -> str:
    """A short, readable account of the inputs (the verbose report's header)."""
    lines = [
        style.bold(f"frtrace: {len(trace.file_table)} dump(s) from {trace.trace_dir}")
        + (f" (prefix '{trace.prefix}')" if trace.prefix else ""),
        f"  ranks      {rank_ranges(trace.ranks)} ({len(trace.ranks)})",
        f"  entries    {trace.entry_count}",
        f"  versions   {', '.join(trace.versions) or '-'}",
        f"  backends   {', '.join(trace.backends) or '-'}",
        "  formats    " + ", ".join(f"{k} {v}" for k, v in trace.formats),
    ]
    ev = trace.evidence
    if ev is not None and ev.logs:
        hosts = sorted({f.host for f in ev.logs if f.host})
        lines.append(f"  logs       {len(ev.logs)} ({', '.join(hosts) or '-'})")
    if ev is not None and ev.stack_files:
        lines.append(f"  py-spy     {ev.stacks} process(es) in {len(ev.stack_files)} file(s)")
    if ev is not None and ev.ranks:
        lines.append(f"  named      ranks {rank_ranges(sorted(ev.ranks))} (logs, stacks, names)")
    if trace.missing_dumps:
        lines.append(style.yellow(f"  no dump    ranks {rank_ranges(trace.missing_dumps)}"))
    if trace.skipped:
        lines.append("")
        lines.append(style.yellow(f"skipped {len(trace.skipped)} file(s):"))
        lines.extend(f"  {s.file}: {s.reason}" for s in trace.skipped)
    return "\n".join(lines)
