"""Rebuild a ledger from the decision log alone: no catalogue, no LLM, no judgement.

Every replayable event carries the resolved command with the ids and clock it was applied
with, so applying them in log order into an empty database reproduces claims and facts exactly.
The log itself is copied along, so the rebuilt database can be replayed again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from pipeline.errors import InvalidInput
from pipeline.forget import apply_forget
from pipeline.ledger import apply_claim
from pipeline.lifecycle import apply_expiry, apply_promotion
from pipeline.models import ClaimRow, EventRow, FactRow
from pipeline.projection import SlotKey, current_fact
from pipeline.store import Store
from schemas.facts import ClaimRecord
from schemas.fields import to_utc

EVENT_COLUMNS = [column.key for column in EventRow.__table__.columns]
BATCH = 500
# Keep planner statistics current during a bulk rebuild instead of waiting for autovacuum:
# plans made while the new tables were empty would otherwise scan them whole.
ANALYZE_EVERY = 20


@dataclass(frozen=True)
class ReplayReport:
    events: int
    applied: int
    seconds: float


def replay(source: Store, target: Store) -> ReplayReport:
    """Apply every event of `source` to the empty, migrated `target`."""
    target.ensure_schema()
    with target.transaction() as session:
        for table in (FactRow, ClaimRow, EventRow):
            if session.scalar(select(func.count()).select_from(table)):
                raise InvalidInput(
                    "to",
                    f"the target database already has {table.__tablename__}"
                    "; replay needs an empty one",
                )
    started = time.perf_counter()
    events = applied = 0
    for number, batch in enumerate(_batches(source), start=1):
        if target.is_postgres and number % ANALYZE_EVERY == 0:
            analyze(target)
        with target.transaction() as session:
            for event in batch:
                session.execute(insert(EventRow).values(**event))
                if event["command"] is not None and event["kind"] in REPLAYED:
                    apply_event(target, session, event["command"])
                    applied += 1
        events += len(batch)
    if target.is_postgres:
        with target.transaction() as session:
            # Copied ids bypassed the sequence; move it past them for the events still to come.
            session.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence('events', 'event_id'), "
                    "COALESCE(MAX(event_id), 0) + 1, false) FROM events"
                )
            )
    return ReplayReport(events, applied, time.perf_counter() - started)


# The decisions that changed state. Rejects, conflicts and supersessions changed nothing of
# their own: the supersessions are re-derived when the write that caused them is applied.
REPLAYED = {"write", "restate", "quarantine", "promote", "expire", "forget", "purge"}


def apply_event(store: Store, session: Session, command: dict[str, Any]) -> None:
    op = command["op"]
    if op == "put":
        apply_claim(store, session, ClaimRecord.model_validate(command["claim"]), command=None)
    elif op == "promote":
        row = current_fact(session, command["fact_id"])
        assert row is not None, f"promote of unknown fact {command['fact_id']}"
        apply_promotion(session, SlotKey.of(row), row.fact_id, to_utc(command["now"]))
    elif op == "expire":
        apply_expiry(session, SlotKey(**command["key"]), to_utc(command["now"]))
    elif op == "forget":
        apply_forget(
            session,
            command["tenant_id"],
            command["subject"],
            command["purge"],
            to_utc(command["now"]),
        )
    else:
        raise ValueError(f"unknown operation {op!r} in the decision log")


def analyze(store: Store) -> None:
    """Refresh the planner statistics of the ledger tables (what autovacuum does)."""
    with store.engine.connect() as connection:
        connection.execute(text("ANALYZE claims, facts, events"))
        connection.commit()


def _batches(source: Store) -> Iterator[list[dict[str, Any]]]:
    last = 0
    while True:
        with source.transaction() as session:
            rows = session.scalars(
                select(EventRow)
                .where(EventRow.event_id > last)
                .order_by(EventRow.event_id)
                .limit(BATCH)
            ).all()
            batch = [{key: getattr(row, key) for key in EVENT_COLUMNS} for row in rows]
        if not batch:
            return
        last = batch[-1]["event_id"]
        yield batch
