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


def state_codes(entries: pd.DataFrame) -> np.ndarray:
    cats = entries["state"].cat.categories
    table = np.array([STATE_CODES.get(str(c), 0) for c in cats] or [0], dtype=np.int8)
    codes = entries["state"].cat.codes.to_numpy()
    return table[codes] if len(codes) else np.empty(0, np.int8)


def build_op_view(entries: pd.DataFrame) -> OpView:
    """Fold coalesced entries and encode each op's signature as integer codes."""
    state = state_codes(entries)
    states_tracked = bool((state > 0).any())
    mask = ~entries["is_p2p"].to_numpy()
    base = pd.DataFrame(
        {
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
    )
    labels: dict[str, list[str]] = {}
    for col in SIGNATURE:
        base[col] = entries[col].cat.codes.to_numpy()[mask].astype(np.int32)
        labels[col] = [str(c) for c in entries[col].cat.categories]
    base["parts"] = np.ones(len(base), dtype=np.int32)
    key = ["rank", "pg", "seq"]
    dup = entries["coalesced"].to_numpy()[mask]
    if not dup.any():
        return OpView(base, labels, states_tracked)
    single = base.loc[~dup]
    multi = base.loc[dup].sort_values(["rank", "pg", "seq", "pos"], kind="stable")
    grouped = multi.groupby(key, sort=False)
    agg = grouped.agg(
        pos=("pos", "min"),
        record_id=("record_id", "min"),
        state=("state", "min"),
        stack_id=("stack_id", "first"),
        time_created_ns=("time_created_ns", "min"),
        input_numel=("input_numel", "sum"),
        output_numel=("output_numel", "sum"),
        parts=("parts", "sum"),
    )
    gid = grouped.ngroup().to_numpy()
    nth = grouped.cumcount().to_numpy()
    first_row = np.unique(gid, return_index=True)[1]
    # A group's signature is the sequence of its parts' codes: hash it with numpy (unsigned
    # arithmetic wraps), then build a joined label once per distinct sequence.
    weight = np.power(np.uint64(1_000_003), nth.astype(np.uint64))
    for col in SIGNATURE:
        codes = multi[col].to_numpy()
        digest = np.zeros(len(agg), dtype=np.uint64)
        np.add.at(digest, gid, (codes.astype(np.uint64) + np.uint64(1)) * weight)
        names = labels[col]
        table = {name: i for i, name in enumerate(names)}
        distinct, first_group, which = np.unique(digest, return_index=True, return_inverse=True)
        code_of = np.empty(len(distinct), dtype=np.int32)
        for k, g in enumerate(first_group.tolist()):
            start = first_row[g]
            parts = codes[start : start + int(agg["parts"].iat[g])]
            code_of[k] = table.setdefault(_join(names, parts), len(table))
        out = code_of[which]
        agg[col] = out
        labels[col] = list(table)
    folded = agg.reset_index()
    coll = pd.concat([single, folded[base.columns]], ignore_index=True)
    coll = coll.sort_values(["rank", "pos"], kind="stable").reset_index(drop=True)
    return OpView(coll, labels, states_tracked)


def _join(names: list[str], codes: np.ndarray) -> str:
    return " + ".join(names[int(c)] or "-" for c in codes)
