"""`frtrace history`: which hosts and ranks broke jobs, over many frtrace JSON reports.

Each report (`frtrace.report/1`, written with `-o` or `--format json`) is one incident: its
root cause names culprit ranks and a kind. A rank's host comes from, in this order: the
`collect.json` manifests that `frtrace collect` left in the dump folder the report names
(`inputs.trace_dir`) or its sub-folders (written on the node itself); `root_cause.hosts` when
the report carries it; the dump file paths in that folder (a sub-folder per host,
`nodeB/trace_3`, or a host inside the name, `nccl_trace_rank_node03-host_27`). A report's
time is its `time` field when it has one, else the earliest collect.json time, else the report
file's mtime. Reports
are untrusted input: read bounded, wrong types rejected naming the field, one bad report is
one line and the rest are counted.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from frtrace.dumps.discover import discover, strip_suffixes
from frtrace.errors import FrtraceError

REPORT_SCHEMA = "frtrace.report/1"
COLLECT_SCHEMA = "frtrace.collect/1"
REPORT_LIMIT = 64 << 20  # bytes of one report
MANIFEST_LIMIT = 16 << 20
PEEK = 4096  # a report names its schema in its first bytes (frtrace writes it first)
MAX_DEPTH = 3  # folder / incident / host / report.json
MAX_FILES = 200_000
_SEPARATORS = "_-."

TimeSource = Literal["report", "collect", "mtime"]
HostSource = Literal["report", "collect", "path"]


class NotAReport(ValueError):
    """A file that is not a usable frtrace report; the message says why."""


@dataclass(frozen=True)
class Incident:
    """One report: when, what broke, and where."""

    path: str
    time: float
    time_source: TimeSource
    kind: str | None  # None: the job was healthy
    culprits: tuple[int, ...] = ()
    #: culprit ranks by host, for the hosts that are known (a host named without its ranks
    #: maps to an empty tuple)
    hosts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    host_source: HostSource | None = None
    undecidable: bool = False

    @property
    def unplaced(self) -> tuple[int, ...]:
        """Culprit ranks whose host is unknown."""
        placed = {r for ranks in self.hosts.values() for r in ranks}
        if self.hosts and not placed:  # hosts named without ranks: no rank is unplaced
            return ()
        return tuple(r for r in self.culprits if r not in placed)


@dataclass
class Tally:
    """How often one host (or one rank whose host is unknown) was a culprit."""

    host: str | None
    rank: int | None = None
    times: int = 0
    alone: int = 0  # times it was the only culprit host (the only rank, for a rank row)
    kinds: Counter[str] = field(default_factory=Counter)
    ranks: set[int] = field(default_factory=set)
    first: float = float("inf")
    last: float = float("-inf")
    reports: list[str] = field(default_factory=list)

    def add(self, incident: Incident, ranks: Iterable[int], alone: bool) -> None:
        self.times += 1
        self.alone += int(alone)
        assert incident.kind is not None
        self.kinds[incident.kind] += 1
        self.ranks.update(ranks)
        self.first = min(self.first, incident.time)
        self.last = max(self.last, incident.time)
        self.reports.append(incident.path)


@dataclass
class History:
    """Incidents, and tallies most often blamed first."""

    incidents: list[Incident]
    skipped: list[tuple[str, str]]
    hosts: list[Tally]
    ranks: list[Tally]  # culprit ranks whose host is unknown

    @property
    def hung(self) -> list[Incident]:
        return [i for i in self.incidents if i.kind is not None]


def find_reports(paths: Iterable[str | Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Report files among `paths`: files as given, folders searched MAX_DEPTH levels down for
    `*.json` files that name the report schema in their first bytes (dumps, manifests and
    other JSON are passed over). Returns the files and (path, reason) for unusable paths."""
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files.extend(p for p in _walk(path, MAX_DEPTH) if _looks_like_report(p))
        elif path.is_file():
            files.append(path)
        else:
            skipped.append((str(path), "no such file or folder"))
    seen: set[Path] = set()
    unique = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique[:MAX_FILES], skipped


def _walk(folder: Path, depth: int) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.name.endswith(".json"):
                yield Path(entry.path)
            elif entry.is_dir(follow_symlinks=False) and depth > 0:
                yield from _walk(Path(entry.path), depth - 1)
        except OSError:
            continue


