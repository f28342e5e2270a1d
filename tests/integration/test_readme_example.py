"""The Python examples of the README and of every page of the site run as written: each
page's blocks in order, in one session, on a fresh embedded store, with the settings the page
names (`readme-test: env`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.readme_blocks import PROJECT, README, blocks, page_env, pages

PYTHON_PAGES = [page for page in pages() if any(b.info == "python" for b in blocks(page))]
PYTHON_GUIDE = PROJECT / "docs" / "guides" / "python.md"


def _python_block(page: Path, after: str) -> str:
    """The first Python code block after the heading `after`."""
    section = page.read_text(encoding="utf-8").split(after, 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def _session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, page: Path) -> None:
    """A reader's fresh shell: a new SQLite file, no model, the page's own settings."""
    for name in ("SGAM_CATALOG", "SGAM_CATALOG_PATH", "SGAM_LLM_BASE_URL", "SGAM_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{tmp_path / 'readme.sqlite3'}")
    for name, value in page_env(page).items():
        monkeypatch.setenv(name, value)


def test_the_readme_python_example_runs_on_the_default_catalogue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _session(monkeypatch, tmp_path, README)

    exec(compile(_python_block(README, "## Python in ten lines"), "README.md", "exec"), {})

    printed = capsys.readouterr().out
    assert "[('diet', 'vegetarian')]" in printed
    assert "- diet (since, source):\n  - vegetarian (" in printed


@pytest.mark.parametrize(
    "page", PYTHON_PAGES, ids=[page.relative_to(PROJECT).as_posix() for page in PYTHON_PAGES]
)
def test_every_python_example_of_a_page_runs_as_written_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks of a page build on each other as a reader would paste them, one session."""
    _session(monkeypatch, tmp_path, page)
    python = [block for block in blocks(page) if block.info == "python"]
    skipped = [f"{block.name}: {block.reason}" for block in python if block.marker]
    assert not skipped, f"every Python example can run here; marked: {skipped}"
    namespace: dict[str, object] = {}

    for block in python:
        # Padded so that a traceback names the page's own line numbers.
        exec(compile("\n" * block.line + block.text, str(page), "exec"), namespace)

    assert python, f"{page}: its Python examples were found"


def test_the_python_guide_runs_every_example_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _session(monkeypatch, tmp_path, PYTHON_GUIDE)
    namespace: dict[str, object] = {}
    python = [block for block in blocks(PYTHON_GUIDE) if block.info == "python"]

    for block in python:
        exec(compile("\n" * block.line + block.text, str(PYTHON_GUIDE), "exec"), namespace)

    assert len(python) >= 3, "the Python guide's examples were found"
    assert "Paris active" in capsys.readouterr().out  # the unit-of-work block ran


def test_the_put_many_example_runs_after_it_and_twice_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _session(monkeypatch, tmp_path, PYTHON_GUIDE)
    namespace: dict[str, object] = {}
    first_block = _python_block(PYTHON_GUIDE, "# Python API")
    exec(compile(first_block, str(PYTHON_GUIDE), "exec"), namespace)
    example = compile(_python_block(PYTHON_GUIDE, "## Many facts at once"), "python.md", "exec")
    capsys.readouterr()

    exec(example, namespace)
    first = capsys.readouterr().out
    exec(example, namespace)

    assert first == "C-1042 written\nC-1043 written\n"
    assert capsys.readouterr().out == "C-1042 unchanged\nC-1043 unchanged\n"
