"""`--html FILE` as a person opens it: one file, no network, drawn in a real headless Chromium.

The browser tests need Debian's `chromium` and `chromium-driver` and the `selenium` package
(scripts/check.sh installs them when run as root). Without them the tests say so and skip,
unless FRTRACE_REQUIRE_BROWSER is set (CI), where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, REPO, nccl_dump, nccl_entry, write_pickle

from frtrace.analysis.analyze import analyze
from frtrace.cli import cli
from frtrace.report.html import ROLES, STATUS, status_table
from frtrace.report.view import CULPRIT, build_view
from frtrace.synth import Fault, Layout, simulate, spec_for_entries, write_job
from frtrace.tables.load import load_trace

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = REPO / "test-artifacts"
EVIL = "</script><img id=pwn src=x onerror=alert(1)><!--"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1800",
)


def _page(folder: Path, out: Path) -> Path:
    result = CliRunner().invoke(cli, [str(folder), "--html", str(out)])
    assert result.exit_code in (0, 1, 4), result.output
    assert f"wrote {out}" in result.stderr
    assert any(w in result.stdout for w in ("ROOT CAUSE", "OK:", "UNKNOWN:"))  # report stays
    return out


# A scheduled op has no discovered times and no duration (the watchdog never saw it run).
_NOT_STARTED: dict[str, Any] = {
    "time_discovered_started_ns": None,
    "time_discovered_completed_ns": None,
    "duration_ms": None,
    "retired": False,
}


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks whose group desc and stack frames are HTML; rank 1 skips the third op."""
    folder = tmp_path_factory.mktemp("hostile")
    for rank in range(2):
        entries = [
            nccl_entry(
                i,
                i + 1,
                process_group=("0", EVIL),
                state="completed" if i < 2 else "scheduled",
                frames=[{"name": EVIL, "filename": "<b>x.py</b>", "line": 1}],
                **({} if i < 2 else _NOT_STARTED),
            )
            for i in range(3 if rank == 0 else 2)
        ]
        dump = nccl_dump(rank, 2, entries)
        dump["pg_config"]["0"]["desc"] = EVIL
        write_pickle(folder / f"nccl_trace_rank_{rank}", dump)
    return folder


@pytest.fixture(scope="module")
def big_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1024-rank job (tp 8, dp 64, pp 2) where rank 513 skips a tp all_reduce."""
    folder = tmp_path_factory.mktemp("big")
    layout = Layout(tp=8, dp=64, pp=2)
    write_job(simulate(spec_for_entries(layout, 60, fault=Fault("missing_ranks", 513))), folder)
    return folder


def _data(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="frtrace-data">(.*?)</script>', page)
    assert match is not None
    return json.loads(match.group(1))


def test_page_is_one_file_that_reaches_for_nothing(tmp_path: Path) -> None:
    page = _page(FIXTURES / "cascade_4rank", tmp_path / "r.html").read_text()
    urls = set(re.findall(r"https?://[^\s\"')]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # an XML namespace name, never fetched
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import", page)
    assert page.count("<script") == 2 and "default-src 'none'" in page
    data = _data(page)
    assert (
        data["verdict"] == "HUNG: root cause missing_ranks, culprit rank 3, pair23#3 (pg 2); exit 1"
    )
    assert data["report"]["root_cause"]["culprit_ranks"] == [3]


def test_dump_strings_cannot_break_out_of_the_data(hostile_dir: Path, tmp_path: Path) -> None:
    page = _page(hostile_dir, tmp_path / "r.html").read_text()
    assert EVIL not in page and "<img" not in page and "<!--" not in page
    assert _data(page)["report"]["root_cause"]["pg_desc"] == EVIL  # intact once parsed


def test_the_page_names_the_root_causes_culprit_for_the_map(tmp_path: Path) -> None:
    data = _data(_page(FIXTURES / "tutorial", tmp_path / "t.html").read_text())
    roles = dict(zip(data["map"]["ranks"], data["map"]["roles"], strict=True))
    assert ROLES[roles[0]] == CULPRIT  # rank 0's extra all_reduce broke the job
    assert ROLES[roles[1]] != CULPRIT


def test_status_table_says_where_each_rank_stopped() -> None:
    analysis = analyze(load_trace(FIXTURES / "cascade_4rank"))
    table = status_table(build_view(analysis))
    status = {(int(r), str(g)): STATUS[s] for r, g, s in table[["rank", "group", "status"]].values}
    assert status[(3, "2")] == "never issued"  # rank 3 stopped before pair23#3
    assert status[(2, "2")] == "issued"  # rank 2 waits there (gloo: never 'started')
    assert status[(0, "0")] == "issued" and status[(2, "0")] == "never issued"


# --- in a real browser --------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        reason = f"no headless browser: {', '.join(missing)} missing (scripts/check.sh installs it)"
        if os.environ.get("FRTRACE_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="frtrace-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _open(driver: Any, page: Path, shot: str) -> list[dict[str, Any]]:
    """Load the page, screenshot it (test-artifacts/), return the console's complaints."""
    driver.get(page.resolve().as_uri())
    assert driver.execute_script("return document.body.getAttribute('data-rendered')") == "1"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 40, 8000))
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / shot))
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def _painted(driver: Any) -> int:
    """Map pixels that are not the white background."""
    return int(
        driver.execute_script(
            "const c = document.getElementById('map');"
            "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            "let n = 0; for (let i = 0; i < d.length; i += 4)"
            "  if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) n++;"
            "return n;"
        )
    )


