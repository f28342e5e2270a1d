"""What a batch reads before it decides: its locks, the idempotency keys it names and every
slot of its keys.

On PostgreSQL all of it goes to the server as one pipeline, in one round trip (with the
transaction's BEGIN when it is the first work of its transaction, as in `put`): the server still
runs the statements one after the other, and in READ COMMITTED each statement takes its
snapshot when it starts, after the lock statement before it has returned, so the reads see
every write committed by whoever held a lock first. (One statement that locks and reads could
not: its snapshot would predate its own locks.) The rows come back as plain namespaces, not ORM
entities: the batch only reads their attributes. SQLite, where a writer holds the database
lock already, reads through the ORM.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache, partial
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Dialect, TypeDecorator

from pipeline.db import pipelined
from pipeline.db.backends import LOCK_ALL_SQL, LockName, lock_params
from pipeline.db.base import Base
from pipeline.db.keyed import KeyedQuery
from pipeline.db.models import ClaimRow, FactRow, IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.ledger.slots import (
    CLAIMS_OF_KEYS,
    CURRENT_OF_KEYS,
    KEY_FIELDS,
    SlotKey,
    SlotState,
    load_slots,
)

Used = dict[tuple[str, str], Any]  # stored idempotency keys, each a namespace of its columns


@dataclass(frozen=True)
class Locks:
    """The locks of a batch, each group in the order it is taken."""

    idempotency: Sequence[LockName]
    exclusive: Sequence[LockName]
    shared: Sequence[LockName]


def lock_and_read(
    unit: Unit, locks: Locks, keyed: Collection[tuple[str, str]], keys: Collection[SlotKey]
) -> tuple[Used, dict[SlotKey, SlotState]]:
    """Take `locks`, then read the stored idempotency keys `keyed` and the slots of `keys`."""
    if unit.backend.name == "postgresql":
        return _pipelined(unit, locks, keyed, keys)
    if locks.idempotency:
        unit.lock(*locks.idempotency)
    unit.lock(*locks.exclusive, shared=locks.shared)
    used = {(row.tenant_id, row.key): row for row in _KEYS_USED.rows(unit.session, keyed)}
    return used, load_slots(unit.session, keys)


_KEYS_USED = KeyedQuery.of(IdempotencyRow, ("tenant_id", "key"))


def _pipelined(
    unit: Unit, locks: Locks, keyed: Collection[tuple[str, str]], keys: Collection[SlotKey]
) -> tuple[Used, dict[SlotKey, SlotState]]:
    import psycopg
    from psycopg.rows import dict_row

    connection = unit.session.connection()
    dialect = connection.dialect
    arrays = {name: [getattr(key, name) for key in keys] for name in KEY_FIELDS}
    statements: list[tuple[str, dict[str, Any]]] = []
    if locks.idempotency:
        statements.append((LOCK_ALL_SQL, lock_params(locks.idempotency, ())))
    statements.append((LOCK_ALL_SQL, lock_params(locks.exclusive, locks.shared)))
    if keyed:
        tenants, names = zip(*keyed, strict=True)
        used_sql = _KEYS_USED.driver_sql(dialect)
        statements.append((used_sql, {"tenant_id": list(tenants), "key": list(names)}))
    statements += [
        (CLAIMS_OF_KEYS.driver_sql(dialect), arrays),
        (CURRENT_OF_KEYS.driver_sql(dialect), arrays),
    ]
    # The transaction's BEGIN goes in the same round trip when this opens it (`pipelined`).
    with pipelined.pipeline(connection, "the locks and reads of a batch") as driver:
        cursors = [psycopg.RawCursor(driver, row_factory=dict_row) for _ in statements]
        for cursor, (sql, params) in zip(cursors, statements, strict=True):
            cursor.execute(*pipelined.numbered(sql, params))
    results = [cursor.fetchall() for cursor in cursors]
    claims, facts = results[-2:]
    stored_keys = results[-3] if keyed else []
    used = {(r.tenant_id, r.key): r for r in _loaded(IdempotencyRow, dialect, stored_keys)}
    states: dict[SlotKey, SlotState] = {}
    for row in _loaded(ClaimRow, dialect, claims):
        states.setdefault(SlotKey.of(row), SlotState({}, {})).claims[row.claim_id] = row
    for row in _loaded(FactRow, dialect, facts):
        states.setdefault(SlotKey.of(row), SlotState({}, {})).current[row.fact_id] = row
    return used, states


def _loaded(table: type[Base], dialect: Dialect, rows: list[dict[str, Any]]) -> list[Any]:
    """Rows as namespaces, each value as SQLAlchemy would load it (aware UTC datetimes)."""
    converters = _converters(table, dialect)
    return [
        SimpleNamespace(
            **{
                name: convert(value) if (convert := converters.get(name)) else value
                for name, value in row.items()
            }
        )
        for row in rows
    ]


@cache
def _converters(table: type[Base], dialect: Dialect) -> dict[str, Any]:
    converters: dict[str, Any] = {}
    for column in table.__table__.columns:
        kind = column.type
        # Only the decorators that convert what they load (UtcDateTime); JSON loads as is.
        if isinstance(kind, TypeDecorator) and _converts_results(kind):
            converters[column.name] = partial(kind.process_result_value, dialect=dialect)
    return converters


def _converts_results(kind: TypeDecorator[Any]) -> bool:
    return type(kind).process_result_value is not TypeDecorator.process_result_value
