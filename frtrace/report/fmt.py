"""Small formatting helpers shared by the reports: rank lists, terminal styling, escaping."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import TextIO

from frtrace.ranks import rank_ranges as rank_ranges  # used by every report

ELLIPSIS = "..."


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
    return _subject(ranks, rank_ranges)


def _subject(ranks: Iterable[int], ranges: Callable[[list[int]], str]) -> str:
    values = sorted(set(int(r) for r in ranks))
    return f"rank {values[0]}" if len(values) == 1 else f"ranks {ranges(values)}"


def _runs(values: list[int]) -> list[str]:
    """Sorted ranks as parts: `0-7` for runs, `1,9,...,1017` for strides of four or more."""
    parts: list[str] = []
    i, n = 0, len(values)
    while i < n:
        j = i
        if i + 1 < n:
            step = values[i + 1] - values[i]
            j = i + 1
            while j + 1 < n and values[j + 1] - values[j] == step:
                j += 1
            if step == 1:
                parts.append(f"{values[i]}-{values[j]}")
                i = j + 1
                continue
            if j - i + 1 >= 4:
                parts.append(f"{values[i]},{values[i] + step},...,{values[j]}")
                i = j + 1
                continue
        parts.append(str(values[i]))
        i += 1
    return parts


def ranks_text(ranks: Iterable[int], max_chars: int = 60, count: bool = True) -> str:
    """Rank sets of any size in a few characters: runs, strides, or a range with exceptions.

    `[0..1023] minus every 8th` reads `0-1023 except 1,9,...,1017 (896 ranks)`; what is still
    too long is cut after whole parts and says how many ranks it stands for.
    """
    values = sorted({int(r) for r in ranks})
    if not values:
        return "-"
    plain = ",".join(_runs(values))
    best = plain
    lo, hi = values[0], values[-1]
    span = hi - lo + 1
    if len(values) > span // 2 and len(values) < span:
        have = set(values)
        holes = ",".join(_runs([r for r in range(lo, hi + 1) if r not in have]))
        other = f"{lo}-{hi} except {holes}"
        if len(other) < len(best):
            best = other
    suffix = f" ({len(values)} ranks)" if len(values) >= 8 and count else ""
    if len(best) + len(suffix) > max_chars:
        parts = best.split(",")
        kept: list[str] = parts[:1]  # at least the first part, however narrow the room
        for part in parts[1:]:
            if len(",".join([*kept, part, ELLIPSIS])) + len(suffix) > max_chars:
                break
            kept.append(part)
        while len(kept) > 1 and kept[-1] == ELLIPSIS:
            kept.pop()
        best = ",".join([*kept, ELLIPSIS])
        suffix = suffix or f" ({len(values)} ranks)"
    if re.fullmatch(r"\d+-\d+", best):
        return best
    return best + suffix


def ranks_subject(ranks: Iterable[int]) -> str:
    """'rank 3' or 'ranks 8,16,...,504 (63 ranks)': `who` for rank sets of any size."""
    return _subject(ranks, ranks_text)


def verb(ranks: Iterable[int], one: str, many: str) -> str:
    """Agreement for `who`: 'rank 3 waits', 'ranks 0-2 wait'."""
    return one if len(set(ranks)) == 1 else many


# C0 controls but newline, DEL, C1 controls, bidi overrides, line separators, and the lone
# surrogates that stand for undecodable bytes in file names (surrogateescape).
_UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_UNSAFE_LINE = re.compile("[\n" + _UNSAFE.pattern[1:])


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 in a file name: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object, keep_newlines: bool = False) -> str:
    """Text from dumps and file names, made safe for a terminal: escape sequences, OSC, BEL,
    CR, C1 controls and undecodable bytes become visible backslash escapes, so a dump cannot
    drive the terminal, and a newline cannot forge another line (unless `keep_newlines`)."""
    pattern = _UNSAFE if keep_newlines else _UNSAFE_LINE
    return pattern.sub(_escape, str(text))


class MarkedStyle(Style):
    """A Style whose ANSI codes are placeholders until `finish`: the report is escaped as a
    whole (dump strings included) first, then the placeholders become real escape codes."""

    def __init__(self, enabled: bool) -> None:
        super().__init__(enabled)
        self.mark = "\ue000" + os.urandom(8).hex()  # private-use char + per-run secret

    def _wrap(self, code: str, text: str) -> str:
        return f"{self.mark}{code}m{text}{self.mark}0m" if self.enabled else text

    def finish(self, report: str) -> str:
        """The report with control characters escaped and the styling made real."""
        text = safe(report, keep_newlines=True)
        return text.replace(self.mark, "\033[") if self.enabled else text


def process_text(pid: object, host: object = "", at: object = "") -> str:
    """`pid 4123 on node17`, for a process no evidence ties to a rank; a faulthandler dump
    in a stream several workers share names no pid: `a process on node17`, told apart by
    where its stack is (`at`: `slurm-77.out:14`) where known."""
    on = f" on {host}" if host else ""
    if pid is not None:
        return f"pid {pid}{on}"
    return f"a process{on}" + (f" (its stack at {at})" if at else "")


def processes_text(procs: Iterable[tuple[object, object]]) -> str:
    """(pid, host) pairs as `pid 4123 on node17, 2 processes on node18` (those with no pid
    counted by host)."""
    shown: dict[str, int] = {}
    for pid, host in procs:
        text = process_text(pid, host)
        shown[text] = shown.get(text, 0) + 1
    return ", ".join(
        t if n == 1 or not t.startswith("a process") else f"{n} processes{t[len('a process') :]}"
        for t, n in shown.items()
    )
