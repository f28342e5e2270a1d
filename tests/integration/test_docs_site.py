"""The documentation site builds offline with `mkdocs build --strict`, and no page it builds
loads anything from another host: no script, stylesheet, font, image or frame."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.readme_blocks import PROJECT

MKDOCS = Path(sys.executable).parent / "mkdocs"
# An element that loads what its attribute names, when the page is shown (an <a> only links).
LOADS = re.compile(
    r"<(?P<tag>script|link|img|iframe|source|video|audio|embed|object|track|image|use)\b"
    r"[^>]*?\s(?P<attr>src|href|data|srcset|poster|xlink:href)\s*=\s*[\"']?(?P<url>[^\"'\s>]+)",
    re.IGNORECASE,
)
CSS_LOADS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])(?P<url>[^\"')\s]+)", re.IGNORECASE)
# The theme's script names these hosts, and loads from each only in a case the site avoids.
GATED_SCRIPT_HOSTS = {
    "unpkg.com/mermaid": "only for a page with a Mermaid diagram (the site draws SVG files)",
    "api.github.com": "only with a `repo_url` of GitHub in mkdocs.yml",
    "/api/v4/projects": "only with a `repo_url` of GitLab in mkdocs.yml",
    "unpkg.com/resize-observer-polyfill": "only in a browser without ResizeObserver (pre-2020)",
    "clipboardjs.com": "a comment naming the library's home page",
}


def _external(url: str) -> bool:
    return re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url, re.IGNORECASE) is not None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_")}
    # No proxy and no route out would make a fetch fail loudly; the build must need none.
    env |= {"NO_MKDOCS_2_WARNING": "1"}
    env |= {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(folder)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-4000:]}"
    return folder


def test_the_site_builds_strict_with_every_page_of_docs(site: Path) -> None:
    """--strict fails on a page left out of the nav (`validation.omitted_files: warn`), a broken
    link or anchor, and an asset of another host (the privacy plugin), so building is the check;
    this one makes sure that every page of docs/ came out as a page."""
    docs = PROJECT / "docs"
    pages = sorted(path.relative_to(docs).as_posix() for path in docs.rglob("*.md"))
    # x/y.md is built as x/y/index.html, x/index.md as x/index.html
    built = {
        page: site / page.removesuffix("index.md").removesuffix(".md") / "index.html"
        for page in pages
    }
    missing = [page for page, html in built.items() if not html.is_file()]
    assert not missing, f"pages of docs/ the site did not build: {missing}"
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "A two-minute tour" in home, "the home page is the README"


def test_no_page_loads_anything_from_another_host(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    loads = [
        f"{page.relative_to(site)}: <{match['tag']} {match['attr']}={match['url']}>"
        for page in pages
        for match in LOADS.finditer(page.read_text(encoding="utf-8"))
        if _external(match["url"])
    ]
    styles = [
        f"{sheet.relative_to(site)}: {match['url']}"
        for sheet in site.rglob("*.css")
        for match in CSS_LOADS.finditer(sheet.read_text(encoding="utf-8"))
        if _external(match["url"])
    ]

    assert len(pages) > 20, "the site's pages were found"
    assert not loads, f"elements that load from another host: {loads}"
    assert not styles, f"stylesheets that load from another host: {styles}"


def test_the_theme_scripts_load_from_another_host_only_in_cases_the_site_avoids(
    site: Path,
) -> None:
    named = {
        url
        # The page's own script; the search worker's (lunr) name hosts only in comments.
        for script in (site / "assets" / "javascripts").glob("bundle.*.js")
        for url in re.findall(r"https?://[^\s\"'`)]+", script.read_text(encoding="utf-8"))
    }
    ungated = [url for url in named if not any(host in url for host in GATED_SCRIPT_HOSTS)]
    config = (PROJECT / "mkdocs.yml").read_text(encoding="utf-8")
    diagrams = [page for page in site.rglob("*.html") if 'class="mermaid"' in page.read_text()]

    assert named, "the theme's script was read"
    assert not ungated, f"script URLs of other hosts not known to be gated: {ungated}"
    assert not re.search(r"^repo_url:", config, re.MULTILINE), "a repo_url makes pages call its API"
    assert not diagrams, f"pages with a Mermaid diagram load its script from a CDN: {diagrams}"