def _hover_rank(driver: Any, row: int, index: int) -> str:
    """Move the mouse over one rank's cell of the map; returns the tooltip's text."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_element(By.ID, "map")
    m = driver.execute_script("return window.frtraceMap")
    x = m["labelW"] + (index % m["perLine"]) * m["cell"] + m["cell"] / 2
    y = row * (m["bandH"] + m["gap"]) + (index // m["perLine"]) * m["cell"] + m["cell"] / 2
    size = canvas.size
    ActionChains(driver).move_to_element_with_offset(
        canvas, int(x - size["width"] / 2), int(y - size["height"] / 2)
    ).perform()
    tip = driver.find_element(By.ID, "tip")
    assert tip.is_displayed()
    return str(tip.text)


def _cell_colours(driver: Any, row: int, indices: list[int]) -> list[tuple[int, int, int]]:
    """The colours the map paints some ranks' cells (away from their labels and outlines),
    read back at once (a second readback makes Chromium warn in the console)."""
    m = driver.execute_script("return window.frtraceMap")
    points = [
        (
            m["labelW"] + (i % m["perLine"]) * m["cell"] + m["cell"] * 0.7,
            row * (m["bandH"] + m["gap"]) + (i // m["perLine"]) * m["cell"] + m["cell"] * 0.7,
        )
        for i in indices
    ]
    rgbs = driver.execute_script(
        "const c = document.getElementById('map'), r = window.devicePixelRatio || 1;"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "return arguments[0].map(([x, y]) => {"
        "  const at = (Math.round(y * r) * c.width + Math.round(x * r)) * 4;"
        "  return [d[at], d[at + 1], d[at + 2]]; });",
        points,
    )
    return [(int(r), int(g), int(b)) for r, g, b in rgbs]


def _alarming(rgb: tuple[int, int, int]) -> bool:
    """Red: the colour that says 'this one is to blame'."""
    r, g, b = rgb
    return r > 170 and g < 90 and b < 90


def test_the_map_paints_the_culprit_red_and_the_waiting_rank_calmer(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    page = _page(FIXTURES / "tutorial", tmp_path / "tutorial.html")
    assert _open(browser, page, "tutorial.png") == []
    rows = browser.execute_script("return D.map.rows.map(r => r.kind)")
    row = rows.index("default_pg")
    culprit, other = _cell_colours(browser, row, [0, 1])
    assert _alarming(culprit)  # rank 0, whose extra all_reduce broke the job
    assert not _alarming(other)  # rank 1, that rank 0 waits for
    legend = browser.find_element(By.ID, "legend-culprit")
    assert legend.text == "root cause culprit (1 rank)"
    swatch = legend.find_element(By.TAG_NAME, "i").value_of_css_property("background-color")
    assert swatch == "rgba(211, 47, 47, 1)"
    assert "root cause culprit" in _hover_rank(browser, row, 0)
    assert "root cause culprit" not in _hover_rank(browser, row, 1)


def test_cascade_page_shows_root_cause_chain_map_and_hover(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = _page(FIXTURES / "cascade_4rank", tmp_path / "cascade.html")
    assert _open(browser, page, "cascade_4rank.png") == []
    verdict = browser.find_element(By.ID, "verdict").text
    assert "HUNG: root cause missing_ranks, culprit rank 3, pair23#3 (pg 2); exit 1" in verdict
    root = browser.find_element(By.ID, "root-body").text
    assert "ROOT CAUSE: missing_ranks in pair23#3 (pg 2), all_reduce" in root
    hops = browser.find_elements(By.CSS_SELECTOR, "#chain svg g.hop")
    assert len(hops) == 3 and "rank 3 never issued it" in hops[-1].text
    assert _painted(browser) > 1000
    rows = browser.execute_script("return D.map.rows.map(r => r.kind)")
    tip = _hover_rank(browser, rows.index("pair23"), 3)
    assert "rank 3 in pair23 (pg 2)" in tip and "never issued" in tip
    browser.find_element(By.CSS_SELECTOR, "#rank-picker button[data-rank='2']").click()
    assert "rank 2, last" in browser.find_element(By.ID, "timeline").text
    assert "cascade_worker" in browser.find_element(By.ID, "stacks").text


def test_hostile_strings_render_as_text(browser: Any, hostile_dir: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = _page(hostile_dir, tmp_path / "hostile.html")
    assert _open(browser, page, "hostile.png") == []
    assert browser.find_elements(By.ID, "pwn") == []
    assert EVIL in browser.find_element(By.ID, "stacks").text


def test_1024_rank_page_draws_every_rank_and_outlines_the_culprit(
    browser: Any, big_job: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    page = _page(big_job, tmp_path / "big.html")
    assert page.stat().st_size < 2_000_000
    assert _open(browser, page, "tp8-dp64-pp2.png") == []
    assert "culprit rank 513, mesh_tp#" in browser.find_element(By.ID, "verdict").text
    assert browser.execute_script("return D.map.ranks.length") == 1024
    assert len(browser.find_elements(By.CSS_SELECTOR, "table tr")) < 60  # no row per rank
    assert _painted(browser) > 20_000
    rows = browser.execute_script("return D.map.rows.map(r => r.kind)")
    tip = _hover_rank(browser, rows.index("mesh_tp"), 513)
    assert tip.startswith("rank 513 in mesh_tp") and "never issued" in tip
    tip = _hover_rank(browser, rows.index("mesh_tp"), 512)
    assert "status: started" in tip and "waits in mesh_tp#" in tip


def test_healthy_and_missing_dump_pages_render_cleanly(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    healthy = _page(FIXTURES / "healthy_4rank", tmp_path / "healthy.html")
    assert _open(browser, healthy, "healthy_4rank.png") == []
    assert browser.find_element(By.ID, "verdict").text.startswith("OK: no desync")
    assert _painted(browser) > 1000
    lost = tmp_path / "lost"
    fault = Fault("missing_dump", 5, "tp")
    write_job(simulate(spec_for_entries(Layout(tp=2, dp=2, pp=2), 40, fault=fault)), lost)
    page = _page(lost, tmp_path / "lost.html")
    assert _open(browser, page, "missing_dump.png") == []
    assert "1 rank without a dump" in browser.find_element(By.ID, "verdict").text
    rows = browser.execute_script("return D.map.rows.map(r => r.kind)")
    assert "status: no dump" in _hover_rank(browser, rows.index("mesh_tp"), 5)
    assert "rank 5 (culprit): no dump" in browser.find_element(By.ID, "stacks").text


def test_a_job_seen_in_part_is_unknown_on_the_page_and_says_what_is_missing(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    one = tmp_path / "one"
    one.mkdir()
    (one / "trace_0").write_bytes((FIXTURES / "cascade_4rank" / "trace_0").read_bytes())
    page = _page(one, tmp_path / "one.html")
    assert _open(browser, page, "one_of_four.png") == []
    header = browser.find_element(By.ID, "verdict")
    assert header.text.startswith("UNKNOWN:") and header.get_attribute("class") == "unknown"
    missing = browser.find_element(By.ID, "unseen").text
    assert "no dump states the job's world size" in missing


def test_skipped_files_are_named_ten_per_reason_and_the_rest_on_demand(
    browser: Any, tmp_path: Path
) -> None:
    """A job killed while it dumped: 23 files cut short alike, one other, three ranks without a
    dump. The page named every skipped file in one table built at load (100,000 rows at
    scale) and listed the ranks without a dump one by one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    folder = tmp_path / "job"
    write_job(simulate(spec_for_entries(Layout(tp=2, dp=2, pp=2), 40)), folder)
    for rank in (5, 6, 7):
        (folder / f"nccl_trace_rank_{rank}").unlink()
    for rank in range(100, 123):
        (folder / f"nccl_trace_rank_{rank}").write_bytes(b"\x80\x02")
    (folder / "nccl_trace_rank_123").write_text("{}")
    page = _page(folder, tmp_path / "skipped.html")
    assert _open(browser, page, "skipped_files.png") == []
    inputs = browser.find_element(By.ID, "inputs")
    assert "no dump from\n5-7" in inputs.text
    blocks = browser.find_elements(By.CSS_SELECTOR, "#skipped .skip-reason")
    assert [b.find_element(By.TAG_NAME, "p").text for b in blocks] == [
        "truncated pickle (file ends early) (23 files)",
        _data(page.read_text())["report"]["inputs"]["skipped"][-1]["reason"] + " (1 file)",
    ]
    cut = blocks[0]
    shown = cut.find_elements(By.CSS_SELECTOR, ":scope > table td")
    assert [td.text for td in shown] == [
        str(folder / f"nccl_trace_rank_{r}") for r in range(100, 110)
    ]
    more = cut.find_element(By.TAG_NAME, "summary")
    assert more.text == "13 more alike"
    assert cut.find_elements(By.CSS_SELECTOR, "details td") == []  # not built until asked
    more.click()
    # The rows are built on the details' "toggle" event, which the browser fires as a task
    # after the click returns: wait for them (they never came in the failing case).
    WebDriverWait(browser, 10).until(
        lambda b: cut.find_elements(By.CSS_SELECTOR, "details td"), "no rows after the click"
    )
    rest = [td.text for td in cut.find_elements(By.CSS_SELECTOR, "details td")]
    assert rest == [str(folder / f"nccl_trace_rank_{r}") for r in range(110, 123)]
    assert blocks[1].find_elements(By.TAG_NAME, "details") == []


