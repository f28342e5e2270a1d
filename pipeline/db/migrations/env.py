"""Alembic environment: runs on the connection `pipeline.store` hands over, or on a URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from pipeline.db.models import Base
from pipeline.db.search_index import is_search_object

config = context.config
connection = config.attributes.get("connection")


def run() -> None:
    if connection is not None:
        _migrate(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as own_connection:
        _migrate(own_connection)


def _migrate(bind: object) -> None:
    context.configure(
        connection=bind,  # type: ignore[arg-type]
        target_metadata=Base.metadata,
        render_as_batch=True,  # SQLite alters tables by copy
        compare_type=True,
        include_name=lambda name, kind, parent: not is_search_object(name),
    )
    with context.begin_transaction():
        context.run_migrations()


run()
