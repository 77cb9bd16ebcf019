"""How the `frtrace` command's process ends: its exit statuses, signals, a reader gone away,
and exiting without the interpreter's teardown. Below every other module of the command, so
that the entry point installs the signal handlers before anything heavy is imported and the
CLI and its subcommands share one way out (docs/architecture.md)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_UNKNOWN = 4  # no finding, but the job is not seen whole: cannot tell it is healthy
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a tool killed by SIGPIPE
_AT_STOP: list[Callable[[], None]] = []


def at_stop(action: Callable[[], None]) -> None:
    """Run `action` (removing a temporary folder) when a signal ends the run at once, which
    skips every `finally`: `frtrace live` fetches into a folder of its own."""
    _AT_STOP.append(action)


def stop_on_signals() -> None:
    """SIGTERM and Ctrl-C end the run at once: workers killed, status 128 + the signal.

    Not by raising into whatever runs then: an exception raised inside an import's weakref
    callback is swallowed by CPython and leaves the import lock held, so the run would go on
    and the next fork would wait forever. With the Dask engine loaded they still unwind, so
    that Dask closes its clients and clusters. A SIGINT that the shell made ignored stays so.
    """
    signal.signal(signal.SIGTERM, _stop)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stop)


def _stop(signum: int, _frame: object) -> None:
    if "distributed" in sys.modules:
        _exit_later(128 + signum)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        sys.exit(128 + signum)
    # Not imported (or only partly, as the signal came): no workers to stop.
    abort = getattr(sys.modules.get("frtrace.tables.workers"), "abort", None)
    if abort is not None:
        abort()
    for action in _AT_STOP:
        with contextlib.suppress(Exception):
            action()
    if signum == signal.SIGINT:  # on a terminal: the prompt below the ^C and any progress line
        try:
            if os.isatty(2):
                os.write(2, b"\n")
        except OSError:
            pass
    os._exit(128 + signum)


UNWIND_SECONDS = 15  # Dask closes its cluster in well under a second


def _exit_later(status: int) -> None:
    """End the run with `status` if unwinding has not ended it by then: a signal that lands
    while Python runs a finalizer (Dask's, an import's) is swallowed there and the run goes
    on. A local cluster's workers exit when this process does (their pipe to it closes)."""

    def stop() -> None:
        time.sleep(UNWIND_SECONDS)
        os._exit(status)

    threading.Thread(target=stop, name="frtrace-stop", daemon=True).start()


def quiet_broken_pipe() -> NoReturn:
    """Exit like a Unix tool whose reader went away: no message, status 141. stdout is pointed
    at /dev/null first so that the final flush at exit cannot fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


def exit_now(code: object) -> NoReturn:
    """Exit once the output is flushed, without tearing the interpreter down.

    Teardown frees the job's tables and pandas' modules one object at a time: 0.2 s of a
    64-rank run, seconds at thousands of ranks, for memory the OS takes back at once. Nothing
    else the command starts needs its exit handlers (the parse workers are stopped by then).
    """
    if code is None:
        status = EXIT_OK
    elif isinstance(code, int):
        status = code
    else:  # what sys.exit does with a message
        with contextlib.suppress(OSError, ValueError):
            print(code, file=sys.stderr)
        status = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        status = EXIT_BROKEN_PIPE
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(status)
