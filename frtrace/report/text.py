"""The default report, for a terminal at 3 a.m.: the root cause first, about 30 lines whatever
the job size, fitted to the terminal's width, and one verdict line at the end.

`-v` (verbose) shows everything: every finding with its whole detail, every group, every hop.
"""

from __future__ import annotations

import itertools
import re
import shutil
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from frtrace.analysis.engine import Analysis
from frtrace.analysis.findings import Finding, Place
from frtrace.report.evidence import (
    culprit_rows,
    hosts_of,
    inputs_summary,
    rank_count,
    ranks_seen,
)
from frtrace.report.fmt import Style
from frtrace.report.summary import loaded_summary
from frtrace.report.wording import (
    chain_lines,
    decided_line,
    detail,
    note_text,
    progress_lines,
    stall_lines,
    straggler_lines,
    unseen_lines,
    where,
)

STACK_HEAD = 6  # frames shown per stack with -v unless --print-stack-trace
STACK_BRIEF = 3  # frames of the culprit's stack by default (past torch.distributed's own)
WAITER_FRAMES = 2  # frames of a waiting rank's stack by default
DETAIL_LINES = 3  # lines of the root cause's prose by default
CHAIN_LINES = 5  # lines of the chain by default (after merging hops alike)
FINDING_ROWS = 3  # rows of other findings by default (after folding findings alike)
WAIT_ROWS = 3  # rows of "where ranks wait" by default
MIN_WIDTH = 40
ELLIPSIS = "..."


# --- the two accessors the analysis wording goes through ---------------------------------


def _detail(f: Finding) -> str:
    """A finding's prose (one place, so the wording can move without touching the layout)."""
    return detail(f)


def _chain(f: Finding) -> list[str]:
    """A finding's wait-for chain as hops, farthest waiter first (one place, as `_detail`)."""
    return chain_lines(f)


# --- ranks -------------------------------------------------------------------------------


def _runs(values: list[int]) -> list[str]:
    """Sorted ranks as parts: `0-7` for runs, `1,9,...,1017` for strides of four or more."""
    parts: list[str] = []
    i, n = 0, len(values)
    while i < n:
        j = i
        if i + 1 < n:
            step = values[i + 1] - values[i]
            j = i + 1
            while j + 1 < n and values[j + 1] - values[j] == step:
                j += 1
            if step == 1:
                parts.append(f"{values[i]}-{values[j]}")
                i = j + 1
                continue
            if j - i + 1 >= 4:
                parts.append(f"{values[i]},{values[i] + step},...,{values[j]}")
                i = j + 1
                continue
        parts.append(str(values[i]))
        i += 1
    return parts


def ranks_text(ranks: Iterable[int], max_chars: int = 60, count: bool = True) -> str:
    """Rank sets of any size in a few characters: runs, strides, or a range with exceptions.

    `[0..1023] minus every 8th` reads `0-1023 except 1,9,...,1017 (896 ranks)`; what is still
    too long is cut after whole parts and says how many ranks it stands for.
    """
    values = sorted({int(r) for r in ranks})
    if not values:
        return "-"
    plain = ",".join(_runs(values))
    best = plain
    lo, hi = values[0], values[-1]
    span = hi - lo + 1
    if len(values) > span // 2 and len(values) < span:
        have = set(values)
        holes = ",".join(_runs([r for r in range(lo, hi + 1) if r not in have]))
        other = f"{lo}-{hi} except {holes}"
        if len(other) < len(best):
            best = other
    suffix = f" ({len(values)} ranks)" if len(values) >= 8 and count else ""
    if len(best) + len(suffix) > max_chars:
        parts = best.split(",")
        kept: list[str] = parts[:1]  # at least the first part, however narrow the room
        for part in parts[1:]:
            if len(",".join([*kept, part, ELLIPSIS])) + len(suffix) > max_chars:
                break
            kept.append(part)
        while len(kept) > 1 and kept[-1] == ELLIPSIS:
            kept.pop()
        best = ",".join([*kept, ELLIPSIS])
        suffix = suffix or f" ({len(values)} ranks)"
    if re.fullmatch(r"\d+-\d+", best):
        return best
    return best + suffix


def _who(ranks: Sequence[int]) -> str:
    values = sorted(set(ranks))
    return f"rank {values[0]}" if len(values) == 1 else f"ranks {ranks_text(values)}"


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


# --- chain -------------------------------------------------------------------------------

