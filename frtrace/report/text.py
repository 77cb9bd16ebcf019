"""The default report: root cause first, then a table per kind of finding, then the groups."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
from tabulate import tabulate

from frtrace.analysis.engine import Analysis
from frtrace.analysis.findings import Finding, Place
from frtrace.report.fmt import Style, rank_ranges
from frtrace.report.summary import loaded_summary
from frtrace.report.wording import chain_lines, detail, where

STACK_HEAD = 6  # frames shown per stack unless --print-stack-trace


def _entry_for(analysis: Analysis, rank: int, f: Finding) -> pd.Series | None:
    """The rank's entry at the finding's collective, else its last entry (see _is_last)."""
    e = analysis.ctx.trace.entries
    mine = e.loc[e["rank"] == rank]
    if mine.empty:
        return None
    if f.collective_seq_id is not None:
        at = mine.loc[
            (mine["pg_name"] == f.pg_name)
            & (mine["collective_seq_id"] == f.collective_seq_id)
            & ~mine["is_p2p"]
        ]
        if not at.empty:
            return at.iloc[0]
    if f.p2p_seq_id is not None:
        at = mine.loc[
            (mine["pg_name"] == f.pg_name) & (mine["p2p_seq_id"] == f.p2p_seq_id) & mine["is_p2p"]
        ]
        if not at.empty:
            return at.iloc[0]
    return mine.iloc[-1]


def _stack_lines(analysis: Analysis, rank: int, f: Finding, role: str, full: bool) -> list[str]:
    entry = _entry_for(analysis, rank, f)
    if entry is None:
        return [f"  rank {rank} ({role}): no dump"]
    seq = f"p2p#{entry['p2p_seq_id']}" if entry["is_p2p"] else f"#{entry['collective_seq_id']}"
    place = where(Place(str(entry["pg_name"]), str(entry["pg_desc"])))
    at_finding = (entry["pg_name"] == f.pg_name) and (
        entry["collective_seq_id"] == f.collective_seq_id
        if not entry["is_p2p"]
        else entry["p2p_seq_id"] == f.p2p_seq_id
    )
    label = f"{'at' if at_finding else 'last recorded op:'} {entry['op']} {place} {seq}"
    sid = int(entry["stack_id"])
    head = f"  rank {rank} ({role}), {label} [{entry['state']}]:"
    if sid < 0:
        return [head, "    (no stack in this dump)"]
    frames = analysis.ctx.trace.stacks[sid]
    shown = frames if full else frames[:STACK_HEAD]
    lines = [head] + [f"    {name}  {filename}:{line}" for name, filename, line in shown]
    if len(shown) < len(frames):
        lines.append(f"    ... {len(frames) - len(shown)} more (--print-stack-trace)")
    return lines


def _root_block(analysis: Analysis, style: Style, full_stacks: bool) -> list[str]:
    f = analysis.root_cause
    if f is None:
        return []
    seq = f.collective_seq_id if f.collective_seq_id is not None else f.p2p_seq_id
    place = where(f.place)
    lines = [style.red(f"ROOT CAUSE: {f.kind} in {place}" + (f", {f.op}" if f.op else "")), ""]
    rows = [
        ["culprit ranks", style.red(rank_ranges(f.culprit_ranks))],
        ["waiting ranks", rank_ranges(f.waiting_ranks)],
        ["group", f"{f.pg_name} ({f.pg_desc or '-'}), members {rank_ranges(f.expected_ranks)}"],
        ["seq id", "-" if seq is None else str(seq)],
    ]
    entry = _entry_for(analysis, f.culprit_ranks[0], f) if f.culprit_ranks else None
    if entry is not None:
        rows.append(
            [
                "sizes (culprit)",
                f"in {entry['input_sizes']} {entry['input_dtypes']}  "
                f"out {entry['output_sizes']} {entry['output_dtypes']}",
            ]
        )
    lines += [f"  {k:<16}{v}" for k, v in rows]
    lines += ["", f"  {detail(f)}"]
    chain = chain_lines(f)
    if chain:
        lines += ["", "  chain (who waits for whom):"]
        lines += [f"    {i}. {hop}" for i, hop in enumerate(chain, 1)]
    lines += ["", "  stacks (innermost first):"]
    for r in f.culprit_ranks[:2]:
        lines += _stack_lines(analysis, r, f, "culprit", full_stacks)
    waiting = [r for r in f.waiting_ranks if r not in f.culprit_ranks]
    if waiting:
        lines += _stack_lines(analysis, waiting[0], f, "waiting", full_stacks)
    return lines


def _findings_tables(analysis: Analysis, style: Style) -> list[str]:
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in analysis.findings:
        by_kind[f.kind].append(f)
    lines = [style.bold(f"FINDINGS ({len(analysis.findings)})")]
    for kind, items in by_kind.items():
        rows = []
        for f in items:
            seq = f.collective_seq_id if f.collective_seq_id is not None else f.p2p_seq_id
            rows.append(
                [
                    f"{f.pg_name} ({f.pg_desc})" if f.pg_desc else f.pg_name,
                    "-"
                    if seq is None
                    else (f"p2p#{seq}" if f.collective_seq_id is None else f"#{seq}"),
                    f.op or "-",
                    rank_ranges(f.culprit_ranks, 6),
                    rank_ranges(f.waiting_ranks, 6),
                    "consequence"
                    if f.secondary
                    else ("ROOT" if f is analysis.root_cause else "cause"),
                    detail(f),
                ]
            )
        lines += ["", f"{kind} ({len(items)})"]
        lines.append(
            tabulate(
                rows,
                headers=["group", "seq", "op", "culprits", "waiting", "role", "detail"],
                tablefmt="simple",
                disable_numparse=True,
                maxcolwidths=[None, None, None, 20, 20, None, 70],
            )
        )
    return lines


def _by_value(values: dict[int, int]) -> str:
    """{0: 37, 1: 37, 2: 36} -> '37 (0-1); 36 (2)': per-rank numbers that stay short."""
    groups: dict[int, list[int]] = defaultdict(list)
    for rank, v in values.items():
        groups[v].append(rank)
    parts = [
        f"{'-' if v < 0 else v} ({rank_ranges(rs, 4)})"
        for v, rs in sorted(groups.items(), reverse=True)
    ]
    return "; ".join(parts[:4]) + (f"; ... {len(parts) - 4} more" if len(parts) > 4 else "")


def _per_pg(series: pd.Series) -> dict[int, dict[int, int]]:
    """A (pg, rank) -> seq series as {pg: {rank: seq}}, in one pass."""
    out: dict[int, dict[int, int]] = defaultdict(dict)
    for (pg, rank), seq in zip(series.index.tolist(), series.tolist(), strict=True):
        out[int(pg)][int(rank)] = int(seq)
    return out


def group_table(analysis: Analysis, involved_only: bool) -> str:
    """Per group: members, last seq each rank issued and completed, who waits there."""
    ctx = analysis.ctx
    coll = ctx.view.coll
    involved = {f.pg_name for f in analysis.findings}
    issued = coll.groupby(["pg", "rank"])["seq"].max()
    done = coll.loc[coll["state"] == 2].groupby(["pg", "rank"])["seq"].max()
    issued_by_pg, done_by_pg = _per_pg(issued), _per_pg(done)
    waiting: dict[str, list[int]] = defaultdict(list)
    for rank, b in analysis.blocked.items():
        waiting[ctx.name(b.node[1])].append(rank)
    rows = []
    hidden = 0
    for pg, name in enumerate(ctx.pg_names):
        if involved_only and name not in involved:
            hidden += 1
            continue
        members = ctx.members.get(name, [])
        last_issued = issued_by_pg.get(pg, {})
        last_done = done_by_pg.get(pg, {})
        rows.append(
            [
                name,
                ctx.pg_desc.get(name, ""),
                rank_ranges(members, 6),
                len(members),
                _by_value(last_issued) or "-",
                _by_value(last_done) if ctx.view.states_tracked else "(not tracked)",
                rank_ranges(waiting.get(name, []), 6) if waiting.get(name) else "-",
            ]
        )
    text = tabulate(
        rows,
        headers=[
            "pg",
            "desc",
            "members",
            "size",
            "last issued (ranks)",
            "last completed (ranks)",
            "waiting here",
        ],
        tablefmt="simple",
    )
    if hidden:
        text += f"\n({hidden} other group(s) without findings not shown; -v shows all)"
    return text


def render_text(
    analysis: Analysis, style: Style, *, full_stacks: bool = False, verbose: bool = False
) -> str:
    trace = analysis.ctx.trace
    entries = trace.entries
    lines = [loaded_summary(trace, entries, style, groups=False), ""]
    if analysis.ok:
        lines.append(style.green("OK: no desync, mismatch or missing rank found."))
    else:
        sel = analysis.selection
        if sel is not None and sel.root_cause_outside:
            lines += [
                style.yellow(
                    "note: the root cause lies outside the selection (--selected-ranks / "
                    "--pg-filters); it is shown in full below"
                ),
                "",
            ]
        lines += _root_block(analysis, style, full_stacks)
        lines += ["", *_findings_tables(analysis, style)]
    for note in analysis.notes:
        lines += ["", f"note: {note}"]
    many = len(analysis.ctx.pg_names) > 12 and not verbose and not analysis.ok
    lines += ["", style.bold("GROUPS"), group_table(analysis, involved_only=many)]
    return "\n".join(lines) + "\n"
