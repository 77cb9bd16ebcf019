#!/usr/bin/env python3
"""Run every hostile-input case (tests/hostile_cases.py) on its own and print what it cost.

Each case gets a fresh folder with two good dumps plus its bad input, and frtrace runs in a
subprocess under a 1.5 GB address-space limit. The table lists the outcome (the skip reason, or
'analyzed', or the exit status), whether it met the expectation, the peak RSS of frtrace's
largest process (ru_maxrss of the children) and the wall time.

Usage: .venv/bin/python scripts/hostile_report.py [-k SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_REPO / "tests"))

from hostile_cases import (  # noqa: E402
    MARKER_NAME,
    Case,
    build_folder,
    case_args,
    cases,
    run_cli,
    verify,
)
from tabulate import tabulate  # noqa: E402


def outcome(case: Case, status: int, report: Path, stderr: str) -> str:
    """The skip reason of the case's file, 'analyzed', 'ignored', or the last stderr line."""
    if status in (0, 1) and report.exists():
        data = json.loads(report.read_text())
        for item in data["inputs"]["skipped"]:
            if Path(item["file"]).name == case.file:
                return f"skipped: {item['reason']}"
        if case.rank in data["inputs"]["ranks"]:
            return f"analyzed (exit {status})"
        return f"ignored: not named like a dump (exit {status})"
    lines = [line for line in stderr.splitlines() if line.strip()]
    return f"exit {status}: {lines[-1] if lines else ''}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args()
    rows = []
    failures = 0
    with tempfile.TemporaryDirectory(prefix="frtrace-hostile-") as tmp:
        for i, case in enumerate(c for c in cases(Path(tmp) / "x") if args.k in c.name):
            base = Path(tmp) / str(i)
            base.mkdir()
            # each case writes its marker next to its own folder, where verify() looks
            case = next(c for c in cases(base / MARKER_NAME) if c.name == case.name)
            folder, report = base / "dumps", base / "report.json"
            build_folder(folder, [case])
            result = run_cli(case_args(case, folder, report))
            try:
                verify([case], result, folder, report)
                verdict = "ok"
            except AssertionError as exc:
                verdict = f"FAIL {str(exc)[:60]}"
                failures += 1
            text = outcome(case, result.status, report, result.stderr)
            rows.append(
                [
                    case.name,
                    case.kind,
                    text[:70],
                    verdict,
                    f"{result.peak_rss_mb:.0f}",
                    f"{result.wall:.2f}",
                ]
            )
    headers = ["case", "kind", "outcome", "check", "peak RSS MB", "wall s"]
    print(tabulate(rows, headers=headers, tablefmt="github"))
    rss = max(rows, key=lambda r: float(r[4]))
    wall = max(rows, key=lambda r: float(r[5]))
    print(
        f"\n{len(rows)} cases, {failures} failed; worst peak RSS {rss[4]} MB ({rss[0]}), "
        f"worst wall {wall[5]} s ({wall[0]})"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
