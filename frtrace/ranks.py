"""Rank lists as people read them, for the reports and for the load's own warnings."""

from __future__ import annotations

from collections.abc import Iterable

from frtrace.errors import FrtraceError


def rank_ranges(ranks: Iterable[int], limit: int = 12) -> str:
    """[0, 1, 2, 3, 8] -> '0-3,8': long rank lists stay readable at 3 a.m."""
    values = sorted(set(int(r) for r in ranks))
    if not values:
        return "-"
    parts: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    if len(parts) > limit:
        shown = ",".join(parts[:limit])
        return f"{shown},... ({len(values)} ranks)"
    return ",".join(parts)


def _named(ranks: Iterable[int]) -> str:
    values = sorted(set(ranks))
    return f"{'rank' if len(values) == 1 else 'ranks'} {rank_ranges(values)}"


def check_selection(
    selected: Iterable[int], present: Iterable[int], where: str = "among the dumps"
) -> str:
    """The line that names the selected ranks not `present` ('' when all are). FrtraceError
    when no selected rank is there: a selection that matches nothing must not pass for an
    empty answer, or for a report about other ranks."""
    wanted, there = set(selected), set(present)
    absent = sorted(wanted - there)
    if not absent:
        return ""
    if len(absent) == len(wanted):
        raise FrtraceError(f"no {_named(absent)} {where}: {_named(there)}")
    return f"no {_named(absent)} {where} ({_named(there)}); showing the others selected"
