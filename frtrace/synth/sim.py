"""Discrete-event simulation of a whole job's NCCL traffic, recorded like Flight Recorder.

Each rank's CPU issues work in program order (at most `window` in flight); each GPU runs its
work strictly in order. A collective completes when its last member reaches it on the GPU,
a send/recv pair when both sides do. Times follow max-plus rules (a collective ends after
the latest member started it), which is the timeline a global event clock would produce,
without a priority queue: a worklist of ranks that can progress is processed until empty.
Per-entry state lives in compact per-rank arrays; dump dicts are only built on demand.
"""

from __future__ import annotations

import gc
import math
import random
from array import array
from collections import deque
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from frtrace.analysis.findings import MISMATCH_KINDS
from frtrace.synth.faults import Fault, plan_fault
from frtrace.synth.layout import KIND_INDEX, NKINDS, GroupTable, Layout
from frtrace.synth.program import Item, OpT, Registry, site_frames, stage_program

Dump = dict[str, Any]

BASE_TIME_NS = 1_730_419_200_000_000_000
LAUNCH_NS = 4_000
COMM_LIB_VERSION = "2.27.5"
TIMEOUT_MS = 600_000
_STATES = ("scheduled", "started", "completed")
_JITTER = 4096
POLL_NS = 100_000_000  # the NCCL watchdog looks at outstanding work about every 100 ms


@dataclass(frozen=True)
class JobSpec:
    """What to simulate.

    `window` bounds the issued-but-incomplete work items (a coalesced group is one) a rank's
    CPU runs ahead of its GPU. `version` is only written into the dumps: the entry layout is
    always that of format 2.10.

    `batch_p2p` records pipeline send/recv as `batch_isend_irecv` blocks; `extras` adds a
    barrier, rooted collectives and an uneven all_gather; `straggler` = (rank, ns) makes one
    rank that much slower per work item (it still completes); `step_straggler` = (rank, lo, hi)
    makes one rank enqueue the first collective of every step lo to hi ns late (drawn per step:
    slow data loading), everything else on time; `snapshot` (0-1) dumps a healthy
    job on demand at that fraction of its run, with work in flight; `dump_skew_ms` bounds how
    far apart ranks dump after a timeout. `clock_skew_ms` offsets each host's clock (8 ranks
    a host) by up to that much either way: every time a rank writes is on its host's clock.
    `jitter_ns` bounds the random CPU time added to every work item of every rank.
    `gpu_scale` multiplies every item's GPU and network time: a model whose layers take
    milliseconds, so pipeline stages wait for each other (bubbles) and CPUs run ahead of
    their GPUs by as much; healthy all the same.
    `stack_depth` cuts or pads every call site's stack to that many frames (None: as written).
    """

    layout: Layout
    steps: int = 2
    microbatches: int = 2
    layers: int = 2
    buffer_size: int = 2000
    version: str = "2.10"
    with_stacks: bool = True
    stack_depth: int | None = None
    enable_timing: bool = True
    window: int = 2
    coalesce_dp: bool = True
    only_active: bool = False
    seed: int = 0
    fault: Fault | None = None
    also: tuple[Fault, ...] = ()  # further faults on other ranks, at the same time
    batch_p2p: bool = False
    extras: bool = False
    straggler: tuple[int, int] | None = None
    step_straggler: tuple[int, int, int] | None = None
    snapshot: float | None = None
    dump_skew_ms: int = 3000
    clock_skew_ms: int = 0
    jitter_ns: int = 20_000
    gpu_scale: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.layout, Layout):
            raise ValueError(f"JobSpec.layout must be a Layout, got {self.layout!r}")
        for name in ("steps", "microbatches", "layers", "buffer_size", "window", "gpu_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"JobSpec.{name} must be an int >= 1, got {value!r}")
        depth = self.stack_depth
        if depth is not None and (
            isinstance(depth, bool) or not isinstance(depth, int) or depth < 1
        ):
            raise ValueError(f"JobSpec.stack_depth must be an int >= 1 or None, got {depth!r}")
        if not isinstance(self.seed, int):
            raise ValueError(f"JobSpec.seed must be an int, got {self.seed!r}")
        if self.fault is not None and not isinstance(self.fault, Fault):
            raise ValueError(f"JobSpec.fault must be a Fault or None, got {self.fault!r}")
        if self.also and (
            self.fault is None
            or not all(isinstance(f, Fault) for f in self.also)
            or len({f.rank for f in (self.fault, *self.also)}) != 1 + len(self.also)
        ):
            raise ValueError("JobSpec.also needs a fault, and Faults on ranks of their own")
        if self.snapshot is not None and not (0 < self.snapshot < 1 and self.fault is None):
            raise ValueError("JobSpec.snapshot must be in (0, 1), and only for healthy jobs")
        late = self.step_straggler
        if late is not None and not (
            len(late) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in late)
            and 0 <= late[0] < self.layout.world
            and 0 <= late[1] <= late[2]
        ):
            raise ValueError(
                "JobSpec.step_straggler must be (rank in the world, lo ns, hi ns >= lo >= 0), "
                f"got {late!r}"
            )


