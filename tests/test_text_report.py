"""The text report as a person at a terminal meets it: short, fitted, the verdict last."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import FIXTURES

from frtrace.analysis.analyze import analyze
from frtrace.analysis.findings import Finding, Hop, Kind, Place, Reason
from frtrace.cli import cli, expand_multi_values
from frtrace.report.fmt import ranks_text
from frtrace.report.text import MAX_LINES, render_text, tidy, wrap
from frtrace.report.view import build_view, merged_chain
from frtrace.report.wording import chain_lines, detail, stall_lines
from frtrace.synth import Fault, Layout, simulate, spec_for_entries, write_job
from frtrace.tables.load import load_trace

ENTRIES = 60  # a short ring per rank keeps 1024 ranks quick to write and read


def _job(root: Path, layout: Layout, fault: Fault) -> tuple[Path, dict[str, Any]]:
    folder = root / f"tp{layout.tp}-dp{layout.dp}-pp{layout.pp}"
    job = simulate(spec_for_entries(layout, ENTRIES, fault=fault))
    write_job(job, folder)
    assert job.expected is not None
    return folder, job.expected


@pytest.fixture(scope="session")
def big_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Three faulted 1024-rank jobs (folder, ground truth), written once per session."""
    root = tmp_path_factory.mktemp("big")
    return {
        "tp": _job(root, Layout(tp=8, dp=64, pp=2), Fault("missing_ranks", 513, "tp")),
        "dp": _job(root, Layout(tp=8, dp=128, pp=1), Fault("missing_ranks", 777, "dp")),
        "cycle": _job(root / "cycle", Layout(tp=8, dp=64, pp=2), Fault("order_cycle", 513)),
    }


def frtrace(*args: str, columns: int = 100) -> Result:
    env = {"COLUMNS": str(columns), "NO_COLOR": "1"}
    return CliRunner().invoke(cli, expand_multi_values(list(args)), env=env)


@pytest.mark.parametrize("case", ["tp", "dp"])
def test_1024_rank_report_fits_a_screen_and_ends_with_the_verdict(
    big_jobs: dict[str, tuple[Path, dict[str, Any]]], case: str
) -> None:
    folder, expected = big_jobs[case]
    result = frtrace(str(folder))
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output
    lines = result.stdout.splitlines()
    assert len(lines) <= 40
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("frtrace: 1024 dump(s)")
    root = next(i for i, line in enumerate(lines) if line.startswith("ROOT CAUSE:"))
    assert root <= 4  # the root cause comes right after the one-paragraph header
    (culprit,) = expected["culprit_ranks"]
    where = f"{expected['pg_desc']}#{expected['collective_seq_id']} (pg {expected['pg_name']})"
    assert lines[-1] == f"HUNG: root cause missing_ranks, culprit rank {culprit}, {where}; exit 1"


