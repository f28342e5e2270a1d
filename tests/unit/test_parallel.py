"""Each xdist worker's services (tests/parallel.py): the given URLs when run alone, and under
xdist a database and two Redis dbs that no other worker, and no given URL, shares."""

from __future__ import annotations

import pytest

from tests import parallel

GIVEN = {
    "SGAM_TEST_POSTGRES_URL": "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_test_me",
    "SGAM_TEST_REDIS_URL": "redis://127.0.0.1:6388/7",
    "SGAM_TEST_API_REDIS_URL": "redis://127.0.0.1:6388/11",
}


@pytest.fixture
def given(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name, value in GIVEN.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def test_alone_the_suite_uses_the_given_urls_as_they_are(given: pytest.MonkeyPatch) -> None:
    given.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert parallel.postgres_url() == GIVEN["SGAM_TEST_POSTGRES_URL"]
    assert parallel.redis_urls() == (GIVEN["SGAM_TEST_REDIS_URL"], GIVEN["SGAM_TEST_API_REDIS_URL"])


def test_the_first_worker_keeps_the_given_urls(given: pytest.MonkeyPatch) -> None:
    given.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert parallel.postgres_url() == GIVEN["SGAM_TEST_POSTGRES_URL"]
    assert parallel.redis_urls() == (GIVEN["SGAM_TEST_REDIS_URL"], GIVEN["SGAM_TEST_API_REDIS_URL"])


def test_seven_workers_share_no_database(given: pytest.MonkeyPatch) -> None:
    databases, redis_dbs = set(), []
    for index in range(7):
        given.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        databases.add(parallel.postgres_url())
        for url in parallel.redis_urls():
            assert url.startswith("redis://127.0.0.1:6388/")  # the given server, another db
            redis_dbs.append(int(url.rsplit("/", 1)[1]))
    assert len(databases) == 7
    assert "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_test_me_gw6" in databases
    assert len(set(redis_dbs)) == 14
    assert 0 not in redis_dbs  # every client's default db is never flushed


def test_an_eighth_worker_is_refused_in_one_line(given: pytest.MonkeyPatch) -> None:
    given.setenv("PYTEST_XDIST_WORKER", "gw7")
    with pytest.raises(RuntimeError, match="gw7 has no Redis db of its own"):
        parallel.redis_urls()
