"""`sgam serve` under test: started as a separate process on a free loopback port, on a
database the caller names; tests talk to it over HTTP (httpx) or through a browser.

Shared by the HTTP tests (tests/integration/api) and the browser tests
(tests/integration/browser); neither imports the other's test modules.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from sqlalchemy import create_engine, make_url, text

from pipeline.db.store import Store
from pipeline.settings import Settings
from tests.databases import create_database as create_database
from tests.parallel import redis_urls

REDIS_URL = redis_urls()[1]  # this xdist worker's own db (tests/parallel.py)
SGAM = str(Path(sys.executable).with_name("sgam"))
# Tables a tenant's writes land in: "nothing written" means none of them gained a row.
WRITTEN_TO = ("episodes", "facts", "claims", "events", "idempotency_keys", "candidates")


@dataclass
class Server:
    url: str
    database_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, secret: str | None = None, **options: Any) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, **options)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(
    database_url: str, workdir: Path, *options: str, ready_within_s: float = 120, **settings: str
) -> Server:
    port = free_port()
    env = {
        **os.environ,
        "SGAM_DATABASE_URL": database_url,
        "SGAM_REDIS_URL": REDIS_URL,
        "SGAM_API_RATE_PER_S": "100000",
        "SGAM_API_RATE_BURST": "100000",
        **settings,
    }
    if "SGAM_BROKER_URL" not in settings:
        env.pop("SGAM_BROKER_URL", None)  # inline mode unless a test names a broker
    log = workdir / f"server-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [SGAM, "serve", "--port", str(port), "--log-level", "warning", *options],
            env=env,
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(f"http://127.0.0.1:{port}", database_url, process, log)
    # A bound, not a wait: the loop ends at the first answer (a busy 2-core machine running the
    # suite on four xdist workers took 50 s to start one server).
    deadline = time.monotonic() + ready_within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"sgam serve exited with {process.returncode}\n{server.logs()}")
        try:
            # 5 s per probe: a loaded machine answers slowly, and a probe that times out
            # every time would never see the server that is up.
            if httpx2.get(server.url + "/healthz", timeout=5).status_code == 200:
                return server
        except httpx2.TransportError:
            time.sleep(0.1)
    stop_server(server)
    raise AssertionError(f"sgam serve did not answer within {ready_within_s} s\n{server.logs()}")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


Keys = Callable[..., str]


def migrated_database(postgres_url: str, suffix: str) -> str:
    """The URL of `<test database>_<suffix>`, created if missing and migrated."""
    url = make_url(postgres_url)
    own = url.set(database=f"{url.database}_{suffix}").render_as_string(hide_password=False)
    create_database(own)
    store = Store(Settings(database_url=own))
    store.upgrade()
    store.dispose()
    return own


def rows_of(database_url: str, tenant: str) -> dict[str, int]:
    """How many rows the tenant has in each table a write could touch."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return {
                table: int(
                    connection.execute(
                        text(f"SELECT count(*) FROM {table} WHERE tenant_id = :tenant"),
                        {"tenant": tenant},
                    ).scalar_one()
                )
                for table in WRITTEN_TO
            }
    finally:
        engine.dispose()


def fact_body(**overrides: Any) -> dict[str, Any]:
    return {
        "subject": "mira",
        "attribute": "home_city",
        "value": "Utrecht",
        "valid_from": "2026-01-01T00:00:00Z",
        "source_episode_id": "e1",
    } | overrides


def episode_body(text: str = "my home city is Utrecht", **overrides: Any) -> dict[str, Any]:
    return {
        "subject": "mira",
        "session_id": "s1",
        "occurred_at": "2026-06-01T10:00:00+02:00",
        "text": text,
    } | overrides
