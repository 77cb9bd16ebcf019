"""The loader against dumps real torch writes, not only against what we believe it writes.

Each scenario is captured once per module with gloo on CPU (a few seconds) and checked
alongside the committed copy in ``fixtures/``, so both a torch upgrade that changes the
format and a stale fixture show up here.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from frtrace import capture

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SCRIPTS = str(ROOT / "scripts")
# Spawned ranks import the worker functions by module name, and inherit this path.
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)


def _make_fixtures() -> Any:
    pytest.importorskip("torch")
    import make_fixtures

    return make_fixtures


def _committed(folder: str) -> Path:
    path = FIXTURES / folder
    if not path.is_dir():
        pytest.skip(f"{path} not generated; run scripts/make_fixtures.py")
    return path


@pytest.fixture(scope="module")
def captured_tutorial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    mf = _make_fixtures()
    root = tmp_path_factory.mktemp("tutorial")
    mf.capture_tutorial(root / "pickle", root / "json")
    return root / "pickle", root / "json"


@pytest.fixture(scope="module")
def captured_healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mf = _make_fixtures()
    out = tmp_path_factory.mktemp("healthy_4rank")
    mf.capture_healthy(out)
    return out


@pytest.fixture(params=["captured", "committed"])
def tutorial_dirs(request: pytest.FixtureRequest) -> tuple[Path, Path]:
    if request.param == "committed":
        return _committed("tutorial"), _committed("tutorial_json")
    dirs: tuple[Path, Path] = request.getfixturevalue("captured_tutorial")
    return dirs


@pytest.fixture(params=["captured", "committed"])
def healthy_dir(request: pytest.FixtureRequest) -> Path:
    if request.param == "committed":
        return _committed("healthy_4rank")
    path: Path = request.getfixturevalue("captured_healthy")
    return path


def _load(path: Path) -> Any:
    load = pytest.importorskip("frtrace.tables.load")
    return load.load_trace(path)


def _members(trace: Any, pg_name: str) -> list[int]:
    row = trace.groups[trace.groups["pg_name"] == pg_name]
    assert len(row) == 1, f"expected one group {pg_name!r}, got\n{trace.groups}"
    return sorted(int(r) for r in row.iloc[0]["ranks"])


def test_dumps_are_plain_pickles(tutorial_dirs: tuple[Path, Path], healthy_dir: Path) -> None:
    """Users may inspect dumps without frtrace: they must load with the stdlib alone."""
    paths = [*tutorial_dirs[0].glob("trace_*"), *healthy_dir.glob("trace_*")]
    assert len(paths) == 6
    for path in paths:
        with open(path, "rb") as f:
            dump = pickle.load(f)
        assert {"version", "pg_config", "entries"} <= dump.keys()
        assert dump["entries"], path


def test_tutorial_loads_both_ranks_with_extra_collective(
    tutorial_dirs: tuple[Path, Path],
) -> None:
    trace = _load(tutorial_dirs[0])
    entries = trace.entries
    assert set(entries["rank"]) == {0, 1}
    assert set(entries["backend"]) == {"gloo"}
    assert not trace.skipped
    assert set(trace.files["format"]) == {"pickle"}
    assert sorted(trace.files["rank"]) == [0, 1]
    pg0 = entries[(entries["pg_name"] == "0") & (entries["op"] == "all_reduce")]
    assert pg0.groupby("rank").size().to_dict() == {0: 5, 1: 4}
    seqs = {r: sorted(g["collective_seq_id"]) for r, g in pg0.groupby("rank")}
    assert seqs == {0: [1, 2, 3, 4, 5], 1: [1, 2, 3, 4]}
    assert _members(trace, "0") == [0, 1]


def test_json_dump_loads_like_pickle(tutorial_dirs: tuple[Path, Path]) -> None:
    pickle_trace, json_trace = _load(tutorial_dirs[0]), _load(tutorial_dirs[1])
    assert set(json_trace.files["format"]) == {"json"}
    assert not json_trace.skipped
    cols = ["rank", "pg_name", "collective_seq_id", "op"]

    def rows(trace: Any) -> list[tuple[Any, ...]]:
        return sorted(trace.entries[cols].itertuples(index=False, name=None))

    assert rows(json_trace) == rows(pickle_trace)


def test_healthy_groups_recovered_despite_empty_pg_config(healthy_dir: Path) -> None:
    with open(healthy_dir / "trace_0", "rb") as f:
        raw = pickle.load(f)
    assert set(raw["pg_config"]) == {""}  # what torch wrote: the loader has to repair it
    trace = _load(healthy_dir)
    assert _members(trace, "0") == [0, 1, 2, 3]
    assert _members(trace, "1") == [0, 1]
    assert _members(trace, "2") == [2, 3]
    descs = dict(zip(trace.groups["pg_name"], trace.groups["pg_desc"], strict=True))
    assert descs["1"] == "pair01" and descs["2"] == "pair23"


def test_healthy_every_member_issued_the_same_collectives(healthy_dir: Path) -> None:
    entries = _load(healthy_dir).entries
    assert set(entries["rank"]) == {0, 1, 2, 3}
    ops = {
        (pg, rank): list(g.sort_values("collective_seq_id")["op"])
        for (pg, rank), g in entries.groupby(["pg_name", "rank"])
    }
    default_ops = ["all_reduce", "broadcast", "all_gather", "all_reduce", "barrier"]
    pair_ops = ["all_reduce", "all_gather", "broadcast"]
    assert ops == {
        **{("0", r): default_ops for r in range(4)},
        **{("1", r): pair_ops for r in (0, 1)},
        **{("2", r): pair_ops for r in (2, 3)},
    }


def test_capture_module_does_not_import_torch() -> None:
    """Analysis machines may lack torch; importing the capture helpers must not need it."""
    code = "import sys, frtrace.capture; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_enable_flight_recorder_sets_old_and_new_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("TORCH_FR_", "TORCH_NCCL_")):
            monkeypatch.delenv(name)
    env = capture.enable_flight_recorder(buffer_size=64, prefix="/tmp/x_", timing=True)
    for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        assert os.environ[name] == env[name] == "64"
    assert os.environ["TORCH_FR_DUMP_TEMP_FILE"] == "/tmp/x_"
    assert os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "/tmp/x_"
    assert os.environ["TORCH_NCCL_ENABLE_TIMING"] == "1"
    monkeypatch.setenv("RANK", "3")
    assert capture.default_dump_path() == "/tmp/x_3"
    assert capture.default_dump_path("/data/fr_") == "/data/fr_3"


def test_real_cascading_hang_is_blamed_on_the_rank_at_the_end_of_the_chain() -> None:
    from frtrace.analysis.analyze import analyze
    from frtrace.report.wording import chain_lines

    analysis = analyze(_load(FIXTURES / "cascade_4rank"))
    root = analysis.root_cause
    assert root is not None
    assert (root.kind, root.culprit_ranks, root.pg_desc, root.collective_seq_id) == (
        "missing_ranks",
        [3],
        "pair23",
        3,
    )
    chain = chain_lines(root)
    assert chain[0].startswith("ranks 0-1 wait in default_pg#3")
    assert "rank 2 waits in pair23#3" in chain[1]
