"""The tests' settings come from the test alone: neither the developer's SGAM_* environment nor
a `.env` file reaches them. The real settings read the environment, and an env file only when
SGAM_ENV_FILE names one: a stray ./.env changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import InvalidInput
from pipeline.settings import Settings, load_settings
from tests.factories import isolated_settings


def test_neither_the_environment_nor_dotenv_reaches_the_tests_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SGAM_BATCH_SIZE", "7")
    monkeypatch.setenv("SGAM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    (tmp_path / ".env").write_text("SGAM_WRITE_RETRIES=9\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    real = load_settings()
    assert (real.batch_size, real.write_retries, real.llm_configured) == (7, 5, True)
    monkeypatch.setenv("SGAM_ENV_FILE", str(tmp_path / ".env"))
    named = load_settings()
    assert (named.batch_size, named.write_retries) == (7, 9)
    monkeypatch.setenv("SGAM_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(InvalidInput, match="SGAM_ENV_FILE: .*missing.env is not a file"):
        load_settings()

    isolated = isolated_settings(database_url="sqlite:///x.sqlite3")
    defaults = Settings.model_fields
    assert isolated.batch_size == defaults["batch_size"].default
    assert isolated.write_retries == defaults["write_retries"].default
    assert not isolated.llm_configured
    assert isolated.database_url == "sqlite:///x.sqlite3"
    assert isinstance(isolated, Settings)
