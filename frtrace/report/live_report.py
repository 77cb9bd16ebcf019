"""What `frtrace live` says on stderr besides the report: one line per rank that did not
answer in full, one summary line per round, and with --watch what moved between rounds.
Every sentence about fetching is here; frtrace.live returns facts."""

from __future__ import annotations

from collections import defaultdict

from frtrace.analysis.analyze import Analysis
from frtrace.live.fetch import Fetched, RankFetch
from frtrace.ranks import rank_ranges
from frtrace.report.fmt import safe
from frtrace.report.view import build_view
from frtrace.report.wording import progress_lines


def _who(rank: int, fetch: RankFetch) -> str:
    return f"rank {rank} ({safe(fetch.worker.url)})"


def rank_lines(fetched: Fetched) -> list[str]:
    """One line per rank that gave no recorder or no stacks, saying why; then one line per
    reason py-spy's stacks gave way to faulthandler's, naming the ranks."""
    lines: list[str] = []
    fallbacks: dict[str, list[int]] = defaultdict(list)
    for r in sorted(fetched.ranks, key=lambda f: f.rank):
        if r.unreachable is not None:
            lines.append(f"{_who(r.rank, r)}: unreachable: {safe(r.unreachable)}")
            continue
        missing = []
        if r.dump_failure is not None:
            missing.append(f"no Flight Recorder ({safe(r.dump_failure)})")
        if r.stack_failure is not None:
            missing.append(f"no stacks ({safe(r.stack_failure)})")
        if missing:
            lines.append(f"{_who(r.rank, r)}: {'; '.join(missing)}")
        if r.pyspy_failure is not None:
            fallbacks[r.pyspy_failure].append(r.rank)
    for reason, ranks in fallbacks.items():
        lines.append(
            f"note: stacks of {_ranks(ranks)} are faulthandler's (dump_traceback): pyspy_dump "
            f"failed ({safe(reason)}; py-spy must be on the ranks' PATH)"
        )
    return lines


def _ranks(ranks: list[int]) -> str:
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {rank_ranges(ranks)}"


def summary(fetched: Fetched, source: str) -> str:
    """`frtrace live: 4 rank(s) asked (the store at H:P): 3 answered in 0.42 s; rank 2 did
    not`."""
    asked = [r.rank for r in fetched.ranks]
    answered = fetched.answered
    line = (
        f"frtrace live: {len(asked)} rank(s) asked ({safe(source)}): {len(answered)} answered "
        f"in {fetched.seconds:.2f} s"
    )
    silent = sorted(set(asked) - set(answered))
    if silent:
        line += f"; {_ranks(silent)} did not"
    return line


def store_lines(bad: list[tuple[int, str]]) -> list[str]:
    """Entries of the store that are not worker addresses: one line each."""
    return [f"rank {rank}: not asked: {safe(why)}" for rank, why in bad]


def round_line(number: int, elapsed: float, analysis: Analysis) -> str:
    """One round of --watch: what moved since the previous round, and the verdict so far."""
    moved = progress_lines(analysis.progress)[1:2] if analysis.progress is not None else []
    when = f"round {number} (+{elapsed:.1f} s)"
    verdict = build_view(analysis).verdict.text
    if not moved:
        return f"frtrace live: {when}: {verdict}"
    return f"frtrace live: {when}: {moved[0]}; {verdict}"


def settled_line(number: int) -> str:
    """Why the watch stopped on its own."""
    return (
        f"frtrace live: settled after round {number}: nothing moved since round {number - 1} "
        "and the root cause is the same; the report follows"
    )
