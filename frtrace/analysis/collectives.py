"""Collectives: match ops across ranks by (process group, collective_seq_id).

Never by record_id (a per-process counter) or position in the file. Only sequence numbers that
every member could still hold are judged (ring buffers drop old entries). Culprits are the ranks
that differ from the majority; with two sides of equal size the same collective in the sibling
groups (the other groups of its kind) decides, else the ranks' own call-site history (stacks
only: JSON dumps have no call sites, and an op sequence cannot tell one side's extra call from
the other's missing one), or both are named as undecidable.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from frtrace.analysis.context import Context, is_default_group, judged
from frtrace.analysis.facts import rank_slice
from frtrace.analysis.findings import Finding, Kind, Reason
from frtrace.analysis.ops import SIGNATURE, pg_seq_key
from frtrace.tables.records import GATHER_NUMEL, SCATTER_NUMEL
from frtrace.tables.table import (
    Table,
    distinct,
    group_max,
    group_min,
    head_per,
    most_common,
    runs,
    split,
)

_KIND_BY_COLUMN = {
    "op": Kind.TYPE_MISMATCH,
    "input_sizes": Kind.SIZE_MISMATCH,
    "output_sizes": Kind.SIZE_MISMATCH,
    "input_dtypes": Kind.DTYPE_MISMATCH,
    "output_dtypes": Kind.DTYPE_MISMATCH,
}


@dataclass
class CollectiveResult:
    findings: list[Finding] = field(default_factory=list)
    # (pg, seq) keys some expected member has not issued, in the judged window, by key
    incomplete: Table = field(
        default_factory=lambda: Table({"pg": np.empty(0, np.int64), "seq": np.empty(0, np.int64)})
    )


def analyze_collectives(ctx: Context) -> CollectiveResult:
    coll = ctx.view.coll
    if not len(coll):
        return CollectiveResult()
    # A group's judged window is a range of its seqs, so a key is wholly in or out of it: the
    # keys outside are dropped from the statistics, and every finding starts from those (or
    # from the window's rows), so the job's view is never copied (700 MB at 8,192 ranks).
    stats = _key_stats(ctx, coll)
    stats = stats.take(judged(stats, ctx))
    if not len(stats):
        return CollectiveResult()
    incomplete = _incomplete_keys(ctx, stats)
    findings = _missing_findings(ctx, coll, incomplete)
    findings += _mismatch_findings(ctx, coll, stats)
    findings += _beside_no_dump(ctx, coll)
    findings += _numel_findings(ctx, coll)
    if ctx.view.states_tracked:
        findings += _state_findings(ctx, coll, stats)
    return CollectiveResult(_cap(findings, ctx.mismatch_cap), incomplete.select(["pg", "seq"]))


def _cap(findings: list[Finding], cap: int) -> list[Finding]:
    seen: Counter[str] = Counter()
    kept = []
    for f in sorted(findings, key=lambda f: (f.pg_name, f.collective_seq_id or 0)):
        seen[f.pg_name] += 1
        if seen[f.pg_name] <= cap:
            kept.append(f)
    return kept


def _expected_counts(ctx: Context) -> np.ndarray:
    return np.array([len(ctx.expected(pg)) for pg in range(len(ctx.pg_names))] or [0])


def _key_stats(ctx: Context, coll: Table) -> Table:
    """Per (pg, seq), by key: how many ranks issued it, their lowest and highest state, and
    whether they disagree on its signature (`torn`): one sort of the job's ops for all three.
    """
    order, starts = runs(pg_seq_key(coll["pg"], coll["seq"]))
    first = order[starts]
    state = coll["state"][order]
    stats = {
        "pg": coll["pg"][first],
        "seq": coll["seq"][first],
        "n": np.diff(np.r_[starts, len(order)]),
        "lo": np.minimum.reduceat(state, starts),
        "hi": np.maximum.reduceat(state, starts),
    }
    del state, first
    sig = _signature_ids(ctx, coll)[order]
    del order
    # Members that differ give a key two signatures: its lowest is not its highest.
    stats["torn"] = np.minimum.reduceat(sig, starts) != np.maximum.reduceat(sig, starts)
    return Table(stats)


def _incomplete_keys(ctx: Context, stats: Table) -> Table:
    """(pg, seq) issued by some expected members but not all."""
    expected = _expected_counts(ctx)[stats["pg"]]
    short = stats["n"] < expected
    if ctx.view.states_tracked:
        # Completed on those that have it means every member took part: the others simply
        # dumped before recording it (dump-time skew), which is not a fault.
        short &= stats["lo"] < 2
    return stats.take(short)


def _present(coll: Table, keys: Table) -> dict[tuple[int, int], Table]:
    """The rows of each wanted (pg, seq), by key: one isin over the job, then a small sort."""
    wanted = pg_seq_key(keys["pg"], keys["seq"])
    rows = coll.take(np.isin(pg_seq_key(coll["pg"], coll["seq"]), wanted))
    return {(k[0], k[1]): g for k, g in split(rows, "pg", "seq")}


def _missing_findings(ctx: Context, coll: Table, incomplete: Table) -> list[Finding]:
    if not len(incomplete):
        return []
    # Per group only the first few keys matter: a missing set is reported where it starts.
    head = incomplete.take(head_per(incomplete["pg"], ctx.mismatch_cap * 4))
    present = _present(coll, head)
    findings: list[Finding] = []
    previous: dict[int, tuple[frozenset[int], Finding]] = {}
    for (pg, seq), rows in present.items():
        have = set(int(r) for r in rows["rank"])
        missing = frozenset(
            m for m in ctx.expected(pg) - have if not ctx.issued_per_status(pg, m, seq)
        )
        if not missing:
            continue
        last = previous.get(pg)
        if last is not None and last[0] == missing:
            last[1].last_seq = seq
            continue
        finding = missing_finding(ctx, pg, seq, rows, sorted(have), sorted(missing))
        previous[pg] = (missing, finding)
        findings.append(finding)
    return findings


def missing_finding(
    ctx: Context,
    pg: int,
    seq: int,
    rows: Table,
    have: list[int],
    missing: list[int],
    elsewhere: int = 0,
) -> Finding:
    """Who is to blame when some members issued (pg, seq) and others did not.

    `elsewhere`: how many other places (groups, p2p channels) ranks wait for the missing
    ranks in, idle. An extra call on this group explains only this wait; a rank that
    stopped explains them all, so that breaks a two-member tie."""
    op = _majority_label(ctx, rows, "op")
    typed: dict = {"issued_by": have, "not_issued_by": missing}
    seq_out: int = seq
    rooted: str | None = None  # the rooted op the missing ranks never left (left_in_rooted)
    facts_sib: dict = {}  # the sibling groups that decided, when they did
    began = {
        r: ctx.unlaunched[pg, r][1] for r in missing if ctx.unlaunched.get((pg, r), (0,))[0] == seq
    }
    if began and len(began) == len(missing):
        # They stopped while issuing it: recorded (a block's first parts), never launched.
        return ctx.finding(
            Kind.MISSING_RANKS,
            pg,
            collective_seq_id=seq,
            op=op,
            culprit_ranks=missing,
            waiting_ranks=have,
            reason=Reason.NOT_LAUNCHED,
            facts={"parts": {str(r): n for r, n in sorted(began.items())}},
            **typed,
        )
    if len(have) > len(missing):
        culprits, waiting, reason = missing, have, Reason.NEVER_ISSUED
    elif len(have) < len(missing):
        culprits, waiting, reason = have, [], Reason.MINORITY_ISSUED
    else:
        # Own histories decide only by call sites: an op sequence (JSON) cannot tell one
        # side's extra call from the other side's missing one.
        sites = ctx.decided_by(have + missing) == "stacks"
        extra = extra_call(ctx, pg, have + missing) if sites else None
        stopped = sites and len(have) == 1 and stopped_early(ctx, pg, seq, have[0], missing[0])
        rooted = left_in_rooted(ctx, pg, seq, missing)
        siblings = sibling_call(ctx, pg, seq)
        if rooted is not None:
            culprits, waiting, reason = missing, have, Reason.LEFT_IN_ROOTED
        elif siblings is not None and _calls(ctx, rows) == {siblings.signature}:
            culprits, waiting, reason = missing, have, Reason.SIBLINGS_ISSUED
            facts_sib = siblings.facts(ctx)
        elif extra is not None:
            rank, extra_seq, _stack_id = extra
            culprits, waiting, seq_out, reason = [rank], [], extra_seq, Reason.EXTRA_CALL
            typed["hang_seq"] = seq
        elif stopped:
            culprits, waiting, reason = missing, have, Reason.STOPPED_EARLY
        elif elsewhere:
            culprits, waiting, reason = missing, have, Reason.AWAITED_ELSEWHERE
        else:
            culprits, waiting, reason = sorted(have + missing), have, Reason.EVEN_SPLIT_MISSING
            typed["undecidable"] = True
    facts: dict = {}
    if reason == Reason.SIBLINGS_ISSUED:
        facts.update(facts_sib)
    if reason == Reason.AWAITED_ELSEWHERE:
        facts["elsewhere"] = elsewhere
    if reason == Reason.LEFT_IN_ROOTED:
        facts["rooted_op"] = rooted
    if reason in (Reason.EXTRA_CALL, Reason.STOPPED_EARLY):
        facts["decided_by"] = ctx.decided_by(have + missing)
    return ctx.finding(
        Kind.MISSING_RANKS,
        pg,
        collective_seq_id=seq_out,
        op=op,
        culprit_ranks=culprits,
        waiting_ranks=waiting,
        reason=reason,
        facts=facts,
        **typed,
    )


# Collectives with a root: the root (and, in a tree, some members) can finish and leave
# while others are still inside, so a member that left proves nothing about the others.
ROOTED_OPS = frozenset({"broadcast", "reduce", "gather", "scatter"})


def left_in_rooted(ctx: Context, pg: int, seq: int, missing: list[int]) -> str | None:
    """The op, when the ranks that never issued (pg, seq) all have (pg, seq - 1) as their
    last collective and it is a rooted one: they never left it, while the others completed
    it and moved on. Of an all_reduce no member can leave before every member arrived, but
    gloo's tree broadcast lets the root's side finish while the rest still wait (the real
    fixture broadcast_root_4rank); those still inside are the suspects, not those that left."""
    op = None
    for rank in missing:
        last = ctx.last_collective(rank)
        if last is None or last[:2] != (pg, seq - 1) or last[2] not in ROOTED_OPS:
            return None
        op = last[2]
    return op


SIBLINGS_ASKED = 4  # sibling groups whose call is asked, nearest first (a history fetch each)


@dataclass(frozen=True)
class Siblings:
    """What the sibling groups of a group issued at one seq: every member of each issued it,
    with one signature (SIGNATURE codes), the same in every one asked."""

    signature: tuple[int, ...]
    groups: tuple[int, ...]  # their group codes

    def facts(self, ctx: Context) -> dict:
        """A finding's evidence: which groups decided, and what they issued."""
        return {
            "decided_by": "siblings",
            "siblings": [ctx.name(g) for g in self.groups],
            "sibling_call": _describe(ctx, self.signature),
        }


