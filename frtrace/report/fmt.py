"""Small formatting helpers shared by the text reports."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import TextIO

from frtrace.ranks import rank_ranges as rank_ranges  # used by every report


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
