"""Reading untrusted dumps: hostile pickles run nothing, broken files are skipped with a reason."""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path

import pytest
from conftest import nccl_dump, nccl_entry, write_pickle

from frtrace.dumps.read import decode, read_dump
from frtrace.errors import DumpError
from frtrace.tables.load import load_trace


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_asks_for_a_global_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    blob = pickle.dumps({"version": "2.10", "entries": [_Exploit(marker)]})
    with pytest.raises(DumpError, match=r"global (posix|os)\.system"):
        decode(blob)
    assert not marker.exists()


def test_a_truncated_pickle_is_reported_as_truncated(tmp_path: Path) -> None:
    blob = pickle.dumps(nccl_dump(0, 1), protocol=2)
    path = tmp_path / "trace_0"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DumpError, match="truncated pickle"):
        read_dump(path)


def test_a_text_file_is_neither_pickle_nor_json(tmp_path: Path) -> None:
    path = tmp_path / "trace_1"
    path.write_text("rank 1 crashed, see stderr\n")
    with pytest.raises(DumpError, match="neither a pickle nor a JSON dump"):
        read_dump(path)


def test_a_pickle_that_is_not_a_dict_is_rejected() -> None:
    with pytest.raises(DumpError, match="top level is list"):
        decode(pickle.dumps([1, 2, 3]))


def test_a_dict_without_dump_keys_is_rejected() -> None:
    with pytest.raises(DumpError, match="not a Flight Recorder dump"):
        decode(pickle.dumps({"loss": 1.5}))


def test_gzip_compressed_pickle_and_json_both_decode() -> None:
    dump = nccl_dump(0, 1)
    assert decode(gzip.compress(pickle.dumps(dump))).fmt == "pickle"
    as_json = dict(
        dump, entries=[{k: v for k, v in e.items() if k != "frames"} for e in dump["entries"]]
    )
    decoded = decode(gzip.compress(json.dumps(as_json).encode()))
    assert (decoded.fmt, decoded.compressed) == ("json", True)


def test_one_broken_dump_among_good_ones_is_skipped_and_the_rest_loaded(tmp_path: Path) -> None:
    for rank in range(3):
        write_pickle(tmp_path / f"trace_{rank}", nccl_dump(rank, 4))
    (tmp_path / "trace_3").write_bytes(b"\x80\x02}q\x00(X")
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 1, 2]
    assert [(Path(s.file).name, s.reason) for s in trace.skipped] == [
        ("trace_3", "truncated pickle (file ends early)")
    ]
    assert trace.missing_dumps == [3]


def test_json_quirks_string_status_zero_times_and_no_entries_key(tmp_path: Path) -> None:
    entry = {k: v for k, v in nccl_entry(0, 1, state="scheduled").items() if k != "frames"}
    entry.update(
        time_discovered_started_ns=0,
        time_discovered_completed_ns=0,
        process_group=["0", "default_pg"],
    )
    dump = nccl_dump(0, 2, [entry])
    dump["pg_status"] = {
        "0": {
            "last_enqueued_collective": "1",
            "last_started_collective": "-1",
            "last_completed_collective": "-1",
        }
    }
    (tmp_path / "trace_0.json").write_text(json.dumps(dump))
    empty = nccl_dump(1, 2, [])
    del empty["entries"]
    (tmp_path / "trace_1.json").write_text(json.dumps(empty))
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 1]
    row = trace.entries.iloc[0]
    assert (row["time_started_ns"], row["state"], row["stack_id"]) == (0, "scheduled", -1)
    status = trace.pg_status.set_index("rank").loc[0]
    assert (status["last_enqueued"], status["last_started"]) == (1, -1)


@pytest.mark.parametrize("fixture", ["tutorial/trace_0", "tutorial_json/trace_0.json"])
def test_corrupted_dumps_are_skipped_or_analyzed_but_never_raise(
    tmp_path: Path, fixture: str
) -> None:
    import random
    import shutil

    from conftest import FIXTURES

    from frtrace.analysis.analyze import analyze
    from frtrace.tables.parse import parse_file

    original = (FIXTURES / fixture).read_bytes()
    peer = FIXTURES / fixture.replace("trace_0", "trace_1")
    rng = random.Random(7)
    outcomes = {"skipped": 0, "analyzed": 0}
    for trial in range(60):
        blob = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        folder = tmp_path / str(trial)
        folder.mkdir()
        shutil.copy(peer, folder / peer.name)
        (folder / Path(fixture).name).write_bytes(
            bytes(blob[: rng.randint(1, len(blob))]) if trial % 3 == 0 else bytes(blob)
        )
        _rank, _path, cols, _fmt, _gz, reason = parse_file((str(folder / Path(fixture).name), 0))
        if cols is None:
            assert reason and "\n" not in reason
            outcomes["skipped"] += 1
        else:
            analyze(load_trace(folder))
            outcomes["analyzed"] += 1
    assert outcomes["skipped"] > 0
