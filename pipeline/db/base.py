"""What every table is built from: the declarative base with its naming convention, and the
column types that behave alike on PostgreSQL and SQLite."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    MetaData,
    String,
)
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator, TypeEngine

from schemas.facts import Trust

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ID = String(200)


def sql_list(values: Iterable[StrEnum]) -> str:
    """An enum's values as SQL's `IN` list, `('a', 'b')`: CHECK constraints and partial
    indexes are built from the enums, never spelled out again."""
    return "(" + ", ".join(f"'{value.value}'" for value in values) + ")"


TRUST_LEVELS = sql_list(Trust)


class UtcDateTime(TypeDecorator[datetime]):
    """timestamptz on Postgres; fixed-width `YYYY-MM-DDTHH:MM:SS.ffffffZ` text on SQLite, so
    SQLite's lexicographic comparison orders instants correctly. Always returns aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(27))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime reached the store")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            # Four-digit year even before 1000: strftime does not pad it on every platform.
            return f"{value.year:04d}" + value.strftime("-%m-%dT%H:%M:%S.%fZ")
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert isinstance(value, datetime)
        return value.astimezone(UTC)


class JsonText:
    """A JSON value whose canonical text is made already (a decision's payload, hashed from
    that text): PostgreSQL's COPY and raw INSERT (`inserts`) are sent the text instead of a
    second encoding of the value; through SQLAlchemy it binds as its value."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any, text: str) -> None:
        self.value = value
        self.text = text


class JsonColumn(TypeDecorator[Any]):
    """JSONB on Postgres, JSON text on SQLite. The Postgres dialect is imported only when a
    Postgres database is used, which keeps the embedded store's start-up cheap."""

    impl = JSON()
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return value.value if isinstance(value, JsonText) else value

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
