"""The test databases: the PostgreSQL one named by SGAM_TEST_POSTGRES_URL (created when
missing), and emptying a database between tests. Every database a test creates derives its
name from SGAM_TEST_POSTGRES_URL, so parallel runs on one server never collide."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, create_engine, make_url, text

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


# A TRUNCATE of the eleven tables rewrites their files: about 150 ms a test on PostgreSQL,
# where deleting the few rows a test leaves costs about 10. With autovacuum off, deleted rows
# stay as dead versions; after this many, a TRUNCATE clears them.
DEAD_ROWS_BEFORE_TRUNCATE = 20_000
RESTART_SEQUENCES = text(
    "SELECT setval(c.oid, 1, false) FROM pg_class c JOIN pg_namespace n "
    "ON n.oid = c.relnamespace WHERE c.relkind = 'S' AND n.nspname = current_schema()"
)
_postgres: dict[str, Engine] = {}  # one small pool per PostgreSQL database, emptied often
_dead_rows: dict[str, int] = {}


def empty_database(url: str) -> None:
    """Delete every row of every table (and restart Postgres's id sequences)."""
    if make_url(url).get_backend_name() != "postgresql":
        engine = create_engine(url)
        with engine.begin() as connection:
            _delete_all(connection)  # rowids restart: no AUTOINCREMENT
        engine.dispose()
        return
    if url not in _postgres:
        _postgres[url] = create_engine(url, pool_size=1, pool_pre_ping=True)
    with _postgres[url].begin() as connection:
        if _dead_rows.get(url, 0) > DEAD_ROWS_BEFORE_TRUNCATE:
            connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY"))
            _dead_rows[url] = 0
        else:
            _dead_rows[url] = _dead_rows.get(url, 0) + _delete_all(connection)
            connection.execute(RESTART_SEQUENCES)


def _delete_all(connection: Connection) -> int:
    """Delete every row, children first; how many were deleted."""
    tables = reversed(Base.metadata.sorted_tables)
    return sum(max(connection.execute(table.delete()).rowcount, 0) for table in tables)
