"""The test databases: the PostgreSQL one named by SGAM_TEST_POSTGRES_URL (created when
missing), and emptying a database between tests. Every database a test creates derives its
name from SGAM_TEST_POSTGRES_URL, so parallel runs on one server never collide."""

from __future__ import annotations

from sqlalchemy import create_engine, make_url, text

from pipeline.db.models import Base
from tests.parallel import postgres_url

POSTGRES_URL = postgres_url()  # this xdist worker's own (tests/parallel.py)
TABLES = tuple(table.name for table in Base.metadata.sorted_tables)


def create_database(url: str) -> None:
    parsed = make_url(url)
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        exists = connection.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": parsed.database}
        ).first()
        if not exists:
            connection.execute(text(f'CREATE DATABASE "{parsed.database}"'))
    admin.dispose()


def new_database(suffix: str) -> str:
    """`<test database>_<suffix>`, dropped and created empty (no schema): its URL."""
    url = make_url(POSTGRES_URL)
    name = f"{url.database}_{suffix}"
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    parsed = make_url(url)
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
    admin.dispose()


def empty_database(url: str) -> None:
    """Delete every row of every table (and restart Postgres's id sequences)."""
    engine = create_engine(url)
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY"))
        else:
            for table in reversed(Base.metadata.sorted_tables):
                connection.execute(table.delete())  # rowids restart: no AUTOINCREMENT
    engine.dispose()
