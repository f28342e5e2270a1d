"""The command line's failure contract: one table of exit codes, one line on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
        ("SGAM_MAX_VALUE_BYTES", "0"),
        ("SGAM_LOCK_TIMEOUT_MS", "-1"),
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


@pytest.mark.slow
def test_db_upgrade_says_from_which_revision_to_which(tmp_path: object) -> None:
    from pipeline.db.migrations import HEAD

    env = {**os.environ, "SGAM_DATABASE_URL": f"sqlite:///{tmp_path}/up.sqlite3"}
    first = subprocess.run([SGAM, "db", "upgrade"], capture_output=True, text=True, env=env)
    again = subprocess.run([SGAM, "db", "upgrade"], capture_output=True, text=True, env=env)
    assert first.stderr == f"database migrated from empty to revision {HEAD}\n"
    assert again.stderr == f"database already at revision {HEAD}; nothing to do\n"


def test_messages_use_the_right_article_and_number(
    store: object,
    cli_env: object,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    put = ["put", "--tenant=acme", "--subject=mira", "--valid-from=2026-01-01", "--source=e"]
    assert run([*put, "--attribute=answer_style", "--value=verbose"]) == 2
    assert "(answer_style is an enum)" in capsys.readouterr().err
    assert run([*put, "--attribute=home_city", "--value=Utrecht"]) == 0
    capsys.readouterr()
    with monkeypatch.context() as terminal:  # the human form, as on a terminal
        terminal.setattr(sys.stdout, "isatty", lambda: True)
        assert run(["forget", "--tenant=acme", "--subject=mira"]) == 0
    assert capsys.readouterr().out == "hid 1 fact about mira\n"
    assert run(["log", "--tenant=acme", "--json", "--limit=1"]) == 0
    assert '"reason": "1 fact hidden"' in capsys.readouterr().out


@pytest.mark.parametrize("command", ["ingest", "import"])
def test_a_missing_input_file_is_named_as_the_argument_it_is(
    command: str, tmp_path: Path, cli_env: object, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "episodes.jsonl"
    assert run([command, str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"sgam: FILE: {missing} cannot be read: No such file or directory\n"
    )  # positional: there is no --file option to name


@pytest.mark.parametrize("command", ["consolidate", "expire"])
def test_a_now_after_the_clock_is_refused_naming_the_force_option(
    command: str, cli_env: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([command, "--now", "2099-01-01T00:00:00Z"]) == 2
    refusal = capsys.readouterr().err
    assert refusal.startswith("sgam: --now: is after the current time"), refusal
    assert "(--force)" in refusal
