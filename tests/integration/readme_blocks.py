"""The fenced code blocks of the README and of every page of the documentation site
(`docs/**/*.md`), with where they stand and how the page marks them.

A block may be preceded (on the line just before its fence) by a marker that tells the tests
what it is, visible to anyone editing the page:

    <!-- readme-test: skip: REASON -->   the block cannot run in the test suite (say why)
    <!-- readme-test: synopsis -->       a command's synopsis with placeholders, not an example

A page whose examples need a setting its text tells the reader to make says so once, anywhere
on the page, in a marker the tests read as that setting of every block of the page:

    <!-- readme-test: env SGAM_CATALOG=support -->

Every other `sh` block is run as written by tests/integration/test_readme_shell.py, every
Python block of a page in order by test_readme_example.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).parents[2]
README = PROJECT / "README.md"
DOCS = PROJECT / "docs"
PAGE_ENV = re.compile(r"^<!--\s*readme-test:\s*env\s+(?P<name>[A-Z_]+)=(?P<value>\S*)\s*-->$")
MARKER = re.compile(
    r"^<!--\s*readme-test:\s*(?P<what>skip|synopsis)\s*(?::\s*(?P<why>.*?))?\s*-->$"
)
FENCE = re.compile(r"^```(?P<info>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # the file, relative to the project: "README.md", "docs/guides/mcp.md"
    line: int  # of the opening fence, 1-based
    heading: str  # the section it stands in
    info: str  # the fence's language: "sh", "python", "json", "" ...
    text: str
    marker: str | None  # "skip", "synopsis" or None
    reason: str | None  # a skip's reason

    @property
    def name(self) -> str:
        """How a failure names it: `README.md:266 (Serving chat backends)`."""
        return f"{self.page}:{self.line} ({self.heading})"

    @property
    def slug(self) -> str:
        page = re.sub(r"[^a-z0-9]+", "-", self.page.removesuffix(".md").lower()).strip("-")
        return f"{page}-L{self.line}-" + re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")


def pages() -> list[Path]:
    """The README, then every page of the site in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def page_env(path: Path) -> dict[str, str]:
    """The settings a page's examples run with, from its `readme-test: env` markers."""
    found = (PAGE_ENV.match(line.strip()) for line in path.read_text(encoding="utf-8").splitlines())
    return {match["name"]: match["value"] for match in found if match}


def blocks(path: Path = README) -> list[Block]:
    """Every fenced block of a page, in order. A marker that does not stand just before a
    fence is an error, so a marker cannot drift away from the block it speaks of."""
    page = path.relative_to(PROJECT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    heading, index = "", 0
    pending: tuple[int, str, str | None] | None = None
    while index < len(lines):
        line = lines[index]
        marker = MARKER.match(line.strip())
        opening = FENCE.match(line)
        if pending is not None and not opening:
            raise AssertionError(
                f"{page}:{pending[0]}: a readme-test marker must stand on the line just "
                "before a code block's opening fence"
            )
        if marker:
            if marker["what"] == "skip" and not marker["why"]:
                raise AssertionError(f"{page}:{index + 1}: a skip marker must say why")
            pending = (index + 1, marker["what"], marker["why"])
        elif line.startswith("#") and not line.startswith("#!"):
            heading = line.lstrip("#").strip()
        elif opening:
            end = next(
                (at for at in range(index + 1, len(lines)) if lines[at].startswith("```")), None
            )
            if end is None:
                raise AssertionError(f"{page}:{index + 1}: a code block is never closed")
            found.append(
                Block(
                    page=page,
                    line=index + 1,
                    heading=heading,
                    info=opening["info"],
                    text="\n".join(lines[index + 1 : end]) + "\n",
                    marker=pending[1] if pending else None,
                    reason=pending[2] if pending else None,
                )
            )
            pending, index = None, end
        index += 1
    return found
