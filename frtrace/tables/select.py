"""Narrowing a job to the groups a user named (`--pg-filters`), in every mode alike."""

from __future__ import annotations

from typing import Any

from frtrace.errors import FrtraceError


def matching_groups(groups: Any, pg_filters: list[str]) -> set[str] | None:
    """Names of the groups whose name or desc is in `pg_filters` (None: no filter given)."""
    if not pg_filters:
        return None
    wanted = set(pg_filters)
    pairs = list(zip(groups["pg_name"], groups["pg_desc"], strict=True))
    names = {str(n) for n, d in pairs if str(n) in wanted or str(d) in wanted}
    if not names:
        known = ", ".join(f"{n} ({d})" for n, d in pairs)
        raise FrtraceError(f"no process group matches {', '.join(pg_filters)}; groups: {known}")
    return names
