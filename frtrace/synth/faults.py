"""Injected faults: how one rank's program deviates, and the ground truth it implies.

A fault only rewrites the culprit's own program; the hang then emerges from the simulation
exactly as it would in a real job (peers block in NCCL waiting for it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from frtrace.analysis.findings import MISMATCH_KINDS, Kind
from frtrace.synth.layout import KIND_INDEX, KINDS, GroupTable, Layout
from frtrace.synth.program import BF16, FP32, Item, OpT, Registry, is_marker

# The generator injects exactly the kinds of problem the analyzer reports.
FAULT_KINDS: tuple[str, ...] = tuple(kind.value for kind in Kind)


@dataclass(frozen=True)
class Fault:
    """A single misbehaving rank.

    The faulted op is the `index`-th op (coalesced markers not counted) of group `group` that
    `rank` issues in training step `step` (0-based). `partner` only applies to order_cycle: the
    group kind whose next op the rank issues too early (default: one that closes a cycle).

    `stuck_collective`: every member issues and starts the op, none completes it (a network,
    NCCL or GPU fault inside the collective). `drop_part` (type_mismatch only): the rank leaves
    one part out of the coalesced block that holds the op. `mid_block` (missing_ranks only):
    the rank records the first parts of that block, then stalls before its end (host code
    between two parts), so it never launches the block its peers wait in.
    """

    kind: str
    rank: int
    group: str = "tp"
    step: int = 1
    index: int = 0
    partner: str | None = None
    drop_part: bool = False
    mid_block: bool = False

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")
        if self.group not in KINDS:
            raise ValueError(f"unknown group {self.group!r}; expected one of {KINDS}")
        for name in ("rank", "step", "index"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Fault.{name} must be an int >= 0, got {value!r}")
        if self.partner is not None:
            if self.kind != "order_cycle":
                raise ValueError("Fault.partner only applies to order_cycle faults")
            if self.partner not in KINDS or self.partner == self.group:
                raise ValueError(
                    f"order_cycle partner must be a group kind other than {self.group!r}, "
                    f"got {self.partner!r}"
                )


@dataclass
class FaultPlan:
    """The culprit's rewritten program for the whole run, plus the ground truth."""

    program: list[Item]
    expected: dict[str, Any]
    omit_ranks: set[int]
    at: int = 0  # the faulted item's place in the program (where a missing rank stops)


def _counts_before(program: list[Item], pos: int, kind: int) -> tuple[int, int]:
    """(collective, p2p) sequence counters of group `kind` after issuing program[:pos]."""
    coll = p2p = 0
    for item in program[:pos]:
        if item.kind == kind:
            if item.p2p:
                p2p += 1
            else:
                coll += 1
    return coll, p2p


def _ops(reg: Registry, item: Item) -> list[OpT]:
    return [reg.ops[t] for t in item.tids]