def sibling_call(ctx: Context, pg: int, seq: int) -> Siblings | None:
    """The call the sibling groups of `pg` made at `seq`, where they agree (None: no sibling
    issued it whole, or they disagree).

    Siblings are the other groups of its kind (same desc, no member in common): the tensor-
    parallel groups of the other replicas, a DeviceMesh dimension's other slices. Their ranks
    run the same program in the same role, so their (desc, seq) is what a member of this group
    was due to issue there. Unlike a rank's own op sequence, this is the same evidence in a
    JSON dump as in a pickle. The nearest SIBLINGS_ASKED groups that issued it are asked."""
    desc = ctx.desc(pg)
    mine = set(ctx.group_members(pg))
    if not desc or not mine:
        return None
    low = min(mine)
    others = []
    for code in _of_kind(ctx, desc):
        members = ctx.group_members(code)
        if code != pg and members and not mine.intersection(members):
            others.append((abs(min(members) - low), code))
    seen: set[tuple[int, ...]] = set()
    asked: list[int] = []
    for _distance, code in sorted(others):
        call = _group_call(ctx, code, seq)
        if call is None:
            continue
        seen.add(call)
        asked.append(code)
        if len(asked) >= SIBLINGS_ASKED:
            break
    if len(seen) != 1:
        return None
    return Siblings(seen.pop(), tuple(asked))


