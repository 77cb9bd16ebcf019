"""The `frtrace` command's entry point: the signal handlers go in before anything heavy is
imported (click, numpy, the parse workers), so that an early Ctrl-C or SIGTERM ends the run
like a later one: quietly, with status 128 + the signal."""

from __future__ import annotations

from frtrace.exits import stop_on_signals


def main() -> None:
    """Console-script entry point (see frtrace.cli.main)."""
    stop_on_signals()
    from frtrace.cli import main as cli_main  # after the handlers: click, numpy load here

    cli_main()
