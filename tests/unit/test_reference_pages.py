"""The reference pages of the site (docs/reference/) are generated from the code by
scripts/reference.py; a page that no longer matches what the code generates fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "reference.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference"] = module
    spec.loader.exec_module(module)
    return module


reference = _generator()


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_checked_in_reference_page_matches_the_code(name: str) -> None:
    page = reference.REFERENCE / name
    assert page.is_file(), f"docs/reference/{name} is missing: run scripts/reference.py"
    assert page.read_text(encoding="utf-8") == reference.PAGES[name](), (
        f"docs/reference/{name} drifted from the code: run .venv/bin/python scripts/reference.py"
    )


def test_the_pages_name_what_they_are_generated_from() -> None:
    """Each page holds what its source holds, so an empty render cannot pass as a match."""
    from pipeline.settings import Settings
    from schemas.lifecycle import EventKind

    settings = reference.settings_page()
    events = reference.events_page()
    cli = reference.cli_page()
    assert all(f"`SGAM_{name.upper()}`" in settings for name in Settings.model_fields)
    assert all(f"`{kind.value}`" in events for kind in EventKind)
    assert "## sgam keys create" in cli
    assert "--role" in cli
    assert "## `POST /v1/remember`" in reference.http_page()
    assert "| `StoreBusy` | 5 | 503 |" in reference.errors_page()


def test_a_drifted_page_is_named_by_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, render in reference.PAGES.items():
        (tmp_path / name).write_text(render(), encoding="utf-8")
    (tmp_path / "settings.md").write_text("# Settings\n\nby hand\n", encoding="utf-8")
    monkeypatch.setattr(reference, "REFERENCE", tmp_path)

    assert reference.main(["--check"]) == 1
    assert capsys.readouterr().out == (
        "docs/reference/settings.md drifted from the code: run scripts/reference.py\n"
    )
