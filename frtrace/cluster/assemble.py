"""Raw mode on a Dask cluster: workers parse and write Parquet; the client sees no entry.

Stage 1 (workers): parse a partition of files into columns (plan.parse_partition); the columns
stay in the workers' memory. The client fetches only a summary per file: its metadata (the
columns released), its distinct stacks, and the few rows membership inference reads (the first
row of each group and desc, and per group the all_gather / reduce_scatter row with the largest
size ratio). From those the client infers the memberships and numbers the stacks exactly as
merging every entry would (frtrace.tables.repair.infer_memberships, trace.merge_columns).
Stage 2 (workers, where the columns are): merge the partition's columns, translate p2p peers to
global ranks, give stacks their job-wide ids, and write one Parquet file per partition. What the
client holds grows with files and groups, not with entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from frtrace.tables.columns import Frame, RankColumns
from frtrace.tables.load import trace_messages, unreadable_ranks
from frtrace.tables.parse import NoUsableDumpError, ParseResult, ProgressCallback
from frtrace.tables.records import NUMEL_RATIOS, numel_rules
from frtrace.tables.repair import (
    World,
    add_global_peers,
    infer_memberships,
    status_names,
)
from frtrace.tables.table import Table, distinct, first_rows, runs
from frtrace.tables.trace import Skipped, file_table, merge_columns

_LABELLED = ("pg_name", "pg_desc", "backend", "op")
_KEPT = ["rank", *_LABELLED, "input_numel", "output_numel"]


@dataclass
class FileSummary:
    """What the client needs of one parsed file: never its entries."""

    rank: int
    path: str
    fmt: str
    compressed: bool
    reason: str
    meta: RankColumns | None  # columns released: rank, pg_config, notes, versions, n
    stacks: list[tuple[Frame, ...]]
    rows: Table | None  # the rows membership inference reads, labels decoded (object arrays)
    pg_ids: dict[tuple[int, int], str] = field(default_factory=dict)  # status_names
    p2p_groups: set[str] = field(default_factory=set)  # groups with p2p entries
    backends: set[str] = field(default_factory=set)


@dataclass
class Skeleton:
    """The job without its entries: what the client builds from the summaries."""

    groups: Table
    conflicts: dict[str, list[list[int]]]
    world: World
    stack_ids: dict[tuple[Frame, ...], int]
    warnings: list[str]
    notes: list[str]
    files: Table
    metas: list[RankColumns]  # in parse order
    pg_ids: dict[tuple[int, int], str]
    p2p_groups: set[str]
    backends: set[str]


def fresh(part: RankColumns) -> RankColumns:
    """A copy merge_columns may consume (it pops columns), leaving the stored result whole."""
    return dataclasses.replace(part, ints=dict(part.ints), cats=dict(part.cats))


def _membership_rows(entries: Table) -> Table:
    """The rows of one rank that infer_memberships reads: first row of each (group, desc), and
    per group the gather / scatter row whose size ratio is the largest (it takes the max)."""
    keep = np.zeros(len(entries), dtype=bool)
    keep[first_rows(entries["pg_name"], entries["pg_desc"])] = True
    rules = numel_rules(entries)
    for rule, num, den in NUMEL_RATIOS:
        idx = np.flatnonzero((rules == rule) & (entries[den] > 0))
        if not len(idx):
            continue
        ratio = entries[num][idx] // entries[den][idx]
        order, _starts = runs(entries["pg_name"][idx], ratio)
        pg_sorted = entries["pg_name"][idx][order]
        last = np.r_[pg_sorted[1:] != pg_sorted[:-1], True]  # the largest ratio of each group
        keep[idx[order[last]]] = True
    rows = entries.take(keep)
    return Table({k: rows.decode(k) if k in _LABELLED else rows[k] for k in _KEPT})


def _encoded(tables: list[Table]) -> Table:
    """Membership rows of many files as one table, labelled columns encoded again."""
    cols = {k: np.concatenate([t[k] for t in tables]) for k in _KEPT}
    labels: dict[str, list[object]] = {}
    for k in _LABELLED:
        codes: dict[object, int] = {}
        cols[k] = np.array([codes.setdefault(v, len(codes)) for v in cols[k]], dtype=np.int32)
        labels[k] = list(codes)
    return Table(cols, labels)


def summarize(results: list[ParseResult]) -> list[FileSummary]:
    """Stage 1's answer to the client, computed where the columns are."""
    out = []
    for rank, path, cols, fmt, compressed, reason in results:
        if cols is None:
            out.append(FileSummary(rank, path, fmt, compressed, reason, None, [], None))
            continue
        stacks = list(cols.stacks.uniques)
        entries, _stacks = merge_columns([fresh(cols)])
        meta = fresh(cols)
        meta.release_columns()
        rows = _membership_rows(entries)
        p2p = distinct(entries["pg_name"][entries["is_p2p"]]).tolist()
        out.append(
            FileSummary(
                rank,
                path,
                fmt,
                compressed,
                reason,
                meta,
                stacks,
                rows,
                status_names(entries),
                {str(entries.labels["pg_name"][c]) for c in p2p},
                {str(entries.labels["backend"][b]) for b in distinct(entries["backend"]).tolist()},
            )
        )
    return out


@dataclass
class PartSummary:
    """A partition's file summaries as one object: Dask serializes a list element by
    element, which would send an object the files share once per file."""

    files: list[FileSummary]


