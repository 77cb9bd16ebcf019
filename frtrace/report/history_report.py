"""What `frtrace history` prints: a table of the hosts (and ranks of unknown host) most often
the culprit, or the same as JSON (`frtrace.history/1`, docs/history.md)."""

from __future__ import annotations

import json
import time
from typing import Any

from frtrace.history import History, Tally
from frtrace.ranks import rank_ranges
from frtrace.report.fmt import safe

SCHEMA_ID = "frtrace.history/1"


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _local(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


def _kinds(row: Tally) -> str:
    return ", ".join(
        kind if count == 1 else f"{kind} x{count}" for kind, count in row.kinds.most_common()
    )


def _row_dict(row: Tally) -> dict[str, Any]:
    return {
        "host": row.host,
        "rank": row.rank,
        "times": row.times,
        "alone": row.alone,
        "kinds": dict(row.kinds.most_common()),
        "ranks": sorted(row.ranks),
        "first_seen": _iso(row.first),
        "last_seen": _iso(row.last),
        "reports": row.reports,
    }


def history_dict(hist: History) -> dict[str, Any]:
    """The history as plain data."""
    return {
        "schema": SCHEMA_ID,
        "reports": len(hist.incidents),
        "hung": len(hist.hung),
        "incidents": [
            {
                "report": i.path,
                "time": _iso(i.time),
                "time_from": i.time_source,
                "kind": i.kind,
                "culprit_ranks": list(i.culprits),
                "hosts": {h: list(r) for h, r in i.hosts.items()},
                "hosts_from": i.host_source,
                "undecidable": i.undecidable,
            }
            for i in hist.incidents
        ],
        "hosts": [_row_dict(r) for r in hist.hosts],
        "ranks_without_host": [_row_dict(r) for r in hist.ranks],
        "skipped": [{"file": f, "reason": r} for f, r in hist.skipped],
    }


def render_json(hist: History) -> str:
    return json.dumps(history_dict(hist), indent=2) + "\n"


def skipped_lines(hist: History) -> list[str]:
    """One stderr line per path that is not a usable report."""
    return [f"skipped {safe(path)}: {safe(reason)}" for path, reason in hist.skipped]


def _table(rows: list[Tally], by_host: bool) -> str:
    """Host rows show the culprit ranks seen on the host ('?' when the report named the
    host alone); rank rows are one rank each."""
    from tabulate import tabulate  # only for the table: importing it costs ~50 ms

    body = []
    for r in rows:
        name: object = safe(r.host) if by_host else r.rank
        ranks = [rank_ranges(sorted(r.ranks)) if r.ranks else "?"] if by_host else []
        body.append(
            [name, r.times, r.alone, safe(_kinds(r)), *ranks, _local(r.first), _local(r.last)]
        )
    headers = ["host" if by_host else "rank", "culprit", "alone", "kinds"]
    headers += ["ranks"] if by_host else []
    headers += ["first seen", "last seen"]
    return tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True)


def render_text(hist: History) -> str:
    """The table, the hosts named most often first; the last line names the top one."""
    hung = hist.hung
    lines = [
        f"frtrace history: {len(hist.incidents)} report(s), {len(hung)} with a root cause, "
        f"{len(hist.incidents) - len(hung)} healthy"
        + (f", {_local(hung[0].time)} to {_local(hung[-1].time)}" if hung else "")
    ]
    if hist.hosts:
        lines += ["", _table(hist.hosts, by_host=True)]
    if hist.ranks:
        lines += ["", "culprit ranks whose host is unknown:", _table(hist.ranks, by_host=False)]
    lines.append("")
    top = hist.hosts[0] if hist.hosts else (hist.ranks[0] if hist.ranks else None)
    if top is None:
        lines.append("MOST OFTEN: no culprit in these reports")
    else:
        name = f"host {safe(top.host)}" if top.host is not None else f"rank {top.rank}"
        lines.append(
            f"MOST OFTEN: {name}, culprit in {top.times} of {len(hung)} hung job(s) "
            f"({top.alone} alone), last {_local(top.last)}"
        )
    return "\n".join(lines) + "\n"