def _of_kind(ctx: Context, desc: str) -> list[int]:
    """The codes of the groups with this desc (worked out once per job)."""
    cache = ctx.__dict__.setdefault("_of_kind", {})
    if not cache:
        for code in range(len(ctx.pg_names)):
            cache.setdefault(ctx.desc(code), []).append(code)
    return cache.get(desc, [])


def _group_call(ctx: Context, pg: int, seq: int) -> tuple[int, ...] | None:
    """The signature every member of `pg` gave its collective `seq`, when all issued it and
    agree (None otherwise). Each member's ops are a slice of the view; where no member has the
    op there, it may have settled on a Dask worker (a range every member completed alike):
    one member's history tells."""
    coll = ctx.view.coll
    expected = ctx.expected(pg)
    if not expected or expected != set(ctx.group_members(pg)):
        return None  # a member left no dump: whether it issued the op is unknown
    calls: set[tuple[int, ...]] = set()
    for rank in sorted(expected):
        rows = coll.take(rank_slice(coll["rank"], rank))
        at = np.flatnonzero((rows["pg"] == pg) & (rows["seq"] == seq))
        if len(at):
            calls.add(tuple(int(rows[c][at[0]]) for c in SIGNATURE))
        elif calls or not ctx.facts.left_out:
            return None  # a member never issued it
        else:
            settled = ctx.rank_ops(rank)
            at = np.flatnonzero((settled["pg"] == pg) & (settled["seq"] == seq))
            if not len(at):
                return None
            return tuple(int(settled[c][at[0]]) for c in SIGNATURE)
    return calls.pop() if len(calls) == 1 else None


