"""Point-to-point: pair the k-th `send a->b` with the k-th `recv b<-a` of the same group.

Each channel (group, src, dst) is FIFO. collective_seq_id does not advance for p2p, so it never
pairs anything. Ring buffers may hold different stretches of a channel on its two ends, so pairs
are counted from the completion boundary: completions happen in pairs, hence the j-th incomplete
send matches the j-th incomplete recv, and completed ones match counting back from the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from frtrace.analysis.context import Context
from frtrace.analysis.findings import Finding, Kind, Reason
from frtrace.analysis.ops import op_is
from frtrace.tables.table import Table, cumcount, pack

_COMPARED = ("input_sizes", "input_dtypes")
_KEY = ("pg", "src", "dst", "slot_kind", "slot")
SEND, RECV = 1, 0  # codes of the `side` column


@dataclass
class P2PResult:
    findings: list[Finding] = field(default_factory=list)
    ops: Table = field(default_factory=lambda: Table({}))  # one row per send/recv with slot


def channel_ops(ctx: Context) -> Table:
    """Every send/recv with its channel and its slot (pairing index) on that channel."""
    e = ctx.trace.table
    is_send, is_recv = op_is(e, "send"), op_is(e, "recv")
    mask = e["is_p2p"] & (is_send | is_recv)
    if not mask.any():
        return Table({})
    rows = np.flatnonzero(mask)  # gathering by index is faster than by mask
    send = is_send[rows]
    rank = e["rank"][rows]
    src, dst = e["global_src"][rows], e["global_dst"][rows]
    cols = {
        "row": rows,  # in the entries table
        "rank": rank,
        "pos": e["pos"][rows],
        "pg": e["pg_name"][rows],
        "side": send.astype(np.int8),  # labels recv, send: these columns are join keys
        "src": np.where(send, rank, src),
        "dst": np.where(send, dst, rank),
        "p2p_seq_id": e["p2p_seq_id"][rows],
        "state": ctx.states[rows],
        "stack_id": e["stack_id"][rows],
        "input_sizes": e["input_sizes"][rows],
        "input_dtypes": e["input_dtypes"][rows],
    }  # already ordered by rank and position, like the entries
    # One integer per (group, src, dst, side): channel ends group on a single key.
    width = int(max(cols["src"].max(), cols["dst"].max())) + 2
    channel = (
        (cols["pg"].astype(np.int64) * width + cols["src"] + 1) * width + cols["dst"] + 1
    ) * 2 + send
    if ctx.view.states_tracked:
        done = cols["state"] == 2
        kinds = ["c", "i"]
        cols["slot_kind"] = np.where(done, 0, 1).astype(np.int8)
        slot = np.empty(len(rank), dtype=np.int64)
        slot[~done] = cumcount(channel[~done])
        slot[done] = cumcount(channel[done], reverse=True)
    else:
        kinds = ["a"]
        cols["slot_kind"] = np.zeros(len(rank), dtype=np.int8)
        slot = cumcount(channel)
    cols["slot"] = slot
    return Table(cols, {"side": ["recv", "send"], "slot_kind": kinds})


def _pairs(sends: Table, recvs: Table) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `sends` and `recvs` that share a channel slot, in slot order (each slot holds
    at most one op per side)."""
    cols = [np.concatenate([sends[k], recvs[k]]) for k in _KEY]
    slot_id = pack(*cols)
    if slot_id is None:  # key ranges too wide to pack: number the distinct slots
        stacked = np.stack([c.astype(np.int64) for c in cols], axis=1)
        slot_id = np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)
    _, i_send, i_recv = np.intersect1d(
        slot_id[: len(sends)], slot_id[len(sends) :], assume_unique=True, return_indices=True
    )
    return i_send, i_recv


def analyze_p2p(ctx: Context) -> P2PResult:
    ops = channel_ops(ctx)
    if not len(ops):
        return P2PResult(ops=ops)
    sends = ops.take(ops["side"] == SEND)
    recvs = ops.take(ops["side"] == RECV)
    if not len(sends) or not len(recvs):
        return P2PResult(ops=ops)
    i_send, i_recv = _pairs(sends, recvs)
    differ = np.zeros(len(i_send), dtype=bool)
    for col in _COMPARED:
        differ |= sends[col][i_send] != recvs[col][i_recv]
    findings = []
    for k in np.flatnonzero(differ)[: ctx.mismatch_cap * 4].tolist():
        findings.append(_pair_finding(ctx, ops, sends, int(i_send[k]), recvs, int(i_recv[k])))
        if len(findings) >= ctx.mismatch_cap:
            break
    return P2PResult(findings=findings, ops=ops)


def _label(ctx: Context, column: str, code: int) -> str:
    return str(ctx.trace.table.label(column, code)) if int(code) >= 0 else "-"


def _changed(ops: Table, rank: int, pos: int, src: int, dst: int, side: int) -> bool | None:
    """Did this rank's op differ from its previous op on the same channel and call site?"""
    mine = ops.take(
        (ops["rank"] == rank) & (ops["src"] == src) & (ops["dst"] == dst) & (ops["side"] == side)
    )
    current = np.flatnonzero(mine["pos"] == pos)
    if not len(current):
        return None
    cur = int(current[0])
    before = np.flatnonzero((mine["pos"] < pos) & (mine["stack_id"] == mine["stack_id"][cur]))
    if not len(before):
        return None
    last = int(before[-1])
    return any(int(mine[c][last]) != int(mine[c][cur]) for c in _COMPARED)


def _pair_finding(ctx: Context, ops: Table, sends: Table, i: int, recvs: Table, j: int) -> Finding:
    """A send and the recv it pairs with disagree on the tensor: who changed?"""
    pg = int(sends["pg"][i])
    src, dst = int(sends["src"][i]), int(sends["dst"][i])
    seq = int(sends["p2p_seq_id"][i])
    send_desc = (
        f"{_label(ctx, 'input_sizes', sends['input_sizes'][i])} "
        f"{_label(ctx, 'input_dtypes', sends['input_dtypes'][i])}"
    )
    recv_desc = (
        f"{_label(ctx, 'input_sizes', recvs['input_sizes'][j])} "
        f"{_label(ctx, 'input_dtypes', recvs['input_dtypes'][j])}"
    )
    s_changed = _changed(ops, src, int(sends["pos"][i]), src, dst, SEND)
    r_changed = _changed(ops, dst, int(recvs["pos"][j]), src, dst, RECV)
    if s_changed and r_changed is False:
        culprits, reason = [src], Reason.SENDER_CHANGED
    elif r_changed and s_changed is False:
        culprits, reason = [dst], Reason.RECEIVER_CHANGED
    else:
        culprits, reason = sorted({src, dst}), Reason.P2P_UNDECIDABLE
    return ctx.finding(
        Kind.P2P_MISMATCH,
        pg,
        p2p_seq_id=seq,
        op="send/recv",
        culprit_ranks=culprits,
        waiting_ranks=[src, dst],
        expected_ranks=sorted({src, dst}),
        reason=reason,
        undecidable=reason == Reason.P2P_UNDECIDABLE,
        facts={
            "src": src,
            "dst": dst,
            "send": send_desc,
            "recv": recv_desc,
            "send_p2p_seq_id": seq,
            "recv_p2p_seq_id": int(recvs["p2p_seq_id"][j]),
        },
    )
