"""What one rank of a Megatron-like training job issues to NCCL, step by step.

The program is expressed per pipeline stage (every rank of a stage runs the same code), with
groups named by kind and p2p peers by stage offset, so 8192 ranks share a handful of lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from frtrace.synth.layout import KIND_INDEX, Layout

# Operation templates -----------------------------------------------------------------------

BF16 = "BFloat16"
FP32 = "Float"
_ELEM_BYTES = {BF16: 2, FP32: 4, "Half": 2, "Int": 4, "Long": 8}

Shape = tuple[int, ...]


@dataclass(frozen=True)
class OpT:
    """Everything an entry shares with every other entry of the same call (all but counters)."""

    profiling_name: str
    op: str
    kind: int
    is_p2p: bool
    input_sizes: tuple[Shape, ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[Shape, ...]
    output_dtypes: tuple[str, ...]
    site: str
    # Sizes that depend on the rank (filled in when a dump is built): "" (none), "a2a" (uneven
    # all_to_all splits), "gather" / "scatter" (only the root records the list of tensors, in
    # the entry's outputs for both: ProcessGroupNCCL::scatter swaps them, docs/nccl-records.md).
    vary: str = ""

    @property
    def nbytes(self) -> int:
        total = 0
        for shape, dtype in zip(self.input_sizes, self.input_dtypes, strict=False):
            numel = 1
            for dim in shape:
                numel *= dim
            total += numel * _ELEM_BYTES.get(dtype, 4)
        return total


@dataclass(frozen=True)
class Item:
    """One unit of GPU work: a single op, or a coalesced group ending in its marker entry.

    `kind` is the group kind; p2p is 0 (collective), 1 (send) or 2 (recv) and `delta` the
    peer's pipeline-stage offset. Timings (ns) drive the simulated clock. `poison` marks work
    whose peers disagree with it (never completes); `nostart` work whose GPU never gets to it;
    `open_block` parts of a coalescing block the rank never ends (its last item).
    """

    tids: tuple[int, ...]
    kind: int
    p2p: int
    delta: int
    cpu_ns: int
    gpu_ns: int
    comm_ns: int
    poison: bool = False
    nostart: bool = False
    open_block: bool = False  # the rank records these parts, then stalls before the block's end


class Registry:
    """Deduplicates op templates so per-entry storage is a small int."""

    def __init__(self) -> None:
        self.ops: list[OpT] = []
        self._index: dict[OpT, int] = {}

    def add(self, op: OpT) -> int:
        tid = self._index.get(op)
        if tid is None:
            tid = len(self.ops)
            self.ops.append(op)
            self._index[op] = tid
        return tid

    def item(
        self,
        ops: Sequence[OpT],
        p2p: int = 0,
        delta: int = 0,
        cpu_ns: int = 10_000,
        gpu_ns: int = 0,
        bandwidth: int = 100,
    ) -> Item:
        nbytes = sum(op.nbytes for op in ops)
        return Item(
            tids=tuple(self.add(op) for op in ops),
            kind=ops[0].kind,
            p2p=p2p,
            delta=delta,
            cpu_ns=cpu_ns,
            gpu_ns=gpu_ns,
            comm_ns=12_000 + nbytes // bandwidth,
        )


# Python call sites ------------------------------------------------------------------------
# One shared str object per name/path so pickle memoizes them, as torch's own dumps do.

_TORCH = "/usr/local/lib/python3.12/dist-packages/torch"
_C10D = _TORCH + "/distributed/distributed_c10d.py"
_LOGGER = _TORCH + "/distributed/c10d_logger.py"
_MODULE = _TORCH + "/nn/modules/module.py"
_AUTOGRAD_FN = _TORCH + "/autograd/function.py"
_AUTOGRAD_GRAPH = _TORCH + "/autograd/graph.py"
_AUTOGRAD_INIT = _TORCH + "/autograd/__init__.py"
_TENSOR = _TORCH + "/_tensor.py"
_CONTEXTLIB = "/usr/lib/python3.12/contextlib.py"
_MEG = "/workspace/Megatron-LM/megatron"
_MAPPINGS = _MEG + "/core/tensor_parallel/mappings.py"
_LAYERS = _MEG + "/core/tensor_parallel/layers.py"
_SCHEDULES = _MEG + "/core/pipeline_parallel/schedules.py"
_P2P = _MEG + "/core/pipeline_parallel/p2p_communication.py"
_BUFFER = _MEG + "/core/distributed/param_and_grad_buffer.py"
_DDP = _MEG + "/core/distributed/distributed_data_parallel.py"
_FINALIZE = _MEG + "/core/distributed/finalize_model_grads.py"
_DIST_OPT = _MEG + "/core/optimizer/distrib_optimizer.py"
_TRAINING = _MEG + "/training/training.py"
_UTILS = _MEG + "/training/utils.py"
_ENTRY = "/workspace/Megatron-LM/pretrain_gpt.py"

_TAIL: tuple[tuple[str, str, int], ...] = (
    ("train_step", _TRAINING, 1187),
    ("train", _TRAINING, 1596),
    ("pretrain", _TRAINING, 386),
    ("main", _ENTRY, 262),
    ("<module>", _ENTRY, 281),
)
_SCHED_PP = ("forward_backward_pipelining_without_interleaving", _SCHEDULES, 1814)

SITES: dict[str, tuple[tuple[str, str, int], ...]] = {
    "tp_fwd": (
        ("all_reduce", _C10D, 2950),
        ("wrapper", _LOGGER, 81),
        ("_reduce", _MAPPINGS, 39),
        ("forward", _MAPPINGS, 243),
        ("apply", _AUTOGRAD_FN, 575),
        ("reduce_from_tensor_model_parallel_region", _MAPPINGS, 482),
        ("forward", _LAYERS, 1034),
        ("_call_impl", _MODULE, 1773),
        ("_wrapped_call_impl", _MODULE, 1762),
        ("forward_step", _SCHEDULES, 287),
        *_TAIL[:1],
        *_TAIL[3:],
    ),
    "tp_bwd": (
        ("all_reduce", _C10D, 2950),
        ("wrapper", _LOGGER, 81),
        ("backward", _LAYERS, 573),
        ("apply", _AUTOGRAD_FN, 307),
        ("_engine_run_backward", _AUTOGRAD_GRAPH, 829),
        ("backward", _AUTOGRAD_INIT, 354),
        ("backward", _TENSOR, 648),
        ("backward_step", _SCHEDULES, 398),
        *_TAIL[:1],
        *_TAIL[3:],
    ),
    "send_fwd": (
        ("isend", _C10D, 2501),
        ("wrapper", _LOGGER, 81),
        ("_p2p_ops", _P2P, 241),
        ("_communicate", _P2P, 386),
        ("send_forward", _P2P, 468),
        _SCHED_PP,
        *_TAIL,
    ),
    "recv_fwd": (
        ("irecv", _C10D, 2546),
        ("wrapper", _LOGGER, 81),
        ("_p2p_ops", _P2P, 232),
        ("_communicate", _P2P, 386),
        ("recv_forward", _P2P, 428),
        _SCHED_PP,
        *_TAIL,
    ),
    "send_bwd": (
        ("isend", _C10D, 2501),
        ("wrapper", _LOGGER, 81),
        ("_p2p_ops", _P2P, 255),
        ("_communicate", _P2P, 386),
        ("send_backward", _P2P, 491),
        _SCHED_PP,
        *_TAIL,
    ),
    "recv_bwd": (
        ("irecv", _C10D, 2546),
        ("wrapper", _LOGGER, 81),
        ("_p2p_ops", _P2P, 264),
        ("_communicate", _P2P, 386),
        ("recv_backward", _P2P, 447),
        _SCHED_PP,
        *_TAIL,
    ),
    "dp_bucket": (
        ("all_reduce", _C10D, 2950),
        ("wrapper", _LOGGER, 81),
        ("start_grad_sync", _BUFFER, 437),
        ("start_grad_sync", _DDP, 482),
        ("finalize_model_grads", _FINALIZE, 251),
        _SCHED_PP,
        *_TAIL,
    ),
    "dp_coalesced": (
        ("__exit__", _C10D, 2652),
        ("__exit__", _CONTEXTLIB, 144),
        ("start_grad_sync", _BUFFER, 445),
        ("start_grad_sync", _DDP, 482),
        ("finalize_model_grads", _FINALIZE, 251),
        _SCHED_PP,
        *_TAIL,
    ),
    "dp_allgather": (
        ("all_gather_into_tensor", _C10D, 3842),
        ("wrapper", _LOGGER, 81),
        ("start_param_sync", _BUFFER, 312),
        ("start_param_sync", _DDP, 455),
        ("step_with_ready_grads", _DIST_OPT, 2064),
        ("step", _DIST_OPT, 2103),
        *_TAIL,
    ),
    "p2p_batch": (
        ("batch_isend_irecv", _C10D, 2749),
        ("wrapper", _LOGGER, 81),
        ("_batched_p2p_ops", _P2P, 168),
        ("_communicate", _P2P, 386),
        _SCHED_PP,
        *_TAIL,
    ),
    "moe_dispatch": (
        ("all_to_all_single", _C10D, 4390),
        ("wrapper", _LOGGER, 81),
        ("forward", _MEG + "/core/transformer/moe/token_dispatcher.py", 210),
        ("forward", _MEG + "/core/transformer/moe/moe_layer.py", 143),
        ("forward_step", _SCHEDULES, 287),
        *_TAIL[:1],
        *_TAIL[3:],
    ),
    "barrier": (
        ("barrier", _C10D, 4712),
        ("wrapper", _LOGGER, 81),
        ("save_checkpoint", _MEG + "/training/checkpointing.py", 402),
        *_TAIL,
    ),
    "bcast": (
        ("broadcast", _C10D, 2811),
        ("wrapper", _LOGGER, 81),
        ("broadcast_params", _DDP, 512),
        *_TAIL,
    ),
    "reduce": (
        ("reduce", _C10D, 3061),
        ("wrapper", _LOGGER, 81),
        ("report_memory", _UTILS, 188),
        *_TAIL,
    ),
    "gather": (
        ("gather", _C10D, 4014),
        ("wrapper", _LOGGER, 81),
        ("gather_metrics", _UTILS, 214),
        *_TAIL,
    ),
    "scatter": (
        ("scatter", _C10D, 4139),
        ("wrapper", _LOGGER, 81),
        ("scatter_seeds", _UTILS, 236),
        *_TAIL,
    ),
    "loss": (
        ("all_reduce", _C10D, 2950),
        ("wrapper", _LOGGER, 81),
        ("average_losses_across_data_parallel_group", _UTILS, 311),
        *_TAIL,
    ),
}


# Frames a deep model adds between the training loop and the collective: nested modules.
_NESTED = (("_call_impl", _MODULE, 1773), ("_wrapped_call_impl", _MODULE, 1762))


def site_frames(site: str, depth: int | None = None) -> tuple[tuple[str, str, int], ...]:
    """A call site's stack, innermost frame first, cut or padded to `depth` frames.

    Short and deep stacks cost the parser differently (unpickling grows with frames, the rest
    per entry does not), so the benchmark measures both; None keeps the site's own stack.
    """
    frames = SITES[site]
    if depth is None or depth == len(frames):
        return frames
    if depth < len(frames):
        return frames[:depth]
    pad = tuple(_NESTED[i % 2] for i in range(depth - len(frames)))
    return frames[:-3] + pad + frames[-3:]  # inside the training loop's outermost frames


# Program -----------------------------------------------------------------------------------

HIDDEN = 4096
SEQ = 2048
MICRO_BATCH = 4
# Parameters per model replica, split into gradient buckets (sizes in elements).
_BUCKETS = (41_943_040, 41_943_040, 23_068_672)


def _collective(name: str, kind: str, ins: Shape, outs: Shape, dtype: str, site: str) -> OpT:
    return OpT(
        f"nccl:{name}", name, KIND_INDEX[kind], False, (ins,), (dtype,), (outs,), (dtype,), site
    )


def _closer(name: str, kind: str, is_p2p: bool, site: str) -> OpT:
    """The entry that ends a coalescing block: empty sizes, the block's real state and times."""
    return OpT(f"nccl:{name}", name, KIND_INDEX[kind], is_p2p, (), (), (), (), site)


