"""The documents a newcomer reads: the README stays one sitting long, and no link leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, ROOT / "fixtures" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WRITTEN_ELSEWHERE: set[Path] = set()  # pages another branch of a change writes, checked once there

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(path: Path) -> str:
    """The document without its code blocks, where brackets are code, not links."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _broken_links(path: Path) -> list[str]:
    broken = []
    for target in _LINK.findall(_prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            continue  # a URL or an absolute path: not a file of this repository
        name, _, anchor = target.partition("#")
        dest = (path.parent / name).resolve() if name else path
        if dest in WRITTEN_ELSEWHERE and not dest.exists():
            continue
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md":
            anchors = {_anchor(h) for h in _HEADING.findall(_prose(dest))}
            if anchor not in anchors:
                broken.append(f"{target} (no such heading)")
    return broken


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(path: Path) -> None:
    assert _broken_links(path) == []


def test_the_readme_holds_no_dated_run_log() -> None:
    dated = [
        line
        for line in README.read_text(encoding="utf-8").splitlines()
        if re.search(r"20\d\d-\d\d-\d\d|load average", line)
    ]
    assert dated == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading, with `code`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading-with-code) [url](https://example.com/x)\n"
        "[gone](gone.md) [bad](there.md#nope)\n```\n[in code](skipped.md)\n```\n"
    )
    assert _broken_links(page) == ["gone.md (no such file)", "there.md#nope (no such heading)"]


def test_the_readmes_tutorial_report_is_what_frtrace_prints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report a newcomer learns to read is the one the command prints today, at 80
    columns: a change of wording shows here too."""
    from click.testing import CliRunner

    from frtrace.cli import cli

    match = re.search(
        r"```\n(frtrace: 2 dump\(s\) from fixtures/tutorial.*?)```", README.read_text(), re.S
    )
    assert match is not None, "the README shows the tutorial's report"
    monkeypatch.chdir(ROOT)  # the report names the folder as given
    result = CliRunner().invoke(
        cli, ["fixtures/tutorial"], env={"NO_COLOR": "1", "COLUMNS": "80"}, catch_exceptions=False
    )
    assert result.exit_code == 1
    assert result.stdout == match.group(1)
