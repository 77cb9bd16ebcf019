"""The local engine for store URLs: objects fetched by this process, parsed as files are.

Folders take frtrace.tables.parse's path unchanged. For a store, this process downloads the
objects several at a time (within max_file_bytes each) and parses them in isolated processes,
one per core, exactly as a Dask worker does with one (plan.iter_objects), so both engines read
a store alike.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from frtrace.dumps.limits import budgets
from frtrace.tables.parse import ParseResult, job_count
from frtrace.tables.partition import Item, iter_objects


def iter_parsed_store(
    items: list[Item], storage_options: dict[str, Any], jobs: int | None = None
) -> Iterator[ParseResult]:
    """Parse results of store objects as they finish, in `jobs` processes (default: a core
    each)."""
    n_jobs = job_count(jobs, os.cpu_count() or 1)
    yield from iter_objects(items, storage_options, budgets(), n_jobs)
