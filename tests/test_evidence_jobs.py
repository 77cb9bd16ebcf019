"""scripts/evidence_jobs.py's sampler (no job is run here, and torch is not imported)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("evidence_jobs", SCRIPTS / "evidence_jobs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["evidence_jobs"] = module
    spec.loader.exec_module(module)
    return module


ej = _load()
SEEDS = 200


@pytest.fixture(scope="module")
def tune() -> list[dict[str, Any]]:
    return [ej.draw("tune", seed) for seed in range(SEEDS)]


@pytest.fixture(scope="module")
def heldout() -> list[dict[str, Any]]:
    return [ej.draw("heldout", seed) for seed in range(1000, 1000 + SEEDS)]


def test_no_torch() -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse((SCRIPTS / "evidence_jobs.py").read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert "torch" not in imported and "subprocess" in imported


def test_same_seed_same_draw() -> None:
    for seed in (0, 7, 123):
        assert ej.draw("tune", seed) == ej.draw("tune", seed)
    assert ej.draw("heldout", 1003) == ej.draw("heldout", 1003)
    assert ej.draw("tune", 1) != ej.draw("tune", 2)


def test_tune_never_draws_held_out(tune: list[dict[str, Any]]) -> None:
    assert all(ej.held_out_combo(s) is None for s in tune)
    more = [ej.draw("tune", seed) for seed in range(SEEDS, 4 * SEEDS)]
    assert all(ej.held_out_combo(s) is None for s in more)


def test_heldout_draws_every_held_out_combination(heldout: list[dict[str, Any]]) -> None:
    found = {ej.held_out_combo(s) for s in heldout}
    assert set(range(len(ej.HELD_OUT))) <= found


def test_ids(tune: list[dict[str, Any]], heldout: list[dict[str, Any]]) -> None:
    assert tune[7]["id"] == "real-tune-0007" and tune[7]["seed"] == 7
    assert heldout[0]["id"] == "real-heldout-1000"
    with pytest.raises(ValueError):
        ej.draw("test", 0)


AXES = {
    "fault": ej.FAULTS,
    "launcher": ej.LAUNCHERS,
    "layout": ej.LAYOUTS,
    "pyspy": ej.PYSPY,
    "names": ej.NAMES,
    "survives": ej.SURVIVES,
    "trainer_lines": ej.TRAINER_LINES,
    "progress": ej.PROGRESS,
    "loglevel": ej.LOGLEVELS,
    "detail": (False, True),
    "dumps": (False, True),
    "cancelled": (False, True),
    "nodes": (2, 3),
    "nproc": (1, 2, 3),
    "rank_locals": ej.RANK_LOCALS,
    "node_rank_arg": (False, True),
}


@pytest.mark.parametrize("axis", sorted(AXES))
def test_every_axis_value_is_drawn(tune: list[dict[str, Any]], axis: str) -> None:
    assert {s[axis] for s in tune} == set(AXES[axis])


def test_every_sub_axis_value_is_drawn(tune: list[dict[str, Any]]) -> None:
    def values(key: str) -> set[Any]:
        return {s[key] for s in tune if s[key] is not None}

    assert values("template") == set(ej.TEMPLATES)
    assert values("dump_layout") == set(ej.DUMP_LAYOUTS)
    assert values("cancel_mode") == set(ej.CANCEL_MODES)
    assert values("slurm_version") == set(ej.SLURM_VERSIONS)
    assert values("role") == {"host", "short", "digits", "none"}
    assert values("dumps_when") == {"on_failure", "on_request"}
    assert {s["waits_in"] for s in tune if s["fault"] == "skipped_collective"} == {
        "barrier",
        "broadcast",
        "all_gather",
    }
    assert {s["exception"] for s in tune if s["fault"] == "exception"} == set(ej.EXCEPTIONS)
    names = {s["log_name"] for s in tune if s["layout"] == "per_node"}
    assert names == set(ej.LOG_NAMES)
    pyspy_names = {s["pyspy_name"] for s in tune if s["pyspy"] == "native_all"}
    assert pyspy_names == set(ej.PYSPY_NAMES)
    assert {s["functions"]["slow_data_loader"] for s in tune} == set(ej.STUCK_FUNCTIONS)


def test_draws_fit_together(tune: list[dict[str, Any]], heldout: list[dict[str, Any]]) -> None:
    for s in tune + heldout:
        assert 2 <= s["world_size"] == s["nodes"] * s["nproc"] <= 6
        assert 0 <= s["culprit"] < s["world_size"]
        assert 1 <= s["fault_step"] < len(s["ops"])
        assert 15 <= s["timeout_s"] <= 25
        assert len(set(s["hosts"])) == s["nodes"]
        assert all(len(h) <= 64 for h in s["hosts"])
        if s["fault"] in ("exception", "sigkill"):
            assert s["pyspy"] == "none" and not s["cancelled"]
        if s["fault"] == "healthy":
            assert not s["cancelled"] and s["hold"] == (s["pyspy"] != "none")
        if s["cancelled"]:
            assert s["fault"] in ej.HUNG_FAULTS and s["cancel_mode"] in ej.CANCEL_MODES
        if s["launcher"] == "role_digits":
            digits = [ej.host_digits(h) for h in s["hosts"]]
            assert all(digits) and len(set(digits)) == len(digits)
        if s["survives"] in ("drop_culprit_pyspy", "pyspy_only"):
            assert s["pyspy"] not in ("none", "faulthandler")  # stacks in files of their own
        if s["pyspy"] == "faulthandler":
            assert s["pyspy_name"] is None and s["pyspy_dir"] is None
        if s["survives"] == "drop_node_log":
            assert s["layout"] == "per_node"
        if s["fault"] == "skipped_collective":
            assert s["ops"][s["fault_step"]][:2] == ["all_reduce", s["waits_in"]]


def test_culprit_is_not_always_the_same_rank(tune: list[dict[str, Any]]) -> None:
    culprits = [s["culprit"] for s in tune]
    assert len(set(culprits)) == 6
    assert sum(c == 0 for c in culprits) < len(culprits) / 2
    assert sum(c == s["world_size"] - 1 for c, s in zip(culprits, tune, strict=True)) < 100


def test_worker_source_renames_functions() -> None:
    s = ej.draw("tune", 3)
    source = ej.worker_source(s["functions"])
    compile(source, "train.py", "exec")
    for old, new in s["functions"].items():
        if old != new:
            assert f"def {new}(" in source
            assert f"def {old}(" not in source
    main = s["functions"]["main_" + s["rank_locals"]]
    assert source.rstrip().endswith(f"    {main}()")
