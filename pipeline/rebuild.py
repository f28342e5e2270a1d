"""Rebuild a ledger from the decision log alone: no catalogue, no LLM, no judgement.

Every replayable event carries the resolved command with the ids and clock it was applied
with, so applying them in log order into an empty database reproduces claims, facts and the
recurrence buffer exactly. The log itself and the episodes are copied along, so the rebuilt
database can be replayed again and still shows where every fact came from. The target's
after-commit hooks (the embedding arm's, `sgam replay`) get every fact version and processed
episode the one transaction wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, text

from pipeline.buffer.candidates import apply_buffered, apply_decided, apply_supported
from pipeline.db.migrations import HEAD
from pipeline.db.models import EPISODES, ClaimRow, EventRow, FactRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import InvalidInput
from pipeline.ledger.dismiss import apply_dismissal
from pipeline.ledger.expire import apply_expiry
from pipeline.ledger.forget import apply_forget
from pipeline.ledger.log import EVENT_COLUMNS
from pipeline.ledger.promote import apply_promotion
from pipeline.ledger.write import store_claim
from schemas.event_kinds import parse_payload
from schemas.lifecycle import EpisodeStatus, EventKind

Apply = Callable[[Unit, Any], object]

# How replay re-applies each kind that changed state of its own. Every other kind is only
# copied: its effect is re-derived from the event that caused it (a supersede, a refusal), or
# it is an audit record (an episode's decisions, a consolidation report).
APPLY: dict[EventKind, Apply] = {
    EventKind.WRITE: store_claim,
    EventKind.RESTATE: store_claim,
    EventKind.QUARANTINE: store_claim,
    EventKind.PROMOTE: apply_promotion,
    EventKind.DISMISS: apply_dismissal,
    EventKind.EXPIRE: apply_expiry,
    EventKind.FORGET: apply_forget,
    EventKind.PURGE: apply_forget,
    EventKind.CANDIDATE_BUFFERED: apply_buffered,
    EventKind.CANDIDATE_SUPPORTED: apply_supported,
    EventKind.CANDIDATE_PROMOTED: apply_decided,
    EventKind.CANDIDATE_CONFIRMED: apply_decided,
    EventKind.CANDIDATE_REJECTED: apply_decided,
    EventKind.CANDIDATE_EXPIRED: apply_decided,
    EventKind.CANDIDATE_RESET: apply_decided,
}
COPIED = frozenset(EventKind) - set(APPLY)


def replayed(kind: str) -> bool:
    """Whether replay re-applies events of `kind` (else it only copies them)."""
    return EventKind(kind) in APPLY


BATCH = 500
# Refresh planner statistics every this many batches during a rebuild (what autovacuum does).
ANALYZE_EVERY = 20


@dataclass(frozen=True)
class ReplayReport:
    events: int
    applied: int
    seconds: float


def replay(source: Store, target: Store) -> ReplayReport:
    """Apply every event of `source` to `target`, an empty database (migrated here if it has
    no schema yet), in one transaction: a replay that fails or is killed leaves the target
    as empty as it found it, never a partial ledger that reads as a normal one."""
    _prepare(target)
    started = time.perf_counter()
    events = applied = 0
    with target.begin() as unit:
        for number, batch in enumerate(_batches(source), start=1):
            if number % ANALYZE_EVERY == 0:
                # Plans made while the new tables were empty would otherwise scan them whole.
                target.backend.analyze(unit.session.connection(), REBUILT_TABLES)
            for event in batch:
                unit.session.execute(insert(EventRow).values(**event))
                applied += apply_event(unit, event["kind"], event["command"])
            events += len(batch)
        _copy_episodes(source, unit)
        if target.is_postgres:
            # Copied ids bypassed the sequence; move it past them for the events still to come.
            unit.session.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence('events', 'event_id'), "
                    "COALESCE(MAX(event_id), 0) + 1, false) FROM events"
                )
            )
    return ReplayReport(events, applied, time.perf_counter() - started)


REBUILT_TABLES = ["claims", "facts", "events"]


def _prepare(target: Store) -> None:
    """Errors name the target (`--to`), not the source's settings."""
    try:
        revision = target.revision()
        if revision is None:
            target.upgrade()
        elif revision != HEAD:
            raise InvalidInput(
                "to",
                f"the target database is at schema revision {revision}, not {HEAD}; "
                "replay into an empty database",
            )
        with target.begin() as unit:
            for table in (FactRow, ClaimRow, EventRow):
                if unit.session.scalar(select(func.count()).select_from(table)):
                    raise InvalidInput(
                        "to",
                        f"the target database already has {table.__tablename__}"
                        "; replay needs an empty one",
                    )
    except InvalidInput as bad:
        raise InvalidInput("to", bad.problem) from None


def apply_event(unit: Unit, kind_name: str, stored: dict[str, Any] | None) -> bool:
    """Re-apply one logged event through its kind; False when it changes nothing."""
    payload = parse_payload(kind_name, stored)
    apply = APPLY.get(EventKind(kind_name))
    if apply is None or payload is None:
        return False
    apply(unit, payload)
    return True


def _copy_episodes(source: Store, unit: Unit) -> None:
    """The episodes are the pipeline's inputs, not decisions: they are copied as they are, so
    the rebuilt database can show where every fact came from."""
    with source.reading() as connection:
        for chunk in connection.execute(select(EPISODES)).partitions(BATCH):
            rows = [dict(row._mapping) for row in chunk]
            unit.session.execute(insert(EPISODES), rows)
            for row in rows:  # what a processed episode is, for the after-commit hooks
                if row["status"] == EpisodeStatus.DONE:
                    unit.written.episode(row["tenant_id"], row["episode_id"])


def _batches(source: Store) -> Iterator[list[dict[str, Any]]]:
    last = 0
    while True:
        with source.begin() as unit:
            rows = unit.session.scalars(
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
