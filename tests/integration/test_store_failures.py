"""Database failures as typed errors and one clean line: unreachable, busy, misconfigured."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import make_url, text

import pipeline
from pipeline.cli import run
from pipeline.db.store import Store, open_store
from pipeline.errors import RetryableError, StoreBusy, StoreUnavailable
from pipeline.settings import Settings
from tests.factories import put_fact

SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")
NO_SERVER = "postgresql+psycopg://postgres@127.0.0.1:9/sgam"  # the discard port: nothing listens


def test_open_store_raises_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable) as unavailable:
        open_store(Settings(database_url=NO_SERVER))
    assert isinstance(unavailable.value, RetryableError)
    assert "unavailable" in str(unavailable.value)


def test_a_sqlite_path_in_a_missing_directory_is_a_bad_setting_named_with_its_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing" / "dir" / "sgam.sqlite3"
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{missing}")

    code = run(["get", "--tenant", "acme", "--subject", "mira"])

    err = capsys.readouterr().err
    assert code == 2
    expected = f"the directory of {missing} does not exist; create it first"
    assert err == f"sgam: SGAM_DATABASE_URL: {expected}\n"


def test_cli_reports_an_unreachable_store_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SGAM_DATABASE_URL", NO_SERVER)

    code = run(["get", "--tenant", "acme", "--subject", "mira"])

    err = capsys.readouterr().err
    assert code == 5
    assert err.count("\n") == 1
    assert err.startswith("sgam: StoreUnavailable: ")


SECRET_VALUE = "Secretstadt-4711"
SECRET_EVIDENCE = "whispered-evidence-0815"
PUT = [
    "put",
    "--tenant=acme",
    "--subject=mira",
    "--attribute=home_city",
    f"--value={SECRET_VALUE}",
    f"--evidence={SECRET_EVIDENCE}",
    "--valid-from=2026-06-01T00:00:00Z",
    "--source=e1",
]


def _sgam(url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SGAM, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SGAM_DATABASE_URL": url, **env},
        timeout=120,
        check=False,
    )


def _assert_one_clean_line(done: subprocess.CompletedProcess[str], code: int, start: str) -> None:
    assert done.returncode == code, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(start), done.stderr
    for secret in (SECRET_VALUE, SECRET_EVIDENCE, "INSERT", "SELECT"):
        assert secret not in done.stderr


@contextmanager
def _writer_holding_the_lock(store: Store) -> Iterator[None]:
    """Another process's transaction that holds what a put needs, until the block ends."""
    if store.is_postgres:
        with store.engine.connect() as connection, connection.begin():
            connection.execute(text("LOCK TABLE facts, claims IN ACCESS EXCLUSIVE MODE"))
            yield
    else:
        path = make_url(store.settings.database_url).database
        assert path is not None
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()


def test_a_busy_store_is_exit_5_in_one_line_without_values(store: Store, database_url: str) -> None:
    with _writer_holding_the_lock(store):
        done = _sgam(database_url, *PUT, SGAM_LOCK_TIMEOUT_MS="200", SGAM_WRITE_RETRIES="2")
    _assert_one_clean_line(done, 5, "sgam: StoreBusy: ")


def test_api_store_busy_message_holds_no_value(store: Store, database_url: str) -> None:
    busy = open_store(Settings(database_url=database_url, lock_timeout_ms=200, write_retries=2))
    try:
        with _writer_holding_the_lock(store), pytest.raises(StoreBusy) as raised:
            pipeline.put(
                busy,
                {
                    "tenant_id": "acme",
                    "subject": "mira",
                    "attribute": "home_city",
                    "value": SECRET_VALUE,
                    "evidence": SECRET_EVIDENCE,
                    "valid_from": "2026-06-01T00:00:00Z",
                    "source_episode_id": "e1",
                },
            )
    finally:
        busy.dispose()
    assert SECRET_VALUE not in str(raised.value)
    assert SECRET_EVIDENCE not in str(raised.value)


def test_a_sqlite_read_needs_no_write_lock(tmp_path: Path) -> None:
    """(PostgreSQL readers never wait for writers.)"""
    database_url = f"sqlite:///{tmp_path / 'busy.sqlite3'}"
    store = open_store(Settings(database_url=database_url))
    with _writer_holding_the_lock(store):
        done = _sgam(
            database_url, "get", "--tenant=acme", "--subject=mira", SGAM_LOCK_TIMEOUT_MS="60000"
        )
    store.dispose()
    # Nothing stored: exit 1 ("nothing found") answered while the writer still held its lock.
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://no_such_role@127.0.0.1:5432/postgres", 'role "no_such_role" does not exist'),
        ("postgresql://postgres@127.0.0.1:5432/no_such_database", "does not exist"),
    ],
)
def test_a_missing_role_or_database_is_a_configuration_error(url: str, problem: str) -> None:
    done = _sgam(url, "get", "--tenant=acme", "--subject=mira")
    _assert_one_clean_line(done, 2, "sgam: SGAM_DATABASE_URL: ")
    assert problem in done.stderr


def _put(store: Store, subject: str) -> None:
    put_fact(store, tenant_id="acme", subject=subject)


def test_a_sqlite_writer_of_this_process_waits_its_turn_then_is_busy(tmp_path: Path) -> None:
    """Threads of one process queue for the file's writer turn (`Sqlite.writers`): one
    waits as long as SGAM_LOCK_TIMEOUT_MS, then it is StoreBusy, as at the file's lock."""
    url = f"sqlite:///{tmp_path / 'turns.sqlite3'}"
    store = open_store(Settings(database_url=url, lock_timeout_ms=200, write_retries=1))
    try:
        with store.begin():  # this thread's transaction holds the turn
            waiting: list[BaseException] = []
            other = threading.Thread(target=lambda: _catch(lambda: _put(store, "mira"), waiting))
            other.start()
            other.join(timeout=30)
        assert [type(error) for error in waiting] == [StoreBusy]
        # Its turn come, every writer of many threads at once gets through.
        failed: list[BaseException] = []
        writers = [
            threading.Thread(target=_catch, args=(lambda n=n: _put(store, f"s{n}"), failed))
            for n in range(16)
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(timeout=60)
        assert failed == []
        for n in range(16):
            assert len(pipeline.get(store, {"tenant_id": "acme", "subject": f"s{n}"})) == 1
    finally:
        store.dispose()


def _catch(work: Callable[[], object], caught: list[BaseException]) -> None:
    try:
        work()
    except BaseException as error:
        caught.append(error)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_child_forked_while_a_thread_writes_can_write(tmp_path: Path) -> None:
    """A worker pool forks its children from a process whose threads may be writing: the
    child's writers take fresh turns, not a copy of one its parent's thread held."""
    url = f"sqlite:///{tmp_path / 'fork.sqlite3'}"
    store = open_store(Settings(database_url=url, lock_timeout_ms=2_000, write_retries=1))
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.begin():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    pid = os.fork()
    if pid == 0:  # the child: its parent's transaction is not its own; it waits for the file
        code = 1
        try:
            child = open_store(Settings(database_url=url, lock_timeout_ms=20_000, write_retries=1))
            _put(child, "forked")
            code = 0
        finally:
            os._exit(code)
    release.set()  # the parent's writer ends; the child gets the file's lock
    holder.join(timeout=30)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(pipeline.get(store, {"tenant_id": "acme", "subject": "forked"})) == 1
    store.dispose()
