"""The README is the front door, not the manual: at most 250 lines, the sections a newcomer
needs, and links into the documentation site for everything else."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
SECTIONS = [
    "A two-minute tour",
    "Serving chat backends",
    "Python in ten lines",
    "Agents over MCP",
    "Search",
    "TypeScript",
    "Security",
    "Documentation",
]


def test_the_readme_is_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert 0 < len(lines) <= 250, f"README.md has {len(lines)} lines; the manual goes in docs/"


def test_the_readme_has_the_newcomers_sections_and_links_into_the_site() -> None:
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    links = set(re.findall(r"\]\((docs/[^)#]+)", text))

    assert [s for s in SECTIONS if s not in headings] == []
    assert "docs/security.md" in links
    missing = [link for link in links if not (ROOT / link).is_file()]
    # Pages other parts of the project add (search) may land after the README names them.
    assert [link for link in missing if link != "docs/guides/search.md"] == []
    assert len(links) >= 15, f"the README links into the documentation: {sorted(links)}"