def _calls(ctx: Context, rows: Table) -> set[tuple[int, ...]]:
    """The signatures the rows of one collective carry."""
    return set(zip(*(rows[c].tolist() for c in SIGNATURE), strict=True))


def _beside_no_dump(ctx: Context, coll: Table) -> list[Finding]:
    """A collective whose visible members agree, while as many or more of its members left
    no dump (or are not seen at all: a gloo group smaller than its siblings), and the sibling
    groups issued something else there: the visible ranks changed.

    gloo aborts a rank that receives more than its call expects (mesh_size_dies_4rank: rank 3
    all_reduced [5, 8] where its tp group's other slice, and its own earlier calls, had
    [4, 8]; rank 2 was aborted and left no dump). The dead rank is then no cause: the rank
    whose call differs from its siblings' is. Only where each group's visible members stand
    is asked: its first incomplete collective (without states, as on gloo: its newest)."""
    lost = ctx.without_dump
    if not len(coll):
        return []
    widest: dict[str, int] = {}
    for pg in range(len(ctx.pg_names)):
        desc = ctx.desc(pg)
        widest[desc] = max(widest.get(desc, 0), len(ctx.group_members(pg)))
    unseen: dict[int, set[int]] = {}
    for pg in range(len(ctx.pg_names)):
        members = ctx.group_members(pg)
        gone = set(members) & lost
        count = len(gone)
        if not ctx.reliable.get(ctx.name(pg), True) and not is_default_group(
            ctx.name(pg), ctx.desc(pg)
        ):
            # Members inferred from the dumps (gloo): any rank without one may be a member,
            # and a DeviceMesh's groups of one kind are alike, so it lacks as many as it is
            # smaller, even where no gap in the file names shows a rank (the highest ones).
            gone |= lost
            count = max(count, widest[ctx.desc(pg)] - len(members))
        if count and len(ctx.expected(pg)) <= count:
            unseen[pg] = gone
    if ctx.view.states_tracked:  # where its visible members stand: the first incomplete one
        open_ = coll["state"] < 2
        frontier = group_min(coll["pg"][open_], coll["seq"][open_])
    else:  # no states (gloo): the newest one
        frontier = group_max(coll["pg"], coll["seq"])
    keys = [(pg, int(frontier[pg])) for pg in sorted(unseen) if pg in frontier]
    if not keys:
        return []
    wanted = Table({"pg": np.array([k[0] for k in keys]), "seq": np.array([k[1] for k in keys])})
    findings = []
    for (pg, seq), rows in _present(coll, wanted).items():
        pg, seq = int(pg), int(seq)
        named = set(ctx.group_members(pg))
        visible = sorted(int(r) for r in rows["rank"])
        if set(visible) != ctx.expected(pg):
            continue  # a visible member never issued it: the others' findings say so
        gone = unseen[pg]
        calls = _calls(ctx, rows)
        siblings = sibling_call(ctx, pg, seq)
        if len(calls) != 1 or siblings is None or siblings.signature in calls:
            continue
        theirs = calls.pop()
        pairs = zip(SIGNATURE, theirs, siblings.signature, strict=True)
        column = next(c for c, a, b in pairs if a != b)
        findings.append(
            ctx.finding(
                _KIND_BY_COLUMN[column],
                pg,
                collective_seq_id=seq,
                op=_majority_label(ctx, rows, "op"),
                culprit_ranks=visible,
                waiting_ranks=[],
                expected_ranks=sorted(named | gone),
                reason=Reason.SIBLINGS_DIFFER,
                facts={
                    "column": column,
                    "by_rank": {str(r): _describe(ctx, theirs) for r in visible},
                    "no_dump": sorted(gone),
                    **siblings.facts(ctx),
                },
            )
        )
    return findings


