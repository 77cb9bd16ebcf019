"""Two rules a one-line slip would break silently: the root cause is the cause that holds up
the most ranks over its whole cascade (not its direct waiters), and a p2p channel is FIFO
(queued sends pair with receives in the order both were posted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builders import nccl_entry, write_pickle

from frtrace.analysis.analyze import analyze
from frtrace.tables.load import load_trace

T0 = 1_730_000_000_000_000_000
HOUR_NS = 3_600 * 10**9


def entry(rank: int, pg: tuple[str, str], pg_id: int, seq: int, done: bool, **kw: Any) -> dict:
    """An NCCL entry: completed long ago, or started and in flight for an hour at the dump."""
    rid = kw.pop("record_id", seq)
    times = (
        {"state": "completed", "time_created_ns": T0 + rid * 1000}
        if done
        else {
            "state": "started",
            "time_created_ns": T0 + rid * 1000,
            "time_discovered_started_ns": T0 + HOUR_NS,
            "time_discovered_completed_ns": None,
            "duration_ms": None,
            "retired": False,
        }
    )
    return nccl_entry(rid, seq, process_group=pg, pg_id=pg_id, **{**times, **kw})


def dump(groups: dict[str, tuple[str, list[int]]], entries: list[dict], rank: int) -> dict:
    """A dump whose pg_config lists every group and whose pg_status follows its entries."""
    status: dict[str, dict[str, int]] = {}
    for e in entries:
        if e["is_p2p"]:
            continue
        done = e["collective_seq_id"] if e["state"] == "completed" else 0
        status[str(e["pg_id"])] = {
            "last_enqueued_collective": e["collective_seq_id"],
            "last_started_collective": e["collective_seq_id"],
            "last_completed_collective": done,
        }
    return {
        "version": "2.10",
        "comm_lib_version": "2.27.5",
        "pg_config": {
            name: {"name": name, "desc": desc, "ranks": str(members)}
            for name, (desc, members) in groups.items()
        },
        "pg_status": status,
        "entries": entries,
    }


def cascade_job(folder: Path) -> Path:
    """Two independent stops. Rank 7 stops: ranks 1 and 6 wait for it in g1, ranks 4-5 wait
    in g2 for rank 6, ranks 2-3 wait in g3 for rank 4 (six ranks held up, two of them
    directly). Rank 8 stops: ranks 9-11 wait for it in h (three ranks, all directly)."""
    groups = {
        "0": ("default_pg", list(range(12))),
        "1": ("g1", [1, 6, 7]),
        "2": ("g2", [4, 5, 6]),
        "3": ("g3", [2, 3, 4]),
        "4": ("h", [8, 9, 10, 11]),
    }
    waits = {1: ("1", 1), 6: ("1", 1), 4: ("2", 2), 5: ("2", 2), 2: ("3", 3), 3: ("3", 3)}
    waits.update({r: ("4", 4) for r in (9, 10, 11)})
    for rank in range(12):
        entries = [entry(rank, ("0", "default_pg"), 0, 1, True, record_id=0)]
        if rank in waits:
            name, pg_id = waits[rank]
            entries.append(entry(rank, (name, groups[name][0]), pg_id, 1, False, record_id=1))
        write_pickle(folder / f"trace_{rank}", dump(groups, entries, rank))
    return folder


def test_the_root_cause_is_the_stop_holding_up_most_ranks_through_its_cascade(
    tmp_path: Path,
) -> None:
    analysis = analyze(load_trace(cascade_job(tmp_path)))
    root = analysis.root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.pg_desc) == ("missing_ranks", [7], "g1")
    assert root.ranks_waiting_on_this == 6
    other = [f for f in analysis.findings[1:] if not f.secondary]
    assert [f.culprit_ranks for f in other] == [[8]]


def p2p(rank: int, seq: int, send: bool, size: int, pos: int) -> dict:
    """A queued send 0->1 or recv 1<-0 in the default group (enqueued, not yet started)."""
    return nccl_entry(
        pos,
        1,
        profiling_name="nccl:send 0->1" if send else "nccl:recv 1<-0",
        is_p2p=True,
        p2p_seq_id=seq,
        input_sizes=[[size]],
        output_sizes=[[size]],
        state="scheduled",
        time_discovered_started_ns=None,
        time_discovered_completed_ns=None,
        duration_ms=None,
        retired=False,
    )


def queued_channel(folder: Path, sent: list[int], received: list[int]) -> Path:
    """Rank 0 queued sends of these sizes to rank 1, which posted receives of these sizes."""
    groups = {"0": ("default_pg", [0, 1])}
    done = [nccl_entry(0, 1)]
    sends = [p2p(0, i + 1, True, n, i + 1) for i, n in enumerate(sent)]
    recvs = [p2p(1, i + 1, False, n, i + 1) for i, n in enumerate(received)]
    write_pickle(folder / "trace_0", dump(groups, done + sends, 0))
    write_pickle(folder / "trace_1", dump(groups, done + recvs, 1))
    return folder


def test_queued_sends_pair_with_receives_in_the_order_both_were_posted(tmp_path: Path) -> None:
    analysis = analyze(load_trace(queued_channel(tmp_path, [1, 2, 3], [1, 2])))
    assert [f for f in analysis.findings if f.kind == "p2p_mismatch"] == []


def test_a_queued_send_that_differs_from_its_receive_is_named_at_its_place(
    tmp_path: Path,
) -> None:
    analysis = analyze(load_trace(queued_channel(tmp_path, [1, 5, 3], [1, 2])))
    found = [f for f in analysis.findings if f.kind == "p2p_mismatch"]
    assert [(f.p2p_seq_id, f.facts["send"], f.facts["recv"]) for f in found] == [
        (2, "[[5]] Float", "[[2]] Float")
    ]
