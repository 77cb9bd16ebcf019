"""The Dask engine's distributed plan: entries stay on the workers, compact answers come back.

1. Workers parse partitions of files (plan.parse_partition) and keep the columns.
2. Each partition sends a summary per file (metadata, membership rows, distinct stacks: see
   raw.summarize_part); the client infers memberships, numbers stacks, resolves pg_status.
3. Workers merge their partition into a table in job-wide terms (global p2p peers and stack
   ids) and build its Context with the job's Scope: a rank's op states need only its own
   entries and the job-wide status.
4. Settling (frtrace.cluster.settle), rounds of per-(group, rank) and per-channel-end
   aggregates (two, and up to two more over pieces of ranges that did not settle); the
   arrival lags by a shuffle between workers (per collective: earliest and
   latest arrival, bucketed by key, each bucket combined on one worker, then per rank).
5. Workers send what did not settle; the client remaps its codes into the job's labels and
   analyzes that with the job's facts, assembled from the partitions' (frtrace.analysis.facts).
   A rank's whole history, when the analysis asks for it, is fetched from its partition.

What the client holds grows with files, groups and unsettled entries, not with all entries.
The workers keep their partitions (and a cluster started for the run stays up) until the
Trace is closed (`Trace.close`, or when it is garbage-collected).
"""

from __future__ import annotations

import itertools
import operator
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.analysis import facts as job_facts
from frtrace.analysis import timing
from frtrace.analysis.context import Context, Scope, build_context, status_by_name
from frtrace.cluster import settle as st
from frtrace.cluster.assemble import Skeleton, assemble, fresh, gather_summaries, job_table
from frtrace.cluster.dask import (
    homes,
    release,
    scheduler_lost,
    share,
    submit_partitions,
    task_error,
)
from frtrace.errors import FrtraceError
from frtrace.tables.columns import Frame
from frtrace.tables.parse import ParseResult, ProgressCallback, Skipped, tell
from frtrace.tables.partition import Item
from frtrace.tables.repair import pg_status_table
from frtrace.tables.table import Table
from frtrace.tables.trace import Trace, code_dtype


def open_part(
    results: list[ParseResult],
    groups: Table,
    stack_ids: dict[tuple[Frame, ...], int],
    scope: Scope,
) -> Context | None:
    """Worker: the partition's entries as one table in job-wide terms, and its Context."""
    parts = [fresh(cols) for _r, _p, cols, *_rest in results if cols is not None]
    if not parts:
        return None
    table, _stacks = job_table(parts, groups, stack_ids)
    files = Table({"rank": np.array(sorted(p.rank for p in parts), dtype=np.int64)})
    trace = Trace("", "", table, groups, Table({}), [], files)
    return build_context(trace, scope=scope)


def reduced(ctx: Context, verdict: st.Verdict) -> tuple[Table, int]:
    """Worker: the partition's entries that did not settle, and how many did."""
    left = st.prune(ctx, verdict)
    return ctx.trace.table.take(~left), int(left.sum())


def rank_entries(ctx: Context, rank: int) -> Table:
    """Worker: one rank's every entry."""
    return ctx.trace.table.take(ctx.rank_rows(rank))


@dataclass
class Codes:
    """The job's labels, built from the partitions' in rank order (so in the order one
    process merging every file would give them), and each partition table's codes mapped in."""

    index: dict[str, dict[Any, int]] = field(default_factory=dict)
    labels: dict[str, list[Any]] = field(default_factory=dict)

    def learn(self, table: Table) -> None:
        for name, values in table.labels.items():
            index = self.index.setdefault(name, {})
            for v in values:
                index.setdefault(v, len(index))

    def remap(self, table: Table) -> Table:
        cols = dict(table.cols)
        for name, values in table.labels.items():
            index = self.index[name]
            to_job = np.array([index[v] for v in values] or [0], dtype=np.int32)
            cols[name] = to_job[cols[name]] if len(cols[name]) else cols[name].astype(np.int32)
        return Table(cols, self.job_labels())

    def job_labels(self) -> dict[str, list[Any]]:
        for name, index in self.index.items():
            labels = self.labels.setdefault(name, [])
            labels.extend(list(index)[len(labels) :])  # grows in place: tables share it
        return self.labels

    def concat(self, tables: list[Table]) -> Table:
        """`tables` (remapped) as one, emptying them: each column leaves the parts once joined,
        so the client holds one copy of the unsettled entries and a column, not two copies."""
        labels = self.job_labels()
        names = list(tables[0].cols)
        cols = {n: np.concatenate([t.cols.pop(n) for t in tables]) for n in names}
        for name, values in labels.items():
            cols[name] = cols[name].astype(code_dtype(len(values)), copy=False)
        return Table(cols, labels)