def stopped_early(ctx: Context, pg: int, seq: int, waiting: int, idle: int) -> bool:
    """The idle rank's own history says the op the other waits in comes next: it stopped."""
    mine = ctx.rank_ops(waiting)
    at = np.flatnonzero((mine["pg"] == pg) & (mine["seq"] == seq))
    if not len(at):
        return False
    return ctx.next_is_usual(idle, (waiting, int(mine["pos"][at[0]])))


def extra_call(ctx: Context, pg: int, ranks: list[int]) -> tuple[int, int, int] | None:
    """Find a rank whose call sites equal the other's with one extra call inserted.

    Returns (rank, seq of the extra call, its stack id), or None when no rank stands out.
    """
    if len(ranks) != 2:
        return None
    seqs = {}
    for rank in ranks:
        mine = ctx.rank_ops(rank)
        rows = mine.take(mine["pg"] == pg)
        rows = rows.take(np.argsort(rows["seq"], kind="stable"))
        rows = rows.take(rows["seq"] >= ctx.judged_lo.get(pg, 0))
        site = rows["stack_id"].astype(np.int64)
        if (site < 0).all():  # no stacks (JSON dumps): the op signature stands in
            site = rows["op"].astype(np.int64) * 1_000_003 + rows["input_sizes"]
        seqs[rank] = (site.tolist(), rows["seq"].tolist())
    a, b = ranks
    hits = []
    for x, y in ((a, b), (b, a)):
        xs, ys = seqs[x][0], seqs[y][0]
        i = next((k for k in range(min(len(xs), len(ys))) if xs[k] != ys[k]), None)
        if i is None:
            continue
        rest = xs[i + 1 :]
        overlap = min(len(rest), len(ys) - i)
        if overlap > 0 and rest[:overlap] == ys[i : i + overlap]:
            hits.append((x, int(seqs[x][1][i]), int(xs[i])))
    return hits[0] if len(hits) == 1 else None


def _majority_label(ctx: Context, rows: Table, column: str) -> str:
    return ctx.view.label(column, most_common(rows[column]))


