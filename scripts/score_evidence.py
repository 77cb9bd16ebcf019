"""Judge frtrace on generated jobs: the culprit, its host, what it was doing, the exit status.

Usage: ``python scripts/score_evidence.py DIR [DIR...] [--only ID...] [--show-failures]
[--json OUT]``

Each DIR holds scenario folders written by ``scripts/evidence_jobs.py`` (real torchrun + gloo
jobs) or ``scripts/nccl_log_jobs.py`` (NCCL jobs' logs rendered from torch's formats): an
``evidence/`` folder handed to frtrace as a user would, and ``expected.json``, the ground
truth the job itself recorded (schema ``frtrace.evidence-job/1``). The oracle is that truth
and the raw evidence text, never frtrace's own reasoning:

- exit status: one of ``expect_exit`` (a hung job never exits 0; a healthy one exits 0, or 4
  where nothing proves the world whole);
- culprit: the root cause names exactly the culprit's rank, or, with no rank named, exactly
  its process (host and pid);
- host: the culprit's host is among the root cause's hosts (compared by short name), where
  the evidence names that host at all (in a file's text or path);
- what it was doing, where the evidence holds it: the function it is stuck in when a py-spy
  file holds its pid, the exception type when a traceback of it is in the logs, the signal
  when torchelastic's summary names it.

Prints one line per scenario that is not right (with ``--show-failures``) and a table per
source and fault; ``--json`` writes every verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120


@dataclass
class Verdict:
    """How frtrace did on one scenario."""

    id: str
    source: str
    fault: str
    exit: int
    exit_ok: bool
    culprit_ok: bool | None  # None: healthy, nothing to name
    host_ok: bool | None
    detail_ok: bool | None  # None: the evidence does not hold it
    said: str  # frtrace's verdict line
    seconds: float
    problems: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        return self.exit_ok and all(
            v is not False for v in (self.culprit_ok, self.host_ok, self.detail_ok)
        )

    named: bool = True  # the report named a culprit (a rank or a process)
    among: bool = False  # undecidable, the culprit among those it named

    @property
    def unknown(self) -> bool:
        """A hung job left without a culprit (UNKNOWN, or a finding whose culprit is in none
        of the inputs): not wrong, but not right."""
        return self.fault != "healthy" and not self.named and self.exit != 0


def short(host: str | None) -> str:
    host = (host or "").strip().lower()
    return host if re.fullmatch(r"[\d.]+", host) else host.split(".", 1)[0]


def evidence_text(folder: Path) -> str:
    """Every text file of the evidence, joined (dumps are binary or JSON objects)."""
    parts = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.stat().st_size < 64 << 20:
            raw = path.read_bytes()
            if raw[:1] not in (b"\x80", b"{", b"\x1f") and b"\x00" not in raw[:4096]:
                parts.append(raw.decode("utf-8", "replace"))
    return "\n".join(parts)


def run_frtrace(folder: Path) -> tuple[int, dict[str, Any] | None, str, float]:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO))
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "frtrace", str(folder), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    took = time.monotonic() - started
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        data = None
    return proc.returncode, data, proc.stderr, took


def judge(scenario: Path) -> Verdict:
    truth = json.loads((scenario / "expected.json").read_text())
    folder = scenario / truth.get("evidence", "evidence")
    code, data, stderr, took = run_frtrace(folder)
    culprit = truth.get("culprit")
    v = Verdict(
        truth["id"],
        truth.get("source", "?"),
        truth.get("fault", "?"),
        code,
        code in truth["expect_exit"],
        None,
        None,
        None,
        "",
        round(took, 2),
    )
    if data is None:
        v.problems.append(f"no JSON report (exit {code}): {stderr.strip()[-300:]}")
        v.exit_ok = False
        return v
    root = data.get("root_cause")
    v.said = f"{data.get('verdict')}: " + (
        f"{root['kind']} ranks {root['culprit_ranks']} procs "
        f"{[p['pid'] for p in root.get('culprit_processes', [])]}"
        if root
        else "no finding"
    )
    if not v.exit_ok:
        v.problems.append(f"exit {code}, expected {truth['expect_exit']}")
    v.named = bool(root and (root["culprit_ranks"] or root.get("culprit_processes")))
    if culprit is None:
        return v
    if root is None:
        v.culprit_ok = v.host_ok = False
        v.problems.append("no root cause")
        return v
    text = evidence_text(folder)
    paths = "\n".join(str(p.relative_to(folder)) for p in folder.rglob("*"))
    _judge_culprit(v, truth, culprit, root, f"{text}\n{paths}")
    _judge_detail(v, culprit, root, text)
    return v


def _judge_culprit(
    v: Verdict, truth: dict[str, Any], culprit: dict[str, Any], root: dict[str, Any], text: str
) -> None:
    """The culprit named exactly; its host named where the evidence names it at all."""
    ranks = sorted(culprit.get("ranks") or [culprit["rank"]])
    named = sorted(root["culprit_ranks"])
    procs = root.get("culprit_processes", [])
    undecidable = bool(truth.get("style", {}).get("undecidable_from_logs"))
    if named:
        v.culprit_ok = named == ranks or (undecidable and set(ranks) <= set(named))
    else:
        v.culprit_ok = (
            len(procs) == 1
            and procs[0]["pid"] == culprit.get("pid")
            and (short(procs[0]["host"]) == short(culprit.get("host")))
        )
    if not v.culprit_ok:
        named_pids = {p.get("pid") for p in procs}  # processes named without their ranks
        v.among = bool(root["evidence"].get("undecidable")) and (
            set(ranks) <= set(named) or (not named and culprit.get("pid") in named_pids)
        )
        v.problems.append(f"culprit {ranks} (pid {culprit.get('pid')}), said {v.said}")
    want = short(culprit.get("host"))
    hosts = [short(h) for h in root.get("hosts", [])]
    if not want or not re.search(rf"(?<![\w-]){re.escape(want)}(?![\w-])", text, re.I):
        return  # the evidence never names the culprit's host
    v.host_ok = want in hosts
    if not v.host_ok:
        v.problems.append(f"host {culprit.get('host')!r}, said {root.get('hosts')}")


def _judge_detail(v: Verdict, culprit: dict[str, Any], root: dict[str, Any], text: str) -> None:
    """What the culprit was doing, where the raw evidence holds it."""
    shown = json.dumps(root.get("culprit_evidence", [])) + root.get("detail", "")
    checks: list[tuple[str, str]] = []
    pid = culprit.get("pid")
    function = culprit.get("function")
    stacked = rf"^Process {pid}:|^# frtrace-collect .*pid={pid}\b"
    # faulthandler's frame (`  File "x.py", line 12 in fn`): the culprit's own function
    faulted = rf'File "[^"]*", line \d+ in {re.escape(function or "")}\s*$'
    if function and pid and (re.search(stacked, text, re.M) or re.search(faulted, text, re.M)):
        checks.append(("function", function))
    exception = culprit.get("exception")
    if exception and re.search(rf"\[rank{culprit.get('rank')}\]: {re.escape(exception)}\b", text):
        checks.append(("exception", exception))
    signal = culprit.get("signal")
    if signal and pid and re.search(rf"\(pid: {pid}\)\s+\({signal}\)", text):
        checks.append(("signal", signal))
    if not checks:
        return
    missing = [f"{what} {value!r}" for what, value in checks if value not in shown]
    v.detail_ok = not missing
    if missing:
        v.problems.append("not shown: " + ", ".join(missing))


SCHEMA = "frtrace.evidence-job/1"


def scenarios(dirs: list[Path], only: list[str] | None) -> list[Path]:
    """Scenario folders of the generators' schema (other fixtures' expected.json are not)."""
    found = sorted(p.parent for d in dirs for p in d.glob("*/expected.json"))
    return [
        p
        for p in found
        if (only is None or p.name in only)
        and json.loads((p / "expected.json").read_text()).get("schema") == SCHEMA
    ]


def table(verdicts: list[Verdict]) -> list[str]:
    rows: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for v in verdicts:
        rows[(v.source, v.fault)].append(v)
    head = f"{'source':<14}{'fault':<20}{'runs':>5}{'exit':>6}{'culprit':>9}{'host':>6}"
    head += f"{'detail':>8}{'right':>7}"
    out = [head]

    def count(vs: list[Verdict], attr: str) -> str:
        judged = [getattr(v, attr) for v in vs if getattr(v, attr) is not None]
        return f"{sum(1 for x in judged if x)}/{len(judged)}" if judged else "-"

    for (source, fault), vs in sorted(rows.items()):
        out.append(
            f"{source:<14}{fault:<20}{len(vs):>5}{count(vs, 'exit_ok'):>6}"
            f"{count(vs, 'culprit_ok'):>9}{count(vs, 'host_ok'):>6}{count(vs, 'detail_ok'):>8}"
            f"{sum(v.right for v in vs):>4}/{len(vs)}"
        )
    right = sum(v.right for v in verdicts)
    unknown = sum(v.unknown for v in verdicts)
    among = sum(v.among and not v.right for v in verdicts)
    hung_ok = sum(1 for v in verdicts if v.fault != "healthy" and v.exit == 0)
    wrong = len(verdicts) - right - unknown - among
    out.append(
        f"total: {right}/{len(verdicts)} right; {among} undecidable with the culprit among "
        f"those named; {unknown} hung with no culprit named (UNKNOWN); {wrong} wrong; hung "
        f"jobs called OK: {hung_ok}"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--only", nargs="+")
    parser.add_argument("--show-failures", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    verdicts = []
    for scenario in scenarios(args.dirs, args.only):
        v = judge(scenario)
        verdicts.append(v)
        if args.show_failures and not v.right:
            print(f"{v.id} [{v.fault}] " + "; ".join(v.problems), flush=True)
    print("\n".join(table(verdicts)))
    if args.json:
        args.json.write_text(json.dumps([asdict(v) for v in verdicts], indent=1) + "\n")
    return 0 if all(v.right for v in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
