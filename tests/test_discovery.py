"""Finding dump files: ranks from names, prefixes, sub-folders, the default location."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import nccl_dump, write_pickle

from frtrace.dumps.discover import discover, infer_prefix, rank_from_name
from frtrace.errors import FrtraceError


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("nccl_trace_rank_12", 12),
        ("nccl_trace_rank_container-node02_5", 5),
        ("nccl_trace_rank_node03-host_27", 27),
        ("trace_3.json", 3),
        ("trace_3.json.gz", 3),
        ("trace_7.pkl", 7),
        ("README", None),
    ],
)
def test_rank_is_the_trailing_integer_of_the_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_prefix_is_inferred_up_to_the_host_name() -> None:
    names = ["nccl_trace_rank_node03-host_27", "nccl_trace_rank_node04-host_28"]
    assert infer_prefix(names) == ("nccl_trace_rank_", 0)


def test_prefix_inference_picks_the_largest_family_of_files() -> None:
    prefix, others = infer_prefix(["trace_0", "trace_1", "trace_2", "other_log_9", "notes.txt"])
    assert (prefix, others) == ("trace_", 1)


def test_files_in_one_level_of_host_folders_are_found(tmp_path: Path) -> None:
    write_pickle(tmp_path / "host-a" / "trace_0", nccl_dump(0, 2))
    write_pickle(tmp_path / "host-b" / "trace_1", nccl_dump(1, 2))
    found = discover(tmp_path, None)
    assert [f.rank for f in found.files] == [0, 1]
    assert found.prefix == "trace_"


def test_explicit_prefix_leaves_other_files_out(tmp_path: Path) -> None:
    write_pickle(tmp_path / "trace_0", nccl_dump(0, 1))
    write_pickle(tmp_path / "other_1", nccl_dump(1, 1))
    found = discover(tmp_path, "trace_")
    assert [f.path.name for f in found.files] == ["trace_0"]
    assert not found.prefix_inferred


def test_two_files_claiming_one_rank_is_an_error_naming_both(tmp_path: Path) -> None:
    write_pickle(tmp_path / "trace_0", nccl_dump(0, 1))
    write_pickle(tmp_path / "trace_0.json", nccl_dump(0, 1))
    with pytest.raises(FrtraceError) as err:
        discover(tmp_path, None)
    assert "trace_0 and" in str(err.value) and "trace_0.json" in str(err.value)


def test_two_jobs_in_subfolders_are_told_apart_by_their_folder(tmp_path: Path) -> None:
    """Sub-folders are searched (host folders of one job); two jobs' folders side by side
    claim each rank twice, and --prefix cannot help there: the advice names a job's folder."""
    for job in ("job-1", "job-2"):
        write_pickle(tmp_path / job / "trace_0", nccl_dump(0, 1))
    with pytest.raises(FrtraceError) as err:
        discover(tmp_path, None)
    assert str(err.value) == (
        f"two files claim rank 0: {tmp_path}/job-1/trace_0 and {tmp_path}/job-2/trace_0 "
        f"(two jobs' dumps? give the folder of one, e.g. {tmp_path}/job-1)"
    )


def test_default_location_comes_from_the_torch_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pickle(tmp_path / "my_fr_3", nccl_dump(3, 4))
    monkeypatch.setenv("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path / "my_fr_"))
    found = discover(None, None)
    assert found.prefix == "my_fr_"
    assert [f.rank for f in found.files] == [3]


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FrtraceError, match="no such folder"):
        discover(tmp_path / "nope", None)


def test_the_default_location_is_searched_without_descending_into_other_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pickle(tmp_path / "nccl_trace_rank_0", nccl_dump(0, 1))
    write_pickle(tmp_path / "old_job" / "nccl_trace_rank_0", nccl_dump(0, 1))
    monkeypatch.setenv("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path / "nccl_trace_rank_"))
    found = discover(None, None)
    assert [f.path for f in found.files] == [tmp_path / "nccl_trace_rank_0"]


def _no_prefix_variable(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for var in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))


def test_without_a_variable_the_dumps_of_current_torch_are_found_in_the_home_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_prefix_variable(monkeypatch, tmp_path)
    write_pickle(tmp_path / ".cache" / "torch" / "comm_lib_trace_rank_0", nccl_dump(0, 1))
    found = discover(None, None)
    assert (found.trace_dir, found.prefix) == (
        tmp_path / ".cache" / "torch",
        "comm_lib_trace_rank_",
    )
    assert [f.rank for f in found.files] == [0]


def test_xdg_cache_home_moves_the_default_place_as_it_does_for_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_prefix_variable(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    write_pickle(tmp_path / "xdg" / "torch" / "comm_lib_trace_rank_2", nccl_dump(2, 3))
    assert [f.path for f in discover(None, None).files] == [
        tmp_path / "xdg" / "torch" / "comm_lib_trace_rank_2"
    ]


def test_dumps_of_torch_2_8_in_the_home_cache_are_found_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_prefix_variable(monkeypatch, tmp_path)
    write_pickle(tmp_path / ".cache" / "torch" / "nccl_trace_rank_1", nccl_dump(1, 2))
    assert discover(None, None).prefix == "nccl_trace_rank_"


def test_no_dump_at_any_default_place_is_an_error_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_prefix_variable(monkeypatch, tmp_path)
    monkeypatch.setattr("frtrace.dumps.discover.LEGACY_PREFIX_PATH", str(tmp_path / "old_"))
    with pytest.raises(FrtraceError) as err:
        discover(None, None)
    assert f"{tmp_path}/.cache/torch/comm_lib_trace_rank_<rank>" in str(err.value)
    assert f"{tmp_path}/old_<rank>" in str(err.value)


def test_a_folder_of_host_folders_of_dumps_is_read(tmp_path: Path) -> None:
    """`dumps/<host>/trace_<rank>` beside the logs: the host folders' dumps are found."""
    from conftest import FIXTURES

    for rank, host in ((0, "nodeA"), (1, "nodeB")):
        target = tmp_path / "dumps" / host
        target.mkdir(parents=True)
        shutil.copy(FIXTURES / "tutorial" / f"trace_{rank}", target / f"trace_{rank}")
    (tmp_path / "nodeA.log").write_text("[nodeA:0]: hello\n")
    found = discover(tmp_path, None)
    assert [f.rank for f in found.files] == [0, 1]
