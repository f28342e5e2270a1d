"""The README's Python examples run as written on a fresh embedded store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.readme_blocks import blocks as readme_blocks

README = Path(__file__).parents[2] / "README.md"


def _python_block(after: str) -> str:
    """The first Python code block after the heading `after`."""
    section = README.read_text(encoding="utf-8").split(after, 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def test_the_python_api_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _python_block("## Python API")
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{tmp_path / 'readme.sqlite3'}")

    exec(compile(example, "README.md", "exec"), {})

    assert "- passport_deadline: 2026-06-30" in capsys.readouterr().out


def test_every_python_example_of_the_readme_runs_as_written_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The blocks build on each other as a reader would paste them, one session."""
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{tmp_path / 'readme.sqlite3'}")
    monkeypatch.delenv("SGAM_LLM_BASE_URL", raising=False)
    python = [block for block in readme_blocks() if block.info == "python"]
    skipped = [f"{block.name}: {block.reason}" for block in python if block.marker]
    assert not skipped, f"every Python example can run here; marked: {skipped}"
    namespace: dict[str, object] = {}

    for block in python:
        # Padded so that a traceback names the README's own line numbers.
        exec(compile("\n" * block.line + block.text, str(README), "exec"), namespace)

    assert len(python) >= 4, "the README's Python examples were found"
    assert "Paris active" in capsys.readouterr().out  # the unit-of-work block ran


def test_the_put_many_example_runs_after_it_and_twice_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{tmp_path / 'readme.sqlite3'}")
    namespace: dict[str, object] = {}
    exec(compile(_python_block("## Python API"), "README.md", "exec"), namespace)
    example = compile(_python_block("### Many facts at once"), "README.md", "exec")
    capsys.readouterr()

    exec(example, namespace)
    first = capsys.readouterr().out
    exec(example, namespace)

    assert first == "C-1042 written\nC-1043 written\n"
    assert capsys.readouterr().out == "C-1042 unchanged\nC-1043 unchanged\n"
