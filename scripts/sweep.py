#!/usr/bin/env python3
"""Sweep the generator's fault scenarios and check frtrace's verdict against the ground truth.

Every scenario (fault kinds, coalesced-block faults, healthy jobs: MoE, rooted collectives,
a straggler, a step-start straggler, an on-demand snapshot) runs on every layout, with timing
on and off, with ring buffers that wrapped (cutting coalesced blocks at different points per
rank) or not, written as pickle and as JSON. Prints one row per scenario and a summary; exits
1 on any miss (a healthy job that lists a straggler is one; so is a straggler not listed
first).

With `--wide`, each fault instead hits every sampled rank (every pipeline stage, both ends of
each group) at each of its group's first six ops of the second of two steps, on three
pipelined layouts, timing on and off: the shortest history, and the awkward places (the first
op of a step, a p2p op, a bucket's all_gather) that one fixed rank and op would never reach.

Scenarios named "format X" write the dumps as torch's writer of that older format did (pickle
only, as torch then wrote): from 2.0 on they must be analyzed as right as the current format;
before 2.0 every dump must be refused naming the version, healthy or not (exit 2, no verdict).

With `--engine dask` every case is also analyzed by the Dask engine on a local cluster of 2
worker processes: that report is the one judged, and its JSON must equal the local engine's
(a case whose reports differ is a miss).

Usage: python scripts/sweep.py [--quick] [--layouts 2] [--filter KIND] [--verbose]
                               [--engine dask] [--wide [--wide-format json]
                               [--wide-buffer STEPS]]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import random
import re
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import frtrace  # noqa: E402
from frtrace.analysis.analyze import analyze  # noqa: E402
from frtrace.api import to_json, to_text  # noqa: E402
from frtrace.dumps.discover import rank_from_name  # noqa: E402
from frtrace.errors import FrtraceError  # noqa: E402
from frtrace.synth import Fault, JobSpec, Layout, simulate, spec_for_entries, write_job  # noqa: E402
from frtrace.synth.layout import KIND_INDEX, GroupTable  # noqa: E402
from frtrace.synth.sim import entries_per_step  # noqa: E402
from frtrace.tables.load import load_trace  # noqa: E402
from frtrace.tables.parse import NoUsableDumpError  # noqa: E402

LAYOUTS = (
    Layout(tp=2, dp=2, pp=2),
    Layout(tp=4, dp=2, pp=1, ep=2),
    Layout(tp=2, dp=4, pp=4),
    Layout(tp=1, dp=8, pp=2),
    Layout(tp=8, dp=4, pp=2, ep=4),
    Layout(tp=4, dp=8, pp=4, ep=2),
)
MISMATCH = ("type_mismatch", "size_mismatch", "dtype_mismatch")


@dataclass(frozen=True)
class Scenario:
    """A named way to break (or not) a job; `fault` is built per layout."""

    name: str
    kind: str | None  # fault kind, None for healthy
    group: str = "tp"
    index: int = 0
    drop_part: bool = False
    mid_block: bool = False
    straggler: bool = False
    step_straggler: bool = False  # late at the first collective of every step
    snapshot: bool = False
    needs_timing: bool = False
    lost_host: bool = False  # missing_dump: the culprit's whole node (8 ranks) leaves no dump
    cut_other: bool = False  # a non-culprit's dump is cut in half (killed while writing it)
    second: str | None = None  # a second fault's kind, on a rank of another pipeline stage
    format_version: str | None = None  # an older format to write the dumps in (pickle only)

    @property
    def refused(self) -> bool:
        """Whether frtrace must refuse the dumps: formats before 2.0 (see docs/formats.md)."""
        return self.format_version is not None and int(self.format_version.split(".")[0]) < 2


SCENARIOS = (
    Scenario("healthy", None),
    Scenario("healthy straggler", None, straggler=True),
    Scenario("healthy step straggler", None, step_straggler=True),
    Scenario("healthy snapshot", None, snapshot=True, needs_timing=True),
    Scenario("missing_ranks tp", "missing_ranks"),
    Scenario("missing_ranks dp", "missing_ranks", group="dp"),
    Scenario("missing_ranks pp (first p2p op of a step)", "missing_ranks", group="pp"),
    Scenario("missing_ranks pp (second p2p op)", "missing_ranks", group="pp", index=1),
    Scenario("missing_dump", "missing_dump"),
    Scenario("lost host (8 ranks, no dumps)", "missing_dump", group="dp", lost_host=True),
    Scenario("size_mismatch beside an unreadable dump", "size_mismatch", cut_other=True),
    Scenario("missing_ranks beside an unreadable dump", "missing_ranks", cut_other=True),
    Scenario("healthy with an unreadable dump", None, cut_other=True),
    Scenario("two faults: missing_ranks + size_mismatch", "missing_ranks", second="size_mismatch"),
    Scenario("two faults: missing_dump + dtype_mismatch", "missing_dump", second="dtype_mismatch"),
    Scenario("type_mismatch", "type_mismatch"),
    Scenario("size_mismatch", "size_mismatch"),
    Scenario("dtype_mismatch", "dtype_mismatch"),
    Scenario("size_mismatch coalesced part", "size_mismatch", group="dp", index=1),
    # The default group's sixth op of a step is a scatter (rooted extras), rooted at rank
    # seq % world (12 % world in step 1): the culprit (world // 2 + 1) is never the root here.
    Scenario("size_mismatch rooted scatter (non-root)", "size_mismatch", group="default", index=5),
    Scenario("coalesced part count", "type_mismatch", group="dp", index=1, drop_part=True),
    Scenario(
        "stalled inside a coalesced block", "missing_ranks", group="dp", index=1, mid_block=True
    ),
    Scenario("state_mismatch", "state_mismatch", needs_timing=True),
    Scenario("stuck in coalesced block", "state_mismatch", group="dp", needs_timing=True),
    Scenario("p2p_mismatch (sender)", "p2p_mismatch", group="pp"),
    Scenario("order_cycle", "order_cycle"),
    Scenario("stuck_collective", "stuck_collective"),
    Scenario("healthy format 2.0", None, format_version="2.0"),
    Scenario("type_mismatch format 2.0", "type_mismatch", format_version="2.0"),
    Scenario("missing_ranks pp format 2.2", "missing_ranks", group="pp", format_version="2.2"),
    Scenario("healthy format 1.5, refused", None, format_version="1.5"),
    Scenario("type_mismatch format 1.4, refused", "type_mismatch", format_version="1.4"),
)


# --wide: every sampled rank x op index, on layouts where groups of two meet a pipeline.
WIDE_LAYOUTS = (Layout(tp=2, dp=2, pp=4), Layout(tp=1, dp=2, pp=4), Layout(tp=4, dp=2, pp=2))
WIDE_INDEXES = range(6)
WIDE = (
    *(Scenario(f"missing_ranks {g}", "missing_ranks", group=g) for g in ("tp", "dp", "pp")),
    Scenario("missing_ranks default", "missing_ranks", group="default"),
    Scenario("stalled inside a coalesced block", "missing_ranks", group="dp", mid_block=True),
    Scenario("missing_dump tp", "missing_dump"),
    *(Scenario(f"{k} {g}", k, group=g) for k in MISMATCH for g in ("tp", "dp")),
    Scenario("coalesced part count", "type_mismatch", group="dp", drop_part=True),
    *(Scenario(f"state_mismatch {g}", "state_mismatch", group=g) for g in ("tp", "dp", "pp")),
    Scenario("p2p_mismatch (sender)", "p2p_mismatch", group="pp"),
    *(Scenario(f"order_cycle {g}", "order_cycle", group=g) for g in ("tp", "dp")),
    *(Scenario(f"stuck_collective {g}", "stuck_collective", group=g) for g in ("tp", "dp")),
)


def wide_ranks(layout: Layout) -> range:
    return range(0, layout.world, max(1, layout.world // 6))


def _group_ok(layout: Layout, group: str) -> bool:
    return layout.has(group) and layout.size_of(group) >= 2


def fault_for(sc: Scenario, layout: Layout) -> Fault | None:
    if sc.kind is None:
        return None
    group = sc.group
    if not _group_ok(layout, group):
        group = next(g for g in ("tp", "dp", "pp") if _group_ok(layout, g))
        if sc.kind == "p2p_mismatch" or sc.drop_part or sc.mid_block or sc.index:
            return None
    rank = layout.world // 2 + 1 if layout.world > 2 else 1
    rank = min(rank, layout.world - 1)
    if sc.kind == "p2p_mismatch":
        if not _group_ok(layout, "pp"):
            return None
        rank = 1 % layout.world  # stage 0 sends first
    return fault_at(sc, rank, sc.index, group)


def fault_at(sc: Scenario, rank: int, index: int, group: str | None = None) -> Fault | None:
    """The scenario's fault on `rank` at its group's op `index` of step 1 (--wide moves it)."""
    if sc.kind is None:
        return None
    return Fault(
        sc.kind,
        rank,
        group=group or sc.group,
        step=1,
        index=index,
        drop_part=sc.drop_part,
        mid_block=sc.mid_block,
    )


@dataclass
class Outcome:
    ok: bool
    why: str
    mismatch_elsewhere: int
    findings: int
    culprit: bool = False
    group: bool = False
    seq: bool = False
    other_causes: int = 0
    late_ok: bool = True  # the stragglers listed are the ones expected
    late_extra: int = 0  # ranks listed besides the expected straggler


def judge(expected: dict[str, Any] | None, members: list[int], report: Any) -> Outcome:
    """Compare the analysis with the ground truth the generator recorded."""
    findings = report.findings
    mism_kinds = {*MISMATCH, "p2p_mismatch"}
    if expected is None:
        n = len(findings)
        seen_whole = report.unseen is None
        if n or not (report.ok or report.undetermined):
            why = f"{n} finding(s) on a healthy job"
        elif not seen_whole and not report.undetermined:
            why = "called healthy while not seen whole"
        else:
            why = ""
        return Outcome(not why, why, 0, n, True, True, True)
    root = report.root_cause
    elsewhere = sum(
        1
        for f in findings
        if f.kind in mism_kinds
        and not (f.kind == expected["kind"] and f.pg_name == expected["pg_name"])
    )
    if root is None:
        return Outcome(False, "no root cause (reported healthy)", elsewhere, 0)
    # One fault, one cause: every other finding must be its consequence.
    others = sum(1 for f in findings if f is not root and not f.secondary)
    got = (root.kind, root.pg_name, sorted(root.culprit_ranks))
    want_culprits = sorted(expected["culprit_ranks"])
    seq_key = "p2p_seq_id" if expected.get("p2p_seq_id") is not None else "collective_seq_id"
    problems = []
    if root.kind != expected["kind"]:
        problems.append(f"kind {root.kind} != {expected['kind']}")
    within = expected.get("culprits_within")  # a lost host: any of its awaited ranks
    if within is None and root.pg_name != expected["pg_name"]:
        problems.append(f"group {root.pg_name} != {expected['pg_name']}")
    if within is not None:
        if not root.culprit_ranks or not set(root.culprit_ranks) <= set(within):
            problems.append(f"culprits {got[2][:8]} not within the host {within[:8]}")
        want_culprits = sorted(root.culprit_ranks)
    elif sorted(root.culprit_ranks) != want_culprits:
        problems.append(f"culprits {got[2][:8]} != {want_culprits[:8]}")
    cut = expected.get("unreadable", [])
    if any(r in f.culprit_ranks for f in findings if not f.secondary for r in cut):
        problems.append(f"unreadable rank {cut} named a cause")
    if expected["kind"] != "missing_dump" and getattr(root, seq_key) != expected[seq_key]:
        problems.append(f"{seq_key} {getattr(root, seq_key)} != {expected[seq_key]}")
    # A p2p seq counts the rank's sends and receives together: the op says which one it
    # never posted (a p2p_mismatch names both sides, 'send/recv').
    p2p_op = seq_key == "p2p_seq_id" and root.kind == "missing_ranks" and root.op != expected["op"]
    if p2p_op:
        problems.append(f"op {root.op} != {expected['op']}")
    if elsewhere:
        problems.append(f"{elsewhere} mismatch finding(s) elsewhere")
    if others:
        problems.append(f"{others} other cause(s) besides the root cause")
    return Outcome(
        not problems,
        "; ".join(problems),
        elsewhere,
        len(findings),
        other_causes=others,
        culprit=root.kind == expected["kind"] and sorted(root.culprit_ranks) == want_culprits,
        group=within is not None or root.pg_name == expected["pg_name"],
        seq=expected["kind"] == "missing_dump"
        or (getattr(root, seq_key) == expected[seq_key] and not p2p_op),
    )


def judge_several(truths: list[dict[str, Any]], report: Any) -> Outcome:
    """Several faults at once: the root cause is one of them, and each other one is found as
    an independent cause (kind and culprits: where a stopped rank is awaited depends on what
    the other fault held up), none else."""
    root = report.root_cause
    causes = [f for f in report.findings if not f.secondary]

    def found(t: dict[str, Any], f: Any) -> bool:
        return (f.kind, sorted(f.culprit_ranks)) == (t["kind"], sorted(t["culprit_ranks"]))

    problems = []
    if root is None or not any(found(t, root) for t in truths):
        problems.append("the root cause is none of the faults")
    # A fault its rank never got to (another one held it up first) shows as a consequence;
    # a missing dump nobody waits for is no cause, only named among what is not seen.
    unseen = report.unseen.no_file if report.unseen is not None else []
    as_cause = [t for t in truths if any(found(t, f) for f in causes)]
    missed = [
        t["kind"]
        for t in truths
        if t.get("reached", True)
        and t not in as_cause
        and not (t["kind"] == "missing_dump" and set(t["culprit_ranks"]) <= set(unseen))
    ]
    if missed:
        problems.append(f"not found as a cause: {', '.join(missed)}")
    extra = len(causes) - len(as_cause)
    if extra > 0:
        problems.append(f"{extra} other cause(s)")
    ok = not problems
    return Outcome(ok, "; ".join(problems), 0, len(report.findings), ok, ok, ok, max(extra, 0))


def judge_refusal(folder: Path, version: str) -> Outcome:
    """A format frtrace cannot read right: every dump refused naming its version, no verdict."""
    try:
        load_trace(folder, jobs=1)
    except NoUsableDumpError as exc:
        want = f"format version {version} is not supported"
        other = [s.reason for s in exc.skipped if not s.reason.startswith(want)]
        ok = not other
        why = f"skipped for another reason: {other[0]}" if other else ""
        return Outcome(ok, why, 0, 0, ok, ok, ok)
    return Outcome(False, f"format {version} was read (it must be refused)", 0, 0)


def judge_late(outcome: Outcome, sc: Scenario, layout: Layout, report: Any) -> Outcome:
    """The stragglers listed: the generated straggler first (a step straggler at the first
    collective of its step, where a step was found), none on a job without one. A healthy
    job that lists one is a miss; ranks listed besides the straggler are counted."""
    top = report.stragglers.top if report.stragglers is not None else []
    ranks = [s.rank for s in top]
    if sc.straggler or sc.step_straggler:
        want = layout.world - 1
        outcome.late_extra = len([r for r in ranks if r != want])
        problems = []
        if not ranks or ranks[0] != want:
            problems.append(f"straggler {want} not listed first (listed {ranks})")
        elif sc.step_straggler:
            first = top[0]
            placed = first.where is not None and first.where.step_index is not None
            if placed and (first.first_of_step_share or 0) < 0.5:
                problems.append(f"straggler {want} not at the first collective: {first.where}")
    else:
        outcome.late_extra = len(ranks)
        problems = [f"stragglers {ranks} listed"] if ranks and sc.kind is None else []
    if problems:
        outcome.late_ok = False
        outcome.ok = False
        outcome.why = "; ".join(w for w in (outcome.why, *problems) if w)
    return outcome


def adjust(expected: dict[str, Any] | None, sc: Scenario, timing: bool, job: Any) -> Any:
    """What the evidence allows when timing is off: a GPU that never started a collective
    looks like every member waiting inside it (no start events), so nobody can be singled out."""
    if expected is None or timing or expected["kind"] != "state_mismatch":
        return expected
    members = job.groups[expected["pg_name"]][1]
    seq = expected["p2p_seq_id"]
    if seq is None:
        return {**expected, "kind": "stuck_collective", "culprit_ranks": members}
    # A send or recv: its two ends are the ones inside it. The culprit's dump names them
    # ('nccl:recv 1<-0', group ranks); each end counts its own p2p seq, so either may name it.
    (rank,) = expected["culprit_ranks"]
    entry = next(
        e
        for e in job.dumps[rank]["entries"]
        if e["is_p2p"] and e["process_group"][0] == expected["pg_name"] and e["p2p_seq_id"] == seq
    )
    ends = sorted({members[int(g)] for g in re.findall(r"\d+", entry["profiling_name"])})
    return {**expected, "kind": "stuck_collective", "culprit_ranks": ends, "p2p_seq_id": None}


def run_case(
    sc: Scenario,
    layout: Layout,
    timing: bool,
    wrapped: bool,
    fmt: str,
    tmp: Path,
    client: Any = None,
    at: tuple[int, int] | None = None,
    buffer_steps: float | None = None,
    reports: Path | None = None,
) -> tuple[Outcome | None, float]:
    """One case; `at` (--wide): the fault's (rank, op index) in a two-step job (None when that
    rank has no such op); `buffer_steps`: its ring buffer holds that many of the shortest
    stage's steps."""
    try:
        fault = fault_for(sc, layout) if at is None else fault_at(sc, *at)
    except ValueError:
        return None, 0.0
    if sc.kind is not None and fault is None:
        return None, 0.0
    also: tuple[Fault, ...] = ()
    if sc.second is not None and fault is not None:
        if layout.pp < 2 or at is not None:
            return None, 0.0
        other = (fault.rank + layout.world // layout.pp) % layout.world
        also = (Fault(sc.second, other, group=fault.group, step=1, index=0),)
    if sc.needs_timing and not timing and sc.kind is None:
        return None, 0.0
    if sc.format_version is not None and (fmt != "pickle" or at is not None):
        return None, 0.0
    common: dict[str, Any] = {
        "also": also,
        "enable_timing": timing,
        "batch_p2p": True,
        "extras": True,
        # A stable seed (str hashes differ per process): a miss is the same on every run.
        "seed": zlib.crc32(repr((sc.name, layout.world, timing, wrapped, fmt, at)).encode())
        & 0xFFFF,
    }
    if sc.straggler:
        common["straggler"] = (layout.world - 1, 3_000_000)
    if sc.step_straggler:
        common["step_straggler"] = (layout.world - 1, 20_000_000, 60_000_000)
    if sc.snapshot:
        common["snapshot"] = 0.6
    if at is not None and buffer_steps is not None:
        per_step = min(entries_per_step(layout, batch_p2p=True, extras=True))
        size = max(1, int(per_step * buffer_steps))
        spec = JobSpec(layout, steps=2, fault=fault, buffer_size=size, **common)
    elif at is not None:
        spec = JobSpec(layout, steps=2, fault=fault, **common)
    elif wrapped:
        spec = spec_for_entries(layout, 97, fault=fault, **common)
    else:
        spec = JobSpec(layout, steps=3, fault=fault, **common)
    t0 = time.perf_counter()
    try:
        job = simulate(spec)
    except ValueError:  # --wide: the rank has no such op (or none of the fault's kind)
        if at is None:
            raise
        return None, 0.0
    expected = adjust(job.expected, sc, timing, job)
    if sc.lost_host:
        if layout.world < 16 or fault is None:
            return None, 0.0
        host = [r for r in range(layout.world) if r // 8 == fault.rank // 8]
        job.omit_ranks |= set(host)
        expected = {**expected, "culprit_ranks": host, "culprits_within": host}
    out = tmp / case_key(sc, layout, timing, wrapped, fmt, at)  # one per case
    paths = write_job(job, out, fmt=fmt, format_version=sc.format_version)
    if sc.refused:
        assert sc.format_version is not None
        return judge_refusal(out, sc.format_version), time.perf_counter() - t0
    if sc.cut_other:
        culprits = set(expected["culprit_ranks"]) if expected else set()
        victim = next(p for p in paths if rank_from_name(p.name) not in culprits)
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
        if expected is not None:
            expected = {**expected, "unreadable": [rank_from_name(victim.name)]}
    trace = load_trace(out, jobs=1)
    try:
        report = analyze(trace)
    except FrtraceError as exc:  # refusing a generated job is a miss, not the sweep's end
        return Outcome(False, f"refused: {exc}", 0, 0), time.perf_counter() - t0
    if reports is not None:  # --reports: every case's report, to compare two versions
        key = case_key(sc, layout, timing, wrapped, fmt, at)
        job_dir = str(out)  # a temporary folder: named alike in every run
        text = to_text(report, width=100, verbose=True).replace(job_dir, "<job>")
        (reports / f"{key}.txt").write_text(text)
        (reports / f"{key}.json").write_text(to_json(report).replace(job_dir, "<job>"))
    if job.also_expected:
        return judge_several([expected, *job.also_expected], report), time.perf_counter() - t0
    members = job.groups[expected["pg_name"]][1] if expected else []
    if client is None:
        return judge_late(judge(expected, members, report), sc, layout, report), (
            time.perf_counter() - t0
        )
    with contextlib.closing(frtrace.load(str(out), engine="dask", client=client)) as on_cluster:
        remote = analyze(on_cluster)
        same = to_json(remote) == to_json(report)
    outcome = judge_late(judge(expected, members, remote), sc, layout, remote)
    if not same:
        outcome.ok = False
        outcome.why = "; ".join(w for w in (outcome.why, "Dask report differs from local") if w)
    return outcome, time.perf_counter() - t0


def case_key(sc: Scenario, layout: Layout, timing: bool, wrapped: bool, fmt: str, at: Any) -> str:
    """A file name that names one case the same on every run."""
    where = "" if at is None else f"-r{at[0]}op{at[1]}"
    name = re.sub(r"[^A-Za-z0-9]+", "_", sc.name).strip("_")
    shape = f"tp{layout.tp}dp{layout.dp}pp{layout.pp}ep{layout.ep}"
    return f"{name}-{shape}-t{int(timing)}-w{int(wrapped)}-{fmt}{where}"


# --thin: the second pass at thin evidence (issue 38). Each case is one simulated job, written
# as pickle and as JSON; both are judged against the truth, and the JSON one must never be
# more confident. Scenarios were built on the "tune" part (its layouts and seeds) and are
# judged at the end on the "held-out" part (other layouts, other seeds).
THIN_PARTS: dict[str, dict[str, Any]] = {
    "tune": {
        "pipelines": (Layout(tp=2, dp=2, pp=2), Layout(tp=4, dp=2, pp=2), Layout(tp=2, dp=2, pp=4)),
        "meshes": (Layout(tp=2, dp=2, pp=1), Layout(tp=4, dp=2, pp=1)),
        "hosts": (Layout(tp=8, dp=8, pp=2), Layout(tp=4, dp=4, pp=2)),
        "seeds": range(0, 4),
    },
    "held-out": {
        "pipelines": (Layout(tp=2, dp=4, pp=2), Layout(tp=4, dp=4, pp=2), Layout(tp=2, dp=2, pp=3)),
        "meshes": (Layout(tp=2, dp=4, pp=1), Layout(tp=8, dp=2, pp=1), Layout(tp=4, dp=4, pp=1)),
        "hosts": (Layout(tp=8, dp=4, pp=2), Layout(tp=4, dp=8, pp=2)),
        "seeds": range(1000, 1004),
    },
}
# gloo: no coalescing blocks, and calls that return when done (a CPU never runs ahead).
GLOO: dict[str, Any] = {
    "coalesce_dp": False,
    "extras": False,
    "batch_p2p": False,
    "enable_timing": False,
    "window": 1,
}


@dataclass
class ThinCase:
    """One job of a thin scenario: how to write it, and what each format must say."""

    job: Any
    backend: str
    truths: list[dict[str, Any]]  # one per fault; none: healthy
    straggler: int | None = None  # the only rank that may be listed (healthy, slow)
    json_may_tie: bool = False  # from JSON, an undecidable split naming the truth is right


def _two_member_kinds(layout: Layout) -> list[str]:
    return [k for k in ("tp", "dp") if layout.has(k) and layout.size_of(k) == 2]


def thin_dead_peer(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """A rank issues a changed call in a group of two and its peer dies (gloo aborts the rank
    that receives too much): no dump from it. The sibling groups tell who changed."""
    rng = random.Random(seed)
    kinds = [k for k in _two_member_kinds(layout) if layout.world // layout.size_of(k) > 1]
    if not kinds:
        return None
    group = rng.choice(kinds)
    rank = rng.randrange(layout.world)
    index = rng.randrange(4 if group == "dp" else 2)
    spec = JobSpec(layout, steps=3, seed=seed, **(GLOO if backend == "gloo" else {}))
    fault = Fault("size_mismatch", rank, group=group, step=1, index=index)
    job = simulate(dataclasses.replace(spec, fault=fault))
    assert job.expected is not None
    peer = next(m for m in job.groups[job.expected["pg_name"]][1] if m != rank)
    job.omit_ranks.add(peer)
    return ThinCase(job, backend, [{**job.expected, "culprit_ranks": [rank]}])


def thin_pair_changed(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """A rank changes a call (op, size or dtype) in a group of two, both members alive: its
    call sites (pickle) or the sibling groups tell; from JSON without siblings, both sides
    are named, never the other one alone."""
    rng = random.Random(seed)
    kinds = _two_member_kinds(layout)
    if not kinds:
        return None
    group = rng.choice(kinds)
    rank = rng.randrange(layout.world)
    kind = rng.choice(MISMATCH)
    index = rng.randrange(4 if group == "dp" else 2)
    spec = JobSpec(layout, steps=3, seed=seed, **(GLOO if backend == "gloo" else {}))
    fault = Fault(kind, rank, group=group, step=rng.choice((1, 2)), index=index)
    job = simulate(dataclasses.replace(spec, fault=fault))
    assert job.expected is not None
    return ThinCase(job, backend, [job.expected], json_may_tie=True)


def thin_lost_host(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """A node (8 ranks) leaves no dump after one of its ranks stopped before a data-parallel
    collective, while a rank of another replica issued a wrong size: two causes."""
    if backend != "nccl" or layout.world < 16 or not layout.has("tp"):
        return None
    rng = random.Random(seed)
    stride = layout.tp * layout.dp
    node = rng.randrange(stride // 8) if stride >= 8 else 0
    host = list(range(node * 8, node * 8 + 8))
    replicas = {layout.coords(r)[1] for r in host}
    others = [r for r in range(stride) if layout.coords(r)[1] not in replicas]
    if not others:
        return None
    odd = rng.choice(others)
    index = rng.randrange(2 * 2 * 2)  # a tp all_reduce of the step's passes
    spec = JobSpec(
        layout,
        steps=3,
        seed=seed,
        fault=Fault("missing_dump", host[0], group="dp"),
        also=(Fault("size_mismatch", odd, group="tp", index=index),),
        batch_p2p=True,
        extras=True,
        enable_timing=bool(seed % 2),
    )
    job = simulate(spec)
    assert job.expected is not None
    job.omit_ranks |= set(host)
    lost = {**job.expected, "culprits_within": host}
    return ThinCase(job, backend, [lost, *job.also_expected])


def thin_apart(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """Two ranks of two groups of one kind stop before the same collective, in a mesh without
    a pipeline: two causes (gloo: no send/recv could have linked them). Groups of three or
    more, where the members that issued it outnumber the one that did not."""
    rng = random.Random(seed)
    kinds = [k for k in ("tp", "dp") if layout.has(k) and layout.size_of(k) >= 3]
    if layout.pp > 1 or not kinds:
        return None
    group = rng.choice(kinds)
    table = GroupTable(layout)
    kind = KIND_INDEX[group]
    first = rng.randrange(layout.world)
    apart = [r for r in range(layout.world) if table.gid(r, kind) != table.gid(first, kind)]
    if not apart:
        return None
    index = rng.randrange(2)
    spec = JobSpec(
        layout,
        steps=3,
        seed=seed,
        fault=Fault("missing_ranks", first, group=group, index=index),
        also=(Fault("missing_ranks", rng.choice(apart), group=group, index=index),),
        **(GLOO if backend == "gloo" else {}),
    )
    job = simulate(spec)
    assert job.expected is not None
    return ThinCase(job, backend, [job.expected, *job.also_expected])


def thin_one_stall(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """gloo: a first-stage rank stops before its step's first pipeline send; the next stages
    wait for it in recvs gloo never records, and its replica stops at every stage: one stall,
    naming the rank among others of its replica (which one first, the dumps cannot tell)."""
    if backend != "gloo" or layout.pp < 2 or not layout.has("dp"):
        return None
    rng = random.Random(seed)
    rank = rng.randrange(layout.tp * layout.dp)  # stage 0
    fault = Fault("missing_ranks", rank, group="pp", step=1, index=0)
    job = simulate(JobSpec(layout, steps=3, seed=seed, fault=fault, **GLOO))
    # Its whole replica stalls, at every stage: any of those ranks may be named with it.
    replica = [r for r in range(layout.world) if layout.coords(r)[1] == layout.coords(rank)[1]]
    truth = {"kind": "missing_ranks", "culprits_among": replica, "must_name": [rank]}
    return ThinCase(job, backend, [truth])


def thin_bubbles(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """A healthy pipeline, timing off, layers that take ms (bubbles) and CPU jitter in ms:
    no finding, no straggler."""
    if backend != "nccl" or layout.pp < 2:
        return None
    rng = random.Random(seed)
    spec = JobSpec(
        layout,
        steps=rng.choice((3, 4, 6)),
        seed=seed,
        microbatches=rng.choice((2, 4, 8)),
        window=rng.choice((2, 3)),
        gpu_scale=rng.choice((5, 10, 20)),
        jitter_ns=rng.choice((1, 3, 6)) * 1_000_000,
        enable_timing=False,
        batch_p2p=True,
        extras=True,
    )
    return ThinCase(simulate(spec), backend, [])


def thin_bubbles_straggler(layout: Layout, seed: int, backend: str) -> ThinCase | None:
    """The same with one rank's data 30-60 ms late every step: no other rank is listed (from
    enqueue times it may be missed where its CPU ran so far ahead that the delay was
    absorbed; counted apart, as found)."""
    if backend != "nccl" or layout.pp < 2:
        return None
    rng = random.Random(seed)
    late = rng.randrange(layout.world)
    spec = JobSpec(
        layout,
        steps=4,
        seed=seed,
        microbatches=rng.choice((2, 4)),
        gpu_scale=rng.choice((5, 10)),
        jitter_ns=rng.choice((1, 3)) * 1_000_000,
        enable_timing=False,
        batch_p2p=True,
        extras=True,
        step_straggler=(late, 30_000_000, 60_000_000),
    )
    return ThinCase(simulate(spec), backend, [], straggler=late)


THIN = (
    ("changed call in a group of two", "pipelines", thin_pair_changed),
    ("changed call in a group of two (mesh)", "meshes", thin_pair_changed),
    ("dead peer beside a changed call", "pipelines", thin_dead_peer),
    ("dead peer beside a changed call (mesh)", "meshes", thin_dead_peer),
    ("lost host beside a size mismatch", "hosts", thin_lost_host),
    ("stalls apart, no pipeline", "meshes", thin_apart),
    ("one stall through an unrecorded pipeline", "pipelines", thin_one_stall),
    ("healthy pipeline: bubbles, jitter", "pipelines", thin_bubbles),
    ("straggler in a pipeline with bubbles", "pipelines", thin_bubbles_straggler),
)


@dataclass
class Refused:
    """A job the analysis refused: its reason stands in for a report."""

    why: str
    findings: tuple = ()
    root_cause: None = None
    stragglers: None = None


def judge_thin(case: ThinCase, report: Any, fmt: str = "pickle") -> list[str]:
    """What a report gets wrong against the case's truth (empty: right). A false finding is a
    cause no fault explains, or a straggler listed on a healthy job without one."""
    if isinstance(report, Refused):
        return [f"refused: {report.why}"]
    causes = [f for f in report.findings if not f.secondary]
    top = [s.rank for s in report.stragglers.top] if report.stragglers is not None else []
    problems = []
    if not case.truths:
        if report.findings:
            problems.append(f"{len(report.findings)} finding(s) on a healthy job")
        if case.straggler is None and top:
            problems.append(f"stragglers {top} listed")
        if case.straggler is not None and set(top) - {case.straggler}:
            problems.append(f"stragglers {top} listed besides {case.straggler}")
        return problems

    def found(t: dict[str, Any], f: Any) -> bool:
        if f.kind != t["kind"]:
            return False
        if "culprits_among" in t:
            return set(t["must_name"]) <= set(f.culprit_ranks) <= set(t["culprits_among"])
        if "culprits_within" in t:
            return bool(f.culprit_ranks) and set(f.culprit_ranks) <= set(t["culprits_within"])
        exact = sorted(f.culprit_ranks) == sorted(t["culprit_ranks"])
        if case.json_may_tie and fmt == "json" and f.undecidable:
            exact = set(t["culprit_ranks"]) < set(f.culprit_ranks)
        return exact and (f.pg_name, f.collective_seq_id) == (
            t["pg_name"],
            t["collective_seq_id"],
        )

    truths = [t for t in case.truths if t.get("reached", True)]
    missed = [t["kind"] for t in truths if not any(found(t, f) for f in causes)]
    extra = [f for f in causes if not any(found(t, f) for t in truths)]
    if report.root_cause is None:
        problems.append("no root cause")
    if missed:
        problems.append(f"not found as a cause: {', '.join(missed)}")
    if extra:
        problems.append(
            f"{len(extra)} other cause(s): {[(f.kind, f.culprit_ranks[:6]) for f in extra]}"
        )
    return problems


def more_confident(json_report: Any, pickle_report: Any) -> str:
    """Why the JSON root cause says more than the pickle one (empty: it does not)."""
    a, b = pickle_report.root_cause, json_report.root_cause
    if a is None or b is None:
        return "" if a is None and b is None else "one format has no root cause"
    if (b.kind, b.pg_name, b.collective_seq_id) != (a.kind, a.pg_name, a.collective_seq_id):
        json_at, pickle_at = (f"{f.kind} {f.pg_name}#{f.collective_seq_id}" for f in (b, a))
        return f"JSON root {json_at}, pickle {pickle_at}"
    if not set(a.culprit_ranks) <= set(b.culprit_ranks):
        return f"JSON names {b.culprit_ranks}, the pickles {a.culprit_ranks}"
    if (a.undecidable or b.culprit_ranks != a.culprit_ranks) and not b.undecidable:
        return "JSON decided what the pickles could not"
    return ""


def run_thin(part: str, tmp: Path, verbose: bool) -> int:
    """The --thin sweep on one part; prints a row per scenario and returns 1 on any miss."""
    setup = THIN_PARTS[part]
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # runs, pickle, json, mono
    misses: list[str] = []
    shown = 0
    found = {"runs": 0, "pickle": 0, "json": 0}  # stragglers listed first
    for name, family, build in THIN:
        for layout, seed, backend in itertools.product(
            setup[family], setup["seeds"], ("gloo", "nccl")
        ):
            try:
                case = build(layout, seed, backend)
            except ValueError:
                case = None  # the layout has no such op or group for this seed's pick
            if case is None:
                continue
            reports: dict[str, Any] = {}
            for fmt in ("pickle", "json"):
                shape = f"tp{layout.tp}dp{layout.dp}pp{layout.pp}"
                out = tmp / f"{re.sub(r'[^A-Za-z0-9]+', '_', name)}-{shape}-{seed}-{backend}-{fmt}"
                write_job(case.job, out, fmt=fmt, backend=case.backend)
                try:
                    reports[fmt] = analyze(load_trace(out, jobs=1))
                except FrtraceError as exc:  # refusing a generated job is a miss
                    reports[fmt] = Refused(str(exc))
            row = rows[name]
            row[0] += 1
            where = f"{name} | tp{layout.tp} dp{layout.dp} pp{layout.pp} seed {seed} {backend}"
            for k, fmt in ((1, "pickle"), (2, "json")):
                wrong = judge_thin(case, reports[fmt], fmt)
                row[k] += not wrong
                if wrong:
                    misses.append(f"{where} {fmt}: {'; '.join(wrong)}")
            if case.straggler is not None:
                for fmt in ("pickle", "json"):
                    top = reports[fmt].stragglers.top if reports[fmt].stragglers else []
                    found[fmt] += [s.rank for s in top[:1]] == [case.straggler]
                found["runs"] += 1
            worse = more_confident(reports["json"], reports["pickle"])
            row[3] += not worse
            if worse:
                misses.append(f"{where}: {worse}")
            if verbose:
                for miss in misses[shown:]:
                    print("MISS", miss, file=sys.stderr, flush=True)
            shown = len(misses)
    title = f"scenario ({part})"
    print(f"{title:<46}{'runs':>6}{'pickle':>8}{'json':>6}{'json never more sure':>22}")
    for name, row in rows.items():
        print(f"{name:<46}{row[0]:>6}{row[1]:>8}{row[2]:>6}{row[3]:>22}")
    total = [sum(r[i] for r in rows.values()) for i in range(4)]
    print(f"{'total':<46}{total[0]:>6}{total[1]:>8}{total[2]:>6}{total[3]:>22}")
    print(
        f"the slow rank listed first in {found['pickle']} (pickle) and {found['json']} (JSON) of "
        f"{found['runs']} jobs with one (enqueue times may miss it where its CPU ran far ahead)"
    )
    for miss in misses[:40]:
        print("MISS", miss)
    return 0 if not misses else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 layouts, pickle only")
    parser.add_argument("--layouts", type=int, default=len(LAYOUTS))
    parser.add_argument("--filter", default="", help="only scenarios whose name contains this")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every miss")
    parser.add_argument(
        "--engine", choices=("local", "dask"), default="local", help="dask: judge its reports"
    )
    parser.add_argument(
        "--wide", action="store_true", help="every sampled rank x op index, two-step jobs"
    )
    parser.add_argument(
        "--wide-format",
        choices=("pickle", "json"),
        default="pickle",
        help="--wide: the dumps' format (JSON has no stacks: ops stand in for call sites)",
    )
    parser.add_argument(
        "--wide-buffer",
        type=float,
        metavar="STEPS",
        help="--wide: ring buffers of STEPS times the shortest stage's step (they wrap; "
        "a middle pipeline stage, with more calls per step, keeps less)",
    )
    parser.add_argument(
        "--thin",
        choices=tuple(THIN_PARTS),
        help="the thin-evidence scenarios of issue 38 on one part: tune or held-out",
    )
    parser.add_argument(
        "--reports",
        type=Path,
        metavar="DIR",
        help="also write every case's text and JSON report into DIR (to diff two versions)",
    )
    args = parser.parse_args(argv)
    if args.reports is not None:
        args.reports.mkdir(parents=True, exist_ok=True)
    if args.thin is not None:
        with tempfile.TemporaryDirectory(prefix="frtrace-sweep-") as tmp:
            return run_thin(args.thin, Path(tmp), args.verbose)
    layouts = LAYOUTS[: 2 if args.quick else args.layouts]
    fmts = ("pickle",) if args.quick else ("pickle", "json")
    cases: Iterator[tuple[Scenario, Layout, bool, bool, str, tuple[int, int] | None]]
    if args.wide:
        cases = (
            (sc, layout, timing, False, args.wide_format, (rank, index))
            for sc in WIDE
            if args.filter in sc.name
            for layout in WIDE_LAYOUTS[: args.layouts]
            for rank in wide_ranks(layout)
            for index in WIDE_INDEXES
            for timing in (True, False)
        )
    else:
        cases = (
            (sc, layout, timing, wrapped, fmt, None)
            for sc in SCENARIOS
            if args.filter in sc.name
            for layout, timing, wrapped, fmt in itertools.product(
                layouts, (True, False), (True, False), fmts
            )
        )
    # runs, culprit+kind, group, seq, all right, findings on healthy jobs, mismatches elsewhere,
    # other causes, stragglers as expected, ranks listed as stragglers besides the expected one
    rows: dict[str, list[int]] = defaultdict(lambda: [0] * 10)
    misses: list[str] = []
    total_t = 0.0
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="frtrace-sweep-"))
        client = None
        if args.engine == "dask":
            from frtrace.cluster.dask import connect

            client = stack.enter_context(connect(None, 2))
        for sc, layout, timing, wrapped, fmt, at in cases:
            outcome, secs = run_case(
                sc,
                layout,
                timing,
                wrapped,
                fmt,
                Path(tmp),
                client,
                at,
                args.wide_buffer,
                args.reports,
            )
            total_t += secs
            if outcome is None:
                continue
            row = rows[sc.name]
            row[0] += 1
            row[1] += outcome.culprit
            row[2] += outcome.group
            row[3] += outcome.seq
            row[4] += outcome.ok
            row[5] += outcome.findings if sc.kind is None else 0
            row[6] += outcome.mismatch_elsewhere
            row[7] += outcome.other_causes
            row[8] += outcome.late_ok
            row[9] += outcome.late_extra
            if not outcome.ok:
                where = "" if at is None else f" rank {at[0]} op {at[1]}"
                ring = (
                    f"wrapped={wrapped}"
                    if args.wide_buffer is None
                    else (f"buffer={args.wide_buffer} steps")
                )
                case = (
                    f"{sc.name} | tp{layout.tp} dp{layout.dp} pp{layout.pp} ep{layout.ep}"
                    f"{where} timing={'on' if timing else 'off'} {ring} {fmt}"
                )
                misses.append(f"{case}: {outcome.why}")
                if args.verbose:
                    print("MISS", misses[-1], file=sys.stderr, flush=True)
    head = (
        "runs",
        "culprit",
        "group",
        "seq",
        "all right",
        "healthy findings",
        "elsewhere",
        "other causes",
        "late ok",
        "late extra",
    )

    def line(name: str, row: list[int] | tuple[str, ...]) -> str:
        cells = "".join(f"{v:>10}" for v in row[:5])
        return f"{name:<34}{cells}{row[5]:>17}{row[6]:>10}{row[7]:>13}{row[8]:>9}{row[9]:>11}"

    print(line("scenario", head))
    for name, row in rows.items():
        print(line(name, row))
    total = [sum(r[i] for r in rows.values()) for i in range(10)]
    print(line("total", total))
    print(
        "culprit: kind and culprit ranks (all members for stuck_collective; both sides where the "
        "evidence allows no better); elsewhere: mismatch findings not at the injected fault; "
        "other causes: findings not marked as consequences besides the root cause (one fault "
        "is one cause); late ok: stragglers listed as expected (the generated one first, at "
        "the first collective of its step for a step straggler; none on a healthy job); late "
        "extra: other ranks listed as stragglers"
    )
    runs, right = total[0], total[4]
    print(f"({total_t:.0f} s)")
    for miss in misses[:40]:
        print("MISS", miss)
    return 0 if right == runs else 1


if __name__ == "__main__":
    sys.exit(main())
