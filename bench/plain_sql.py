"""The plain-SQL baseline the ledger is measured against: the same `facts` rows that a verified
put stores, written and read by hand over psycopg.

The rows are built here from the table's columns and the catalogue alone, never with the
ledger's own write helpers, so the baseline is what an application without SGAM would write.
`check_row_shape` makes sure it still fills every column of the table.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pipeline.db.models import FACT_COLUMNS
from schemas.catalog import Catalog
from schemas.fields import canonical_json

WRITE_ATTRIBUTE = "home_city"  # a single-valued string attribute of the default catalogue
EPISODE = "bench-episode"

COLUMN_LIST = ", ".join(FACT_COLUMNS)
INSERT_ONE = (
    f"INSERT INTO facts ({COLUMN_LIST}) VALUES ({', '.join(f'%({c})s' for c in FACT_COLUMNS)})"
)
CLOSE_VERSION = "UPDATE facts SET superseded_at = %s WHERE fact_id = %s AND superseded_at IS NULL"

# The same predicates as pipeline.read.get, written by hand (status 'active' only).
_RAW_VISIBLE = (
    f"SELECT {COLUMN_LIST} FROM facts "
    "WHERE tenant_id = %(tenant)s AND agent_id = 'default' AND purpose = 'default' "
    "AND subject = %(subject)s AND forgotten_at IS NULL AND attribute = %(attribute)s "
    "AND status = 'active' AND (expires_at IS NULL OR expires_at > %(now)s) "
    "AND valid_from <= %(at)s AND (valid_to IS NULL OR valid_to > %(at)s) "
)
RAW_CURRENT = _RAW_VISIBLE + "AND superseded_at IS NULL ORDER BY attribute, valid_from"
RAW_KNOWN = (
    _RAW_VISIBLE + "AND recorded_at <= %(known)s "
    "AND (superseded_at IS NULL OR superseded_at > %(known)s) ORDER BY attribute, valid_from"
)


def fact_row(
    catalog: Catalog,
    *,
    tenant: str,
    subject: str,
    value: str,
    valid_from: datetime,
    now: datetime,
    supersedes: str | None,
) -> dict[str, Any]:
    """The first version of a verified fact of WRITE_ATTRIBUTE, as put stores it."""
    spec = catalog.attributes[WRITE_ATTRIBUTE]
    return {
        "fact_id": str(uuid.uuid4()),
        "version": 1,
        "recorded_at": now,
        "superseded_at": None,
        "supersedes_fact_id": supersedes,
        "status": "active",
        "tenant_id": tenant,
        "agent_id": "default",
        "purpose": "default",
        "subject": subject,
        "attribute": WRITE_ATTRIBUTE,
        "slot": "",  # single-valued: one slot per key
        "cardinality": spec.cardinality.value,
        "value": value,
        "value_hash": hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest(),
        "kind": spec.kind,
        "schema_version": catalog.version,
        "valid_from": valid_from,
        "valid_to": None,
        "source_episode_id": EPISODE,
        "evidence": None,
        "confidence": 1.0,
        "trust": "verified",
        "expires_at": now + catalog.retention(WRITE_ATTRIBUTE),
        "forgotten_at": None,
    }


def check_row_shape(row: dict[str, Any]) -> None:
    """Refuse to measure a baseline that no longer writes every column of the table."""
    if set(row) != set(FACT_COLUMNS):
        raise SystemExit(f"the plain baseline writes {sorted(row)}, the table has {FACT_COLUMNS}")


def sql_params(row: dict[str, Any]) -> dict[str, Any]:
    """A facts row as psycopg parameters: the value goes to the JSONB column as JSON."""
    return row | {"value": Jsonb(row["value"])}


class PlainWrite:
    """The same `facts` rows as put writes, by plain SQL, one transaction per fact, or with
    `batched` one transaction per flush (the closes by executemany, then the rows by one
    executemany, which psycopg sends as a pipeline).

    A new key is one INSERT. Superseding an open fact is what put does to the facts table:
    close the open version, insert its closed-interval version and the new fact.
    """

    def __init__(self, conn: psycopg.Connection[Any], catalog: Catalog, *, batched: bool) -> None:
        self.conn = conn
        now = datetime.now(UTC)
        self.template = fact_row(
            catalog, tenant="", subject="", value="", valid_from=now, now=now, supersedes=None
        )
        check_row_shape(self.template)
        self.retention = catalog.retention(WRITE_ATTRIBUTE)
        self.open: dict[tuple[str, str], dict[str, Any]] = {}
        self.batched = batched
        self.closes: list[tuple[datetime, str]] = []
        self.inserts: list[dict[str, Any]] = []
        self.queued: dict[str, dict[str, Any]] = {}  # open rows in `inserts`, by fact_id

    def __call__(self, tenant: str, subject: str, value: str, valid_from: datetime) -> None:
        now = datetime.now(UTC)
        previous = self.open.get((tenant, subject))
        # Only what differs per write is computed here, as cheaply as a hand-written INSERT.
        row = self.template | {
            "fact_id": str(uuid.uuid4()),
            "tenant_id": tenant,
            "subject": subject,
            "value": value,
            "value_hash": hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest(),
            "valid_from": valid_from,
            "recorded_at": now,
            "expires_at": now + self.retention,
            "supersedes_fact_id": previous["fact_id"] if previous else None,
        }
        self.open[(tenant, subject)] = row
        if self.batched:
            if previous is not None:
                queued = self.queued.get(previous["fact_id"])
                if queued is not None:  # inserted by this flush: it goes in closed
                    queued["superseded_at"] = now
                else:
                    self.closes.append((now, previous["fact_id"]))
                self.inserts.append(self._closed(previous, valid_from, now))
            self.queued[row["fact_id"]] = sql_params(row)
            self.inserts.append(self.queued[row["fact_id"]])
            return
        with self.conn.transaction(), self.conn.cursor() as cursor:
            if previous is None:
                cursor.execute(INSERT_ONE, sql_params(row))
            else:
                cursor.execute(CLOSE_VERSION, (now, previous["fact_id"]))
                self._insert_two(cursor, self._closed(previous, valid_from, now), row)

    def flush(self) -> None:
        if not self.inserts:
            return
        with self.conn.transaction(), self.conn.cursor() as cursor:
            if self.closes:
                cursor.executemany(CLOSE_VERSION, self.closes)
            cursor.executemany(INSERT_ONE, self.inserts)
        self.closes, self.inserts, self.queued = [], [], {}

    @staticmethod
    def _closed(previous: dict[str, Any], valid_to: datetime, now: datetime) -> dict[str, Any]:
        closed = {"version": previous["version"] + 1, "valid_to": valid_to, "recorded_at": now}
        return sql_params(previous | closed)

    @staticmethod
    def _insert_two(
        cursor: psycopg.Cursor[Any], first: dict[str, Any], second: dict[str, Any]
    ) -> None:
        slots = ", ".join(["%s"] * len(FACT_COLUMNS))
        values = [first[c] for c in FACT_COLUMNS]
        values += [sql_params(second)[c] for c in FACT_COLUMNS]
        cursor.execute(f"INSERT INTO facts ({COLUMN_LIST}) VALUES ({slots}), ({slots})", values)


def raw_select(
    conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """A lookup as one hand-written, auto-prepared SELECT in autocommit mode; `at` None
    means now."""
    now = datetime.now(UTC)
    params = params | {"now": now}
    if params["at"] is None:
        params["at"] = now
    return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]