def _signature_ids(ctx: Context, coll: Table) -> np.ndarray:
    """One integer per distinct (op, sizes, dtypes): mixed radix over the label tables."""
    sig = np.zeros(len(coll), dtype=np.int64)
    scale = 1
    for col in SIGNATURE:
        width = len(ctx.view.labels[col]) or 1
        if scale * width >= 1 << 62:  # too many distinct values to pack: number the rows
            stacked = np.stack([coll[c].astype(np.int64) for c in SIGNATURE], axis=1)
            return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)
        sig += coll[col].astype(np.int64) * scale
        scale *= width
    return sig


def _mismatch_findings(ctx: Context, coll: Table, stats: Table) -> list[Finding]:
    bad = stats.take(stats["torn"])  # sorted: by group, then seq
    if not len(bad):
        return []
    bad = bad.take(head_per(bad["pg"], ctx.mismatch_cap))
    findings = []
    for (pg, seq), rows in _present(coll, bad).items():
        findings.append(mismatch_finding(ctx, pg, seq, rows))
    return findings


def mismatch_finding(ctx: Context, pg: int, seq: int, rows: Table) -> Finding:
    """Members disagree on what (pg, seq) is: blame the ranks that differ from the majority."""
    column = next(c for c in SIGNATURE if len(distinct(rows[c])) > 1)
    kind = _KIND_BY_COLUMN[column]
    signature = {
        int(rank): tuple(sig)
        for rank, *sig in zip(
            rows["rank"].tolist(), *(rows[c].tolist() for c in SIGNATURE), strict=True
        )
    }
    sides: dict[tuple[int, ...], list[int]] = {}
    for rank, sig in signature.items():
        sides.setdefault(sig, []).append(rank)
    ordered = sorted(sides.values(), key=len, reverse=True)
    facts: dict = {
        "column": column,
        "by_rank": {str(rank): _describe(ctx, signature[rank]) for rank in signature},
    }
    undecidable = False
    if len(ordered[0]) > len(ordered[1]):
        majority = ordered[0]
        culprits = sorted(r for r in signature if r not in majority)
        reason = Reason.MINORITY_DIFFERS
        i = SIGNATURE.index(column)
        facts.update(
            majority_size=len(majority),
            theirs=ctx.view.label(column, signature[culprits[0]][i]),
            ours=ctx.view.label(column, signature[majority[0]][i]),
        )
    else:
        tied = sorted(signature)
        siblings = sibling_call(ctx, pg, seq)
        odd = [r for r in tied if siblings is not None and signature[r] != siblings.signature]
        changed = history_changed(ctx, pg, seq, rows)
        if odd and len(odd) < len(tied):
            culprits, reason = odd, Reason.SIBLINGS_DIFFER
            facts.update(siblings.facts(ctx))  # type: ignore[union-attr]
        elif changed and len(changed) < len(tied) and any(set(changed) == set(s) for s in ordered):
            culprits, reason = sorted(changed), Reason.HISTORY_CHANGED
            facts["decided_by"] = ctx.decided_by(tied)
        else:
            culprits, reason, undecidable = tied, Reason.EVEN_SPLIT, True
    return ctx.finding(
        kind,
        pg,
        collective_seq_id=seq,
        op=_majority_label(ctx, rows, "op"),
        culprit_ranks=culprits,
        waiting_ranks=sorted(signature),
        reason=reason,
        facts=facts,
        undecidable=undecidable,
    )


def _describe(ctx: Context, sig: tuple[int, ...]) -> str:
    op, isz, osz, idt, odt = (ctx.view.label(c, v) for c, v in zip(SIGNATURE, sig, strict=True))
    return f"{op} in {isz} {idt} out {osz} {odt}".replace("  ", " ")


