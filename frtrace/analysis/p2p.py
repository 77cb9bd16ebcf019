"""Point-to-point: pair the k-th `send a->b` with the k-th `recv b<-a` of the same group.

Each channel (group, src, dst) is FIFO. collective_seq_id does not advance for p2p, so it never
pairs anything. Ring buffers may hold different stretches of a channel on its two ends, so pairs
are counted from the completion boundary: completions happen in pairs, hence the j-th incomplete
send matches the j-th incomplete recv, and completed ones match counting back from the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from frtrace.analysis.context import Context
from frtrace.analysis.findings import Finding
from frtrace.analysis.ops import op_is

_COMPARED = ("input_sizes", "input_dtypes")


@dataclass
class P2PResult:
    findings: list[Finding] = field(default_factory=list)
    ops: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per send/recv with slot
    unpaired: pd.DataFrame = field(default_factory=pd.DataFrame)  # incomplete, no partner


def channel_ops(ctx: Context) -> pd.DataFrame:
    """Every send/recv with its channel and its slot (pairing index) on that channel."""
    e = ctx.trace.entries
    is_send, is_recv = op_is(e, "send"), op_is(e, "recv")
    mask = e["is_p2p"].to_numpy() & (is_send | is_recv)
    if not mask.any():
        return pd.DataFrame()
    send = is_send[mask]
    rows = pd.DataFrame(
        {
            "rank": e["rank"].to_numpy()[mask],
            "pos": e["pos"].to_numpy()[mask],
            "pg": e["pg_name"].cat.codes.to_numpy()[mask],
            # categories, not strings: millions of rows, and these columns are join keys
            "side": pd.Categorical.from_codes(send.astype(np.int8), categories=["recv", "send"]),
            "src": e["global_src"].to_numpy()[mask],
            "dst": e["global_dst"].to_numpy()[mask],
            "p2p_seq_id": e["p2p_seq_id"].to_numpy()[mask],
            "state": ctx.states[mask],
            "stack_id": e["stack_id"].to_numpy()[mask],
            "input_sizes": e["input_sizes"].cat.codes.to_numpy()[mask],
            "input_dtypes": e["input_dtypes"].cat.codes.to_numpy()[mask],
        }
    )  # already ordered by rank and position, like the entries
    rows.loc[send, "src"] = rows.loc[send, "rank"]
    rows.loc[~send, "dst"] = rows.loc[~send, "rank"]
    # One integer per (group, src, dst, side): channel ends group on a single key.
    width = int(max(rows["src"].max(), rows["dst"].max())) + 2
    channel = (
        (rows["pg"].to_numpy().astype(np.int64) * width + rows["src"].to_numpy() + 1) * width
        + rows["dst"].to_numpy()
        + 1
    ) * 2 + send
    if ctx.view.states_tracked:
        done = rows["state"].to_numpy() == 2
        rows["slot_kind"] = pd.Categorical.from_codes(
            np.where(done, 0, 1).astype(np.int8), categories=["c", "i"]
        )
        slot = np.empty(len(rows), dtype=np.int64)
        slot[~done] = pd.Series(channel[~done]).groupby(channel[~done]).cumcount().to_numpy()
        slot[done] = (
            pd.Series(channel[done]).groupby(channel[done]).cumcount(ascending=False).to_numpy()
        )
        rows["slot"] = slot
    else:
        rows["slot_kind"] = pd.Categorical.from_codes(
            np.zeros(len(rows), dtype=np.int8), categories=["a"]
        )
        rows["slot"] = pd.Series(channel).groupby(channel).cumcount().to_numpy()
    return rows


def analyze_p2p(ctx: Context) -> P2PResult:
    ops = channel_ops(ctx)
    if ops.empty:
        return P2PResult(ops=ops, unpaired=ops)
    on = ["pg", "src", "dst", "slot_kind", "slot"]
    sends = ops.loc[ops["side"] == "send"]
    recvs = ops.loc[ops["side"] == "recv"]
    pairs = sends.merge(recvs, on=on, how="outer", suffixes=("_s", "_r"), indicator=True)
    both = pairs.loc[pairs["_merge"] == "both"]
    differ = np.zeros(len(both), dtype=bool)
    for col in _COMPARED:
        differ |= both[f"{col}_s"].to_numpy() != both[f"{col}_r"].to_numpy()
    findings = []
    for row in both.loc[differ].head(ctx.mismatch_cap * 4).itertuples(index=False):
        findings.append(_pair_finding(ctx, ops, row))
        if len(findings) >= ctx.mismatch_cap:
            break
    lonely = pairs.loc[(pairs["_merge"] != "both") & (pairs["slot_kind"] != "c")]
    return P2PResult(findings=findings, ops=ops, unpaired=lonely)


def _label(ctx: Context, column: str, code: float) -> str:
    cats = ctx.trace.entries[column].cat.categories
    return str(cats[int(code)]) if code == code and int(code) >= 0 else "-"


def _changed(ops: pd.DataFrame, rank: int, pos: int, src: int, dst: int, side: str) -> bool | None:
    """Did this rank's op differ from its previous op on the same channel and call site?"""
    mine = ops.loc[
        (ops["rank"] == rank) & (ops["src"] == src) & (ops["dst"] == dst) & (ops["side"] == side)
    ]
    current = mine.loc[mine["pos"] == pos]
    if current.empty:
        return None
    cur = current.iloc[0]
    before = mine.loc[(mine["pos"] < pos) & (mine["stack_id"] == cur["stack_id"])]
    if before.empty:
        return None
    last = before.iloc[-1]
    return any(int(last[c]) != int(cur[c]) for c in _COMPARED)


def _pair_finding(ctx: Context, ops: pd.DataFrame, row: Any) -> Finding:
    pg = int(row.pg)
    src, dst = int(row.src), int(row.dst)
    seq = int(row.p2p_seq_id_s)
    send_desc = (
        f"{_label(ctx, 'input_sizes', row.input_sizes_s)} "
        f"{_label(ctx, 'input_dtypes', row.input_dtypes_s)}"
    )
    recv_desc = (
        f"{_label(ctx, 'input_sizes', row.input_sizes_r)} "
        f"{_label(ctx, 'input_dtypes', row.input_dtypes_r)}"
    )
    s_changed = _changed(ops, src, int(row.pos_s), src, dst, "send")
    r_changed = _changed(ops, dst, int(row.pos_r), src, dst, "recv")
    if s_changed and r_changed is False:
        culprits, reason = [src], "sender_changed"
    elif r_changed and s_changed is False:
        culprits, reason = [dst], "receiver_changed"
    else:
        culprits, reason = sorted({src, dst}), "p2p_undecidable"
    return ctx.finding(
        "p2p_mismatch",
        pg,
        p2p_seq_id=seq,
        op="send/recv",
        culprit_ranks=culprits,
        waiting_ranks=[src, dst],
        expected_ranks=sorted({src, dst}),
        reason=reason,
        undecidable=reason == "p2p_undecidable",
        facts={
            "src": src,
            "dst": dst,
            "send": send_desc,
            "recv": recv_desc,
            "send_p2p_seq_id": seq,
            "recv_p2p_seq_id": int(row.p2p_seq_id_r),
        },
    )
