"""The layers contract (pyproject.toml, [tool.importlinter]) holds, and has teeth.

frtrace's modules import one way: dumps -> evidence -> tables -> analysis -> ... -> api/cli
(docs/architecture.md). `lint-imports` checks it in CI; these tests run it on the project and
on a copy of the contract with one arrow reversed, which must fail naming the import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parent.parent


def _lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run(
        [exe, str(config), "--no-cache"],
        cwd=_REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def _layers() -> list[str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((_REPO / "pyproject.toml").read_text())
    (contract,) = config["tool"]["importlinter"]["contracts"]
    return list(contract["layers"])


def _config_with(layers: list[str], tmp_path: Path) -> Path:
    lines = ["[importlinter]", "root_package = frtrace", "include_external_packages = False", ""]
    lines += ["[importlinter:contract:layers]", "name = layers", "type = layers", "layers ="]
    lines += [f"    {layer}" for layer in layers]
    path = tmp_path / "contract.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_modules_keep_the_layers_contract() -> None:
    run = _lint_imports(_REPO / "pyproject.toml")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "1 kept, 0 broken" in run.stdout


def test_the_same_contract_written_out_again_is_kept(tmp_path: Path) -> None:
    # The reversed-arrow test below relies on this rewriting being faithful.
    run = _lint_imports(_config_with(_layers(), tmp_path))
    assert run.returncode == 0, run.stdout[-3000:]


def test_reversing_the_arrow_between_tables_and_analysis_breaks_the_contract(
    tmp_path: Path,
) -> None:
    layers = _layers()
    i, j = layers.index("frtrace.analysis"), layers.index("frtrace.tables")
    layers[i], layers[j] = layers[j], layers[i]  # now tables may import analysis, not back
    run = _lint_imports(_config_with(layers, tmp_path))
    assert run.returncode != 0
    assert "frtrace.analysis is not allowed to import frtrace.tables" in run.stdout


def test_reversing_the_arrow_between_report_and_api_breaks_the_contract(tmp_path: Path) -> None:
    layers = _layers()
    i = next(k for k, layer in enumerate(layers) if "frtrace.api" in layer)
    j = layers.index("frtrace.report")
    layers[i], layers[j] = layers[j], layers[i]  # now report may import api, not back
    run = _lint_imports(_config_with(layers, tmp_path))
    assert run.returncode != 0
    assert "frtrace.api is not allowed to import frtrace.report" in run.stdout