def summarize_part(results: list[ParseResult]) -> PartSummary:
    """`summarize` for a partition, with what every file repeats sent once: the partition's
    distinct stacks ride on its first usable file (in rank order, as they are numbered), and
    equal member lists are one object, which pickling sends once (the world group's list is
    in every dump: 64 KB per file at 16k ranks)."""
    out = summarize(results)
    stacks: dict[tuple[Frame, ...], None] = {}
    for s in out:
        stacks.update(dict.fromkeys(s.stacks))
        s.stacks = []
    share_lists(out, {})
    usable = [s for s in out if s.meta is not None]
    if usable:
        min(usable, key=lambda s: s.rank).stacks = list(stacks)
    return PartSummary(out)


def gather_summaries(
    client: Any,
    parsed: list[Any],
    given: dict[str, str],
    files: int = 0,
    progress: ProgressCallback | None = None,
) -> list[FileSummary]:
    """Stage 1 on every partition (`parsed`: their futures), paths as the user gave them.
    Each summary is asked for once its partition is parsed, on the worker holding it (see
    dask.homes: a busy worker's parsed partition would otherwise be shipped to an idle one),
    and `progress` hears of each partition as its summary arrives (`files`: the total)."""
    from distributed import as_completed

    from frtrace.cluster.dask import homes

    slot = {f.key: k for k, f in enumerate(parsed)}
    asked: dict[str, int] = {}
    parts: list[list[FileSummary]] = [[] for _ in parsed]
    lists: dict[bytes, bytes] = {}
    done = entries = 0
    if progress is not None:  # the line shows, and its clock runs, before a partition is in
        progress(0, files, 0)
    pending = as_completed(parsed, loop=client.loop)
    for batch in pending.batches():
        ready = [f for f in batch if f.key in slot]
        for f, home in zip(ready, homes(client, ready), strict=True):
            summary = client.submit(summarize_part, f, pure=False, **home)
            asked[summary.key] = slot[f.key]
            pending.add(summary)
        for f in batch:
            if f.key not in asked:
                continue
            part = f.result().files
            share_lists(part, lists)
            parts[asked[f.key]] = part
            done += len(part)
            entries += sum(s.meta.n for s in part if s.meta is not None)
            if progress is not None:
                progress(done, max(files, done), entries)
    return [dataclasses.replace(s, path=given.get(s.path, s.path)) for p in parts for s in p]


def share_lists(files: list[FileSummary], lists: dict[bytes, bytes]) -> None:
    """One object per distinct member list across partitions (`lists`: those seen so far)."""
    for s in files:
        for cfg in s.meta.pg_config.values() if s.meta is not None else ():
            if isinstance(cfg, dict) and isinstance(cfg.get("ranks"), bytes):
                cfg["ranks"] = lists.setdefault(cfg["ranks"], cfg["ranks"])


def job_table(
    parts: list[RankColumns], groups: Table, stack_ids: dict[tuple[Frame, ...], int]
) -> tuple[Table, list[tuple[Frame, ...]]]:
    """A partition's files merged in job-wide terms: p2p peers as global ranks, stack ids
    the job's (`stack_ids`, from assemble); also the partition's own stacks."""
    table, stacks = merge_columns(parts)
    add_global_peers(table, groups)
    to_global = np.array([stack_ids[s] for s in stacks] or [-1], dtype=np.int32)
    local = table["stack_id"]
    table["stack_id"] = np.where(local >= 0, to_global[np.maximum(local, 0)], -1)
    return table, stacks


def assemble(trace_dir: str, summaries: list[FileSummary], skipped: list[Skipped]) -> Skeleton:
    """Groups, job-wide stack ids, warnings, notes and files from the summaries (rank order)."""
    ok = [s for s in summaries if s.meta is not None]  # in parse order, as the Trace sees them
    by_rank = sorted(ok, key=lambda s: s.rank)
    skipped.extend(Skipped(s.path, s.reason, s.rank) for s in summaries if s.meta is None)
    if not ok:
        raise NoUsableDumpError(
            f"no usable dump in {trace_dir} ({len(skipped)} file(s) skipped)", skipped
        )
    metas = [cast(RankColumns, s.meta) for s in ok]
    rows = _encoded([s.rows for s in by_rank if s.rows is not None])
    members = infer_memberships(rows, metas, [m.rank for m in metas], unreadable_ranks(skipped))
    stack_ids: dict[tuple[Frame, ...], int] = {(): -1}
    for s in by_rank:  # numbered as merge_columns numbers them: by rank, first seen first
        for frames in s.stacks:
            stack_ids.setdefault(frames, len(stack_ids) - 1)
    files = file_table(
        [
            {
                "path": s.path,
                "rank": s.rank,
                "format": s.fmt,
                "compressed": s.compressed,
                "version": m.version,
                "comm_lib_version": m.comm_lib_version,
                "entries": m.n,
            }
            for s, m in zip(ok, metas, strict=True)
        ]
    )
    warnings, notes = trace_messages(metas, files, members)
    pg_ids: dict[tuple[int, int], str] = {}
    p2p_groups: set[str] = set()
    backends: set[str] = set()
    for s in ok:
        pg_ids.update(s.pg_ids)
        p2p_groups |= s.p2p_groups
        backends |= s.backends
    return Skeleton(
        members.groups,
        members.conflicts,
        members.world,
        stack_ids,
        warnings,
        notes,
        files,
        metas,
        pg_ids,
        p2p_groups,
        backends,
    )
