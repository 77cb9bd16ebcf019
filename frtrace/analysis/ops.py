"""The view analyzers share: one row per rank and collective, coalesced work folded into one.

Entries sharing a collective_seq_id on one rank (ending in `coalesced` / `*_coalesced`) are a
single collective, so they become one row whose signature joins the parts. Signatures are kept
as integer codes with a label table, so comparing ranks is integer work even for millions of rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

STATE_CODES = {"scheduled": 0, "started": 1, "completed": 2}
SIGNATURE = ("op", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes")


@dataclass
class OpView:
    """Collective ops (one row per rank, group, seq) and the labels of their signature codes."""

    coll: pd.DataFrame
    labels: dict[str, list[str]]
    states_tracked: bool

    def label(self, column: str, code: int) -> str:
        return self.labels[column][int(code)]


def op_is(entries: pd.DataFrame, name: str) -> np.ndarray:
    """Mask of entries whose op is `name`, from the categorical codes (no string column)."""
    cats = entries["op"].cat.categories
    codes = entries["op"].cat.codes.to_numpy()
    return codes == cats.get_loc(name) if name in cats else np.zeros(len(codes), dtype=bool)


def state_codes(entries: pd.DataFrame) -> np.ndarray:
    cats = entries["state"].cat.categories
    table = np.array([STATE_CODES.get(str(c), 0) for c in cats] or [0], dtype=np.int8)
    codes = entries["state"].cat.codes.to_numpy()
    return table[codes] if len(codes) else np.empty(0, np.int8)


def build_op_view(entries: pd.DataFrame) -> OpView:
    """Fold coalesced entries and encode each op's signature as integer codes.

    Each coalesced group collapses onto its first part's row, so rows stay ordered by rank and
    position without a re-sort; everything here is numpy over whole columns.
    """
    state = state_codes(entries)
    states_tracked = bool((state > 0).any())
    mask = ~entries["is_p2p"].to_numpy()
    cols: dict[str, np.ndarray] = {
        "rank": entries["rank"].to_numpy()[mask],
        "pg": entries["pg_name"].cat.codes.to_numpy()[mask],
        "seq": entries["collective_seq_id"].to_numpy()[mask],
        "pos": entries["pos"].to_numpy()[mask],
        "record_id": entries["record_id"].to_numpy()[mask],
        "state": state[mask],
        "stack_id": entries["stack_id"].to_numpy()[mask],
        "time_created_ns": entries["time_created_ns"].to_numpy()[mask],
        "input_numel": entries["input_numel"].to_numpy()[mask],
        "output_numel": entries["output_numel"].to_numpy()[mask],
    }
    labels: dict[str, list[str]] = {}
    for col in SIGNATURE:
        cols[col] = entries[col].cat.codes.to_numpy()[mask].astype(np.int32)
        labels[col] = [str(c) for c in entries[col].cat.categories]
    cols["parts"] = np.ones(len(cols["rank"]), dtype=np.int32)
    dup = entries["coalesced"].to_numpy()[mask]
    if dup.any():
        cols = _fold(cols, dup, labels)
    return OpView(pd.DataFrame(cols), labels, states_tracked)


def _fold(
    cols: dict[str, np.ndarray], dup: np.ndarray, labels: dict[str, list[str]]
) -> dict[str, np.ndarray]:
    """Collapse each coalesced group (same rank, group, seq) onto its first part."""
    rows = np.flatnonzero(dup)
    rank, pg, seq, pos = (cols[c][rows] for c in ("rank", "pg", "seq", "pos"))
    rows = rows[np.lexsort((pos, seq, pg, rank))]
    rank, pg, seq = cols["rank"][rows], cols["pg"][rows], cols["seq"][rows]
    new = np.r_[True, (rank[1:] != rank[:-1]) | (pg[1:] != pg[:-1]) | (seq[1:] != seq[:-1])]
    starts = np.flatnonzero(new)
    nth = np.arange(len(rows)) - starts[np.cumsum(new) - 1]
    first = rows[starts]  # lowest position: its pos, record, time and stack stand for the group
    cols["state"][first] = np.minimum.reduceat(cols["state"][rows], starts)
    for col in ("input_numel", "output_numel"):
        cols[col][first] = np.add.reduceat(cols[col][rows], starts)
    counts = np.diff(np.r_[starts, len(rows)])
    cols["parts"][first] = counts
    # A group's signature is the sequence of its parts' codes: hash it with numpy (unsigned
    # arithmetic wraps), then build a joined label once per distinct sequence.
    weight = np.power(np.uint64(1_000_003), nth.astype(np.uint64))
    for col in SIGNATURE:
        codes = cols[col][rows]
        digest = np.add.reduceat((codes.astype(np.uint64) + np.uint64(1)) * weight, starts)
        names = labels[col]
        table = {name: i for i, name in enumerate(names)}
        distinct, first_group, which = np.unique(digest, return_index=True, return_inverse=True)
        code_of = np.empty(len(distinct), dtype=np.int32)
        for k, g in enumerate(first_group.tolist()):
            parts = codes[starts[g] : starts[g] + counts[g]]
            code_of[k] = table.setdefault(_join(names, parts), len(table))
        cols[col][first] = code_of[which]
        labels[col] = list(table)
    keep = ~dup
    keep[first] = True
    return {name: values[keep] for name, values in cols.items()}


def _join(names: list[str], codes: np.ndarray) -> str:
    return " + ".join(names[int(c)] or "-" for c in codes)
