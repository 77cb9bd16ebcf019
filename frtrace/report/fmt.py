"""Small formatting helpers shared by the text reports."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TextIO


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


def use_color(stream: TextIO | None = None) -> bool:
    """Color only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


class Style:
    """ANSI styling that collapses to plain text when color is off."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("1;31", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)


def who(ranks: Iterable[int]) -> str:
    """'rank 3' or 'ranks 0-2,7': the subject of a sentence about ranks."""
    values = sorted(set(int(r) for r in ranks))
    return f"rank {values[0]}" if len(values) == 1 else f"ranks {rank_ranges(values)}"


def verb(ranks: Iterable[int], one: str, many: str) -> str:
    """Agreement for `who`: 'rank 3 waits', 'ranks 0-2 wait'."""
    return one if len(set(ranks)) == 1 else many