_RANKS = r"ranks? (?:\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*(?:,\.\.\.)?(?: \(\d+ ranks\))?)"
_HOP_TOKENS = re.compile(rf"(?P<ranks>{_RANKS})|(?P<verb>\b(?:waits|wait)\b)|#(?P<seq>\d+)")


def _template(hop: str) -> str:
    return _HOP_TOKENS.sub(
        lambda m: "R" if m.group("ranks") else ("W" if m.group("verb") else "#S"), hop
    )


def _rank_set(text: str) -> list[int] | None:
    """The ranks of `rank 3` / `ranks 0-2,7`; None when the list was elided."""
    body = text.split(" ", 1)[1]
    if "..." in body:
        return None
    out: list[int] = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _merge_hops(hops: list[str]) -> str:
    """Hops differing only in ranks and sequence numbers as one line that counts them."""
    if len(hops) == 1:
        return hops[0]
    found = [list(_HOP_TOKENS.finditer(h)) for h in hops]
    first = found[0]
    pieces: list[str] = []
    pos = 0
    plural = False
    for k, m in enumerate(first):
        pieces.append(hops[0][pos : m.start()])
        pos = m.end()
        if m.group("ranks"):
            sets = [_rank_set(f[k].group("ranks")) for f in found]
            if any(s is None for s in sets):
                pieces.append(m.group("ranks") + " (and others)")
                plural = True
            else:
                union = sorted({r for s in sets for r in s or []})
                pieces.append(_who(union))
                plural = plural or len(union) > 1
        elif m.group("verb"):
            pieces.append("wait" if plural else "waits")
        else:
            seqs = sorted({int(f[k].group("seq")) for f in found})
            pieces.append(f"#{seqs[0]}" if len(seqs) == 1 else f"#{seqs[0]}-{seqs[-1]}")
    pieces.append(hops[0][pos:])
    return "".join(pieces) + f" [{len(hops)} hops alike]"


def merged_chain(hops: list[str]) -> list[str]:
    """Consecutive hops alike (same words, other ranks or seq) folded into one line each."""
    out: list[str] = []
    run: list[str] = []
    for hop in hops:
        if run and _template(hop) != _template(run[-1]):
            out.append(_merge_hops(run))
            run = []
        run.append(hop)
    if run:
        out.append(_merge_hops(run))
    return out


# --- stacks ------------------------------------------------------------------------------


def _entry_for(analysis: Analysis, rank: int, f: Finding) -> dict[str, Any] | None:
    """The rank's entry at the finding's collective, else its last entry (labels decoded)."""
    found = _entry_at(analysis, rank, f)
    return None if found is None else found[0]


def _entry_at(analysis: Analysis, rank: int, f: Finding) -> tuple[dict[str, Any], bool] | None:
    """(the rank's entry at the finding, True), else (its last entry, False)."""
    mine = analysis.ctx.history(rank)
    if not len(mine):
        return None
    in_group = mine["pg_name"] == mine.code("pg_name", f.pg_name)
    if f.collective_seq_id is not None:
        at = np.flatnonzero(
            in_group & (mine["collective_seq_id"] == f.collective_seq_id) & ~mine["is_p2p"]
        )
        if len(at):
            return mine.record(int(at[0])), True
    if f.p2p_seq_id is not None:
        at = np.flatnonzero(in_group & (mine["p2p_seq_id"] == f.p2p_seq_id) & mine["is_p2p"])
        if len(at):
            return mine.record(int(at[0])), True
        # p2p seqs count per rank: a peer waiting in the group is at its own blocking entry.
        b = analysis.blocked.get(rank)
        if b is not None:
            at = np.flatnonzero(in_group & mine["is_p2p"] & (mine["pos"] == b.pos))
            if len(at):
                return mine.record(int(at[0])), True
    return mine.record(len(mine) - 1), False


def stack_of(analysis: Analysis, rank: int, f: Finding) -> dict[str, Any] | None:
    """Where a rank is, for the finding: its entry there (else its last) and that stack."""
    found = _entry_at(analysis, rank, f)
    if found is None:
        return None
    entry, at_finding = found
    p2p = bool(entry["is_p2p"])
    seq = f"p2p#{entry['p2p_seq_id']}" if p2p else f"#{entry['collective_seq_id']}"
    sid = int(entry["stack_id"])
    frames = list(analysis.ctx.trace.stacks[sid]) if sid >= 0 else []
    return {
        "at_finding": bool(at_finding),
        "op": str(entry["op"]),
        "place": where(Place(str(entry["pg_name"]), str(entry["pg_desc"]))),
        "seq": seq,
        "state": str(entry["state"]),
        "frames": [(str(n), str(fn), int(ln)) for n, fn, ln in frames],
    }


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
    analysis: Analysis, rank: int, f: Finding, role: str, frames: int | None, width: int
) -> list[str]:
    info = stack_of(analysis, rank, f)
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