def _looks_like_report(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(PEEK)
    except OSError:
        return False
    return b'"schema"' in head and b"frtrace.report/" in head


def _read_json(path: Path, limit: int) -> Any:
    try:
        size = path.stat().st_size
        if size > limit:
            raise NotAReport(f"larger than {limit:,} bytes")
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise NotAReport(f"cannot read: {exc.strerror or exc}") from exc
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise NotAReport("not JSON") from exc


def _ints(value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise NotAReport(f"{name} is not a list of ranks")
    return tuple(value)


def parse_time(value: Any) -> float | None:
    """A time field: epoch seconds, or ISO 8601 text (`Z` or an offset; naive is local)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if 0 <= value < 1e11 else None
    if isinstance(value, str) and len(value) <= 64:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    return None


def _hosts_field(value: Any, culprits: tuple[int, ...]) -> dict[str, tuple[int, ...]] | None:
    """root_cause.hosts in the forms accepted: {rank: host}, [{"rank", "host"}], [host...]."""
    pairs: list[tuple[int, str]] = []
    if isinstance(value, dict):
        for key, host in value.items():
            rank = int(key) if isinstance(key, str) and key.isdigit() and len(key) < 10 else None
            if rank is None or not isinstance(host, str):
                return None
            pairs.append((rank, host))
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        for item in value:
            rank, host = item.get("rank"), item.get("host")
            if not isinstance(rank, int) or isinstance(rank, bool) or not isinstance(host, str):
                return None
            pairs.append((rank, host))
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = sorted({h for h in value if h})
        if len(names) == 1:  # one host: every culprit is on it
            return {names[0]: culprits}
        return {h: () for h in names}
    else:
        return None
    hosts: dict[str, list[int]] = {}
    for rank, host in pairs:
        if host and rank in culprits:
            hosts.setdefault(host, []).append(rank)
    return {h: tuple(sorted(r)) for h, r in hosts.items()}


def _trace_dir(report: Path, inputs: Mapping[str, Any]) -> Path | None:
    """The dump folder a report names, if it is still there."""
    text = inputs.get("trace_dir")
    if not isinstance(text, str) or not text or "://" in text:
        return None
    path = Path(text)
    tries = [path] if path.is_absolute() else [report.parent / path, Path.cwd() / path]
    return next((p for p in tries if p.is_dir()), None)


def _manifests(trace_dir: Path) -> Iterator[dict[str, Any]]:
    """The collect.json files in the dump folder and its sub-folders (frtrace collect's)."""
    for path in [trace_dir / "collect.json", *sorted(trace_dir.glob("*/collect.json"))]:
        try:
            data = _read_json(path, MANIFEST_LIMIT)
        except NotAReport:
            continue
        if isinstance(data, dict) and data.get("schema") == COLLECT_SCHEMA:
            yield data


def hosts_from_manifests(manifests: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """rank -> host from collect manifests (processes and dumps); a rank seen on two hosts
    is left out."""
    seen: dict[int, set[str]] = {}
    for manifest in manifests:
        host = manifest.get("host")
        if not isinstance(host, str) or not host:
            continue
        items = [
            *(manifest.get("processes") or []),
            *(f for f in manifest.get("files") or [] if isinstance(f, dict)),
        ]
        for item in items:
            rank = item.get("rank") if isinstance(item, dict) else None
            if isinstance(rank, int) and not isinstance(rank, bool):
                seen.setdefault(rank, set()).add(host)
    return {rank: hosts.pop() for rank, hosts in seen.items() if len(hosts) == 1}


def host_from_path(rel: Path, prefix: str) -> str | None:
    """The host a dump path names: its first folder (`nodeB/trace_3`), else what stands
    between the family prefix and the rank in its name (`nccl_trace_rank_node03-host_27`)."""
    if len(rel.parts) > 1:
        return rel.parts[0]
    stem = strip_suffixes(rel.name).rstrip("0123456789").strip(_SEPARATORS)
    rest = stem[len(prefix) :] if stem.startswith(prefix) else ""
    rest = rest.strip(_SEPARATORS)
    return rest if any(c.isalpha() for c in rest) else None


def hosts_from_paths(trace_dir: Path) -> dict[int, str]:
    """rank -> host from the dump files in the folder (see host_from_path)."""
    try:
        found = discover(trace_dir, None)
    except (FrtraceError, OSError):
        return {}
    hosts = {}
    for dump in found.files:
        host = host_from_path(dump.path.relative_to(trace_dir), found.prefix)
        if host is not None:
            hosts[dump.rank] = host
    return hosts


def read_incident(path: Path) -> Incident:
    """One report as an incident; NotAReport says why a file is not usable."""
    data = _read_json(path, REPORT_LIMIT)
    if not isinstance(data, dict):
        raise NotAReport("not a frtrace report (not a JSON object)")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith("frtrace.report/"):
        raise NotAReport("not a frtrace report (no frtrace.report schema)")
    if schema != REPORT_SCHEMA:
        raise NotAReport(f"schema {schema[:40]} is not {REPORT_SCHEMA}, the one this reads")
    inputs = data.get("inputs")
    if not isinstance(inputs, dict):
        raise NotAReport("inputs is not an object")
    root = data.get("root_cause")
    if root is not None and not isinstance(root, dict):
        raise NotAReport("root_cause is neither null nor an object")
    trace_dir = _trace_dir(path, inputs)
    manifests = list(_manifests(trace_dir)) if trace_dir is not None else []
    when, source = _incident_time(path, data, manifests)
    if root is None:
        return Incident(str(path), when, source, None)
    kind = root.get("kind")
    if not isinstance(kind, str) or not kind or len(kind) > 64:
        raise NotAReport("root_cause.kind is not a kind name")
    culprits = _ints(root.get("culprit_ranks"), "root_cause.culprit_ranks")
    evidence = root.get("evidence")
    undecidable = isinstance(evidence, dict) and evidence.get("undecidable") is True
    hosts, host_source = _hosts(root, culprits, manifests, trace_dir)
    return Incident(str(path), when, source, kind, culprits, hosts, host_source, undecidable)


def _incident_time(
    path: Path, data: Mapping[str, Any], manifests: list[dict[str, Any]]
) -> tuple[float, TimeSource]:
    stamp = parse_time(data.get("time"))
    if stamp is not None:
        return stamp, "report"
    times = [t for m in manifests if (t := parse_time(m.get("time"))) is not None]
    if times:
        return min(times), "collect"
    try:
        return path.stat().st_mtime, "mtime"
    except OSError as exc:
        raise NotAReport(f"cannot stat: {exc.strerror or exc}") from exc


def _hosts(
    root: Mapping[str, Any],
    culprits: tuple[int, ...],
    manifests: list[dict[str, Any]],
    trace_dir: Path | None,
) -> tuple[dict[str, tuple[int, ...]], HostSource | None]:
    # A manifest was written on the node itself; a report's hosts may come from folder names.
    from_manifests = _placed(culprits, hosts_from_manifests(manifests))
    if from_manifests:
        return from_manifests, "collect"
    if "hosts" in root:
        named = _hosts_field(root["hosts"], culprits)
        if named:
            return named, "report"
    sources: list[tuple[HostSource, Callable[[], dict[int, str]]]] = [
        ("path", lambda: hosts_from_paths(trace_dir) if trace_dir is not None else {}),
    ]
    for source, by_rank in sources:
        placed = _placed(culprits, by_rank())
        if placed:
            return placed, source
    return {}, None


def _placed(culprits: tuple[int, ...], ranks_hosts: dict[int, str]) -> dict[str, tuple[int, ...]]:
    """host -> the culprits on it, for the culprits whose host is known."""
    placed: dict[str, list[int]] = {}
    for rank in culprits:
        if rank in ranks_hosts:
            placed.setdefault(ranks_hosts[rank], []).append(rank)
    return {h: tuple(r) for h, r in placed.items()}


def tally(incidents: list[Incident], kinds: Iterable[str] = ()) -> tuple[list[Tally], list[Tally]]:
    """Host rows and rank rows (culprit ranks whose host is unknown), most often first:
    by times named, then times named alone, then the latest."""
    wanted = set(kinds)
    hosts: dict[str, Tally] = {}
    ranks: dict[int, Tally] = {}
    for incident in incidents:
        if incident.kind is None or (wanted and incident.kind not in wanted):
            continue
        for host, host_ranks in incident.hosts.items():
            row = hosts.setdefault(host, Tally(host))
            row.add(incident, host_ranks, alone=len(incident.hosts) == 1)
        unplaced = incident.unplaced
        for rank in unplaced:
            row = ranks.setdefault(rank, Tally(None, rank))
            row.add(incident, [rank], alone=len(incident.culprits) == 1)

    def order(t: Tally) -> tuple[int, int, float, str]:
        return (-t.times, -t.alone, -t.last, t.host or f"{t.rank:012d}")

    return sorted(hosts.values(), key=order), sorted(ranks.values(), key=order)


def history(paths: Iterable[str | Path], kinds: Iterable[str] = ()) -> History:
    """Read every report under `paths` and tally the culprits."""
    files, skipped = find_reports(paths)
    incidents: list[Incident] = []
    for path in files:
        try:
            incidents.append(read_incident(path))
        except NotAReport as exc:
            skipped.append((str(path), str(exc)))
    incidents.sort(key=lambda i: (i.time, i.path))
    host_rows, rank_rows = tally(incidents, kinds)
    return History(incidents, skipped, host_rows, rank_rows)
