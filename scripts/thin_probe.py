"""Less evidence never gives a more confident answer: drop each input of a job and compare.

Usage: ``python scripts/thin_probe.py DIR [DIR...] [--only ID...] [--json OUT]``

Each DIR holds scenario folders written by ``scripts/evidence_jobs.py`` or
``scripts/nccl_log_jobs.py``. For every scenario, frtrace reads its whole ``evidence/``
folder, then the folder once more without each of its files in turn (a copy of hard links,
the same relative paths). Each answer gets a confidence:

- ``ok``: no finding, the job seen whole (exit 0);
- ``decided``: a culprit named and not said to be undecidable;
- ``undecidable``: several named, the report saying it cannot tell them apart;
- ``unknown``: nothing named (a finding without a culprit, or UNKNOWN, exit 4).

A thinned answer breaks the rule when it is more confident than the whole folder's: ``ok``
where the whole was not; ``decided`` where the whole was undecidable or unknown;
``undecidable`` where the whole was unknown. A decided answer that names another culprit is
listed as *changed* (not a breach by itself: the dropped file may have held the proof), and
counted apart. The oracle is frtrace's own answer on more evidence, never its reasoning:
this probes the rule. Beside it, each decided thinned answer is checked against the job's
own truth (``expected.json``): a decided answer naming another culprit than the job's (its
rank, the ranks of a stuck group, or its pid where no rank is named), or any finding on a
healthy job, is *decided wrong*: less evidence should leave it undecidable or unknown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frtrace import api  # noqa: E402
from frtrace.errors import FrtraceError  # noqa: E402

SCHEMA = "frtrace.evidence-job/1"
RANK = {"unknown": 0, "undecidable": 1, "decided": 2}


@dataclass
class Answer:
    confidence: str  # ok, decided, undecidable, unknown (see the module's docstring)
    culprits: list[int]
    processes: list[int]
    said: str


@dataclass
class Probe:
    id: str
    fault: str
    whole: Answer
    breaches: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    wrong: list[dict[str, Any]] = field(default_factory=list)  # decided, not the job's culprit
    runs: int = 0


def answer(folder: Path) -> Answer:
    """frtrace's answer on one folder, as the JSON report states it."""
    try:
        report = json.loads(api.to_json(api.analyze(api.load(folder))))
    except FrtraceError as e:  # nothing readable: no answer at all
        return Answer("unknown", [], [], f"error: {e}")
    root = report.get("root_cause")
    if report["verdict"] == "ok":
        return Answer("ok", [], [], "ok")
    if not root:
        return Answer("unknown", [], [], f"{report['verdict']}: no root cause")
    ranks = sorted(root.get("culprit_ranks") or [])
    procs = sorted(p["pid"] for p in root.get("culprit_processes") or [])
    said = f"{root['kind']} ranks {ranks} procs {procs}"
    if not ranks and not procs:
        return Answer("unknown", [], [], said)
    undecidable = bool(root.get("evidence", {}).get("undecidable"))
    return Answer("undecidable" if undecidable else "decided", ranks, procs, said)


def more_confident(thin: Answer, whole: Answer) -> bool:
    if thin.confidence == "ok":
        return whole.confidence != "ok"
    if whole.confidence == "ok":
        return False
    return RANK[thin.confidence] > RANK[whole.confidence]


def decided_wrong(thin: Answer, truth: dict[str, Any]) -> bool:
    """A decided answer that names another culprit than the job recorded."""
    if thin.confidence != "decided":
        return False
    culprit = truth.get("culprit")
    if culprit is None:  # a healthy job: any finding is wrong
        return True
    ranks = set(culprit.get("ranks") or [culprit["rank"]])
    if thin.culprits:
        loose = bool(truth.get("style", {}).get("undecidable_from_logs"))
        return set(thin.culprits) != ranks and not (loose and ranks <= set(thin.culprits))
    return culprit.get("pid") not in thin.processes


def thinned(evidence: Path, dropped: Path, into: Path) -> Path:
    """A copy of `evidence` (hard links) without `dropped`."""
    out = into / "evidence"
    if out.exists():
        shutil.rmtree(out)
    for path in evidence.rglob("*"):
        if path.is_dir() or path == dropped:
            continue
        target = out / path.relative_to(evidence)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
    out.mkdir(exist_ok=True)
    return out


def probe(scenario: Path, scratch: Path) -> Probe:
    truth = json.loads((scenario / "expected.json").read_text())
    evidence = scenario / truth.get("evidence", "evidence")
    result = Probe(truth["id"], truth.get("fault", "?"), answer(evidence))
    for dropped in sorted(p for p in evidence.rglob("*") if p.is_file()):
        thin = answer(thinned(evidence, dropped, scratch))
        result.runs += 1
        name = str(dropped.relative_to(evidence))
        if decided_wrong(thin, truth):
            result.wrong.append({"dropped": name, "said": thin.said})
        if more_confident(thin, result.whole):
            result.breaches.append({"dropped": name, "said": thin.said, "as": thin.confidence})
        elif thin.confidence == result.whole.confidence == "decided" and (
            thin.culprits,
            thin.processes,
        ) != (result.whole.culprits, result.whole.processes):
            result.changed.append({"dropped": name, "said": thin.said})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--only", nargs="+")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    found = sorted(p.parent for d in args.dirs for p in d.glob("*/expected.json"))
    found = [
        p
        for p in found
        if (args.only is None or p.name in args.only)
        and json.loads((p / "expected.json").read_text()).get("schema") == SCHEMA
    ]
    probes = []
    with tempfile.TemporaryDirectory(prefix="frtrace-thin-") as tmp:
        for scenario in found:
            p = probe(scenario, Path(tmp))
            probes.append(p)
            for b in p.breaches:
                print(
                    f"{p.id} [{p.fault}] whole: {p.whole.confidence} {p.whole.said}; "
                    f"without {b['dropped']}: {b['as']} {b['said']}",
                    flush=True,
                )
    runs = sum(p.runs for p in probes)
    breached = sum(1 for p in probes if p.breaches)
    changed = sum(1 for p in probes if p.changed)
    wrong = sum(1 for p in probes if p.wrong)
    print(
        f"total: {len(probes)} jobs, {runs} thinned runs; {breached} jobs with a thinned "
        f"answer more confident than the whole ({sum(len(p.breaches) for p in probes)} "
        f"runs); {changed} jobs with a decided answer that changed culprit; {wrong} jobs "
        f"with a thinned answer decided wrong ({sum(len(p.wrong) for p in probes)} runs)"
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in probes], indent=1) + "\n")
    return 1 if breached else 0


if __name__ == "__main__":
    raise SystemExit(main())
