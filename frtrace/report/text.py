"""The default report, for a terminal at 3 a.m.: the root cause first, at most 40 lines
whatever the job size, fitted to the terminal's width, and one verdict line at the end.

`-v` (verbose) shows everything: every finding with its whole detail, every group, every hop.
It renders the report view (frtrace.report.view); every sentence in it comes from there.
"""

from __future__ import annotations

import itertools
import re
import shutil
import textwrap
from collections import defaultdict
from dataclasses import dataclass

from frtrace.analysis.findings import Finding
from frtrace.report.evidence import culprit_rows, inputs_summary, process_rows, ranks_seen
from frtrace.report.fmt import ELLIPSIS, Style, processes_text, ranks_subject, ranks_text
from frtrace.report.summary import loaded_summary
from frtrace.report.view import CAUSE, ROOT, ReportView, Shown

STACK_HEAD = 6  # frames shown per stack with -v unless --print-stack-trace
STACK_BRIEF = 3  # frames of the culprit's stack by default (past torch.distributed's own)
MAX_LINES = 40  # the default report's height, whatever the job size (the verdict included)
MIN_WIDTH = 40
GLUE = "\ue001"  # joins the words of a phrase that a line must not break (a private-use char)


@dataclass(frozen=True)
class Limits:
    """How much of each part the default report shows."""

    detail: int = 3  # lines of the root cause's prose
    chain: int = 5  # lines of the chain (after merging hops alike)
    findings: int = 3  # rows of other findings (after folding findings alike)
    waits: int = 3  # rows of "where ranks wait"
    culprit_frames: int = STACK_BRIEF  # frames of the culprit's stack
    waiter_frames: int = 2  # frames of a waiting rank's stack


# When the report would pass MAX_LINES, it folds in this order, least needed first: the
# waiting rank's frames (its line still says where it waits), the rows of other findings and
# of waits (a line counts the rest), the chain (its first hops stay), then the culprit's frames.
FOLDS = (
    Limits(),
    Limits(waiter_frames=0),
    Limits(waiter_frames=0, findings=2, waits=2),
    Limits(waiter_frames=0, findings=1, waits=1),
    Limits(waiter_frames=0, findings=1, waits=1, chain=4),
    Limits(waiter_frames=0, findings=1, waits=1, chain=3, culprit_frames=2),
    Limits(waiter_frames=0, findings=1, waits=1, chain=3, culprit_frames=1),
)


# --- fitting lines to the width ----------------------------------------------------------


class _Wrapper(textwrap.TextWrapper):
    """Wraps between words only; a single word wider than the line (a long rank list or
    path) is cut after its commas or slashes rather than overflowing the terminal."""

    def _split(self, text: str) -> list[str]:
        chunks: list[str] = []
        for chunk in re.split(r"(\s+)", text):
            if len(chunk) > self.width - len(self.subsequent_indent) and not chunk.isspace():
                chunks.extend(p for p in re.split(r"(?<=[,/])", chunk) if p)
            elif chunk:
                chunks.append(chunk)
        return chunks


