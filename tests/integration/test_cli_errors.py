"""The command line's failure contract: one table of exit codes, one line on stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.cli import run
from pipeline.cli.errors import EXIT_CODES, exit_code
from pipeline.errors import (
    FactConflict,
    InvalidInput,
    NotFound,
    NotQuarantined,
    SgamError,
    StoreBusy,
    StoreUnavailable,
)

SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")
GET = ["get", "--tenant", "acme", "--subject", "mira"]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (NotFound("x"), 1),
        (InvalidInput("value", "bad"), 2),
        (FactConflict("x", existing_fact_id="f"), 3),
        (NotQuarantined("x", fact_id="f"), 3),
        (StoreBusy("x"), 5),
        (StoreUnavailable("x"), 5),
        (SgamError("x"), 4),
        (RuntimeError("x"), 4),
    ],
)
def test_one_table_maps_classes_to_codes(error: BaseException, code: int) -> None:
    assert exit_code(error) == code


def test_the_table_lists_subclasses_before_their_bases() -> None:
    for index, (kind, _) in enumerate(EXIT_CODES):
        for later, _ in EXIT_CODES[index + 1 :]:
            assert not issubclass(later, kind), f"{later} is shadowed by {kind}"


def _crash(*_: object, **__: object) -> None:
    raise RuntimeError("secret value 1987-04-12 must not be printed")


def test_an_unexpected_exception_is_exit_4_in_one_line(
    cli_env: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("pipeline.read.facts.get", _crash)

    code = run(GET)

    err = capsys.readouterr().err
    assert code == 4
    assert err.count("\n") == 1, err
    assert err.startswith("sgam: internal error (RuntimeError)")
    assert "1987" not in err


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_traceback_only_on_request(
    how: str,
    cli_env: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("pipeline.read.facts.get", _crash)
    if how == "environment":
        monkeypatch.setenv("SGAM_DEBUG", "1")

    code = run(["--debug", *GET] if how == "flag" else GET)

    err = capsys.readouterr().err
    assert code == 4
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().endswith("for the traceback")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SGAM_DATABASE_URL", "sqlite://x.db"),
        ("SGAM_DATABASE_URL", "mysql://root@localhost/sgam"),
        ("SGAM_LOCK_TIMEOUT_MS", "abc"),
        ("SGAM_WRITE_RETRIES", "0"),
        ("SGAM_MAX_VALUE_BYTES", "lots"),
    ],
)
def test_invalid_settings_are_exit_2_naming_the_variable(variable: str, value: str) -> None:
    done = subprocess.run(
        [SGAM, *GET],
        capture_output=True,
        text=True,
        env={**os.environ, variable: value},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"sgam: {variable}: "), done.stderr
    assert "Traceback" not in done.stderr


def test_postgres_spellings_are_accepted_alike() -> None:
    from pipeline.settings import Settings

    for url in ("postgres://u@h/db", "postgresql://u@h/db", "postgresql+psycopg://u@h/db"):
        assert Settings(database_url=url).database_url == "postgresql+psycopg://u@h/db"
