"""Forget a subject: one idempotent event that hides every fact about it from every read.

Forgetting is a tombstone (`forgotten_at` on every row of the subject), so the audit trail
stays. Purging also erases content: values and evidence in claims and facts, in the payloads of
logged decisions and in cached idempotent results, and replaces every hash of content with a
token that cannot be traced back. Ids, timestamps and the shape of the history remain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema
from sqlalchemy import func, select, update

from pipeline.db.models import CandidateRow, ClaimRow, EpisodeRow, FactRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError
from pipeline.ledger import events, idempotency
from pipeline.ledger.erase import erase
from pipeline.ledger.refusals import stored_outcome
from pipeline.ledger.results import settled
from pipeline.ledger.slots import subject_lock_name
from pipeline.validation import parse
from schemas.commands import ForgetSubject
from schemas.events import ForgetPayload
from schemas.lifecycle import EventKind


class ForgetResult(BaseModel):
    """`files_scrubbed` (after a purge; null without one): no erased content is left in the
    database files; when False, `sgam purge-vacuum` (`Store.vacuum`) removes what is."""

    model_config = ConfigDict(frozen=True)

    hidden: int = Field(description="how many facts were hidden")
    purged: bool
    files_scrubbed: bool | None = Field(
        default=None, description="after a purge: no erased content left in the database files"
    )

    # A repeated idempotency key's answer (HTTP's Idempotent-Replayed; not in the JSON).
    replayed: SkipJsonSchema[bool] = Field(default=False, exclude=True)

    @classmethod
    def repeated(cls, stored: Mapping[str, Any]) -> ForgetResult:
        """What a repeated idempotency key answers: the first result."""
        return cls(hidden=int(stored["hidden"]), purged=bool(stored["purged"]), replayed=True)


def forget(store: Store, command: ForgetSubject | Mapping[str, Any]) -> ForgetResult:
    """`forget_subject` in a transaction of its own; after a purge, also drops the erased
    content from the database files where that is cheap (SQLite)."""
    command = parse(ForgetSubject, command)
    result = settled(store, lambda unit: forget_subject(unit, command))
    if not command.purge:
        return result
    return result.model_copy(update={"files_scrubbed": store.scrub_after_purge()})


def forget_subject(
    unit: Unit, command: ForgetSubject | Mapping[str, Any]
) -> ForgetResult | ConflictError:
    """Hide (and with purge, erase) everything about a subject within a tenant, in the
    caller's unit of work."""
    command = parse(ForgetSubject, command)

    def apply() -> ForgetResult:
        # Exclusive: no write to this subject may interleave with its forgetting.
        unit.lock(subject_lock_name(command.tenant_id, command.subject))
        payload = ForgetPayload(
            tenant_id=command.tenant_id,
            subject=command.subject,
            purge=command.purge,
            now=unit.clock(),
        )
        hidden = apply_forget(unit, payload)
        events.record(
            unit,
            EventKind.PURGE if command.purge else EventKind.FORGET,
            payload,
            occurred_at=payload.now,
            actor=command.actor,
            tenant_id=command.tenant_id,
            subject=command.subject,
            fact_ids=[],
            idempotency_key=command.idempotency_key,
            reason=f"{hidden} {'fact' if hidden == 1 else 'facts'} hidden",
        )
        return ForgetResult(hidden=hidden, purged=command.purge)

    step = idempotency.KeyedStep.of(
        command, lambda _unit, seen, _forgotten: ForgetResult.repeated(seen.result), stored_outcome
    )
    return step.answer(unit, apply)


def apply_forget(unit: Unit, payload: ForgetPayload) -> int:
    """Tombstone every fact, claim, candidate and episode of the subject; returns how many
    facts were hidden. Also what replay applies."""
    session = unit.session
    tenant_id, subject, now = payload.tenant_id, payload.subject, payload.now
    of_subject = (FactRow.tenant_id == tenant_id, FactRow.subject == subject)
    hidden = (
        session.scalar(
            select(func.count(func.distinct(FactRow.fact_id))).where(
                *of_subject, FactRow.forgotten_at.is_(None)
            )
        )
        or 0
    )
    for table in (FactRow, ClaimRow, CandidateRow):
        session.execute(
            update(table)
            .where(
                table.tenant_id == tenant_id, table.subject == subject, table.forgotten_at.is_(None)
            )
            .values(forgotten_at=now)
            .execution_options(synchronize_session=False)
        )
    # What the subject said before the forget is hidden from search too; an episode received
    # later (replay applies this to a store that may hold it) is not.
    session.execute(
        update(EpisodeRow)
        .where(
            EpisodeRow.tenant_id == tenant_id,
            EpisodeRow.subject == subject,
            EpisodeRow.forgotten_at.is_(None),
            EpisodeRow.received_at <= now,
        )
        .values(forgotten_at=now)
        .execution_options(synchronize_session=False)
    )
    if payload.purge:
        erase(session, tenant_id, subject)
    return hidden
