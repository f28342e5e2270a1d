"""`sgam worker` rides out a broker that restarts: a Redis server of the test's own (on a free
loopback port, nothing kept on disk) is stopped and started again twice while the worker runs;
the worker must stay up, reconnect and process what is ingested afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.databases import create_database, empty_database
from tests.integration.celery_helpers import (
    celery_database_url,
    die_with_the_test_process,
    episode_counts,
    wait_for,
)
from tests.integration.pipeline_helpers import episode
from tests.integration.server_helpers import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.celery, pytest.mark.slow]
SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("the test's Redis did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def database(postgres_url: str) -> str:
    url = celery_database_url(postgres_url) + "_outage"
    create_database(url)
    migrated = Store(Settings(database_url=url))
    migrated.upgrade()
    migrated.dispose()
    empty_database(url)
    return url


def test_the_worker_rides_out_a_broker_restart(
    broker: RedisServer, database: str, tmp_path: Path
) -> None:
    env = {**os.environ, "SGAM_DATABASE_URL": database, "SGAM_BROKER_URL": broker.url}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [SGAM, "worker", "--concurrency", "1", "--loglevel", "info"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_the_test_process,
        )
    store = open_store(Settings(database_url=database, broker_url=broker.url))

    def logs() -> str:
        return log.read_text(errors="replace")

    try:
        pipeline.ingest(store, episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1"))
        wait_for(lambda: episode_counts(database) == {"done": 1}, 60, "the first episode", logs)
        for restart in range(2):
            broker.stop()
            time.sleep(2)  # the worker notices the lost connection and starts retrying
            broker.start()
            text = f"My employer is Globex{restart}."
            at = f"2026-06-0{2 + restart}T09:00:00Z"
            pipeline.ingest(store, episode(text, at, f"s{2 + restart}"))
            wait_for(
                lambda n=restart: episode_counts(database) == {"done": 2 + n},
                60,
                f"an episode after restart {restart + 1}",
                logs,
            )
        assert worker.poll() is None, f"the worker exited\n{logs()[-4000:]}"
        print("branch: the worker processed episodes after two broker restarts")
    finally:
        store.dispose()
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
