"""Errors the CLI turns into one-line messages instead of tracebacks."""

from __future__ import annotations


class FrtraceError(Exception):
    """A problem the user can fix (bad arguments, no usable dump): exit status 2."""

    exit_code = 2


class DumpError(Exception):
    """One dump file cannot be used; the loader skips it and reports why."""