def _seq(f: Finding) -> int | None:
    return f.collective_seq_id if f.collective_seq_id is not None else f.p2p_seq_id


def _place(f: Finding) -> str:
    return where(f.place)


def _role(analysis: Analysis, f: Finding) -> str:
    if f is analysis.root_cause:
        return "ROOT CAUSE"
    return "consequence" if f.secondary else "cause"


def _header(analysis: Analysis, width: int) -> list[str]:
    trace = analysis.ctx.trace
    backends = ", ".join(trace.backends)
    formats = ", ".join(f"{k} {v}" for k, v in trace.formats)
    ev = analysis.evidence
    read = (
        f"{len(trace.file_table)} dump(s)"
        if ev is None or not ev.files
        else inputs_summary(analysis)
    )
    text = (
        f"frtrace: {read} from {trace.trace_dir}"
        + (f" (prefix '{trace.prefix}')" if trace.prefix and len(trace.file_table) else "")
        + f": {ranks_seen(analysis, ranks_text)}"
    )
    if len(trace.file_table) or ev is None:
        text += (
            f", {trace.entry_count:,} entries, format "
            f"{', '.join(trace.versions) or '-'}, {backends or '-'}, {formats}"
        )
    lines = wrap(text, width, "", "  ")
    if trace.missing_dumps:
        lines += wrap(f"no dump from {_who(trace.missing_dumps)}", width, "  ")
    if trace.skipped:
        lines += wrap(f"skipped {len(trace.skipped)} file(s) (listed on stderr)", width, "  ")
    return lines


def _root_block(
    analysis: Analysis, style: Style, width: int, verbose: bool, full_stacks: bool
) -> list[str]:
    f = analysis.root_cause
    if f is None:
        return []
    seq = _seq(f)
    title = f"ROOT CAUSE: {f.kind} in {_place(f)}" + (f", {f.op}" if f.op else "")
    lines = [style.red(t) for t in wrap(title, width, "", "  ")]
    group = (
        f"{f.pg_name} ({f.pg_desc or '-'}), members {ranks_text(f.expected_ranks)}"
        if f.pg_name or f.pg_desc
        else f"not in the logs; ranks they name {ranks_text(f.expected_ranks)}"
    )
    rows = [
        ("culprit ranks", ranks_text(f.culprit_ranks)),
        ("waiting ranks", ranks_text(f.waiting_ranks)),
        ("group", group),
    ]
    hosts = hosts_of(analysis, f.culprit_ranks)
    if hosts:
        rows.append(("culprit hosts", ", ".join(hosts)))
    if verbose:
        rows.append(("seq id", "-" if seq is None else str(seq)))
    entry = _entry_for(analysis, f.culprit_ranks[0], f) if f.culprit_ranks else None
    if entry is not None and (verbose or f.kind.endswith("_mismatch")):
        rows.append(
            (
                "sizes (culprit)",
                f"in {entry['input_sizes']} {entry['input_dtypes']}  "
                f"out {entry['output_sizes']} {entry['output_dtypes']}",
            )
        )
    live = None if full_stacks else (STACK_HEAD if verbose else STACK_BRIEF)
    for r in f.culprit_ranks[: 2 if verbose else 1]:
        rows += culprit_rows(analysis, r, live)
    for key, value in rows:
        wrapped = wrap(value, width, f"  {key:<16}", " " * 18)
        if key in ("culprit ranks", "culprit hosts"):
            wrapped = [style.red(w) for w in wrapped]
        lines += wrapped
    told = decided_line(f)
    if told:
        lines += wrap(told, width, f"  {'decided by':<16}", " " * 18)
    stall = stall_lines(f)
    if stall is not None:
        lines += wrap(stall[0], width, f"  {'stuck':<16}", " " * 18)
        if not any(key == "next step" for key, _v in rows):  # the logs gave a concrete one
            lines += wrap(stall[1], width, f"  {'look at':<16}", " " * 18)
    if verbose:
        lines += ["", *wrap(_detail(f), width, "  ")]
    else:
        lines += _clip(wrap(tidy(_detail(f)), width, "  "), DETAIL_LINES, "... (-v)", width)
    hops = _chain(f)
    if hops:
        lines += ["  chain (who waits for whom):"]
        shown = hops if verbose else [tidy(h) for h in merged_chain(hops)]
        body: list[str] = []
        for i, hop in enumerate(shown, 1):
            body += wrap(hop, width, f"    {i}. ", "       ")
        lines += body if verbose else _clip(body, CHAIN_LINES, "... (-v)", width)
    frames = None if full_stacks else (STACK_HEAD if verbose else STACK_BRIEF)
    if not len(analysis.ctx.trace.file_table):
        return lines  # no dump: no recorded stack to show
    lines += [""]
    for r in f.culprit_ranks[: 2 if verbose else 1]:
        lines += _stack_lines(analysis, r, f, "culprit", frames, width)
    waiting = [r for r in f.waiting_ranks if r not in f.culprit_ranks]
    if waiting:
        lines += _stack_lines(
            analysis, waiting[0], f, "waiting", frames if verbose else WAITER_FRAMES, width
        )
    if frames is not None:
        lines += wrap(
            "(stacks innermost first, cut; --print-stack-trace shows them whole)", width, "    "
        )
    return lines


