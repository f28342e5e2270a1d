"""Workers and settings that fail loudly at start, not later: `sgam worker` and `sgam beat`
refuse a store they cannot use (exit 2, one line, like `sgam serve`) instead of reporting
ready and failing every task; a schemeless broker URL or an invalid consolidation schedule is a
bad setting (exit 2, one line). Ingest with the broker down says the episodes are stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import make_url

from pipeline.cli import run
from tests.databases import POSTGRES_URL
from tests.integration.celery_helpers import REDIS_URL
from tests.integration.pipeline_helpers import episode

SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")


def _sgam(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_")}
    env |= {"SGAM_DATABASE_URL": f"sqlite:///{tmp_path / 'sgam.sqlite3'}"} | settings
    return subprocess.run(
        [SGAM, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def _missing_database() -> str:
    url = make_url(POSTGRES_URL)
    return url.set(database=f"{url.database}_does_not_exist").render_as_string(False)


@pytest.mark.postgres
@pytest.mark.parametrize("command", [["worker", "--concurrency", "1"], ["beat"]])
def test_worker_and_beat_refuse_a_database_that_does_not_exist(
    tmp_path: Path, command: list[str]
) -> None:
    done = _sgam(
        tmp_path, *command, SGAM_BROKER_URL=REDIS_URL, SGAM_DATABASE_URL=_missing_database()
    )

    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("sgam: SGAM_DATABASE_URL: ")
    assert "ready" not in done.stdout


@pytest.mark.parametrize("command", [["worker"], ["beat"]])
def test_worker_and_beat_refuse_an_unmigrated_sqlite_path_in_a_missing_directory(
    tmp_path: Path, command: list[str]
) -> None:
    missing = f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'sgam.sqlite3'}"
    done = _sgam(tmp_path, *command, SGAM_BROKER_URL=REDIS_URL, SGAM_DATABASE_URL=missing)

    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("sgam: ")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "value", "problem"),
    [
        ("SGAM_BROKER_URL", "127.0.0.1:6379", "must be a broker URL with its scheme"),
        ("SGAM_BROKER_URL", "reddis://127.0.0.1:6379/0", "must be a broker URL with its scheme"),
        ("SGAM_CONSOLIDATE_CRON", "61 3 * * *", "is not a crontab schedule"),
        ("SGAM_CONSOLIDATE_CRON", "0 3 * *", "must have 5 fields"),
    ],
)
@pytest.mark.parametrize("command", ["worker", "beat", "ingest"])
def test_a_bad_broker_url_or_schedule_is_a_bad_setting(
    tmp_path: Path, command: str, setting: str, value: str, problem: str
) -> None:
    settings = {"SGAM_BROKER_URL": REDIS_URL, setting: value}
    done = _sgam(tmp_path, command, *(["-"] if command == "ingest" else []), **settings)

    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"sgam: {setting}: {problem}")


def test_ingest_with_the_broker_down_says_stored_not_queued(
    cli_env: object,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SGAM_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1")))

    code = run(["ingest", str(path), "--json"])

    out, err = capsys.readouterr()
    assert code == 5  # stored, nothing lost, but nothing is under way: retryable
    assert [receipt["status"] for receipt in json.loads(out)] == ["stored"]
    assert err.count("\n") == 1, err
    assert err.startswith("sgam: StoreUnavailable: the broker is unreachable: the episodes are ")
    assert "stored and the sweeper will queue them" in err