def history_changed(ctx: Context, pg: int, seq: int, rows: Table) -> list[int]:
    """Ranks whose op at this call site differs from everything they issued there before.

    Only the columns the members disagree on are compared: a call site that issues a
    bucket's all_gather per bucket sees many sizes, but always the same op. Without stacks
    (JSON dumps) the call site is unknown and nothing is decided: that one side issued what
    the group saw before and the other something new is what one side's extra call shows too
    (helper_extra_2rank: rank 0 all_reduced its gradient once more, rank 1 went on to its
    metrics; from the op sequence rank 1 "changed").
    """
    torn = [c for c in SIGNATURE if len(distinct(rows[c])) > 1] or list(SIGNATURE)
    changed = []
    if bool((rows["stack_id"] < 0).any()):
        return []  # no call sites: see the docstring
    for i in range(len(rows)):
        rank = int(rows["rank"][i])
        mine = ctx.rank_ops(rank)
        earlier = (mine["pg"] == pg) & (mine["seq"] < seq)
        earlier &= mine["stack_id"] == rows["stack_id"][i]
        before = mine.take(earlier)
        if not len(before):
            return []
        seen = set(zip(*(before[c].tolist() for c in torn), strict=True))
        if tuple(int(rows[c][i]) for c in torn) not in seen:
            changed.append(rank)
    return changed


def _numel_findings(ctx: Context, coll: Table) -> list[Finding]:
    """all_gather / reduce_scatter whose numel does not fit the group size (which ops, per
    backend: frtrace.tables.records)."""
    sizes = np.array(
        [
            len(ctx.group_members(pg)) if ctx.reliable.get(ctx.name(pg)) else 0
            for pg in range(len(ctx.pg_names))
        ]
        or [0]
    )
    rule = coll["numel_rule"]
    single = coll["parts"] == 1
    size = sizes[coll["pg"]]
    inn, out = coll["input_numel"], coll["output_numel"]
    bad = (
        single
        & (size > 0)
        & (
            ((rule == GATHER_NUMEL) & (out != inn * size))
            | ((rule == SCATTER_NUMEL) & (inn != out * size))
        )
    )
    bad &= judged(coll, ctx)
    if not bad.any():
        return []
    findings = []
    for (pg, seq), rows in split(coll.take(bad), "pg", "seq"):
        everyone = coll.take((coll["pg"] == pg) & (coll["seq"] == seq))
        culprits = sorted(int(r) for r in rows["rank"])
        if len(culprits) == len(everyone):
            continue  # all agree: trust them over our idea of the group size
        findings.append(
            ctx.finding(
                Kind.SIZE_MISMATCH,
                pg,
                collective_seq_id=seq,
                op=_majority_label(ctx, rows, "op"),
                culprit_ranks=culprits,
                waiting_ranks=[int(r) for r in everyone["rank"]],
                reason=Reason.NUMEL,
                facts={
                    "column": "numel",
                    "group_size": int(sizes[pg]),
                    "input_numel": int(rows["input_numel"][0]),
                    "output_numel": int(rows["output_numel"][0]),
                },
            )
        )
        if len(findings) >= ctx.mismatch_cap:
            break
    return findings


def _state_findings(ctx: Context, coll: Table, stats: Table) -> list[Finding]:
    """Every member issued it; some never started it while the others run it."""
    expected = _expected_counts(ctx)[stats["pg"]]
    hit = stats.take((stats["n"] >= expected) & (stats["lo"] == 0) & (stats["hi"] == 1))
    if not len(hit):
        return []
    hit = hit.take(head_per(hit["pg"], ctx.mismatch_cap))
    findings = []
    for (pg, seq), rows in _present(coll, hit).items():
        stuck = sorted(int(r) for r in rows["rank"][rows["state"] == 0])
        running = sorted(int(r) for r in rows["rank"][rows["state"] == 1])
        op = _majority_label(ctx, rows, "op")
        findings.append(state_finding(ctx, pg, stuck, running, op, collective_seq_id=seq))
    return findings


def state_finding(
    ctx: Context,
    pg: int,
    stuck: list[int],
    running: list[int],
    op: str,
    *,
    collective_seq_id: int | None = None,
    p2p_seq_id: int | None = None,
    expected_ranks: list[int] | None = None,
) -> Finding:
    """Everyone issued it; `stuck` never started it while `running` run it."""
    return ctx.finding(
        Kind.STATE_MISMATCH,
        pg,
        collective_seq_id=collective_seq_id,
        p2p_seq_id=p2p_seq_id,
        op=op,
        culprit_ranks=stuck,
        waiting_ranks=running,
        expected_ranks=expected_ranks,
        reason=Reason.NOT_STARTED,
        facts={"scheduled": stuck, "started": running},
    )