def _fold_key(f: Finding, role: str) -> tuple:
    return (role, f.kind, f.pg_desc or f.pg_name, _seq(f), f.op)


def _row(head: str, ranks: list[int], width: int, count: bool = True) -> list[str]:
    """`head` then the ranks: one line when the ranks fit in what is left of it, else two."""
    room = width - 2 - len(head)
    text = head + ranks_text(ranks, room if room >= 24 else 40, count)
    return _clip(wrap(text, width, "  ", "      "), 2, ELLIPSIS, width)


def _other_findings(analysis: Analysis, style: Style, width: int, verbose: bool) -> list[str]:
    others = [f for f in analysis.findings if f is not analysis.root_cause]
    if not others:
        return []
    roles = [_role(analysis, f) for f in others]
    n_cause = roles.count("cause")
    lines = [
        style.bold(f"OTHER FINDINGS: {n_cause} cause(s), {len(others) - n_cause} consequence(s)")
    ]
    if verbose:
        for f, role in zip(others, roles, strict=True):
            lines += wrap(
                f"{role}: {f.kind} in {_place(f)}" + (f", {f.op}" if f.op else ""), width, "  "
            )
            lines += wrap(
                f"culprits {ranks_text(f.culprit_ranks)}; waiting {ranks_text(f.waiting_ranks)}",
                width,
                "    ",
            )
            lines += wrap(_detail(f), width, "    ")
        return lines
    # Findings alike (same role, kind, group kind, seq and op; one per group) fold into one row.
    folded: dict[tuple, list[Finding]] = {}
    for f, role in zip(others, roles, strict=True):
        folded.setdefault(_fold_key(f, role), []).append(f)
    for i, ((role, kind, _g, _s, _op), items) in enumerate(folded.items()):
        if i == FINDING_ROWS:
            lines.append(f"  ... {len(folded) - i} more (-v shows every finding)")
            break
        f = items[0]
        place = _place(f) if len(items) == 1 else f"{_place(f)} +{len(items) - 1} groups"
        culprits = sorted({r for x in items for r in x.culprit_ranks})
        lines += _row(f"{role}: {kind} in {place}, culprits ", culprits, width)
    return lines


def _waits(analysis: Analysis) -> list[tuple[tuple[str, int, str], dict[str, Any]]]:
    """Where ranks wait, folded per (group kind, seq, state): most waiting ranks first."""
    ctx = analysis.ctx
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    for rank, b in analysis.blocked.items():
        pg = int(b.node[1])
        name = ctx.name(pg)
        kind = ctx.pg_desc.get(name, "") or f"pg {name}"
        p2p = b.node[0] == "p"
        seq = -1 if p2p else int(b.node[2])
        state = "started" if b.state == 1 else "issued"
        key = (kind, seq, f"{'p2p ' if p2p else ''}{b.op} {state}")
        item = out.setdefault(key, {"ranks": [], "groups": set()})
        item["ranks"].append(rank)
        item["groups"].add(name)
    return sorted(out.items(), key=lambda kv: (-len(kv[1]["ranks"]), kv[0]))


