"""Real Celery workers and beat for the pipeline's tests: separate processes on the local
Redis (a database number of their own) and a PostgreSQL database of their own."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis
from sqlalchemy import create_engine, func, make_url, select, text

from pipeline.db.models import EpisodeRow
from tests.parallel import redis_urls

REDIS_URL = redis_urls()[0]  # this xdist worker's own db (tests/parallel.py)
PR_SET_PDEATHSIG = 1


def die_with_the_test_process() -> None:
    """In the child before exec: SIGKILL it when the test process dies. A worker left behind by
    a test that could not stop it (an interrupted run) would otherwise go on taking messages
    from its Redis db, and a later run's test on the same db would wait for wake-ups it ate."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def celery_database_url(postgres_url: str) -> str:
    url = make_url(postgres_url)
    return url.set(database=f"{url.database}_celery").render_as_string(hide_password=False)


def worker_env(database_url: str, **settings: str) -> dict[str, str]:
    return {
        **os.environ,
        "SGAM_DATABASE_URL": database_url,
        "SGAM_BROKER_URL": REDIS_URL,
        "SGAM_EPISODE_LEASE_S": "10",
        "SGAM_SWEEP_GRACE_S": "2",
        "SGAM_SWEEP_INTERVAL_S": "1",
        "SGAM_WORKER_BATCH": "25",
        **settings,
    }


@dataclass
class Celery:
    """Worker and beat processes started for one test, stopped after it."""

    env: dict[str, str]
    workdir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _start(self, *args: str) -> subprocess.Popen[bytes]:
        with open(self.workdir / f"celery-{len(self.processes)}.log", "wb") as log:
            process = subprocess.Popen(  # the child keeps its own copy of the log's descriptor
                [sys.executable, "-m", "celery", "-A", "workers.app", *args],
                env=self.env,
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: SIGKILL reaches the pool too
                preexec_fn=die_with_the_test_process,
            )
        self.processes.append(process)
        return process

    def worker(self, concurrency: int = 2) -> subprocess.Popen[bytes]:
        return self._start(
            "worker",
            "--queues",
            "extract,consolidate",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            "info",
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"w{len(self.processes)}-{os.getpid()}@%h",
        )

    def beat(self) -> subprocess.Popen[bytes]:
        return self._start(
            "beat", "--loglevel", "info", "--schedule", str(self.workdir / "beat-schedule")
        )

    @staticmethod
    def kill(process: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker and every process of its pool, as the OOM killer would."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(
            path.read_text(errors="replace") for path in sorted(self.workdir.glob("celery-*.log"))
        )


def flush_redis() -> None:
    """Empty the broker's Redis database, and only that one: other runs on the same server
    (the HTTP tests, a benchmark, a second checkout) keep theirs."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.flushdb()
    finally:
        client.close()


def episode_counts(database_url: str) -> dict[str, int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(EpisodeRow.status, func.count()).group_by(EpisodeRow.status)
            ).all()
    finally:
        engine.dispose()
    return {status: count for status, count in rows}


def wait_for(check: Callable[[], bool], timeout: float, what: str, logs: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs()[-4000:]}")


def wait_for_done(
    database_url: str, total: int, stalled_after: float, logs: Callable[[], str]
) -> None:
    """Wait until `total` episodes are done, failing only when none finishes for `stalled_after`
    seconds: a loaded machine (the suite runs beside other tests) is slow, a lost episode stalls."""
    done, last_progress = -1, time.monotonic()
    while time.monotonic() - last_progress < stalled_after:
        now_done = episode_counts(database_url).get("done", 0)
        if now_done == total:
            return
        if now_done != done:
            done, last_progress = now_done, time.monotonic()
        time.sleep(0.2)
    raise AssertionError(
        f"{done} of {total} episodes done and none for {stalled_after} s\n{logs()[-4000:]}"
    )


def count(database_url: str, statement: str) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(text(statement)).scalar_one())
    finally:
        engine.dispose()


def scrape_metrics(port: int, celery: Celery) -> dict[str, float]:
    """The samples a worker's metrics endpoint serves, waiting up to 20 s for it to listen."""
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                text = answer.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"no metrics on {port}\n{celery.logs()[-3000:]}") from None
            time.sleep(0.2)
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples
