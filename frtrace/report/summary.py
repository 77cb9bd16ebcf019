"""What was loaded: files, ranks, groups, entry counts, versions, skipped files."""

from __future__ import annotations

from typing import Any

import pandas as pd

from frtrace.report.fmt import Style, rank_ranges
from frtrace.tables.trace import Trace


def group_rows(trace: Trace, entries: pd.DataFrame) -> list[dict[str, Any]]:
    """Per group: members, entries recorded, highest collective seq issued."""
    counts = entries.groupby(entries["pg_name"].astype(object)).size()
    last = (
        entries.loc[~entries["is_p2p"]]
        .groupby(entries["pg_name"].astype(object))["collective_seq_id"]
        .max()
    )
    rows = []
    for g in trace.groups.itertuples(index=False):
        if g.pg_name not in counts.index:
            continue
        rows.append(
            {
                "pg_name": g.pg_name,
                "pg_desc": g.pg_desc,
                "ranks": [int(r) for r in g.ranks],
                "entries": int(counts.get(g.pg_name, 0)),
                "last_seq": int(last.get(g.pg_name, -1)),
                "source": g.source,
            }
        )
    return rows


def loaded_summary(trace: Trace, entries: pd.DataFrame, style: Style, groups: bool = True) -> str:
    """A short, readable account of the inputs (the report's header)."""
    lines = [
        style.bold(f"frtrace: {len(trace.files)} dump(s) from {trace.trace_dir}")
        + (f" (prefix '{trace.prefix}')" if trace.prefix else ""),
        f"  ranks      {rank_ranges(trace.ranks)} ({len(trace.ranks)})",
        f"  entries    {len(entries)}",
        f"  versions   {', '.join(trace.versions) or '-'}",
        f"  backends   {', '.join(sorted(str(b) for b in entries['backend'].unique())) or '-'}",
    ]
    formats = trace.files.groupby("format").size()
    lines.append("  formats    " + ", ".join(f"{k} {v}" for k, v in formats.items()))
    if trace.missing_dumps:
        lines.append(style.yellow(f"  no dump    ranks {rank_ranges(trace.missing_dumps)}"))
    if groups:
        rows = [
            [
                r["pg_name"],
                r["pg_desc"],
                rank_ranges(r["ranks"]),
                len(r["ranks"]),
                r["entries"],
                r["last_seq"] if r["last_seq"] >= 0 else "-",
            ]
            for r in group_rows(trace, entries)
        ]
        headers = ["pg", "desc", "members", "size", "entries", "last seq"]
        from tabulate import tabulate  # only here: importing it costs ~50 ms

        lines += ["", tabulate(rows, headers=headers, tablefmt="simple")]
    if trace.skipped:
        lines.append("")
        lines.append(style.yellow(f"skipped {len(trace.skipped)} file(s):"))
        lines.extend(f"  {s.file}: {s.reason}" for s in trace.skipped)
    return "\n".join(lines)