class DumpMap(MutableMapping[int, Dump]):
    """rank -> dump dict, built lazily so a 8192-rank job never holds every dump at once.

    A dump read through `[]` is cached, so callers may mutate it (e.g. corrupt a field) and
    `write_job` writes the mutated version; `peek` builds without caching for streaming.
    """

    def __init__(self, ranks: range, build: Callable[[int], Dump]) -> None:
        self._ranks: dict[int, None] = dict.fromkeys(ranks)
        self._build = build
        self._cache: dict[int, Dump] = {}

    def __getitem__(self, rank: int) -> Dump:
        dump = self._cache.get(rank)
        if dump is None:
            dump = self.peek(rank)
            self._cache[rank] = dump
        return dump

    def peek(self, rank: int) -> Dump:
        dump = self._cache.get(rank)
        if dump is not None:
            return dump
        if rank not in self._ranks:
            raise KeyError(rank)
        return self._build(rank)

    def __setitem__(self, rank: int, dump: Dump) -> None:
        self._ranks[rank] = None
        self._cache[rank] = dump

    def __delitem__(self, rank: int) -> None:
        del self._ranks[rank]
        self._cache.pop(rank, None)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._ranks))

    def __len__(self) -> int:
        return len(self._ranks)

    def __contains__(self, rank: object) -> bool:
        return rank in self._ranks

    def __repr__(self) -> str:
        return f"DumpMap({len(self._ranks)} ranks, {len(self._cache)} materialized)"


