"""The Python API as a notebook uses it: load, analyze, and the three reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import FIXTURES

import frtrace
from frtrace.errors import FrtraceError
from frtrace.report.json_report import load_schema


def _root(analysis: frtrace.Analysis) -> tuple[str, list[int], str, str, int | None]:
    f = analysis.root_cause
    assert f is not None
    return f.kind, f.culprit_ranks, f.pg_name, f.pg_desc, f.collective_seq_id


def test_tutorial_root_cause_is_rank_0s_extra_all_reduce() -> None:
    analysis = frtrace.analyze(frtrace.load(FIXTURES / "tutorial"))
    assert _root(analysis) == ("missing_ranks", [0], "0", "default_pg", 3)
    assert not analysis.ok


def test_cascade_root_cause_is_rank_3_in_pair23_from_a_list_of_files() -> None:
    files = sorted(str(p) for p in (FIXTURES / "cascade_4rank").iterdir())
    trace = frtrace.load(files)
    assert isinstance(trace, frtrace.Trace) and trace.ranks == [0, 1, 2, 3]
    analysis = frtrace.analyze(trace)
    assert _root(analysis) == ("missing_ranks", [3], "2", "pair23", 3)
    assert _root(frtrace.analyze(frtrace.load(str(FIXTURES / "cascade_4rank")))) == _root(analysis)


def test_reports_are_the_commands_reports() -> None:
    analysis = frtrace.analyze(frtrace.load(FIXTURES / "cascade_4rank"))
    report = json.loads(frtrace.to_json(analysis))
    jsonschema.validate(report, load_schema())
    assert report["root_cause"]["culprit_ranks"] == [3]
    text = frtrace.to_text(analysis, width=80)
    assert text.splitlines()[-1] == (
        "HUNG: root cause missing_ranks, culprit rank 3, pair23#3 (pg 2); exit 1"
    )
    page = frtrace.to_html(analysis)
    assert page.startswith("<!DOCTYPE html>") and 'id="frtrace-data"' in page


def test_healthy_job_has_no_root_cause() -> None:
    analysis = frtrace.analyze(frtrace.load(FIXTURES / "healthy_4rank"))
    assert analysis.ok and analysis.root_cause is None and analysis.findings == []
    assert json.loads(frtrace.to_json(analysis))["ok"] is True


def test_load_says_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(FrtraceError, match="no such folder"):
        frtrace.load(tmp_path / "nope")
    unnamed = tmp_path / "dump.pkl"  # a dump by its bytes (text would be read as a log)
    unnamed.write_bytes((FIXTURES / "tutorial" / "trace_0").read_bytes())
    with pytest.raises(FrtraceError, match="does not end in a rank"):
        frtrace.load([unnamed])


def test_import_is_cheap_and_never_pulls_pandas_or_torch() -> None:
    code = (
        "import sys, frtrace, frtrace.cli; "
        "print(sorted(m for m in ('pandas', 'numpy', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert "load" in dir(frtrace)
    with pytest.raises(AttributeError):
        _ = frtrace.nothing_here


def test_loading_only_ranks_that_left_no_dump_names_the_ranks_there() -> None:
    with pytest.raises(FrtraceError, match=r"^no rank 5 among the dumps: ranks 0-1$"):
        frtrace.load(FIXTURES / "tutorial", ranks=[5])