class Remote:
    """The partitions on the cluster, for as long as the Trace needs them."""

    def __init__(self, client: Any, contexts: list[Any], ranks: list[list[int]]) -> None:
        self.client = client
        self.contexts = contexts
        self.homes = homes(client, contexts)
        self.where = {r: k for k, rs in enumerate(ranks) for r in rs}
        self.shared: list[Any] = []  # what every context was built from (dask.share)
        self.closers: list[Callable[[], None]] = []

    def history(self, codes: Codes, rank: int) -> Table:
        """A rank's every entry in the job's codes (none for a rank without a dump)."""
        if not self.contexts:
            raise FrtraceError(f"rank {rank}'s entries are not on the cluster (Trace closed)")
        try:
            table = self.each(rank_entries, rank, only=self.where.get(rank, 0))[0].result()
        except Exception as exc:  # its partition lost, and not made again
            raise FrtraceError(f"rank {rank}'s entries: {task_error(exc)}") from exc
        return codes.remap(table)

    def each(self, work: Callable[..., Any], *args: Any, only: int | None = None) -> list[Any]:
        """Futures of `work(context, *args)` on every partition (or partition `only`), each
        where its partition is."""
        if self.client.status != "running":  # a task submitted now waits 15 s, then fails
            raise scheduler_lost(getattr(self.client.scheduler, "address", None))
        picked = range(len(self.contexts)) if only is None else [only]
        return [
            self.client.submit(work, self.contexts[k], *args, pure=False, **self.homes[k])
            for k in picked
        ]

    def ask(self, work: Callable[[Any, Any], Any], arg: Any) -> list[Any]:
        """`work(context, arg)`'s results on every partition, one copy of `arg` on the cluster."""
        return list(self.stream(work, arg))

    def stream(self, work: Callable[[Any, Any], Any], arg: Any) -> Iterator[Any]:
        """`ask`'s results one at a time, each fetched when the previous one is done with."""
        one = share(self.client, arg)
        try:
            yield from _gather(self.each(work, one))
        finally:
            one.release()

    def close(self) -> None:
        release(self.contexts + self.shared)
        self.contexts, self.shared = [], []
        while self.closers:
            self.closers.pop()()


def _gather(futures: list[Any]) -> Iterator[Any]:
    for future in futures:
        yield future.result()


def analyze_on_cluster(
    client: Any,
    items: list[Item],
    remote: bool,
    storage_options: dict[str, Any],
    trace_dir: str,
    prefix: str,
    skipped: list[Skipped],
    progress: ProgressCallback | None = None,
    on_close: Callable[[], None] | None = None,
) -> Trace:
    """The Trace of a job whose entries stay on the cluster, but for the unsettled ones.
    `on_close` runs when the Trace is closed (or collected), after its partitions are
    released: to stop a cluster started for it."""
    _parts, parsed, given = submit_partitions(client, items, remote, storage_options, progress)
    opened: list[Any] = []
    shared: list[Any] = []
    try:
        summaries = gather_summaries(client, parsed, given, len(items), progress)
        tell(progress, "inferring process groups")
        job = assemble(trace_dir, summaries, skipped)
        del summaries
        members = st.members_of(job.groups)
        gloo = "gloo" in job.backends
        status = pg_status_table(job.metas, job.pg_ids)
        job.metas = []  # read: a few KB per rank the rest of the load need not hold
        scope = Scope(gloo, {} if gloo else status_by_name(status, members, job.p2p_groups))
        shared = [share(client, x) for x in (job.groups, job.stack_ids, scope)]
        tell(progress, "indexing entries on the workers")
        opened = [
            client.submit(open_part, p, *shared, pure=False, **home)
            for p, home in zip(parsed, homes(client, parsed), strict=True)
        ]
        release(parsed)
        parsed = []
        ranks = list(_gather([client.submit(_ranks, c, pure=False) for c in opened]))
        contexts = [c for c, rs in zip(opened, ranks, strict=True) if rs]
        release([c for c, rs in zip(opened, ranks, strict=True) if not rs])
        held = Remote(client, contexts, [rs for rs in ranks if rs])
        held.shared = shared  # a context lost with its worker is made again from them
        if on_close is not None:
            held.closers.append(on_close)
        return _settled_trace(held, job, members, status, trace_dir, prefix, skipped, progress)
    except FrtraceError:
        release(parsed + opened + shared)
        raise
    except Exception as exc:  # a worker lost repeatedly on one task
        release(parsed + opened + shared)
        raise FrtraceError(f"the Dask analysis tasks failed: {task_error(exc)}") from exc


