"""A progress line on stderr while dumps load: only on a terminal, only after a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO

DELAY_S = 1.0  # small jobs finish before anything is shown
INTERVAL_S = 0.1


class LoadProgress:
    """Callable for `load_trace(progress=...)`: files read, entries, elapsed time."""

    def __init__(self, stream: TextIO | None = None, *, force: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, done: int, total: int, entries: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        elapsed = now - self.start
        if elapsed < DELAY_S or (now - self.last < INTERVAL_S and done < total):
            return
        self.last = now
        width = 24
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(
            f"\rreading dumps [{bar}] {done}/{total} files, {entries:,} entries, {elapsed:.1f}s"
        )
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """Erase the line so results and warnings start clean."""
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
