"""The `skipped FILE: reason` lines on stderr, a few per reason.

When files fail for one cause (a store's credentials missing on the workers, a job killed
while it dumped, a folder of something else), every file of a large job gives the same line:
100,000 of them would bury the lines that differ. Past SKIPPED_SHOWN files with one reason,
one line counts the rest; `-v` names every file, as the JSON report's `inputs.skipped` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from frtrace.report.fmt import safe

if TYPE_CHECKING:
    from frtrace.tables.parse import Skipped

SKIPPED_SHOWN = 10  # files named per reason


def skipped_lines(skipped: Iterable[Skipped], every: bool = False) -> list[str]:
    """A line per skipped file, in the order given, but at most SKIPPED_SHOWN per reason
    (unless `every`), then per reason cut short one line with how many more."""
    lines: list[str] = []
    seen: Counter[str] = Counter()
    for item in skipped:
        seen[item.reason] += 1
        if every or seen[item.reason] <= SKIPPED_SHOWN:
            lines.append(f"skipped {safe(item.file)}: {safe(item.reason)}")
    for reason, count in seen.items():
        if not every and count > SKIPPED_SHOWN:
            lines.append(
                f"skipped {count - SKIPPED_SHOWN:,} more file(s) alike: {safe(reason)} "
                "(-v names them all)"
            )
    return lines
