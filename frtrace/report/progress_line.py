"""A progress line on stderr while a run works: only on a terminal, only after a second.

Reading moves a bar per file. The steps around it (a Dask cluster's start, merging, the
settle rounds on the cluster, the analysis) each name themselves (`stage`), and a ticker keeps
the clock moving, so a step of minutes at 100,000 ranks, or a first Dask partition still
being read, never looks like a hang. Off a terminal only a wait with no end in sight
(`notice`: workers still in a Slurm queue) writes a line, for the batch job's log.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

DELAY_S = 1.0  # small jobs finish before anything is shown
INTERVAL_S = 0.1
TICK_S = 0.5  # a step's elapsed time is redrawn this often
WIDTH = 24


class ProgressLine:
    """Callable for `load_trace(progress=...)`: files read, entries, elapsed time; `stage`
    names a step that has no files to count."""

    def __init__(
        self, stream: TextIO | None = None, *, force: bool = False, label: str = "reading dumps"
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.label = label  # what the file bar is reading
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False
        self._line = ""  # what the line says now, without the clock
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def __call__(self, done: int, total: int, entries: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < INTERVAL_S and 0 < done < total:
            return
        self.last = now
        self._show(f"{self.label} {_bar(done, total)} {done}/{total} files, {entries:,} entries")

    def stage(self, what: str, done: int = 0, total: int = 0) -> None:
        """Name the step now running (`done` of `total` parts when it has parts to count)."""
        if self.enabled:
            self._show(f"{what} {_bar(done, total)} {done}/{total}" if total else what)

    def notice(self, what: str) -> None:
        """A step that may last long (hours, for a Slurm queue): the line on a terminal, else
        one line of its own, so that a batch job's log says what the run waits for."""
        if self.enabled:
            self.stage(what)
        else:
            self.stream.write(f"frtrace: {what}\n")
            self.stream.flush()

    def close(self) -> None:
        """Stop the ticker and erase the line, so results and warnings start clean."""
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        with self._lock:
            self._line = ""
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.shown = False

    def _show(self, line: str) -> None:
        """The line now says `line`: drawn once the run is a second old, then kept ticking."""
        with self._lock:
            self._line = line
            if time.monotonic() - self.start >= DELAY_S:
                self._draw(line)
        if self._stop is None:
            self._stop = threading.Event()
            threading.Thread(target=self._tick, args=(self._stop,), daemon=True).start()

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(TICK_S):
            with self._lock:
                if self._line and time.monotonic() - self.start >= DELAY_S:
                    self._draw(self._line)

    def _draw(self, text: str) -> None:
        """Under the lock: the line, with the run's elapsed time, over the previous one."""
        elapsed = time.monotonic() - self.start
        self.stream.write(f"\r{text}, {elapsed:.1f}s\033[K")
        self.stream.flush()
        self.shown = True


def _bar(done: int, total: int) -> str:
    filled = WIDTH * done // max(total, 1)
    return "[" + "#" * filled + "." * (WIDTH - filled) + "]"
