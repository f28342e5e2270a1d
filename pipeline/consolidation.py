"""Nightly consolidation: promote candidates that became eligible, expire candidates with no
support inside their window, expire facts past their retention, re-drive failed episodes
(within a budget) and re-queue stuck ones; then record a report.

Idempotent: a second run at the same `now` finds nothing left to do and records nothing new.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema
from sqlalchemy import select

from pipeline.buffer.candidates import close, promote_if_eligible
from pipeline.buffer.rules import stale
from pipeline.db.models import CandidateRow, EpisodeRow, EventRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.embedding import settle
from pipeline.embedding.vectors import fill_quietly
from pipeline.episodes.stage import EpisodeKey, drive, observe_consolidation, sweep
from pipeline.errors import InvalidInput
from pipeline.ledger import events
from pipeline.ledger.expire import expire
from pipeline.policy.apply import ACTOR, promotion_rule
from pipeline.validation import parse
from schemas.facts import Trust
from schemas.fields import Identifier, UtcDatetime, UtcInstant, format_utc
from schemas.lifecycle import CandidateStatus, EpisodeError, EpisodeStatus, EventKind
from schemas.pipeline_events import ConsolidationPayload

log = logging.getLogger("sgam.consolidation")
STEPS = ("promoted", "expired_candidates", "expired_facts", "redriven", "requeued")
Step = Callable[[str], None]
# A candidate that waits for sessions came from the background lane with an inferred trust
# (a verified or user-confirmed one is written at once), and the buffer keeps no episode's
# confidence: a fact promoted on support alone is written with none.
PROMOTED_TRUST = Trust.INFERRED
PROMOTED_CONFIDENCE = 0.0


class ConsolidateCommand(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier | None = None
    now: UtcDatetime | None = None
    force: bool = False  # a `now` after the clock
    actor: Identifier = "consolidation"


class Report(BaseModel):
    """What one consolidation did, per step; `recorded` is False when a run at the same `now`
    had already recorded it (the report is not part of the JSON answer)."""

    now: UtcInstant
    tenant_id: str | None
    promoted: int = 0
    expired_candidates: int = 0
    expired_facts: int = 0
    redriven: int = 0
    requeued: int = 0
    recorded: SkipJsonSchema[bool] = Field(default=False, exclude=True)

    @property
    def counts(self) -> dict[str, int]:
        return {step: getattr(self, step) for step in STEPS}


def consolidate(
    store: Store, command: ConsolidateCommand | Mapping[str, Any], *, step: Step | None = None
) -> Report:
    command = parse(ConsolidateCommand, command)
    clock = store.clock()
    if command.now is not None and command.now > clock and not command.force:
        raise InvalidInput(
            "now",
            f"is after the current time ({format_utc(clock)}); pass force=True (--force) to "
            "run ahead on purpose",
        )
    started = time.perf_counter()
    report = Report(now=command.now or clock, tenant_id=command.tenant_id)
    now, tenant = report.now, report.tenant_id
    report.promoted = store.run(lambda unit: _promote_eligible(unit, tenant))
    _done(step, "promoted")
    report.expired_candidates = store.run(lambda unit: _expire_candidates(unit, now, tenant))
    _done(step, "expired_candidates")
    expired = expire(
        store, {"now": now, "tenant_id": tenant, "force": True, "actor": command.actor}
    )
    report.expired_facts = len(expired.expired_fact_ids)
    _done(step, "expired_facts")
    redriven = store.run(lambda unit: _reopen_retryable(unit, now, tenant))
    drive(store, redriven)
    report.redriven = len(redriven)
    _done(step, "redriven")
    pending, stuck, _ = sweep(store, now=now, tenant_id=tenant)
    report.requeued = pending + stuck
    _done(step, "requeued")
    # The promotions' and expiries' vectors were queued as they committed (the store's
    # after-commit hook): made first, then the embedding arm's backfill (a no-op when it is
    # off), the vectors earlier writes left missing, each row embedded once.
    settle()
    embedded = fill_quietly(store, None if tenant is None else [tenant])
    report.recorded = store.run(lambda unit: _record(unit, report, command.actor))
    decisions = {
        "promoted": report.promoted,
        "expired_candidates": report.expired_candidates,
        "expired_facts": report.expired_facts,
    }
    observe_consolidation(decisions)
    log.info(
        "consolidated",
        extra={
            "tenant": tenant,
            "decisions": decisions,
            "episodes": {"redriven": report.redriven, "requeued": report.requeued},
            "embedded": {"facts": embedded.facts, "episodes": embedded.episodes},
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    )
    return report


def _done(step: Step | None, name: str) -> None:
    if step is not None:
        step(name)


def _buffered(unit: Unit, tenant: str | None) -> list[CandidateRow]:
    query = select(CandidateRow).where(
        CandidateRow.status == CandidateStatus.BUFFERED, CandidateRow.forgotten_at.is_(None)
    )
    if tenant is not None:
        query = query.where(CandidateRow.tenant_id == tenant)
    return list(unit.session.scalars(query.order_by(CandidateRow.created_at)))


def _promote_eligible(unit: Unit, tenant: str | None) -> int:
    promoted = 0
    for row in _buffered(unit, tenant):
        rule = promotion_rule(unit, row.attribute)
        if rule is None or rule.times is None:
            continue
        result = promote_if_eligible(
            unit,
            row,
            times=rule.times,
            window=rule.window,
            trust=PROMOTED_TRUST,
            confidence=PROMOTED_CONFIDENCE,
            actor=ACTOR,
        )
        promoted += result.fact is not None
    return promoted


def _expire_candidates(unit: Unit, now: datetime, tenant: str | None) -> int:
    expired = 0
    for row in _buffered(unit, tenant):
        rule = promotion_rule(unit, row.attribute)
        window = (
            rule.window if rule is not None else timedelta(days=unit.settings.buffer_window_days)
        )
        if stale(row.last_seen_at, window, now):
            close(
                unit,
                row,
                CandidateStatus.EXPIRED,
                actor=ACTOR,
                reason="no support inside the window",
            )
            expired += 1
    return expired


def _reopen_retryable(unit: Unit, now: datetime, tenant: str | None) -> list[EpisodeKey]:
    """Failed episodes whose error may pass (the endpoint or the store was down, or every
    attempt was lost to a crash or an expired lease), at most SGAM_EPISODE_MAX_REDRIVES times
    each and once per `now`."""
    query = select(EpisodeRow).where(
        EpisodeRow.status == EpisodeStatus.FAILED,
        EpisodeRow.error_kind == EpisodeError.RETRYABLE,
        EpisodeRow.redrives < unit.settings.episode_max_redrives,
        EpisodeRow.text.is_not(None),
    )
    if tenant is not None:
        query = query.where(EpisodeRow.tenant_id == tenant)
    keys: list[EpisodeKey] = []
    for row in unit.session.scalars(query.with_for_update(skip_locked=True)):
        if row.redriven_at is not None and row.redriven_at >= now:
            continue
        row.status, row.attempts, row.enqueued_at = EpisodeStatus.PENDING, 0, now
        row.lost_attempts = 0
        row.redrives += 1
        row.redriven_at, row.finished_at = now, None
        keys.append((row.tenant_id, row.episode_id))
    return keys


def _record(unit: Unit, report: Report, actor: str) -> bool:
    """The report as an event — once per `now` and scope: a re-run finds it and adds none."""
    moment = format_utc(report.now)
    assert moment is not None
    earlier = unit.session.scalars(
        select(EventRow.command).where(
            EventRow.kind == EventKind.CONSOLIDATION, EventRow.tenant_id == report.tenant_id
        )
        if report.tenant_id is not None
        else select(EventRow.command).where(
            EventRow.kind == EventKind.CONSOLIDATION, EventRow.tenant_id.is_(None)
        )
    )
    if any((command or {}).get("now") == moment for command in earlier):
        return False
    payload = ConsolidationPayload(now=moment, tenant_id=report.tenant_id, counts=report.counts)
    summary = ", ".join(
        f"{count} {name.replace('_', ' ')}" for name, count in report.counts.items()
    )
    events.record(
        unit,
        EventKind.CONSOLIDATION,
        payload,
        occurred_at=report.now,
        actor=actor,
        tenant_id=report.tenant_id,
        reason=summary,
    )
    return True
