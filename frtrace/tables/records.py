"""What a backend records for the ops whose sizes differ by rank or follow the group size.

An entry's `input_sizes` / `output_sizes` are not the user's arguments but the tensors the
backend hands to `FlightRecorder::recordWithResetEnabled` (FlightRecorderDetail.hpp: one shape
and one dtype per tensor): ProcessGroupNCCL passes what it passes `collective()` (`initWork`),
ProcessGroupGloo what its work's `getInputTensors()` / `getOutputTensors()` return
(`ProcessGroupGloo::enqueue`). The two differ for scatter, so the rules are per backend and
op. An undefined tensor (the placeholder a non-root passes) records shape `[0]` and dtype
`UNKNOWN_SCALAR` (an undefined TensorImpl has the default one-dim size 0 and no scalar type).
docs/nccl-records.md has the table, with the torch source lines behind each rule.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from frtrace.tables.table import Table

INPUTS = ("input_sizes", "input_dtypes")
OUTPUTS = ("output_sizes", "output_dtypes")

# Backends whose records were checked against their source. Everything else (ncclx, rccl,
# hccl, mccl, custom backends) is unverified: ROCm builds of ProcessGroupNCCL.cpp write
# `nccl:` names themselves, so an `rccl:` prefix comes from code not checked here, and the
# ncclx / hccl process groups are not in PyTorch's tree. xccl (intel/torch-xpu-ops,
# ProcessGroupXCCL.cpp) was checked for all_gather / reduce_scatter only: its checked source
# has no gather or scatter.
NCCL, GLOO, XCCL = "nccl", "gloo", "xccl"

# all_to_all splits are the caller's: every rank sends and receives its own counts (MoE).
# ProcessGroupNCCL::alltoall_base and ::alltoall record `nccl:all_to_all` with the whole
# tensors (lists); ProcessGroupGloo's AsyncAlltoallWork `gloo:all_to_all` likewise. The other
# names are never compared either: masking only ever withholds a verdict.
ALL_TO_ALL = frozenset(
    {"all_to_all", "all_to_all_single", "alltoall", "alltoall_base", "all_to_allv"}
)

# Which side of a rooted op holds the root's list (and a placeholder, or nothing, elsewhere).
_LIST_SIDE: dict[tuple[str, str], tuple[str, ...]] = {
    # ProcessGroupNCCL::gather: `collective(inputs, outputs, ...)` with inputs = {inputTensor}
    # and outputs = the root's list, `outputs.emplace_back()` (one undefined tensor) elsewhere.
    (NCCL, "gather"): OUTPUTS,
    # ProcessGroupNCCL::scatter: `collective(outputs, inputs, ...)`: the record's inputs are
    # the scatter's output tensor (equal on every rank), its outputs the root's list of chunks,
    # one undefined tensor (`inputs.emplace_back()`) elsewhere.
    (NCCL, "scatter"): OUTPUTS,
    # ProcessGroupGloo AsyncGatherWork::getOutputTensors: `{newLikeFlat(outputs[0])}` on the
    # root (one stacked shape), `{}` elsewhere; getInputTensors: the input, on every rank.
    (GLOO, "gather"): OUTPUTS,
    # AsyncScatterWork::getInputTensors: `{newLikeFlat(inputs[0])}` on the root, `{}`
    # elsewhere; getOutputTensors: the output, on every rank.
    (GLOO, "scatter"): INPUTS,
}
_ROOTED_LISTS = frozenset({"gather", "scatter"})

# Uneven all_gather / reduce_scatter on NCCL (and XCCL) are coalesced rooted parts:
# ProcessGroupNCCL::allgather issues, for each i, `_broadcast_oop(output[i], i == rank ? input
# : output[i])` and ::reduce_scatter `_reduce_oop(i == rank ? output : input[i], input[i])`;
# both call `collective(inputTensor, outputTensor, ...)`. Part i's output (broadcast) or input
# (reduce) is shard i on every member; the other side is shard i too, except on rank i, where
# it is the caller's own tensor: torch checks only that its numel matches, not its shape. So
# that side is not compared (a real disagreement shows on the side that is).
_ANY_BACKEND: dict[str, tuple[str, ...]] = {
    **{op: ("input_sizes", "output_sizes") for op in ALL_TO_ALL},
    "_broadcast_oop": ("input_sizes",),
    "_reduce_oop": ("output_sizes",),
}

# Ops whose output numel is the input's times the group size ("gather") or the reverse
# ("scatter"), per backend.
_NUMEL: dict[str, dict[str, str]] = {
    NCCL: {
        # ProcessGroupNCCL::allgather (equal sizes): `collective(inputTensor, outputFlattened)`,
        # the output list stacked into one tensor; the uneven branch writes _broadcast_oop parts.
        "all_gather": "gather",
        # ::_allgather_base (all_gather_into_tensor): `nccl:_all_gather_base`, checked by torch
        # (`input_tensor.numel() * size_ != output_tensor.numel()` throws).
        "_all_gather_base": "gather",
        # ::allgather_into_tensor_coalesced: one entry listing every input and output.
        "all_gather_into_tensor_coalesced": "gather",
        # ::reduce_scatter (equal sizes): `collective(inputFlattened, outputTensor)`.
        "reduce_scatter": "scatter",
        # ::_reduce_scatter_base (reduce_scatter_tensor), checked by torch likewise.
        "_reduce_scatter_base": "scatter",
        # ::reduce_scatter_tensor_coalesced: one entry listing every input and output.
        "reduce_scatter_tensor_coalesced": "scatter",
    },
    # AsyncAllgatherWork::getOutputTensors: `{newLikeFlat(outputs[0])}`; _allgather_base
    # chunks its output and calls allgather, so it records `gloo:all_gather` too. gloo
    # records no reduce_scatter: reduce_scatter, _reduce_scatter_base and
    # reduce_scatter_tensor_coalesced issue one `gloo:all_reduce` per buffer.
    GLOO: {"all_gather": "gather"},
}
# intel/torch-xpu-ops ProcessGroupXCCL: allgather, _allgather_base (`xccl:_all_gather_base`),
# allgather_into_tensor_coalesced, reduce_scatter, _reduce_scatter_base and
# reduce_scatter_tensor_coalesced call collective() / collectiveCoalesced() as NCCL's do, and
# initWork records (inputs, outputs).
_NUMEL[XCCL] = _NUMEL[NCCL]


def rank_dependent(backend: str, op: str) -> tuple[str, ...]:
    """The signature columns of `op` on `backend` that legitimately differ by rank."""
    if op in _ROOTED_LISTS:
        # Unverified backends: the list may be on either side, so neither is compared.
        return _LIST_SIDE.get((backend, op), INPUTS + OUTPUTS)
    return _ANY_BACKEND.get(op, ())


GATHER_NUMEL, SCATTER_NUMEL = 1, 2  # codes of numel_rules
# (rule, numerator, denominator): the numel ratio that is the group size
NUMEL_RATIOS = (
    (GATHER_NUMEL, "output_numel", "input_numel"),
    (SCATTER_NUMEL, "input_numel", "output_numel"),
)


def numel_rule(backend: str, op: str) -> str:
    """Which numel rule `op` follows on `backend`: "gather" (output numel = input numel x
    group size), "scatter" (the reverse) or "" (none)."""
    return _NUMEL.get(backend, {}).get(op, "")


def numel_rules(entries: Table, pairs: np.ndarray | None = None) -> np.ndarray:
    """Per row: GATHER_NUMEL, SCATTER_NUMEL or 0 (no rule for its backend and op).
    `pairs`: `pair_codes(entries)` (or a subset of it) to look up instead of every row."""
    codes = {"gather": GATHER_NUMEL, "scatter": SCATTER_NUMEL, "": 0}
    table = pair_table(entries, lambda b, o: codes[numel_rule(b, o)], np.int8)
    return table[pair_codes(entries) if pairs is None else pairs]


def pair_codes(entries: Table) -> np.ndarray:
    """One code per row for its (backend, op), indexing the tables of `pair_table`."""
    width = max(1, len(entries.labels["op"]))
    return entries["backend"].astype(np.int64) * width + entries["op"]


def pair_table(
    entries: Table, rule: Callable[[str, str], object], dtype: type = bool
) -> np.ndarray:
    """`rule(backend, op)` for every (backend, op) pair of `entries`' labels, by pair code:
    evaluated once per pair, looked up per row."""
    backends = [str(b) for b in entries.labels["backend"]] or [""]
    ops = [str(o) for o in entries.labels["op"]] or [""]
    return np.array([rule(b, o) for b in backends for o in ops], dtype=dtype)
