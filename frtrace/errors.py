"""Errors the CLI turns into one-line messages instead of tracebacks."""

from __future__ import annotations


class FrtraceError(Exception):
    """A problem the user can fix (bad arguments, no usable dump): exit status 2."""

    exit_code = 2


class DumpError(Exception):
    """One dump file cannot be used; the loader skips it and reports why."""


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's text, cut at `limit` characters: what a one-line
    message can quote of another library's error (Dask's run on for lines)."""
    text = str(exc)
    return text.splitlines()[0][:limit] if text else ""
