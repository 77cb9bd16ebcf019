"""The local engine for store URLs: objects fetched by this process, parsed as files are.

Folders take frtrace.tables.parse's path unchanged. For a store, this process fetches the
objects a few at a time (within max_file_bytes each) and parses them in isolated processes,
exactly as a Dask worker does (plan.parse_partition), so both engines read a store alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from frtrace.dumps.limits import budgets
from frtrace.engine.plan import Item, parse_partition
from frtrace.tables.parse import ParseResult

BATCH = 16  # objects spooled at a time: bounds the temporary disk to 16 dumps


def iter_parsed_store(items: list[Item], storage_options: dict[str, Any]) -> Iterator[ParseResult]:
    """Parse results of store objects, in the order given."""
    limits = budgets()
    for start in range(0, len(items), BATCH):
        yield from parse_partition(items[start : start + BATCH], True, storage_options, limits)