def _wait_section(analysis: Analysis, style: Style, width: int) -> list[str]:
    waits = _waits(analysis)
    if not waits:
        return []
    n = len(analysis.blocked)
    lines = [style.bold(f"WHERE RANKS WAIT: {n} rank{'s' if n > 1 else ''}, most first")]
    for i, ((kind, seq, what), item) in enumerate(waits):
        if i == WAIT_ROWS:
            lines.append(f"  ... {len(waits) - i} more place(s) (-v shows every group)")
            break
        groups = sorted(item["groups"], key=lambda n: (len(n), n))
        at = f"{kind}{'' if seq < 0 else f'#{seq}'}"
        at += f" (pg {groups[0]})" if len(groups) == 1 else f" ({len(groups)} groups)"
        count = len(item["ranks"])
        lines += _row(f"{count} in {at}, {what}: ", item["ranks"], width, count=False)
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


def group_table(analysis: Analysis) -> str:
    """Every group (for -v): members, last seq issued and completed, who waits there; the
    groups where ranks wait come first, most waiting ranks first."""
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


def verdict(analysis: Analysis, exit_status: int | None = None) -> str:
    """The one line a person (or a log grep) needs: verdict, culprit, group#seq, exit status.

    It is never wrapped, so `tail -1` always has all of it."""
    code = (0 if analysis.ok else 1) if exit_status is None else exit_status
    n = rank_count(analysis)
    f = analysis.root_cause
    stopped = analysis.stopped
    if f is None and stopped:
        return f"STOPPED: {_who(stopped)} did not advance since the older snapshot; exit {code}"
    if f is None and analysis.undetermined:
        return (
            f"UNKNOWN: no finding in the {n} rank(s) read, but the job is not seen whole; "
            f"exit {code}"
        )
    if f is None:
        return f"OK: no desync, mismatch or missing rank found in {n} ranks; exit {code}"
    from_logs = not len(analysis.ctx.trace.file_table)
    state = "HUNG" if analysis.blocked or (from_logs and f.waiting_ranks) else "FAILED"
    hosts = hosts_of(analysis, f.culprit_ranks)
    on = f" on {', '.join(hosts[:3])}{',...' if len(hosts) > 3 else ''}" if hosts else ""
    return (
        f"{state}: root cause {f.kind}, culprit {_who(f.culprit_ranks)}{on}, {_place(f)}; "
        f"exit {code}"
    )


def render_text(
    analysis: Analysis,
    style: Style | None = None,
    *,
    full_stacks: bool = False,
    verbose: bool = False,
    width: int | None = None,
    exit_status: int | None = None,
) -> str:
    """The text report; `width` defaults to the terminal's (80 when piped)."""
    style = style or Style(False)
    width = max(MIN_WIDTH, width or terminal_width())
    trace = analysis.ctx.trace
    lines = [loaded_summary(trace, style)] if verbose else _header(analysis, width)
    if analysis.root_cause is not None:
        sel = analysis.selection
        if sel is not None and sel.root_cause_outside:
            outside = (
                "note: the root cause lies outside the selection (--selected-ranks / "
                "--pg-filters); it is shown in full below"
            )
            lines += ["", *(style.yellow(x) for x in wrap(outside, width, "", "  "))]
        lines += ["", *_root_block(analysis, style, width, verbose, full_stacks)]
        other = _other_findings(analysis, style, width, verbose)
        if other:
            lines += ["", *other]
        waits = _wait_section(analysis, style, width)
        if waits:
            lines += ["", *waits]
    missing = analysis.unseen
    if missing is not None:
        head = (
            "CANNOT TELL: the dumps do not show the whole job"
            if analysis.undetermined
            else ("NOT SEEN: what the dumps do not show")
        )
        lines += ["", style.bold(head)]
        for line in unseen_lines(missing):
            lines += wrap(line, width, "  ", "    ")
    moved = progress_lines(analysis.progress)
    if moved:
        lines += ["", style.bold(moved[0])]
        for line in moved[1 : None if verbose else 4]:
            lines += wrap(line, width, "  ", "    ")
    late = straggler_lines(analysis.stragglers)
    if late:
        lines += ["", *wrap(late[0], width, "", "  ")]
        for line in late[1 : None if verbose else 3]:
            lines += wrap(line, width, "  ", "    ")
    shown = analysis.notes if verbose else analysis.notes[:2]
    if shown:
        lines.append("")
    for item in shown:
        lines += wrap(f"note: {note_text(item)}", width, "", "  ")
    if verbose and len(analysis.ctx.pg_names):
        lines += ["", style.bold("GROUPS"), group_table(analysis)]
    line = verdict(analysis, exit_status)
    lines += ["", style.green(line) if analysis.ok else style.red(line)]
    return "\n".join(lines) + "\n"
