"""MkDocs hooks: the site's home page is the README, so the two never drift apart.

docs/index.md holds only a pointer; `on_page_markdown` replaces it with README.md, its links
into docs/ made relative to the site and its links to other files of the repository (which
the site does not carry) made plain text naming the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
LINK = re.compile(r"(?<!!)\[(?P<label>[^\]]+)\]\((?P<target>[^)\s]+)\)")


def home_page(readme: str, pages: set[str]) -> str:
    """The README as the site's index: `docs/x.md` links become `x.md`; a link to any other
    file of the repository (or to a page not in the site) becomes its label and path."""

    def relink(match: re.Match[str]) -> str:
        label, target = match["label"], match["target"]
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match[0]
        path, _, anchor = target.partition("#")
        inside = path.removeprefix("docs/")
        if path.startswith("docs/") and inside in pages:
            return f"[{label}]({inside}{'#' + anchor if anchor else ''})"
        return label if label.strip("`") == path else f"{label} (`{path}`)"

    return LINK.sub(relink, readme)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != "index.md":
        return markdown
    pages = {file.src_uri for file in files}
    return home_page(README.read_text(encoding="utf-8"), pages)
