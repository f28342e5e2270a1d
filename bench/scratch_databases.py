"""The benchmarks' scratch PostgreSQL databases. Only a database whose name contains `bench`
is ever dropped, so a mistyped --url cannot cost anyone their data."""

from __future__ import annotations

import sys

import psycopg
from sqlalchemy import make_url


def libpq_url(url: str) -> str:
    """The SQLAlchemy URL as a libpq connection string for psycopg."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def recreate(url: str) -> None:
    """Drop the database of `url` (closing its connections) and create it empty."""
    name = _bench_name(url)
    with _server(url) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')


def create_if_missing(url: str) -> None:
    name = _bench_name(url)
    with _server(url) as server:
        found = server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if found.fetchone() is None:
            server.execute(f'CREATE DATABASE "{name}"')


def drop(url: str) -> None:
    with _server(url) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{_bench_name(url)}" WITH (FORCE)')


def _bench_name(url: str) -> str:
    name = make_url(url).database or ""
    if "bench" not in name:
        sys.exit(f"refusing to use {name!r}: a benchmark database's name must contain 'bench'")
    return name


def _server(url: str) -> psycopg.Connection[tuple[object, ...]]:
    server = make_url(url).set(database="postgres").render_as_string(hide_password=False)
    return psycopg.connect(libpq_url(server), autocommit=True)
