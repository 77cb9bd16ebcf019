"""The numpy group-bys the analysis relies on give what pandas' group-by gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frtrace.tables.table import (
    Table,
    cumcount,
    first_rows,
    group_max,
    group_min,
    head_per,
    pack,
    split,
)


def _keys(seed: int, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    a = rng.integers(0, 7, n).astype(np.int32)
    b = rng.integers(-3, 40, n).astype(np.int64)
    if wide:  # ranges whose product does not fit one int64: the multi-key sort path
        b = (b % 7 - 3) * (1 << 60)
    return a, b


@pytest.mark.parametrize("wide", [False, True], ids=["packed", "too-wide-to-pack"])
@pytest.mark.parametrize("seed", range(4))
def test_first_rows_are_the_first_row_of_each_key_in_key_order(seed: int, wide: bool) -> None:
    a, b = _keys(seed, wide)
    assert (pack(a, b) is None) == wide
    frame = pd.DataFrame({"a": a, "b": b, "i": np.arange(len(a))})
    expected = frame.groupby(["a", "b"], sort=True)["i"].min().tolist()
    assert first_rows(a, b).tolist() == expected


@pytest.mark.parametrize("seed", range(4))
def test_cumcount_numbers_rows_per_key_from_either_end(seed: int) -> None:
    a, _ = _keys(seed, False)
    by = pd.Series(a).groupby(a)
    assert cumcount(a).tolist() == by.cumcount().tolist()
    assert cumcount(a, reverse=True).tolist() == by.cumcount(ascending=False).tolist()
    assert head_per(a, 3).tolist() == (by.cumcount() < 3).tolist()


@pytest.mark.parametrize("seed", range(4))
def test_group_max_and_split_agree_with_pandas(seed: int) -> None:
    a, b = _keys(seed, False)
    assert group_max(a, b) == pd.Series(b).groupby(a).max().to_dict()
    table = Table({"a": a, "b": b, "i": np.arange(len(a))})
    got = {key: part["i"].tolist() for key, part in split(table, "a")}
    expected = {(int(k),): g["i"].tolist() for k, g in pd.DataFrame(table.cols).groupby("a")}
    assert got == expected


@pytest.mark.parametrize("seed", range(4))
def test_group_extremes_of_keys_already_sorted_agree_with_pandas(seed: int) -> None:
    """Ranks come sorted in the entries table, which takes a path without a sort."""
    a, b = _keys(seed, False)
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    assert group_max(a, b) == pd.Series(b).groupby(a).max().to_dict()
    assert group_min(a, b) == pd.Series(b).groupby(a).min().to_dict()


def test_a_table_becomes_a_dataframe_with_categoricals() -> None:
    table = Table({"op": np.array([1, 0, 1], np.int8), "n": np.arange(3)}, {"op": ["send", "recv"]})
    frame = table.to_pandas()
    assert frame["op"].tolist() == ["recv", "send", "recv"]
    assert isinstance(frame["op"].dtype, pd.CategoricalDtype)
    assert table.record(0) == {"op": "recv", "n": 0}
