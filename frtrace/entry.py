"""The `frtrace` command's entry point: the signal handlers go in before anything heavy is
imported (click, numpy, the parse workers), so that an early Ctrl-C or SIGTERM ends the run
like a later one: quietly, with status 128 + the signal."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def main() -> None:
    """Console-script entry point (see frtrace.cli.main)."""
    stop_on_signals()
    from frtrace.cli import main as cli_main

    cli_main()


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
