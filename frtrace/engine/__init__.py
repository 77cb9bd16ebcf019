"""Engines: where dump files are parsed. One answer for every size of job.

`local` (the default) parses in isolated processes of this machine (frtrace.tables.load);
`dask` parses on the workers of a Dask cluster (frtrace.engine.dask), reading the files or
store objects where they run. Both hand the same parse results to the same assembly and
analysis, so their reports are identical. Sources are folders, `file://` URLs, or fsspec URLs
of a store (`s3://bucket/job-123/`, see frtrace.dumps.store).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frtrace.dumps.discover import Discovery, discover
from frtrace.dumps.store import StoreDiscovery, discover_store, is_url, local_path
from frtrace.errors import FrtraceError
from frtrace.tables import load as _load
from frtrace.tables.load import NoUsableDumpError, Progress, assemble_trace
from frtrace.tables.trace import Skipped, Trace

ENGINES = ("local", "dask")
Found = Discovery | StoreDiscovery


def locate(
    source: str | os.PathLike[str] | None,
    prefix: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Found:
    """Discover one dump per rank in a folder, a file:// URL or a store URL (names only)."""
    if isinstance(source, str) and is_url(source):
        folder = local_path(source)
        if folder is None:
            return discover_store(source, prefix, storage_options)
        return discover(folder, prefix)
    return discover(None if source is None else Path(source), prefix)


@dataclass
class Plan:
    """What to parse: the same for every engine."""

    trace_dir: str
    prefix: str
    items: list[tuple[str, int]]  # path or URL, rank; by rank
    skipped: list[Skipped]
    remote: bool
    storage_options: dict[str, Any]


def make_plan(found: Found, ranks: Iterable[int] | None = None) -> Plan:
    """The files to parse (only `ranks`' when given); the errors load_discovered gives when
    nothing is left."""
    if isinstance(found, StoreDiscovery):
        items = list(found.files)
        skipped = [Skipped(url, reason) for url, reason in found.skipped]
        trace_dir, remote, options = found.trace_dir, True, found.storage_options
    else:
        items = [(str(f.path), f.rank) for f in found.files]
        skipped = [Skipped(str(path), reason) for path, reason in found.skipped]
        trace_dir, remote, options = str(found.trace_dir), False, {}
    if ranks is not None:
        wanted = set(ranks)
        items = [item for item in items if item[1] in wanted]
    if not items:
        where = trace_dir + (f" with prefix '{found.prefix}'" if found.prefix else "")
        if skipped:
            raise NoUsableDumpError(
                f"no usable dump in {where} ({len(skipped)} file(s) skipped)", skipped
            )
        raise FrtraceError(f"no dump files found in {where}")
    return Plan(trace_dir, found.prefix, items, skipped, remote, options)


def load_found(
    found: Found,
    *,
    engine: str = "local",
    scheduler: str | None = None,
    ranks: Iterable[int] | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
    client: Any = None,
) -> Trace:
    """Parse what `locate` found with the chosen engine and build the Trace.

    `scheduler` (dask: else $DASK_SCHEDULER_ADDRESS, else a local cluster of `jobs` worker
    processes) or an existing dask.distributed `client`.
    """
    if engine not in ENGINES:
        raise FrtraceError(f"unknown engine '{engine}' (known: {', '.join(ENGINES)})")
    if engine == "local" and isinstance(found, Discovery):
        # looked up at call time, like the command always did (tests replace it)
        return _load.load_discovered(found, ranks=ranks, jobs=jobs, progress=progress)
    work = make_plan(found, ranks)
    _load.tune_allocator()
    order = [rank for _path, rank in work.items]  # results are compacted as they come
    if engine == "local":
        from frtrace.engine.local import iter_parsed_store

        results = iter_parsed_store(work.items, work.storage_options)
        return assemble_trace(
            work.trace_dir, work.prefix, results, len(work.items), work.skipped, progress, order
        )
    from frtrace.engine import dask as dask_engine

    if client is not None:
        parsed = dask_engine.iter_parsed_dask(client, work.items, work.remote, work.storage_options)
        return assemble_trace(
            work.trace_dir, work.prefix, parsed, len(work.items), work.skipped, progress, order
        )
    with dask_engine.connect(scheduler, jobs) as own:
        parsed = dask_engine.iter_parsed_dask(own, work.items, work.remote, work.storage_options)
        return assemble_trace(
            work.trace_dir, work.prefix, parsed, len(work.items), work.skipped, progress, order
        )
