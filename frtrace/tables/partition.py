"""The work that runs next to the data: parse one partition of dump files into columns.

It runs in a Dask worker (or, for URLs with the local engine, in the client) and does exactly
what the local engine does with a file: read it under the budgets, decode it with the safe
unpickler (frtrace.dumps.read) and columnize it (frtrace.tables.columns), in an isolated child
process with the same CPU and memory limits (frtrace.tables.workers), so that a hostile file
costs one `skipped FILE: reason` line with the same reason as in the local engine, never the
worker. Objects from a store are fetched within max_file_bytes and spooled to a private
temporary folder first (several at once, a window ahead of the parse): the isolated parse
then reads them as local files, and its CPU budget follows their size, as for a folder.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from frtrace import version as frtrace_version
from frtrace.dumps.limits import Budgets, set_budgets
from frtrace.dumps.store import NO_SUCH_OBJECT, download, probe
from frtrace.errors import DumpError, FrtraceError
from frtrace.tables.parse import ParseResult, lost, parse_file
from frtrace.tables.workers import iter_isolated, scratch_dir

Item = tuple[str, int]  # path or URL, rank
FETCHES = 8  # downloads at once per task or run: a store's latency, not its bandwidth, limits
WINDOW = 16  # objects downloaded ahead of the parse: at most two windows are spooled


def partitions(items: list[Item], count: int) -> list[list[Item]]:
    """`items` (ordered by rank) cut into at most `count` contiguous runs of near-equal size:
    a worker reads neighbouring ranks, and results come back in rank order."""
    count = max(1, min(count, len(items)))
    size, extra = divmod(len(items), count)
    out, start = [], 0
    for k in range(count):
        end = start + size + (1 if k < extra else 0)
        out.append(items[start:end])
        start = end
    return [p for p in out if p]


def cannot_read(item: Item, remote: bool, storage_options: dict[str, Any]) -> str | None:
    """Why this worker cannot reach a file of the job (None when it can)."""
    try:
        if remote:
            probe(item[0], storage_options)
        else:
            os.close(os.open(item[0], os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except (DumpError, FrtraceError) as exc:  # FrtraceError: no library for the store here
        return str(exc)
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    return None


def lacks_access(item: Item, remote: bool, storage_options: dict[str, Any]) -> str | None:
    """Why this worker cannot reach the job's files at all (None when it can, or when only
    this file is gone: it was listed, and a file removed since is skipped like any other).

    Asked of every worker before the parse tasks go out, and by each parse task (a worker may
    join later): a worker without the shared folder at that path, or without the store's
    credentials, would otherwise skip every file it is given, one line each, and the report
    blame the ranks it could not read."""
    reason = cannot_read(item, remote, storage_options)
    if reason is None:
        return None
    if remote:
        return None if reason == NO_SUCH_OBJECT else reason
    if os.path.isdir(os.path.dirname(item[0])) and not os.access(item[0], os.F_OK):
        return None
    return reason


def unwrapped(reason: str) -> str:
    """'cannot read (X)' -> 'X', for a line that says 'cannot read' itself."""
    if reason.startswith("cannot read (") and reason.endswith(")"):
        return reason[len("cannot read (") : -1]
    return reason


def access_advice(remote: bool) -> str:
    """What a worker that cannot reach the dumps needs, where the client can."""
    if remote:
        return (
            "the workers need the store's library, credentials, endpoint and network access, "
            "as this client has them"
        )
    return (
        "a folder must be readable at the same path on every worker (a shared file system), "
        "or give a store URL"
    )


def _allow_children() -> None:
    """Dask starts its worker processes as daemons, and multiprocessing refuses to let a daemon
    start children. The isolated parse children are joined before the task returns and die
    with their parent (PR_SET_PDEATHSIG), which is what the flag protects against."""
    process: Any = multiprocessing.current_process()
    if process.daemon:
        process._config["daemon"] = False


def parse_partition(
    items: list[Item],
    remote: bool,
    storage_options: dict[str, Any],
    limits: Budgets,
    version: str | None = None,
) -> list[ParseResult]:
    """Parse result per item, in the order given (see frtrace.tables.parse.ParseResult).

    `version`, the client's frtrace: every worker is asked which it runs before the tasks go
    out, but one that joins later (an autoscaled cluster) takes tasks unasked."""
    if version is not None and frtrace_version.__version__ != version:
        raise FrtraceError(
            f"a Dask worker that joined after the start runs frtrace "
            f"{str(frtrace_version.__version__)[:40]!r}, this client {version}: install the same "
            "version on every worker"
        )
    if version is not None and items:
        lacking = lacks_access(items[0], remote, storage_options)
        if lacking is not None:
            raise FrtraceError(
                f"a Dask worker (one that joined after the start, or whose access changed "
                f"since) cannot read {items[0][0]} "
                f"({unwrapped(lacking)[:200]}): {access_advice(remote)}"
            )
    set_budgets(limits)
    _allow_children()
    if not remote:
        done = {r[1]: r for r in iter_isolated(items, 1, parse_file, lost, limits)}
        return [done[path] for path, _rank in items]
    done = {r[1]: r for r in iter_objects(items, storage_options, limits, 1)}
    return [done[url] for url, _rank in items]


def iter_objects(
    items: list[Item], storage_options: dict[str, Any], limits: Budgets, jobs: int
) -> Iterator[ParseResult]:
    """Parse results of store objects as they finish, in `jobs` isolated processes.

    A store answers each request in tens of milliseconds: FETCHES downloads run at once, a
    window ahead of the parse, so that the wait for one object hides behind the others and
    behind the parse. At most two windows of objects are spooled at a time.
    """
    windows = [items[k : k + WINDOW] for k in range(0, len(items), WINDOW)]
    pool = ThreadPoolExecutor(max(1, min(FETCHES, len(items))), thread_name_prefix="fetch")
    with scratch_dir() as tmp:

        def spool(w: int) -> list[tuple[Item, str, Future[None]]]:
            """Start downloading window w; its objects land in tmp/<index>."""
            started = []
            for k, item in enumerate(windows[w], w * WINDOW):
                path = str(Path(tmp) / str(k))
                fetched = pool.submit(download, item[0], path, storage_options, limits)
                started.append((item, path, fetched))
            return started

        try:
            ahead = spool(0) if windows else []
            for w in range(len(windows)):
                current, ahead = ahead, spool(w + 1) if w + 1 < len(windows) else []
                local: list[Item] = []
                url_of: dict[str, str] = {}
                for (url, rank), path, fetched in current:
                    try:
                        fetched.result()
                    except DumpError as exc:
                        yield lost((url, rank), str(exc))
                        continue
                    local.append((path, rank))
                    url_of[path] = url
                for rank, path, *rest in iter_isolated(local, jobs, parse_file, lost, limits):
                    yield (rank, url_of[path], *rest)
                for _item, path, _fetched in current:  # a failed download may have left part
                    with contextlib.suppress(OSError):
                        os.unlink(path)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # before the folder goes
