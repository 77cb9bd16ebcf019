"""Rank lists as people read them, for the reports and for the load's own warnings."""

from __future__ import annotations

from collections.abc import Iterable


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