def _double_first_dim(shapes: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    return tuple((s[0] * 2, *s[1:]) if s else s for s in shapes)


def _mutate(op: OpT, kind: str, group_size: int) -> OpT:
    """The op as the buggy rank calls it; other ranks keep calling the original."""
    if kind == "type_mismatch":
        if op.op == "all_gather":
            return replace(
                op, profiling_name="nccl:all_reduce", op="all_reduce", output_sizes=op.input_sizes
            )
        # all_gather of the same input: consistent sizes, only the collective differs.
        out = tuple((s[0] * group_size, *s[1:]) for s in op.input_sizes)
        return replace(op, profiling_name="nccl:all_gather", op="all_gather", output_sizes=out)
    if kind in ("size_mismatch", "p2p_mismatch"):
        return replace(
            op,
            input_sizes=_double_first_dim(op.input_sizes),
            output_sizes=_double_first_dim(op.output_sizes),
        )
    # dtype_mismatch
    flip = {BF16: FP32, FP32: BF16}
    return replace(
        op,
        input_dtypes=tuple(flip.get(d, FP32) for d in op.input_dtypes),
        output_dtypes=tuple(flip.get(d, FP32) for d in op.output_dtypes),
    )


def _locate(
    program: list[Item], reg: Registry, per_step: int, fault: Fault, kind: int
) -> tuple[int, int]:
    """(item position in the whole-run program, op position inside that item)."""
    seen = 0
    start = fault.step * per_step
    for pos in range(start, start + per_step):
        item = program[pos]
        if item.kind != kind:
            continue
        for j, op in enumerate(_ops(reg, item)):
            if is_marker(op):
                continue
            if seen == fault.index:
                return pos, j
            seen += 1
    raise ValueError(
        f"rank {fault.rank} issues only {seen} op(s) on its {fault.group!r} group per step; "
        f"fault index {fault.index} is out of range"
    )


def plan_fault(
    fault: Fault,
    layout: Layout,
    table: GroupTable,
    reg: Registry,
    step_program: list[Item],
    steps: int,
) -> FaultPlan:
    """Rewrite the culprit's program for `fault` and compute the expected diagnosis."""
    if fault.rank >= layout.world:
        raise ValueError(f"fault rank {fault.rank} outside world of {layout.world}")
    if fault.step >= steps:
        raise ValueError(f"fault step {fault.step} not before the job's {steps} steps")
    kind = KIND_INDEX[fault.group]
    if not layout.has(fault.group) or layout.size_of(fault.group) < 2:
        raise ValueError(f"layout {layout} has no {fault.group!r} group with 2+ ranks to fault")
    group = table.group(fault.rank, kind)
    program = step_program * steps
    pos, j = _locate(program, reg, len(step_program), fault, kind)
    item = program[pos]
    op = _ops(reg, item)[j]
    target_pos, target_op = pos, op
    culprits = [fault.rank]
    omit: set[int] = set()

    if fault.mid_block:
        ops = _ops(reg, item)
        if fault.kind != "missing_ranks" or item.p2p or len(ops) < 3:
            raise ValueError("mid_block needs a missing_ranks fault on an op in a coalesced block")
        kept = max(2, (len(ops) - 1) // 2)  # parts recorded before the stall; no closer
        program[pos] = replace(item, tids=item.tids[:kept], open_block=True)
        del program[pos + 1 :]
    elif fault.kind in ("missing_ranks", "missing_dump"):
        # The rank hangs outside NCCL (data loader, host code) right before this call.
        del program[pos:]
        if fault.kind == "missing_dump":
            omit = {fault.rank}
    elif fault.kind == "stuck_collective":
        if item.p2p:
            raise ValueError("stuck_collective needs a collective, not a p2p op")
        program[pos] = replace(item, poison=True)  # issued and started, never completes
        culprits = list(group.ranks)
    elif fault.drop_part:
        ops = _ops(reg, item)
        if fault.kind != "type_mismatch" or len(ops) < 3:
            raise ValueError("drop_part needs a type_mismatch on an op inside a coalesced block")
        del ops[j]
        program[pos] = replace(item, tids=tuple(reg.add(o) for o in ops), poison=True)
    elif fault.kind in MISMATCH_KINDS:
        if item.p2p:
            raise ValueError(
                f"{fault.kind} needs a collective; the {fault.group!r} op at index "
                f"{fault.index} is a p2p op (use p2p_mismatch)"
            )
        ops = _ops(reg, item)
        ops[j] = _mutate(op, fault.kind, len(group.ranks))
        program[pos] = replace(item, tids=tuple(reg.add(o) for o in ops), poison=True)
        if len(group.ranks) == 2 and fault.step == 0:
            # With two members and no earlier call at this site, nobody can tell which side
            # deviated (unless a sibling group issued it: sim._sibling_told); from step 1 on
            # the culprit's own history of call sites shows that it changed.
            culprits = list(group.ranks)
    elif fault.kind == "state_mismatch":
        program[pos] = replace(item, nostart=True)
    elif fault.kind == "p2p_mismatch":
        if fault.group != "pp":
            raise ValueError("p2p_mismatch faults must target the 'pp' group")
        if item.p2p != 1:
            raise ValueError(
                f"p2p_mismatch needs a send; pp op {fault.index} of rank "
                f"{fault.rank} in step {fault.step} is a {op.op}"
            )
        program[pos] = replace(item, tids=(reg.add(_mutate(op, "p2p_mismatch", 2)),), poison=True)
    else:  # order_cycle
        ppos = _find_partner(program, pos, fault, layout, table)
        target_pos = ppos  # the moved op keeps the counters of its original slot
        item = program.pop(ppos)
        program.insert(pos, item)
        target_op = next(o for o in _ops(reg, item) if not is_marker(o))
        kind = item.kind
        group = table.group(fault.rank, kind)

    coll, p2p = _counts_before(step_program * steps, target_pos, kind)
    expected = _expected(fault, culprits, group.pg_name, group.desc, item, coll, p2p, target_op)
    return FaultPlan(program, expected, omit, pos)


def _expected(
    fault: Fault,
    culprits: list[int],
    pg_name: str,
    pg_desc: str,
    item: Item,
    coll_before: int,
    p2p_before: int,
    op: OpT,
) -> dict[str, Any]:
    return {
        "kind": fault.kind,
        "culprit_ranks": sorted(culprits),
        "pg_name": pg_name,
        "pg_desc": pg_desc,
        "collective_seq_id": None if item.p2p else coll_before + 1,
        "p2p_seq_id": p2p_before + 1 if item.p2p else None,
        "op": op.op,
    }


def _find_partner(
    program: list[Item], pos: int, fault: Fault, layout: Layout, table: GroupTable
) -> int:
    """Position of the next op on another group that some peer of the faulted op also needs.

    Issuing that op first deadlocks: the culprit waits in it for a peer that is itself
    waiting for the culprit in the faulted group.
    """
    kind = KIND_INDEX[fault.group]
    mine = set(table.group(fault.rank, kind).ranks)
    # Kinds whose group shares a second rank with the faulted group: only those can close a cycle.
    closing = {
        other
        for other in table.present_kinds()
        if other != kind and len(mine & set(table.group(fault.rank, other).ranks)) >= 2
    }
    if fault.partner is not None:
        wanted = KIND_INDEX[fault.partner]
        if not layout.has(fault.partner):
            raise ValueError(f"layout {layout} has no {fault.partner!r} group")
        if wanted not in closing:
            raise ValueError(
                f"issuing the {fault.partner!r} op before the {fault.group!r} op cannot "
                f"deadlock: those groups share no rank besides {fault.rank}"
            )
        closing = {wanted}
    for ppos in range(pos + 1, len(program)):
        if program[ppos].kind in closing:
            return ppos
    raise ValueError(
        f"order_cycle: rank {fault.rank} issues no later op on a group sharing a peer with its "
        f"{fault.group!r} group after step {fault.step}; add steps or pick another fault"
    )