def test_each_ranks_live_stack_is_shown_beside_its_recent_ops(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = _page(FIXTURES / "logs" / "stuck", tmp_path / "stuck.html")
    assert _open(browser, page, "logs_stuck.png") == []
    assert "culprit rank 3 on nodeB" in browser.find_element(By.ID, "verdict").text
    browser.find_element(By.CSS_SELECTOR, "#rank-picker button[data-rank='3']").click()
    timeline = browser.find_element(By.ID, "timeline").text
    assert "rank 3, last" in timeline and "live stack of rank 3" in timeline
    assert "slow_data_loader" in timeline
    browser.find_element(By.CSS_SELECTOR, "#rank-picker button[data-rank='0']").click()
    assert "inside all_reduce" in browser.find_element(By.ID, "timeline").text
    assert "next step" in browser.find_element(By.ID, "stacks").text


def test_a_logs_only_page_shows_the_live_stacks_without_dumps(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    logs = tmp_path / "stuck"
    logs.mkdir()
    for path in (FIXTURES / "logs" / "stuck").glob("node*.*"):
        shutil.copy(path, logs / path.name)
    page = _page(logs, tmp_path / "logs.html")
    assert _open(browser, page, "logs_only_stuck.png") == []
    browser.find_element(By.CSS_SELECTOR, "#rank-picker button[data-rank='3']").click()
    timeline = browser.find_element(By.ID, "timeline").text
    assert "No dump from rank 3" in timeline and "slow_data_loader" in timeline