def _settled_trace(
    remote: Remote,
    job: Skeleton,
    members: dict[str, list[int]],
    status: Table,
    trace_dir: str,
    prefix: str,
    skipped: list[Skipped],
    progress: ProgressCallback | None = None,
) -> Trace:
    client = remote.client
    submit = client.submit
    tell(progress, "settling: counting each group's collectives")
    whole = st.merge_tallies(list(_gather(remote.each(st.tally))))
    dumped = {int(r) for r in job.files["rank"]}
    ask = st.plan(whole, members, dumped)
    rounds = itertools.count(1)

    def answer(question: st.Ask) -> list[st.Digests]:
        tell(progress, f"settling: comparing signatures, round {next(rounds)}")
        return remote.ask(st.digests, question)

    verdict = st.settle_rounds(ask, answer)
    tell(progress, "timing: each collective's lag")
    index, sizes = st.group_sizes(job.groups)
    buckets = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    by_group = share(client, index)
    maps = remote.each(st.lag_partials, ask.method, by_group, buckets)
    pieces = [[submit(operator.getitem, m, b, pure=False) for m in maps] for b in range(buckets)]
    combined = [submit(timing.combine_lags, p, sizes, pure=False) for p in pieces]
    collectives = sum(_gather([submit(timing.collectives_in, c, pure=False) for c in combined]))
    per_part = list(_gather(remote.each(st.rank_lags, ask.method, by_group, combined)))
    release([by_group, *maps, *[p for ps in pieces for p in ps], *combined])
    codes = Codes()
    parts = remote.stream(reduced, verdict)
    kept, left_out = _remapped(parts, codes, progress, len(remote.contexts))
    table = codes.concat(kept)
    del kept
    code = {str(n): i for i, n in enumerate(codes.labels.get("pg_name", []))}
    by_index = {index[n]: c for n, c in code.items() if n in index}
    lags = timing.join_lags(ask.method, collectives, per_part, by_index, timing.TOP)
    facts = job_facts.assembled(
        whole.facts, left_out, code, lags, lambda r: remote.history(codes, r)
    )
    facts.release = remote.close
    weakref.finalize(facts, remote.close)  # the Trace and its copies share these facts
    stacks = sorted((i, s) for s, i in job.stack_ids.items() if i >= 0)
    return Trace(
        trace_dir=trace_dir,
        prefix=prefix,
        table=table,
        group_table=job.groups,
        status_table=status,
        stacks=[s for _i, s in stacks],
        file_table=job.files,
        skipped=skipped,
        notes=job.notes,
        warnings=job.warnings,
        membership_conflicts=job.conflicts,
        world=job.world,
        facts=facts,
    )


FETCHING = "fetching the unsettled entries"


def _remapped(
    parts: Iterator[tuple[Table, int]],
    codes: Codes,
    progress: ProgressCallback | None = None,
    total: int = 0,
) -> tuple[list[Table], int]:
    """The partitions' unsettled entries in the job's codes, and how many settled (stayed on
    the workers): each part's own label codes are dropped as the next part is fetched.
    `progress` counts the parts fetched of `total`."""
    kept, left_out = [], 0
    tell(progress, FETCHING, 0, total)
    for done, (part, left) in enumerate(parts, start=1):
        codes.learn(part)
        kept.append(codes.remap(part))
        left_out += left
        tell(progress, FETCHING, done, total)
    return kept, left_out


def _ranks(ctx: Context | None) -> list[int]:
    return [] if ctx is None else sorted(ctx.dumped)
