#!/usr/bin/env python3
"""Write every bundled fixture's reports into one folder, to compare two versions of frtrace.

A restructuring must not change what users read: run this before and after, then
`diff -r BEFORE AFTER`. For each fixture folder (and each job under fixtures/logs/) it writes
the text report, the JSON report, the HTML page, the raw entries as JSON and as a table, and
each command's exit status, all through the installed `frtrace` command as a user runs it.

Usage: python scripts/snapshot_reports.py OUT_DIR [--frtrace PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
_VIEWS: dict[str, list[str]] = {
    "text": [],
    "verbose": ["-v"],
    "json": ["--format", "json"],
    "raw.json": ["-j"],
    "raw.table": ["-j", "--format", "table"],
}


def fixture_folders() -> list[Path]:
    """Every folder under fixtures/ that holds a job (dumps, logs or both)."""
    root = _REPO / "fixtures"
    jobs = [p for p in sorted(root.iterdir()) if p.is_dir() and p.name != "logs"]
    jobs += [p for p in sorted((root / "logs").iterdir()) if p.is_dir()]
    return jobs


# Each job is copied here first, so that the paths the reports print (and wrap) are the same
# whichever clone or worktree runs this.
_PLACE = Path(f"/tmp/frtrace-snapshot-{os.getpid():07d}")


def snapshot(folder: Path, out: Path, frtrace: str) -> None:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    name = folder.relative_to(_REPO / "fixtures").as_posix().replace("/", "__")
    shutil.rmtree(_PLACE, ignore_errors=True)
    folder = Path(shutil.copytree(folder, _PLACE / name))
    for view, args in _VIEWS.items():
        run = subprocess.run(
            [frtrace, str(folder), *args], capture_output=True, text=True, env=env, check=False
        )
        stdout = run.stdout.replace(str(_PLACE), "<fixtures>")  # wrapped alike, named alike
        (out / f"{name}.{view}").write_text(f"exit {run.returncode}\n{stdout}")
    page = out / f"{name}.html"
    subprocess.run(
        [frtrace, str(folder), "--html", str(page)], capture_output=True, env=env, check=False
    )
    if page.exists():
        page.write_text(page.read_text().replace(str(_PLACE), "<fixtures>"))
    shutil.rmtree(_PLACE, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--frtrace", default=str(_REPO / ".venv" / "bin" / "frtrace"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for folder in fixture_folders():
        snapshot(folder, args.out, args.frtrace)
        print(folder.name, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
