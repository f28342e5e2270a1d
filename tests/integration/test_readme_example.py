"""The README's Python example runs as written on a fresh embedded store."""

from __future__ import annotations

from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"


def test_the_python_api_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    section = README.read_text(encoding="utf-8").split("## Python API", 1)[1]
    example = section.split("```python", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{tmp_path / 'readme.sqlite3'}")

    exec(compile(example, "README.md", "exec"), {})

    assert "- passport_deadline: 2026-06-30" in capsys.readouterr().out
