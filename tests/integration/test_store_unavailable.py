"""A database that cannot be reached is a typed, retryable error and one line on the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import run
from pipeline.db.store import open_store
from pipeline.errors import RetryableError, StoreUnavailable
from pipeline.settings import Settings

NO_SERVER = "postgresql+psycopg://postgres@127.0.0.1:9/sgam"  # the discard port: nothing listens


@pytest.mark.parametrize("url", [NO_SERVER, "sqlite:///{tmp}/missing/dir/sgam.sqlite3"])
def test_open_store_raises_store_unavailable(url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable) as unavailable:
        open_store(Settings(database_url=url.format(tmp=tmp_path)))
    assert isinstance(unavailable.value, RetryableError)
    assert "unavailable" in str(unavailable.value)


def test_cli_reports_an_unreachable_store_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SGAM_DATABASE_URL", NO_SERVER)

    code = run(["get", "--tenant", "acme", "--subject", "mira"])

    err = capsys.readouterr().err
    assert code == 5
    assert err.count("\n") == 1
    assert err.startswith("sgam: StoreUnavailable: ")