@dataclass
class SyntheticJob:
    """Simulated job: per-rank dumps, its groups, and the fault ground truth (None if healthy)."""

    dumps: DumpMap
    groups: dict[str, tuple[str, list[int]]]
    expected: dict[str, Any] | None
    omit_ranks: set[int] = field(default_factory=set)
    spec: JobSpec | None = None
    also_expected: list[dict[str, Any]] = field(default_factory=list)  # JobSpec.also's truth
    hung: bool = False
    simulator: Any = field(default=None, repr=False)

    def snapshot(self, fraction: float) -> DumpMap:
        """The dumps every rank would write on demand at `fraction` (0-1] of the run's span,
        from its start to its last event (for a hung job, the moment it stopped moving)."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        sim = self.simulator
        return self.snapshot_at(sim.t0 + int((sim.last_event() - sim.t0) * fraction))

    def snapshot_at(self, at_ns: int) -> DumpMap:
        """The dumps every rank would write on demand at simulated time `at_ns`."""
        sim = self.simulator
        return DumpMap(range(len(sim.ranks)), lambda r: sim.build_dump(r, at_ns))

    def last_activity(self, rank: int) -> int:
        """When `rank` last enqueued work (simulated ns, before any clock offset)."""
        times = self.simulator.ranks[rank].times
        return int(times[-3]) if len(times) else int(self.simulator.t0)


class _Rank:
    """Mutable per-rank simulation state; entry columns are parallel arrays (ring-trimmed)."""

    __slots__ = (
        "base",
        "cc",
        "chan",
        "co",
        "com",
        "cp",
        "cpu_t",
        "enq",
        "gids",
        "gpu_free",
        "head_on",
        "inflight",
        "ints",
        "lag",
        "late",
        "n",
        "part",
        "pc",
        "pre",
        "prog",
        "st",
        "sta",
        "times",
        "total",
    )

    def __init__(self, prog: list[Item], total: int, gids: list[int], t0: int) -> None:
        self.prog = prog
        self.n = len(prog)
        self.total = total
        self.pc = 0
        self.cpu_t = t0
        self.gpu_free = t0
        self.inflight: deque[tuple[int, Item, int, tuple[int, ...], int, int]] = deque()
        self.head_on = False
        self.gids = gids
        self.base = 0  # record_id of column index 0
        # Entry i: ints[4i:4i+4] = template id, collective seq, p2p seq, op id;
        # times[3i:3i+3] = created, GPU start, GPU end (0 = not yet); st[i] = state index.
        self.ints = array("i")
        self.times = array("q")
        self.st = array("b")
        self.part = array("b")  # part[i]: 1 for a coalescing block's part (not its closer)
        self.cc = [0] * NKINDS  # collective seq per group kind
        self.cp = [0] * NKINDS  # p2p seq per group kind
        self.co = [0] * NKINDS  # op id per group kind
        self.enq = [-1] * NKINDS
        self.sta = [-1] * NKINDS
        self.com = [-1] * NKINDS
        self.pre = [-1] * NKINDS  # last seq per kind among entries the ring buffer dropped
        self.lag = 0
        # The step straggler's lateness before its first collective of each step, by step.
        self.late: tuple[int, list[int]] | None = None
        self.chan: dict[int, int] = {}


class _Simulator:
    """Owns every rank's state; kept alive by the DumpMap so dumps can be built lazily."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        lay = spec.layout
        self.layout = lay
        self.table = GroupTable(lay)
        self.reg = Registry()
        self.stage_progs = [
            stage_program(
                self.reg,
                lay,
                s,
                spec.microbatches,
                spec.layers,
                spec.coalesce_dp,
                spec.batch_p2p,
                spec.extras,
            )
            for s in range(lay.pp)
        ]
        self.members = [g.ranks for g in self.table.groups]
        rng = random.Random(spec.seed)
        self.jit = [rng.randrange(max(1, spec.jitter_ns)) for _ in range(_JITTER)]
        if spec.gpu_scale != 1:
            self.stage_progs = [
                [
                    replace(
                        it, gpu_ns=it.gpu_ns * spec.gpu_scale, comm_ns=it.comm_ns * spec.gpu_scale
                    )
                    for it in prog
                ]
                for prog in self.stage_progs
            ]
        self.t0 = BASE_TIME_NS + rng.randrange(10**15)
        self.expected: dict[str, Any] | None = None
        self.also_expected: list[dict[str, Any]] = []  # the truth of JobSpec.also's faults
        self.omit: set[int] = set()
        self.also_at: list[tuple[int, int, bool]] = []  # with JobSpec.also: rank, place, stops
        self.ranks = self._start_ranks(self._plan_faults())
        self._slow_down()
        self.hung = False
        self._rank_strs: dict[int, str] = {}
        self.dump_ns: list[int] = []
        skew = spec.clock_skew_ms * 1_000_000
        hosts = (lay.world + 7) // 8
        self.clock_offsets = [rng.randint(-skew, skew) for _ in range(hosts)] if skew else []

    def _plan_faults(self) -> dict[int, list[Item]]:
        """Each faulted rank's own program (the fault is only a rewrite of it), with the
        ground truth and the ranks left without a dump that each fault implies."""
        spec, lay = self.spec, self.layout
        stride = lay.dp * lay.tp
        programs: dict[int, list[Item]] = {}
        for i, fault in enumerate((spec.fault, *spec.also) if spec.fault is not None else ()):
            stage = fault.rank // stride if fault.rank < lay.world else 0
            plan = plan_fault(fault, lay, self.table, self.reg, self.stage_progs[stage], spec.steps)
            programs[fault.rank] = plan.program
            self.omit |= plan.omit_ranks
            if i == 0:
                self.expected = plan.expected
            else:
                self.also_expected.append(plan.expected)
            if spec.also:
                stops = fault.kind in ("missing_ranks", "missing_dump")
                self.also_at.append((fault.rank, plan.at, stops))
        return programs

    def _start_ranks(self, programs: dict[int, list[Item]]) -> list[_Rank]:
        """Every rank at its start: a faulted rank runs its own program once, the others
        their stage's program `steps` times; start times differ by a little jitter."""
        stride = self.layout.dp * self.layout.tp
        ranks: list[_Rank] = []
        for r in range(self.layout.world):
            gids = [self.table.gid(r, k) for k in range(NKINDS)]
            t0 = self.t0 + self.jit[(r * 7) % _JITTER] * 10
            if r in programs:
                ranks.append(_Rank(programs[r], len(programs[r]), gids, t0))
            else:
                prog = self.stage_progs[r // stride]
                ranks.append(_Rank(prog, len(prog) * self.spec.steps, gids, t0))
        return ranks

    def _slow_down(self) -> None:
        """Make JobSpec's straggler slower on every work item, and its step straggler late to
        the first collective of each step (by a lateness drawn per step)."""
        spec = self.spec
        if spec.straggler is not None:
            self.ranks[spec.straggler[0]].lag = spec.straggler[1]
        if spec.step_straggler is not None:
            who, lo, hi = spec.step_straggler
            me = self.ranks[who]
            first = next((i for i, item in enumerate(me.prog) if item.p2p == 0), None)
            if first is not None:
                steps = -(-me.total // me.n)
                draw = random.Random(spec.seed + 2)
                me.late = (first, [draw.randint(lo, hi) for _ in range(steps)])

    def run(self) -> None:
        """Run the job until every rank finished or none can move, then record whether it
        hung and when each rank dumps; a job that did not do what its spec asked is a bug."""
        self._advance()
        self.hung = any(me.inflight or me.pc < me.total for me in self.ranks)
        self._mark_reached()
        self._sibling_told()
        if self.spec.fault is None and self.hung:
            raise RuntimeError("healthy synthetic job deadlocked; program generator bug")
        if self.spec.fault is not None and not self.hung:
            raise RuntimeError(f"fault {self.spec.fault} did not hang the job")
        self.dump_ns = self._dump_times()

    def _advance(self) -> None:
        """Move ranks until none can: a worklist of the ranks that may progress, each issuing
        work and starting it on its GPU until it blocks (max-plus times, no event queue)."""
        ranks = self.ranks
        window = self.spec.window
        # work key -> [members still missing, latest start so far, poisoned]
        pending: dict[int, list[int]] = {}
        work = deque(range(self.layout.world))
        queued = bytearray(b"\x01") * self.layout.world
        start_head, complete, issue = self._start_head, self._complete, self._issue
        while work:
            r = work.popleft()
            queued[r] = 0
            me = ranks[r]
            infl = me.inflight
            while True:
                if infl and not me.head_on:
                    done = start_head(me, pending)
                    if done is not None:
                        complete(r, *done, work, queued)
                elif len(infl) < window and me.pc < me.total:
                    issue(r, me)
                else:
                    break

    @staticmethod
    def _start_head(
        me: _Rank, pending: dict[int, list[int]]
    ) -> tuple[int, tuple[int, ...], int] | None:
        """Start the rank's oldest work on its GPU; once every member started it (and none
        disagrees), returns its key, its members and when it completes."""
        me.head_on = True
        gidx, item, key, members, seq, t_issue = me.inflight[0]
        if item.nostart:
            return None
        start = t_issue + LAUNCH_NS
        ready = me.gpu_free + item.gpu_ns
        if ready > start:
            start = ready
        pos = gidx - me.base
        times, st = me.times, me.st
        # Coalesced parts are recorded without events: only the block's closing entry (its
        # last) ever changes state.
        for j in range(max(pos + len(item.tids) - 1, 0), pos + len(item.tids)):
            times[3 * j + 1] = start
            st[j] = 1
        if seq >= 0:
            me.sta[item.kind] = seq
        slot = pending.get(key)
        if slot is None:
            slot = [len(members) - 1, start, int(item.poison)]
            pending[key] = slot
        else:
            slot[0] -= 1
            if start > slot[1]:
                slot[1] = start
            if item.poison:
                slot[2] = 1
        if slot[0] != 0 or slot[2]:
            return None
        del pending[key]
        return key, members, slot[1] + item.comm_ns

    def _complete(
        self,
        r: int,
        key: int,
        members: tuple[int, ...],
        end: int,
        work: deque[int],
        queued: bytearray,
    ) -> None:
        """Complete work `key` on every member's GPU at `end`, and queue the members it held
        up (a rank whose CPU waited for room in its window resumes then)."""
        window = self.spec.window
        for m in members:
            peer = self.ranks[m]
            pinfl = peer.inflight
            full = len(pinfl) >= window
            rec = pinfl.popleft()
            if rec[2] != key:
                raise RuntimeError(f"rank {m} completed work it was not on")
            pitem = rec[1]
            pos = rec[0] - peer.base + len(pitem.tids) - 1
            if pos >= 0:
                peer.times[3 * pos + 2] = end
                peer.st[pos] = 2
            if rec[4] >= 0:
                peer.com[pitem.kind] = rec[4]
            peer.gpu_free = end
            if full and peer.cpu_t < end:
                peer.cpu_t = end  # its CPU was blocked on this work
            peer.head_on = False
            if m != r and not queued[m]:
                queued[m] = 1
                work.append(m)

    def _issue(self, r: int, me: _Rank) -> None:
        """The rank's CPU issues its next work item: its entries are recorded and, unless
        the rank stalls inside a coalescing block, the work waits for the GPU."""
        item = me.prog[me.pc % me.n]
        late = 0
        if me.late is not None and me.pc % me.n == me.late[0]:
            late = me.late[1][me.pc // me.n]  # its data arrives late
        me.pc += 1
        t = me.cpu_t + item.cpu_ns + self.jit[(me.pc * 7 + r * 13) & (_JITTER - 1)] + me.lag + late
        seq, cs, ps, key, members = self._enqueue_counters(r, me, item)
        # Its entries, 3 us apart, each with its own op id.
        st = me.st
        gidx = me.base + len(st)
        op_id = me.co[item.kind]
        tc = t
        ints, times, part = me.ints, me.times, me.part
        closer = len(item.tids) - (0 if item.open_block else 1)
        for j, tid in enumerate(item.tids):
            op_id += 1
            ints.extend((tid, cs, ps, op_id))
            times.extend((tc, 0, 0))
            st.append(0)
            part.append(j < closer)
            tc += 3_000
        me.co[item.kind] = op_id
        me.cpu_t = tc - 3_000
        if item.open_block:
            return  # the rank stalls before the block's end: nothing launched
        me.inflight.append((gidx, item, key, members, seq, t))
        bs = self.spec.buffer_size
        if len(st) >= bs + max(64, bs // 4):
            self._trim(me, len(st) - bs, self.reg.ops)

    def _enqueue_counters(
        self, r: int, me: _Rank, item: Item
    ) -> tuple[int, int, int, int, tuple[int, ...]]:
        """Bump the group's collective or p2p counter as torch does at enqueue; returns the
        collective seq (-1 for p2p), the entries' two seq ids, and the key and members by
        which every member names the same work (group and seq; sender, receiver, nth)."""
        k = item.kind
        if item.p2p == 0:
            c = me.cc[k] + 1
            me.cc[k] = c
            me.enq[k] = c
            gid = me.gids[k]
            return c, c, me.cp[k], (gid << 32) | c, self.members[gid]
        ps = me.cp[k] + 1
        me.cp[k] = ps
        world = self.layout.world
        peer_rank = r + item.delta * self.layout.dp * self.layout.tp
        if item.p2p == 1:
            src, dst, ck = r, peer_rank, 2 * peer_rank + 1
        else:
            src, dst, ck = peer_rank, r, 2 * peer_rank
        nth = me.chan.get(ck, 0) + 1
        me.chan[ck] = nth
        return -1, me.cc[k], ps, -((((src * world) + dst) << 32) | nth) - 1, (src, dst)

    def _mark_reached(self) -> None:
        """With JobSpec.also: whether each fault's rank got to its fault, or another fault
        held it up before (a missing dump is missing wherever its rank got to)."""
        truths = [self.expected, *self.also_expected] if self.expected and self.also_at else []
        for truth, (rank, at, stops) in zip(truths, self.also_at, strict=True):
            pc = self.ranks[rank].pc
            reached = pc >= at if stops else pc > at
            truth["reached"] = reached or truth["kind"] == "missing_dump"

    def _sibling_told(self) -> None:
        """A two-member mismatch with no earlier call at its site names both members (nobody
        can tell which side deviated), unless a sibling group (another group of its kind)
        issued that collective whole: what ranks in the same role called there tells."""
        truth, fault = self.expected, self.spec.fault
        if truth is None or fault is None or len(truth["culprit_ranks"]) != 2:
            return
        if truth["kind"] not in MISMATCH_KINDS or truth["collective_seq_id"] is None:
            return
        kind, seq = KIND_INDEX[fault.group], truth["collective_seq_id"]
        mine = self.table.gid(fault.rank, kind)
        for g in self.table.groups:
            if (
                g.kind == kind
                and g.gid != mine
                and all(self.ranks[m].cc[kind] >= seq for m in g.ranks)
            ):
                truth["culprit_ranks"] = [fault.rank]
                return

    def _dump_times(self) -> list[int]:
        """When each rank writes its dump, on its own clock.

        A hang: the watchdog of the rank with the oldest outstanding work times out first
        (`timeout_ms` after it was enqueued) and dumps; the others follow when they see its
        signal, up to `dump_skew_ms` later. A healthy job dumps at its end, or at `snapshot`.
        """
        rng = random.Random(self.spec.seed + 1)
        skew = self.spec.dump_skew_ms * 1_000_000
        last = max((me.times[-3] for me in self.ranks if len(me.times)), default=self.t0)
        if self.hung:
            oldest = [
                me.times[3 * (rec[0] - me.base)]
                for me in self.ranks
                for rec in list(me.inflight)[:1]
                if rec[0] >= me.base
            ]
            first = min(oldest, default=last) + TIMEOUT_MS * 1_000_000
            return [first + rng.randrange(skew + 1) for _ in self.ranks]
        end = max((max(me.times) for me in self.ranks if len(me.times)), default=self.t0)
        if self.spec.snapshot is not None:
            end = self.t0 + int((end - self.t0) * self.spec.snapshot)
        return [end + rng.randrange(skew // 10 + 1) for _ in self.ranks]

    @staticmethod
    def _trim(me: _Rank, drop: int, ops: list[OpT]) -> None:
        """Forget the oldest entries, as the ring buffer overwrites them (pg_status keeps
        counting: it is not part of the ring)."""
        for i in range(drop):
            op = ops[me.ints[4 * i]]
            me.pre[op.kind] = me.ints[4 * i + (2 if op.is_p2p else 1)]
        del me.ints[: 4 * drop]
        del me.times[: 3 * drop]
        del me.st[:drop]
        del me.part[:drop]
        me.base += drop

    # Dump building -------------------------------------------------------------------------

    def last_event(self) -> int:
        return max((max(me.times) for me in self.ranks if len(me.times)), default=self.t0)

    def build_dump(self, r: int, at: int | None = None) -> Dump:
        """The dict a real rank would pickle at dump time (or on demand at `at`), as fresh
        objects."""
        spec = self.spec
        me = self.ranks[r]
        table = self.table
        kinds = table.present_kinds()
        groups = {k: table.groups[me.gids[k]] for k in kinds}
        pg_config = {
            g.pg_name: {"name": g.pg_name, "desc": g.desc, "ranks": self._ranks_str(g.gid)}
            for g in groups.values()
        }
        pg_info = [
            (groups[k].pg_name, groups[k].desc, table.pg_ids[k]) if k in groups else None
            for k in range(NKINDS)
        ]
        # Thousands of small acyclic containers: cyclic GC passes would only cost time.
        paused = gc.isenabled()
        gc.disable()
        try:
            entries, status = self._entries(r, me, pg_info, self.dump_ns[r] if at is None else at)
        finally:
            if paused:
                gc.enable()
        # Keyed by the process-local pg_id; covers p2p work too (which reports its p2p seq).
        pg_status = {
            str(table.pg_ids[k]): {
                "last_enqueued_collective": status[k][0],
                "last_started_collective": status[k][1],
                "last_completed_collective": status[k][2],
            }
            for k in kinds
        }
        return {
            "version": spec.version,
            "comm_lib_version": COMM_LIB_VERSION,
            "pg_config": pg_config,
            "pg_status": pg_status,
            "entries": entries,
        }

    def _ranks_str(self, gid: int) -> str:
        # One shared str per group: real dumps repeat it, and pickle then memoizes it.
        text = self._rank_strs.get(gid)
        if text is None:
            text = str(list(self.members[gid]))
            self._rank_strs[gid] = text
        return text

    def _entries(
        self, r: int, me: _Rank, pg_info: list[tuple[str, str, int] | None], dump_at: int
    ) -> tuple[list[Dump], list[list[int]]]:
        """The ring buffer's entries as the rank's dump writes them at its dump time, and its
        pg_status counters per group kind (enqueued, started, completed)."""
        spec = self.spec
        ops: list[OpT] = self.reg.ops
        timing = spec.enable_timing
        only_active = spec.only_active
        off = self.clock_offsets[r // 8] if self.clock_offsets else 0
        phase = self.jit[(r * 31) % _JITTER] * 4_000
        thread_id = str(140_230_000 + (r * 7919) % 10_000)
        ints, times, part = me.ints, me.times, me.part
        groups = [self.table.groups[g] if g >= 0 else None for g in me.gids]
        local = [(g.local_rank(r), len(g.ranks)) if g else (0, 1) for g in groups]
        status = [[p, p if timing else -1, p] for p in me.pre]
        visible = [i for i in range(len(me.st)) if times[3 * i] <= dump_at][-spec.buffer_size :]
        frames_of = _SiteFrames(spec.stack_depth)
        copy_dict = dict.copy
        out: list[Dump] = []
        for i in visible:
            tid, cseq, pseq, op_id = ints[4 * i : 4 * i + 4]
            created, t_start, t_end = times[3 * i : 3 * i + 3]
            op = ops[tid]
            state, retired, seen_start, seen_done = _seen(t_start, t_end, dump_at, phase, timing)
            counters = status[op.kind]
            if not part[i]:  # torch enqueues a block (pg_status counts it) at its closer
                counters[0] = pseq if op.is_p2p else cseq
            if state:
                counters[1] = counters[0] if timing else -1
            if state == 2:
                counters[2] = counters[0]
                if only_active:
                    continue
            info = pg_info[op.kind]
            assert info is not None
            in_sizes, in_dtypes, out_sizes, out_dtypes = (
                _rank_sizes(op, *local[op.kind], cseq, r) if op.vary else _sizes(op)
            )
            entry: Dump = {
                # Fresh dicts sharing str objects: what unpickling a real dump gives.
                "frames": list(map(copy_dict, frames_of[op.site])) if spec.with_stacks else [],
                "record_id": me.base + i,
                "pg_id": info[2],
                "process_group": (info[0], info[1]),
                "collective_seq_id": cseq,
                "p2p_seq_id": pseq,
                "op_id": op_id,
                "profiling_name": op.profiling_name,
                "time_created_ns": created + off,
                "time_discovered_started_ns": None if seen_start is None else seen_start + off,
                "time_discovered_completed_ns": None if seen_done is None else seen_done + off,
                "input_sizes": in_sizes,
                "input_dtypes": in_dtypes,
                "output_sizes": out_sizes,
                "output_dtypes": out_dtypes,
                "state": _STATES[state],
                "retired": retired,
                "timeout_ms": TIMEOUT_MS,
                "is_p2p": op.is_p2p,
                "thread_id": thread_id,
                "thread_name": "pt_main_thread",
            }
            if timing and state == 2:
                entry["duration_ms"] = (t_end - t_start) / 1e6
            out.append(entry)
        return out, status


def _seen(
    t_start: int, t_end: int, dump_at: int, phase: int, timing: bool
) -> tuple[int, bool, int | None, int | None]:
    """An entry's state index, `retired` and discovered start and end times at `dump_at`.

    They change only when the rank's watchdog retires work (one poll, every POLL_NS from the
    rank's `phase`, for both times) or when the dump itself looks at the events.
    """
    if 0 < t_end <= dump_at:
        poll = t_end + (phase - t_end) % POLL_NS
        retired = poll <= dump_at
        seen_done = poll if retired else dump_at
        return 2, retired, seen_done if timing else None, seen_done
    if timing and 0 < t_start <= dump_at:
        return 1, False, dump_at, None
    return 0, False, None, None


class _SiteFrames(dict[str, list[dict[str, Any]]]):
    """A call site's stack as dump dicts, built once per dump (each entry gets copies)."""

    def __init__(self, depth: int | None) -> None:
        super().__init__()
        self.depth = depth

    def __missing__(self, site: str) -> list[dict[str, Any]]:
        frames = [
            {"name": a, "filename": b, "line": c} for a, b, c in site_frames(site, self.depth)
        ]
        self[site] = frames
        return frames


Sizes = tuple[list[list[int]], list[str], list[list[int]], list[str]]
_UNDEFINED = "UNKNOWN_SCALAR"  # dtype of the undefined tensor a non-root records


def _sizes(op: OpT) -> Sizes:
    return (
        list(map(list, op.input_sizes)),
        list(op.input_dtypes),
        list(map(list, op.output_sizes)),
        list(op.output_dtypes),
    )


def _rank_sizes(op: OpT, local: int, size: int, seq: int, rank: int) -> Sizes:
    """Sizes that legitimately differ by rank, as NCCL records them."""
    ins, idt, outs, odt = _sizes(op)
    root = seq % size
    if op.vary == "a2a":  # MoE token dispatch: every rank sends and receives its own counts
        hidden = op.input_sizes[0][1]
        ins = [[512 + (rank * 31 + seq * 17) % 512, hidden]]
        outs = [[512 + (rank * 7 + seq * 13) % 512, hidden]]
    elif op.vary in ("gather", "scatter") and local != root:
        # ProcessGroupNCCL::gather / ::scatter: a non-root passes `outputs` (gather) or
        # `inputs` (scatter) as one undefined tensor, which collective() records as the entry's
        # outputs in both (scatter calls `collective(outputs, inputs)`).
        outs, odt = [[0]], [_UNDEFINED]
    return ins, idt, outs, odt


def simulate(spec: JobSpec) -> SyntheticJob:
    """Run the job until it finishes or hangs, then let every rank dump (as on timeout)."""
    simulator = _Simulator(spec)
    simulator.run()
    return SyntheticJob(
        dumps=DumpMap(range(spec.layout.world), simulator.build_dump),
        groups=simulator.table.as_mapping(),
        expected=simulator.expected,
        omit_ranks=set(simulator.omit),
        spec=spec,
        also_expected=simulator.also_expected,
        hung=simulator.hung,
        simulator=simulator,
    )


def entries_per_step(
    layout: Layout,
    microbatches: int = 2,
    layers: int = 2,
    coalesce_dp: bool = True,
    batch_p2p: bool = False,
    extras: bool = False,
) -> list[int]:
    """Entries each pipeline stage records per healthy training step."""
    reg = Registry()
    return [
        sum(
            len(item.tids)
            for item in stage_program(
                reg, layout, s, microbatches, layers, coalesce_dp, batch_p2p, extras
            )
        )
        for s in range(layout.pp)
    ]


def spec_for_entries(world_layout: Layout, entries: int, **kw: Any) -> JobSpec:
    """A spec whose ring buffer (size `entries`) has wrapped on every rank when it dumps.

    With a fault, its step is shifted by the steps needed to fill the ring, so the job hangs
    only after every rank recorded at least `entries` entries.
    """
    if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
        raise ValueError(f"entries must be an int >= 1, got {entries!r}")
    for key in ("steps", "buffer_size"):
        if key in kw:
            raise ValueError(f"spec_for_entries picks {key}; do not pass it")
    per_step = entries_per_step(
        world_layout,
        kw.get("microbatches", 2),
        kw.get("layers", 2),
        kw.get("coalesce_dp", True),
        kw.get("batch_p2p", False),
        kw.get("extras", False),
    )
    needed = math.ceil(entries / min(per_step))
    fault: Fault | None = kw.pop("fault", None)
    steps = needed
    if fault is not None:
        fault = replace(fault, step=fault.step + needed)
        steps = fault.step + 2
    return JobSpec(world_layout, steps=steps, buffer_size=entries, fault=fault, **kw)