def stage_program(
    reg: Registry,
    layout: Layout,
    stage: int,
    microbatches: int,
    layers: int,
    coalesce_dp: bool,
    batch_p2p: bool = False,
    extras: bool = False,
) -> list[Item]:
    """One training step of a rank on pipeline stage `stage`, as GPU work items in issue order.

    `batch_p2p` sends pipeline activations through `batch_isend_irecv` (Megatron's default):
    each send/recv becomes a one-op coalescing block closed by `nccl:coalesced`. `extras` adds
    a barrier and rooted collectives (broadcast, reduce, gather, scatter) after the loss.
    """
    items = _passes(reg, layout, stage, microbatches, layers, batch_p2p)
    if layout.dp > 1:
        items += _gradient_sync(reg, layout, coalesce_dp, extras)
    loss = _collective("all_reduce", "default", (1,), (1,), FP32, "loss")
    items.append(reg.item([loss], cpu_ns=50_000, gpu_ns=20_000, bandwidth=20))
    if extras:
        items += _rooted(reg, layout.world)
    return items


def _passes(
    reg: Registry, layout: Layout, stage: int, microbatches: int, layers: int, batch_p2p: bool
) -> list[Item]:
    """The forward pass of every microbatch, then the backward pass of every one: each gets
    its activations from the previous stage, runs the layers and hands them to the next."""
    last = layout.pp - 1
    act: Shape = (MICRO_BATCH, SEQ, HIDDEN)
    tp_fwd = _collective("all_reduce", "tp", act, act, BF16, "tp_fwd")
    tp_bwd = _collective("all_reduce", "tp", act, act, BF16, "tp_bwd")

    def p2p(direction: int, delta: int, site: str) -> Item:
        return _p2p(reg, layout, stage, direction, delta, site, batch_p2p)

    items: list[Item] = []
    for _ in range(microbatches):
        if stage > 0:
            items.append(p2p(2, -1, "recv_fwd"))
        for _ in range(layers):
            items.extend(_layer(reg, layout, tp_fwd, 25_000, 180_000))
        if stage < last:
            items.append(p2p(1, +1, "send_fwd"))
    for _ in range(microbatches):
        if stage < last:
            items.append(p2p(2, +1, "recv_bwd"))
        for _ in range(layers):
            items.extend(_layer(reg, layout, tp_bwd, 40_000, 350_000))
        if stage > 0:
            items.append(p2p(1, -1, "send_bwd"))
    return items