def wrap(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """Word-wrapped lines of at most `width` columns, never cut inside a word."""
    hang = indent if hang is None else hang
    wrapper = _Wrapper(
        width=width,
        initial_indent=indent,
        subsequent_indent=hang,
        break_long_words=True,
        break_on_hyphens=False,
    )
    return wrapper.wrap(text) or [indent.rstrip()]


def _clip(lines: list[str], limit: int | None, more: str, width: int) -> list[str]:
    """At most `limit` lines; the last one says what was left out, within the width."""
    if limit is None or len(lines) <= limit:
        return lines
    last = lines[limit - 1]
    while last.strip() and len(last) + 1 + len(more) > width:
        last = last.rsplit(" ", 1)[0] if " " in last.strip() else ""
    return [*lines[: limit - 1], (last + " " if last.strip() else last) + more]


def _fit(line: str, width: int) -> str:
    """One line cut to the width (for table-like rows), marking the cut."""
    return line if len(line) <= width else line[: width - len(ELLIPSIS)] + ELLIPSIS


def terminal_width() -> int:
    """The terminal's columns; 80 when piped (or $COLUMNS when set)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


# --- stacks ------------------------------------------------------------------------------


def _short_path(path: str, room: int) -> str:
    if len(path) <= room:
        return path
    cut = path[-(room - len(ELLIPSIS)) :]
    slash = cut.find("/")
    return ELLIPSIS + (cut[slash:] if 0 <= slash < len(cut) - 1 else cut)


def _internal(filename: str) -> bool:
    """Frames inside torch.distributed say nothing about the job's own code."""
    return "torch/distributed/" in filename.replace("\\", "/")


def _stack_lines(
    view: ReportView, rank: int, f: Finding, role: str, frames: int | None, width: int
) -> list[str]:
    info = view.stack_of(rank, f)
    if info is None:
        return wrap(f"rank {rank} ({role}): no dump", width, "  ")
    where_ = "at" if info["at_finding"] else "last op"
    head = wrap(
        f"rank {rank} ({role}) {where_} {info['op']} {info['place']} {info['seq']}, "
        f"{info['state']}:",
        width,
        "  ",
        "    ",
    )
    all_frames = info["frames"]
    if not all_frames:
        return [*head, "    (no stack in this dump)"]
    skip = 0
    if frames is not None and frames <= STACK_BRIEF:
        while skip < len(all_frames) - 1 and _internal(all_frames[skip][1]):
            skip += 1
    shown = all_frames[skip:] if frames is None else all_frames[skip : skip + frames]
    lines = list(head)
    for name, filename, line in shown:
        text = f"    {name}  "
        room = max(20, width - len(text) - len(str(line)) - 1)
        lines.append(_fit(f"{text}{_short_path(filename, room)}:{line}", width))
    return lines


# --- sections ----------------------------------------------------------------------------

# An exact list may carry its count already ('0-1,3-15 (15 ranks)'): it is taken with it.
_STRIDE = r"\d+,\d+,\.\.\.,\d+"  # `1,9,...,1017`: every 8th rank, one part
_PART = rf"(?:{_STRIDE}|\d+(?:-\d+)?)"
_LIST = re.compile(
    rf"(?<![\w#>-])({_PART}(?:,{_PART})*)(,\.\.\. \((\d+) ranks\))?(?: \(\d+ ranks\))?"
)


def tidy(text: str) -> str:
    """Rank lists inside prose made short: exact lists recompressed (`1,9,...,1017`), elided
    ones cut to their first parts and their count."""

    def short(m: re.Match[str]) -> str:
        parts = re.findall(_PART, m.group(1))
        if m.group(2) is None and "," not in m.group(1):
            return m.group(0)  # one number: not a list
        if m.group(2) is None:
            ranks: list[int] = []
            for part in parts:
                if "..." in part:
                    first, second, last = (int(v) for v in part.split(",") if v != "...")
                    if second <= first:
                        return m.group(0)  # not a stride ranks_text would write
                    ranks.extend(range(first, last + 1, second - first))
                    continue
                lo, _, hi = part.partition("-")
                ranks.extend(range(int(lo), int(hi or lo) + 1))
            return ranks_text(ranks, 40)
        singles = [int(p) for p in parts if p.isdigit()]
        if (
            len(singles) == len(parts) >= 3
            and len({b - a for a, b in itertools.pairwise(singles)}) == 1
        ):
            return f"{parts[0]},{parts[1]},... ({m.group(3)} ranks)"
        return ",".join(parts[:3]) + f",... ({m.group(3)} ranks)"

    return _LIST.sub(short, text)


def _glue(text: str) -> str:
    """A phrase no line may break inside (`ranks 0-1`, `format 2.10`, `(prefix 'trace_')`)."""
    return text.replace(" ", GLUE)


def _unglue(lines: list[str]) -> list[str]:
    return [line.replace(GLUE, " ") for line in lines]


def _header(view: ReportView, width: int) -> list[str]:
    """What was read, in phrases a line never breaks inside: `ranks 0-1, 9 entries` never
    reads `ranks 0-1, 9` on one line and `entries` on the next."""
    analysis = view.analysis
    trace = analysis.ctx.trace
    ev = analysis.evidence
    read = (
        f"{len(trace.file_table)} dump(s)"
        if ev is None or not ev.files
        else inputs_summary(analysis)
    )
    read = re.sub(r"(?<=\d) ", GLUE, read)  # `9 dumps`, `2 logs (nodeA, nodeB)`
    text = f"frtrace: {read} from {trace.trace_dir}"
    if trace.prefix and len(trace.file_table):
        text += " " + _glue(f"(prefix '{trace.prefix}')")
    phrases = [text + ": " + _glue(ranks_seen(analysis))]
    if len(trace.file_table) or ev is None:
        phrases += [
            _glue(f"{trace.entry_count:,} entries"),
            _glue(f"format {', '.join(trace.versions) or '-'}"),
            *(_glue(b) for b in trace.backends or ["-"]),
            *([_glue(f"{k} {v}") for k, v in trace.formats] or [""]),
        ]
    lines = _unglue(wrap(", ".join(phrases), width, "", "  "))
    if trace.missing_dumps:
        missing = f"no dump from {_glue(ranks_subject(trace.missing_dumps))}"
        lines += _unglue(wrap(missing, width, "  "))
    if trace.skipped:
        lines += wrap(f"skipped {len(trace.skipped)} file(s) (listed on stderr)", width, "  ")
    return lines


def _detail_lines(root: Shown, width: int, limit: int) -> list[str]:
    """The root cause's prose in at most `limit` lines. Where it holds a list of waits, that
    list is cut, never the sentence that says what the culprit did (even past `limit`)."""
    lines = wrap(tidy(root.detail), width, "  ")
    if len(lines) <= limit:
        return lines
    if root.detail_cut(1) == root.detail:  # no list to cut: the prose is cut, marked
        return _clip(lines, limit, "... (-v)", width)
    for items in range(len(root.finding.chain), 0, -1):
        lines = wrap(tidy(root.detail_cut(items)), width, "  ")
        if len(lines) <= limit:
            break
    return lines


def _root_block(
    view: ReportView,
    style: Style,
    width: int,
    verbose: bool,
    full_stacks: bool,
    limits: Limits,
) -> list[str]:
    root = view.root
    if root is None:
        return []
    analysis = view.analysis
    f = root.finding
    seq = root.seq
    title = f"ROOT CAUSE: {f.kind} in {root.place}" + (f", {f.op}" if f.op else "")
    lines = [style.red(t) for t in wrap(title, width, "", "  ")]
    group = (
        f"{f.pg_name} ({f.pg_desc or '-'}), members {ranks_text(f.expected_ranks)}"
        if f.pg_name or f.pg_desc
        else f"not in the logs; ranks they name {ranks_text(f.expected_ranks)}"
    )
    rows = [("culprit ranks", ranks_text(f.culprit_ranks))]
    if f.culprit_processes:
        procs = processes_text((p.pid, p.host) for p in f.culprit_processes)
        if not f.culprit_ranks:
            rows = []
        rows.append(("culprit process", procs + " (rank not in the logs)"))
    rows += [("waiting ranks", ranks_text(f.waiting_ranks)), ("group", group)]
    if view.hosts:
        rows.append(("culprit hosts", ", ".join(view.hosts)))
    if verbose:
        rows.append(("seq id", "-" if seq is None else str(seq)))
    found = view.entry_at(f.culprit_ranks[0], f) if f.culprit_ranks else None
    entry = None if found is None else found[0]
    if entry is not None and (verbose or f.kind.endswith("_mismatch")):
        rows.append(
            (
                "sizes (culprit)",
                f"in {entry['input_sizes']} {entry['input_dtypes']}  "
                f"out {entry['output_sizes']} {entry['output_dtypes']}",
            )
        )
    frames = None if full_stacks else (STACK_HEAD if verbose else limits.culprit_frames)
    live = None if full_stacks else (STACK_HEAD if verbose else STACK_BRIEF)
    for r in f.culprit_ranks[: 2 if verbose else 1]:
        rows += culprit_rows(analysis, r, live)
    if not f.culprit_ranks:
        for ref in f.culprit_processes[: 2 if verbose else 1]:
            rows += process_rows(analysis, ref, live)
    for key, value in rows:
        wrapped = wrap(value, width, f"  {key:<16}", " " * 18)
        if key in ("culprit ranks", "culprit hosts", "culprit process"):
            wrapped = [style.red(w) for w in wrapped]
        lines += wrapped
    if view.decided:
        lines += wrap(view.decided, width, f"  {'decided by':<16}", " " * 18)
    if view.stall is not None:
        lines += wrap(view.stall[0], width, f"  {'stuck':<16}", " " * 18)
        if not any(key == "next step" for key, _v in rows):  # the logs gave a concrete one
            lines += wrap(view.stall[1], width, f"  {'look at':<16}", " " * 18)
    if verbose:
        lines += ["", *wrap(root.detail, width, "  ")]
    else:
        lines += _detail_lines(root, width, limits.detail)
    if root.chain:
        lines += ["  chain (who waits for whom):"]
        shown = root.chain if verbose else [tidy(h) for h in root.merged_chain]
        body: list[str] = []
        for i, hop in enumerate(shown, 1):
            body += wrap(hop, width, f"    {i}. ", "       ")
        lines += body if verbose else _clip(body, limits.chain, "... (-v)", width)
    if not len(analysis.ctx.trace.file_table):
        return lines  # no dump: no recorded stack to show
    lines += [""]
    for r in f.culprit_ranks[: 2 if verbose else 1]:
        lines += _stack_lines(view, r, f, "culprit", frames, width)
    if view.waiting:
        waiter = frames if verbose else limits.waiter_frames
        lines += _stack_lines(view, view.waiting[0], f, "waiting", waiter, width)
    if frames is not None:
        lines += wrap(
            "(stacks innermost first, cut; --print-stack-trace shows them whole)", width, "    "
        )
    return lines


def _row(head: str, ranks: list[int], width: int, count: bool = True) -> list[str]:
    """`head` then the ranks: one line when the ranks fit in what is left of it, else two."""
    room = width - 2 - len(head)
    text = head + ranks_text(ranks, room if room >= 24 else 40, count)
    return _clip(wrap(text, width, "  ", "      "), 2, ELLIPSIS, width)


def _other_findings(
    view: ReportView, style: Style, width: int, verbose: bool, rows: int
) -> list[str]:
    others = view.others
    if not others:
        return []
    n_cause = sum(1 for s in others if s.role == CAUSE)
    lines = [
        style.bold(f"OTHER FINDINGS: {n_cause} cause(s), {len(others) - n_cause} consequence(s)")
    ]
    if verbose:
        for s in others:
            f = s.finding
            lines += wrap(
                f"{s.role}: {f.kind} in {s.place}" + (f", {f.op}" if f.op else ""), width, "  "
            )
            lines += wrap(
                f"culprits {ranks_text(f.culprit_ranks)}; waiting {ranks_text(f.waiting_ranks)}",
                width,
                "    ",
            )
            lines += wrap(s.detail, width, "    ")
        return lines
    folded = [row for row in view.folded if row.role != ROOT]
    for i, row in enumerate(folded):
        if i == rows:
            lines.append(f"  ... {len(folded) - i} more (-v shows every finding)")
            break
        first = row.first
        place = first.place if row.count == 1 else f"{first.place} +{row.count - 1} groups"
        lines += _row(
            f"{row.role}: {first.finding.kind} in {place}, culprits ", row.culprits, width
        )
    return lines


def _wait_section(view: ReportView, style: Style, width: int, rows: int) -> list[str]:
    if not view.waits:
        return []
    n = len(view.analysis.blocked)
    lines = [style.bold(f"WHERE RANKS WAIT: {n} rank{'s' if n > 1 else ''}, most first")]
    for i, w in enumerate(view.waits):
        if i == rows:
            lines.append(f"  ... {len(view.waits) - i} more place(s) (-v shows every group)")
            break
        at = f"{w.kind}{'' if w.seq < 0 else f'#{w.seq}'}"
        at += f" (pg {w.groups[0]})" if len(w.groups) == 1 else f" ({len(w.groups)} groups)"
        lines += _row(f"{len(w.ranks)} in {at}, {w.what}: ", w.ranks, width, count=False)
    return lines


def _by_value(values: dict[int, int]) -> str:
    """{0: 37, 1: 37, 2: 36} -> '37 (0-1); 36 (2)': per-rank numbers that stay short."""
    groups: dict[int, list[int]] = defaultdict(list)
    for rank, v in values.items():
        groups[v].append(rank)
    parts = [
        f"{'-' if v < 0 else v} ({ranks_text(rs, 30)})"
        for v, rs in sorted(groups.items(), reverse=True)
    ]
    return "; ".join(parts[:4]) + (f"; ... {len(parts) - 4} more" if len(parts) > 4 else "")


def _per_pg(seqs: dict[tuple[int, int], int]) -> dict[int, dict[int, int]]:
    """{(pg, rank): seq} as {pg: {rank: seq}}, in one pass."""
    out: dict[int, dict[int, int]] = defaultdict(dict)
    for (pg, rank), seq in seqs.items():
        out[pg][rank] = seq
    return out


def group_table(view: ReportView) -> str:
    """Every group (for -v): members, last seq issued and completed, who waits there; the
    groups where ranks wait come first, most waiting ranks first."""
    analysis = view.analysis
    ctx = analysis.ctx
    issued_by_pg = _per_pg(ctx.view.last_seqs())
    done_by_pg = _per_pg(ctx.view.last_seqs(completed=True))
    waiting: dict[str, list[int]] = defaultdict(list)
    for rank, b in analysis.blocked.items():
        waiting[ctx.name(b.node[1])].append(rank)
    order = sorted(
        range(len(ctx.pg_names)), key=lambda pg: (-len(waiting.get(ctx.pg_names[pg], [])), pg)
    )
    rows = []
    for pg in order:
        name = ctx.pg_names[pg]
        members = ctx.members.get(name, [])
        rows.append(
            [
                name,
                ctx.pg_desc.get(name, ""),
                ranks_text(members, 30),
                len(members),
                _by_value(issued_by_pg.get(pg, {})) or "-",
                _by_value(done_by_pg.get(pg, {})) if ctx.view.states_tracked else "(not tracked)",
                ranks_text(waiting[name], 30) if waiting.get(name) else "-",
            ]
        )
    from tabulate import tabulate  # only here: importing it costs ~50 ms

    return tabulate(
        rows,
        headers=["pg", "desc", "members", "size", "last issued", "last completed", "waiting"],
        tablefmt="simple",
        disable_numparse=True,
    )


def render_text(
    view: ReportView,
    style: Style | None = None,
    *,
    full_stacks: bool = False,
    verbose: bool = False,
    width: int | None = None,
    exit_status: int | None = None,
) -> str:
    """The text report; `width` defaults to the terminal's (80 when piped). By default it
    keeps to MAX_LINES, folding what is least needed first (FOLDS); `-v` shows everything."""
    style = style or Style(False)
    width = max(MIN_WIDTH, width or terminal_width())
    lines: list[str] = []
    for limits in FOLDS:
        lines = _report(view, style, width, verbose, full_stacks, limits, exit_status)
        if verbose or len(lines) <= MAX_LINES:
            break
    return "\n".join(lines) + "\n"


def _report(
    view: ReportView,
    style: Style,
    width: int,
    verbose: bool,
    full_stacks: bool,
    limits: Limits,
    exit_status: int | None,
) -> list[str]:
    analysis = view.analysis
    trace = analysis.ctx.trace
    lines = [loaded_summary(trace, style)] if verbose else _header(view, width)
    if view.root is not None:
        sel = analysis.selection
        if sel is not None and sel.root_cause_outside:
            outside = (
                "note: the root cause lies outside the selection (--selected-ranks / "
                "--pg-filters); it is shown in full below"
            )
            lines += ["", *(style.yellow(x) for x in wrap(outside, width, "", "  "))]
        lines += ["", *_root_block(view, style, width, verbose, full_stacks, limits)]
        other = _other_findings(view, style, width, verbose, limits.findings)
        if other:
            lines += ["", *other]
        waits = _wait_section(view, style, width, limits.waits)
        if waits:
            lines += ["", *waits]
    if view.unseen is not None:
        what = "the logs and stacks" if view.unseen.logs is not None else "the dumps"
        head = (
            f"CANNOT TELL: {what} do not show the whole job"
            if view.verdict.undetermined
            else (f"NOT SEEN: what {what} do not show")
        )
        lines += ["", style.bold(head)]
        for line in view.unseen_lines:
            lines += wrap(line, width, "  ", "    ")
    moved = view.progress
    if moved:
        lines += ["", style.bold(moved[0])]
        for line in moved[1 : None if verbose else 4]:
            lines += wrap(line, width, "  ", "    ")
    late = view.stragglers
    if late:
        lines += ["", *wrap(late[0], width, "", "  ")]
        for line in late[1 : None if verbose else 3]:
            lines += wrap(line, width, "  ", "    ")
    shown = view.notes if verbose else view.notes[:2]
    if shown:
        lines.append("")
    for note in shown:
        lines += wrap(f"note: {note}", width, "", "  ")
    if verbose and len(analysis.ctx.pg_names):
        lines += ["", style.bold("GROUPS"), group_table(view)]
    line = view.verdict.line(exit_status)
    lines += ["", style.green(line) if view.verdict.ok else style.red(line)]
    return lines
