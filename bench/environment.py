"""What every benchmark prints about the conditions of its run: the machine, the PostgreSQL
settings the figures depend on, the code measured, and how busy the CPUs were.

A figure taken on a loaded 2-core machine says more about the other work than about SGAM, so
each benchmark prints `describe(url)` once and `machine_load()` before and after each section.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import platform
import subprocess
import time
from pathlib import Path

import psycopg
import sqlalchemy
from scratch_databases import libpq_url

import pipeline
import schemas

# Every server setting the figures depend on: durability, memory, planning, statistics.
SERVER_SETTINGS = (
    "server_version",
    "shared_buffers",
    "work_mem",
    "synchronous_commit",
    "fsync",
    "wal_level",
    "autovacuum",
    "plan_cache_mode",
    "jit",
    "random_page_cost",
    "effective_cache_size",
    "max_locks_per_transaction",
    "max_connections",
)


def describe(url: str | None = None) -> list[str]:
    """Lines naming the machine, the server settings of the PostgreSQL database at `url`
    (when there is one), and the code measured."""
    lines = [
        f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
        f", SQLAlchemy {sqlalchemy.__version__}, psycopg {psycopg.__version__} "
        f"({psycopg.pq.__impl__})"
    ]
    if url is not None and sqlalchemy.make_url(url).get_backend_name() == "postgresql":
        lines.append(server_settings(url))
    lines.append(f"code: {code_identity()}")
    return lines


def server_settings(url: str) -> str:
    """The PostgreSQL version and SERVER_SETTINGS of the server at `url`, on one line (read
    from its `postgres` database: a bench creates its own only after describing the machine)."""
    server = str(sqlalchemy.make_url(url).set(database="postgres").render_as_string(False))
    with psycopg.connect(libpq_url(server), autocommit=True) as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in SERVER_SETTINGS
        }
    version = settings.pop("server_version").split()[0]
    shown = ", ".join(f"{name} {value}" for name, value in settings.items())
    return f"postgres {version}: {shown}"


def code_identity() -> str:
    """Where `pipeline` was imported from, a digest of its and the schemas' source, and the
    git state of that tree (the code may be edited between runs)."""
    digest = hashlib.sha256()
    roots = [Path(pipeline.__file__).parent, Path(schemas.__file__).parent]
    for root in roots:
        for source in sorted(root.rglob("*")):
            if source.suffix in {".py", ".yaml"}:
                digest.update(source.read_bytes())
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
            cwd=roots[0],
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        described = "not a git checkout"
    return f"{roots[0]} (git {described}, source sha256 {digest.hexdigest()[:12]})"


def other_runnable_tasks() -> float | None:
    """The mean number of runnable tasks over one second besides this sampler (from
    /proc/loadavg), or None where there is no /proc."""
    try:
        samples = []
        for _ in range(20):
            running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            samples.append(int(running) - 1)
            time.sleep(0.05)
    except OSError:
        return None
    return sum(samples) / len(samples)


def machine_load() -> str:
    """How busy the CPUs are with other work right now, and the 1-minute load average."""
    busy = other_runnable_tasks()
    average = f"load average {os.getloadavg()[0]:.2f}"
    if busy is None:
        return average
    note = "  <- other work is competing for the CPUs" if busy >= 0.5 else ""
    return f"other runnable tasks {busy:.1f}, {average}{note}"


def use_support_catalog() -> None:
    """The benchmarks' workloads write the support catalogue's attributes (account_plan,
    home_city...), and their figures of record were measured on it: select it by name for this
    process and every server and worker it starts, since the default is now `personal`."""
    os.environ["SGAM_CATALOG"] = "support"


def ready(server: subprocess.Popen[bytes], port: int, timeout_s: float) -> subprocess.Popen[bytes]:
    """`server` once `sgam serve` on `port` answers /readyz; killed, and the benchmark
    stopped, if it does not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("sgam serve did not become ready")