def _p2p(
    reg: Registry,
    layout: Layout,
    stage: int,
    direction: int,
    delta: int,
    site: str,
    batch_p2p: bool,
) -> Item:
    """A send (direction 1) or recv (2) of activations to the stage `delta` away; a one-op
    coalescing block with `batch_p2p`. Only a send keeps the GPU busy before it starts."""
    me, peer = stage, stage + delta
    if direction == 1:
        name, short = f"nccl:send {me}->{peer}", "send"
    else:
        name, short = f"nccl:recv {me}<-{peer}", "recv"
    p2p_act: Shape = (MICRO_BATCH, max(1, SEQ // layout.tp), HIDDEN)
    op = OpT(name, short, KIND_INDEX["pp"], True, (p2p_act,), (BF16,), (p2p_act,), (BF16,), site)
    gpu = 0 if direction == 2 else 60_000
    ops = [op, _closer("coalesced", "pp", True, "p2p_batch")] if batch_p2p else [op]
    return reg.item(ops, p2p=direction, delta=delta, cpu_ns=15_000, gpu_ns=gpu, bandwidth=25)


def _layer(reg: Registry, layout: Layout, tp_op: OpT, cpu: int, gpu: int) -> list[Item]:
    """One transformer layer's collectives: the tensor-parallel all_reduce (when tp > 1),
    then with MoE (ep > 1) the token dispatch."""
    out = [reg.item([tp_op], cpu_ns=cpu, gpu_ns=gpu)] if layout.tp > 1 else []
    if layout.ep > 1:
        tokens: Shape = (1024, HIDDEN // 4)
        # all_to_all_single: ProcessGroupNCCL::alltoall_base records `nccl:all_to_all`.
        a2a = _collective("all_to_all", "ep", tokens, tokens, BF16, "moe_dispatch")
        out.append(reg.item([replace(a2a, vary="a2a")], cpu_ns=cpu, gpu_ns=gpu // 2))
    return out


def _gradient_sync(reg: Registry, layout: Layout, coalesce_dp: bool, extras: bool) -> list[Item]:
    """The data-parallel end of a step: gradient buckets all_reduced (coalesced, or one by
    one), the parameter shards all_gathered, and with `extras` an uneven all_gather."""
    tp, dp, pp = layout.tp, layout.dp, layout.pp
    split = tp * pp
    buckets = [
        _collective(
            "all_reduce", "dp", (max(1, b // split),), (max(1, b // split),), FP32, "dp_bucket"
        )
        for b in _BUCKETS
    ]
    items: list[Item] = []
    if coalesce_dp:
        # `_coalescing_manager`'s slow path: one part per bucket (recorded without events,
        # so they stay `scheduled` forever), closed by `endCoalescing`'s `nccl:coalesced`.
        marker = _closer("coalesced", "dp", False, "dp_coalesced")
        items.append(reg.item([*buckets, marker], cpu_ns=8_000, gpu_ns=40_000, bandwidth=20))
    else:
        items.extend(reg.item([b], cpu_ns=5_000, gpu_ns=20_000, bandwidth=20) for b in buckets)
    shard = max(1, sum(_BUCKETS) // split // dp)
    gather = _collective("all_gather", "dp", (shard,), (shard * dp,), BF16, "dp_allgather")
    items.append(reg.item([gather], cpu_ns=30_000, gpu_ns=200_000, bandwidth=20))
    if extras:
        # An uneven all_gather: ProcessGroupNCCL::allgather issues, for each member m,
        # `_broadcast_oop(output[m], m == rank ? input : output[m])`, so part m records
        # shard m in and out on every member; closed by `nccl:ALLGATHER_coalesced`.
        parts = [
            _collective("_broadcast_oop", "dp", (8 + m,), (8 + m,), FP32, "dp_allgather")
            for m in range(dp)
        ]
        closer = _closer("ALLGATHER_coalesced", "dp", False, "dp_allgather")
        items.append(reg.item([*parts, closer], cpu_ns=30_000, gpu_ns=50_000, bandwidth=20))
    return items


def _rooted(reg: Registry, world: int) -> list[Item]:
    """`extras` after the loss: a barrier and the rooted collectives, whose recorded sizes
    differ between the root and the others (see OpT.vary)."""
    barrier = _collective("all_reduce_barrier", "default", (1,), (1,), FP32, "barrier")
    bcast = _collective("broadcast", "default", (64,), (64,), FP32, "bcast")
    red = _collective("reduce", "default", (8,), (8,), FP32, "reduce")
    # ProcessGroupNCCL::gather: `collective(inputs, outputs)`, the root's outputs the list.
    gather = OpT(
        "nccl:gather", "gather", 0, False, ((16,),), (FP32,), ((16,),) * world,
        (FP32,) * world, "gather", vary="gather",
    )  # fmt: skip
    # ProcessGroupNCCL::scatter: `collective(outputs, inputs)`: the entry's inputs are the
    # received chunk (every rank), its outputs the root's list of chunks.
    scatter = OpT(
        "nccl:scatter", "scatter", 0, False, ((4,),), (FP32,), ((4,),) * world,
        (FP32,) * world, "scatter", vary="scatter",
    )  # fmt: skip
    return [
        reg.item([op], cpu_ns=20_000, gpu_ns=10_000, bandwidth=20)
        for op in (barrier, bcast, red, gather, scatter)
    ]


def is_marker(op: OpT) -> bool:
    """Coalesced-group terminators are bookkeeping, not ops a user would count."""
    return op.op == "coalesced" or (op.op.endswith("_coalesced") and not op.input_sizes)
