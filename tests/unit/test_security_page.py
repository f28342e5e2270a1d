"""The security page names a test for each promise, and the README's security section lists
the promises of the review page, MCP and /metrics: every test the page names exists (a
renamed test would leave a promise unbacked), and every README link lands on a section."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "security.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(test_\w+))?`|`(test_\w+)`")


def _defined(name: str, files: list[Path]) -> bool:
    pattern = re.compile(rf"^def {name}\(", re.MULTILINE)
    return any(pattern.search(path.read_text(encoding="utf-8")) for path in files)


def test_every_test_the_security_page_names_exists() -> None:
    every = sorted((ROOT / "tests").rglob("test_*.py"))
    named = NAMED.findall(PAGE.read_text(encoding="utf-8"))
    missing = []
    for path, in_path, bare in named:
        if path and not (ROOT / path).is_file():
            missing.append(path)
        elif path and in_path and not _defined(in_path, [ROOT / path]):
            missing.append(f"{path}::{in_path}")
        elif bare and not _defined(bare, every):
            missing.append(bare)

    assert len(named) >= 30  # the page names its tests; a broken pattern would find none
    assert missing == []


def test_the_readmes_security_section_links_each_doors_promises() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Security\n")[1].split("\n## ")[0]
    anchors = set(re.findall(r"\(docs/security\.md#([\w-]+)\)", section))
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), re.MULTILINE)
    slugs = {re.sub(r"[^\w]+", "-", h.lower()).strip("-") for h in headings}

    wanted = {"what-the-review-page-promises", "what-mcp-promises", "what-metrics-promises"}
    assert wanted <= anchors
    assert anchors - slugs == set()