def test_verbose_shows_every_finding_and_every_group(
    big_jobs: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    brief = frtrace(str(big_jobs["dp"][0])).stdout
    full = frtrace(str(big_jobs["dp"][0]), "-v").stdout
    assert "GROUPS" in full and "GROUPS" not in brief
    assert full.count("consequence: missing_ranks") > 100
    assert len(full.splitlines()) > 3 * len(brief.splitlines())


def test_narrow_terminal_wraps_between_words(
    big_jobs: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    out = frtrace(str(big_jobs["tp"][0]), columns=60).stdout
    lines = out.splitlines()[:-1]  # the verdict line is never wrapped: `tail -1` has it all
    assert max(len(line) for line in lines) <= 60
    words = set(" ".join(lines).split())
    assert {"never", "issued", "waiting", "collective"} <= words  # whole words survive wrapping


def test_healthy_report_is_short_and_says_ok() -> None:
    result = frtrace(str(FIXTURES / "healthy_4rank"))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) <= 5
    assert lines[-1] == "OK: no desync, mismatch or missing rank found in 4 ranks; exit 0"


def test_cascade_names_the_root_first_and_roles_of_the_others() -> None:
    out = frtrace(str(FIXTURES / "cascade_4rank")).stdout
    assert out.index("ROOT CAUSE: missing_ranks in pair23#3") < out.index("OTHER FINDINGS")
    assert "  consequence: missing_ranks in default_pg#3" in out
    assert "1. ranks 0-1 wait in default_pg#3 (pg 0) for ranks 2-3" in out
    assert out.splitlines()[-1] == (
        "HUNG: root cause missing_ranks, culprit rank 3, pair23#3 (pg 2); exit 1"
    )


def test_render_text_takes_a_width_and_exit_status() -> None:
    analysis = analyze(load_trace(FIXTURES / "tutorial"))
    text = render_text(build_view(analysis), width=50, exit_status=7)
    assert max(len(line) for line in text.splitlines()[:-1]) <= 50
    assert text.splitlines()[-1].endswith("; exit 7")


def test_rank_sets_compress_to_ranges_strides_and_exceptions() -> None:
    assert ranks_text(range(1024)) == "0-1023"
    assert ranks_text([512, 514, 515, 516, 517, 518, 519]) == "512,514-519"
    assert ranks_text(range(8, 512, 8)) == "8,16,...,504 (63 ranks)"
    every_but_1_mod_8 = [r for r in range(1024) if r % 8 != 1]
    assert ranks_text(every_but_1_mod_8) == "0-1023 except 1,9,...,1017 (896 ranks)"
    scattered = ranks_text([r * r % 4099 for r in range(300)], 40)
    assert len(scattered) <= 40 and scattered.endswith(" ranks)")


def test_chain_hops_alike_merge_into_one_line_with_a_count() -> None:
    hops = [
        f"rank {13 + i} waits in default_pg#{114 + i} (pg 0) for rank {14 + i}" for i in range(26)
    ]
    chain = ["ranks 0-5 wait in mesh_dp#37 (pg 1) for rank 13", *hops, "rank 39 never issued it"]
    assert merged_chain(chain) == [
        "ranks 0-5 wait in mesh_dp#37 (pg 1) for rank 13",
        "ranks 13-38 wait in default_pg#114-139 (pg 0) for ranks 14-39 [26 hops alike]",
        "rank 39 never issued it",
    ]


def test_wrap_never_cuts_words_and_splits_only_overlong_lists_at_commas() -> None:
    text = "supercalifragilistic " * 5 + ",".join(str(r) for r in range(0, 200, 3))
    lines = wrap(text, 30, "  ")
    assert all(len(line) <= 30 for line in lines)
    tokens = [w for line in lines for w in line.split()]
    assert [w for w in tokens if not w[0].isdigit()] == ["supercalifragilistic"] * 5
    assert "".join(w for w in tokens if w[0].isdigit()) == ",".join(map(str, range(0, 200, 3)))


def test_any_finding_kind_renders_generically() -> None:
    analysis = analyze(load_trace(FIXTURES / "cascade_4rank"))
    assert analysis.root_cause is not None
    analysis.root_cause.kind = Kind.STUCK_COLLECTIVE  # a kind this report has never heard of
    analysis.root_cause.chain = []
    text = render_text(build_view(analysis), width=80)
    assert "ROOT CAUSE: stuck_collective in pair23#3 (pg 2)" in text
    assert text.splitlines()[-1].startswith("HUNG: root cause stuck_collective, culprit rank 3")


@pytest.mark.parametrize(
    "fixture", ["order_inversion_4rank", "tutorial_json", "size_3rank", "cascade_4rank"]
)
def test_one_rank_is_never_called_ranks(fixture: str) -> None:
    out = frtrace(str(FIXTURES / fixture), "-v").stdout
    assert not re.findall(r"\b[Rr]anks \d+\b(?![-,\d])", out), out


def test_a_deadlock_names_its_one_culprit_in_the_singular() -> None:
    out = frtrace(str(FIXTURES / "order_inversion_4rank"), columns=200).stdout
    assert "Rank 1 issued right#3 (pg 2) before the collective its peers are in: it calls" in out


def test_a_deadlock_where_one_node_waits_for_many_ranks_says_each_wait_once() -> None:
    # One hop per edge: the world all_reduce waits for ranks blocked in several places.
    world = Place("0", "default_pg", 7)
    hops = [Hop((0,), Place("9", "mesh_dp", 4), (2,))]
    hops += [Hop((2,), world, (r,)) for r in (0, 1, 3)]
    f = Finding(
        Kind.ORDER_CYCLE,
        "0",
        "default_pg",
        7,
        None,
        "all_reduce",
        [2],
        [0, 1, 3],
        [0, 1, 2, 3],
        Reason.CYCLE,
        chain=hops,
    )
    assert detail(f).startswith(
        "deadlock: rank 0 waits in mesh_dp#4 (pg 9); rank 2 waits in default_pg#7 (pg 0); "
        "each waits for the other."
    )


def test_a_merged_hop_keeps_one_count_of_its_ranks() -> None:
    hops = [f"rank 2 waits in default_pg#7 (pg 0) for rank {r}" for r in [0, 1, *range(3, 16)]]
    (line,) = merged_chain(hops)
    assert tidy(line) == (
        "rank 2 waits in default_pg#7 (pg 0) for ranks 0-1,3-15 (15 ranks) [15 hops alike]"
    )


def test_a_strided_rank_list_in_prose_keeps_its_count() -> None:
    # Every third rank, then one more: shortened, the list must still say how many it holds.
    ranks = ranks_text([*range(0, 4000, 3), 5000], 40)
    assert tidy(f"ranks {ranks} wait in default_pg#7 (pg 0)") == (
        "ranks 0,3,...,3999,5000 (1335 ranks) wait in default_pg#7 (pg 0)"
    )


@pytest.mark.parametrize("columns", range(40, 101, 3))
def test_the_header_never_breaks_a_line_inside_a_phrase(columns: int) -> None:
    out = frtrace(str(FIXTURES / "tutorial"), columns=columns).stdout
    header = out.split("\n\n")[0].splitlines()
    for phrase in ("2 dump(s)", "(prefix 'trace_')", "ranks 0-1", "9 entries", "format 2.10"):
        assert any(phrase in line for line in header), (phrase, header)
    assert "pickle 2" in header[-1]


def test_a_merged_hop_of_several_ranks_takes_the_plural() -> None:
    hops = [f"rank {r} waits in default_pg#7 (pg 0) for rank 9" for r in (1, 3)]
    assert merged_chain(hops) == ["ranks 1,3 wait in default_pg#7 (pg 0) for rank 9 [2 hops alike]"]


def _finding(reason: Reason, culprits: list[int], **facts: Any) -> Finding:
    """A finding of two waiting ranks (0 and 2) at mesh_tp#7, or at p2p#4 for a send/recv."""
    p2p = reason == Reason.NEVER_POSTED
    return Finding(
        Kind.STATE_MISMATCH if reason == Reason.NOT_STARTED else Kind.MISSING_RANKS,
        "3",
        "mesh_tp",
        None if p2p else 7,
        4 if p2p else None,
        "recv" if p2p else "all_reduce",
        culprits,
        [0, 2],
        [0, 1, 2, 3],
        reason,
        facts=facts,
        issued_by=[0, 2],
        not_issued_by=culprits,
    )


@pytest.mark.parametrize(
    ("reason", "facts", "said"),
    [
        (
            Reason.STOPPED_EARLY,
            {},
            "their own histories show this call always followed their last one: they stopped "
            "before it",
        ),
        (
            Reason.AWAITED_ELSEWHERE,
            {"elsewhere": 2},
            "ranks also wait for them in 2 other places, which an extra call here would not "
            "explain: they stopped",
        ),
        (
            Reason.NEVER_POSTED,
            {"waiting_op": "send"},
            "ranks 1,3 never posted the matching recv and are not waiting in any collective: "
            "look at what they do outside collectives",
        ),
        (
            Reason.NOT_STARTED,
            {},
            "ranks 1,3 never started it while ranks 0,2 run it: their GPUs are stuck",
        ),
        (
            Reason.NO_DUMP,
            {"unreadable": [1, 3]},
            "look at how they ended and at their logs (killed while writing their dumps?)",
        ),
        (
            Reason.NEVER_ISSUED,
            {"idle": True, "states_tracked": True},
            "ranks 1,3 are not waiting in any collective (their last operations completed): "
            "look at what they do outside collectives",
        ),
    ],
)
def test_two_culprits_are_spoken_of_in_the_plural(
    reason: Reason, facts: dict[str, Any], said: str
) -> None:
    assert said in detail(_finding(reason, [1, 3], **facts))


def test_two_culprits_stuck_on_the_cpu_are_spoken_of_in_the_plural() -> None:
    f = _finding(Reason.NEVER_ISSUED, [1, 3], stall="cpu_side", idle_ms=5000.0, last_op="send")
    stuck, look_at = stall_lines(f) or ("", "")
    assert stuck.startswith("stuck on the CPU side: they never enqueued the collective")
    assert "before their dumps" in stuck
    assert look_at.startswith("py-spy dump --pid <pid> on those ranks' hosts; their logs")


def test_an_extra_call_leaves_two_ranks_nothing_to_pair_with() -> None:
    f = _finding(Reason.EXTRA_CALL, [1])
    f.chain = [Hop((1,), Place("3", "mesh_tp", 9), (0, 2))]
    f.chain_end = "idle"
    assert chain_lines(f)[-1].startswith("ranks 0,2 have nothing left to pair with it")


def _prose(report: str) -> str:
    """The report's words with its line breaks and indents undone, to find a sentence."""
    return " ".join(report.split())


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_a_1024_rank_deadlock_says_whole_what_its_culprit_did(
    big_jobs: dict[str, tuple[Path, dict[str, Any]]], columns: int
) -> None:
    prose = _prose(frtrace(str(big_jobs["cycle"][0]), columns=columns).stdout)
    assert (
        "Rank 513 issued default_pg#6 (pg 0) before the collective its peers are in: it calls "
        "collectives in a different order" in prose
    )
    assert "rank 513 waits in default_pg#6 (pg 0);" in prose  # its own wait is kept
    assert re.search(r"\d+ other waits \(-v\); each waits for the other", prose)


@pytest.mark.parametrize("case", ["tp", "cycle"])
def test_1024_rank_report_keeps_to_40_lines_on_an_80_column_terminal(
    big_jobs: dict[str, tuple[Path, dict[str, Any]]], case: str
) -> None:
    lines = frtrace(str(big_jobs[case][0]), columns=80).stdout.splitlines()
    assert len(lines) <= MAX_LINES == 40
    assert lines[-1].startswith("HUNG: root cause")
    assert any(line.startswith("  rank 513 (culprit)") for line in lines)  # its stack stays
