"""Loading: one entry for every source and both engines (`locate`, `load_found`), with the
job's logs and stacks attached (evidence.py) and a memory estimate before a local parse
(memory.py). One answer for every size of job.

`local` (the default) parses in isolated processes of this machine (frtrace.tables.load); `dask`
parses on the workers of a Dask cluster (frtrace.cluster.dask), reading the files or store
objects where they run, and keeps the entries there: the client gets the ones that did not
settle and the facts of the others (frtrace.cluster.spread). The reports are identical. Sources
are folders, `file://` URLs, or fsspec URLs of a store (`s3://bucket/job-123/`, see
frtrace.dumps.store).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frtrace.dumps.discover import Discovery, discover, discover_many
from frtrace.dumps.store import StoreDiscovery, discover_store, is_url, local_path
from frtrace.errors import FrtraceError
from frtrace.loading.evidence import load_with_evidence
from frtrace.tables.parse import (
    ProgressCallback,
    Skipped,
    select_files,
    skipped_by,
    start_parsing,
    tune_allocator,
    wanted_items,
)

if TYPE_CHECKING:
    from frtrace.tables.trace import Trace

ENGINES = ("local", "dask")
Found = Discovery | StoreDiscovery


def locate(
    source: str | os.PathLike[str] | list[str] | tuple[str, ...] | None,
    prefix: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Found:
    """Discover one dump per rank in a folder, a file:// URL or a store URL (names only);
    several local folders and files (dumps, logs, py-spy outputs) at once."""
    if isinstance(source, (list, tuple)):
        if len(source) > 1:
            if any(is_url(str(s)) and local_path(str(s)) is None for s in source):
                raise FrtraceError("several sources: give local folders and files (one URL)")
            return discover_many([Path(local_path(str(s)) or s) for s in source], prefix)
        source = source[0] if source else None
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
    if isinstance(found, Discovery):
        items = select_files(found, ranks)
        return Plan(str(found.trace_dir), found.prefix, items, skipped_by(found), False, {})
    skipped = [Skipped(url, reason) for url, reason in found.skipped]
    items = wanted_items(list(found.files), ranks, found.trace_dir, found.prefix, skipped)
    return Plan(found.trace_dir, found.prefix, items, skipped, True, found.storage_options)


def load_found(
    found: Found,
    *,
    engine: str = "local",
    scheduler: str | None = None,
    ranks: Iterable[int] | None = None,
    jobs: int | None = None,
    progress: ProgressCallback | None = None,
    client: Any = None,
) -> Trace:
    """Parse what `locate` found with the chosen engine and build the Trace.

    `scheduler` (dask: else $DASK_SCHEDULER_ADDRESS, else a local cluster of `jobs` worker
    processes) or an existing dask.distributed `client`.
    """
    if engine not in ENGINES:
        raise FrtraceError(f"unknown engine '{engine}' (known: {', '.join(ENGINES)})")
    if isinstance(found, Discovery) and (found.logs or found.stacks or found.files):

        def dumps() -> Trace:
            return _load_found(found, engine, scheduler, ranks, jobs, progress, client)

        return load_with_evidence(found, dumps)
    return _load_found(found, engine, scheduler, ranks, jobs, progress, client)


def _load_found(
    found: Found,
    engine: str,
    scheduler: str | None,
    ranks: Iterable[int] | None,
    jobs: int | None,
    progress: ProgressCallback | None,
    client: Any,
) -> Trace:
    if engine == "local" and isinstance(found, Discovery):
        with start_parsing(select_files(found, ranks), jobs) as parsing:
            # Imported only now: the analysis' imports run while the workers parse.
            from frtrace.tables import load

            return load.assemble_parsed(found, parsing, progress)
    from frtrace.tables.load import assemble_trace  # as above: loads while objects arrive

    work = make_plan(found, ranks)
    tune_allocator()
    order = [rank for _path, rank in work.items]  # results are compacted as they come
    if engine == "local":
        from frtrace.tables.store_parse import iter_parsed_store  # store URLs only

        results = iter_parsed_store(work.items, work.storage_options, jobs)
        return assemble_trace(
            work.trace_dir, work.prefix, results, len(work.items), work.skipped, progress, order
        )
    # --engine dask only: the cluster's modules import distributed, an optional extra.
    from frtrace.cluster import dask as dask_engine
    from frtrace.cluster.spread import analyze_on_cluster

    def on(cluster: Any, on_close: Any = None) -> Trace:
        return analyze_on_cluster(
            cluster,
            work.items,
            work.remote,
            work.storage_options,
            work.trace_dir,
            work.prefix,
            work.skipped,
            progress,
            on_close,
        )

    if client is not None:
        return on(client)
    # The cluster started here outlives this call: the entries stay on it until the Trace
    # is closed (Trace.close, or when it is collected), which stops it.
    stack = contextlib.ExitStack()
    try:
        cluster = stack.enter_context(dask_engine.connect(scheduler, jobs, progress))
        return on(cluster, stack.close)
    except BaseException:
        stack.close()
        raise
