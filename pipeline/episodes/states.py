"""Episode states (`EpisodeStatus`). Listing them, showing one with
everything it led to, re-driving failed ones, and the sweeper that re-queues what a broker
lost or a worker dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, func, or_, select, tuple_, update

from pipeline.catalog.names import nothing_matched
from pipeline.db.models import CandidateRow, EpisodeRow, EventRow, FactRow, SupportRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.errors import NotFound
from pipeline.validation import parse
from schemas.facts import Fact, FactStatus
from schemas.fields import Identifier
from schemas.lifecycle import EpisodeStatus, EventKind
from schemas.results import EpisodeDetail, LoggedDecision, StoredCandidate, StoredEpisode


class EpisodeQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    agent_id: Identifier | None = None
    purpose: Identifier | None = None
    status: EpisodeStatus | None = None
    session_id: Identifier | None = None
    subject: Identifier | None = None
    limit: int = Field(default=1000, ge=1, le=100_000)


def list_episodes(store: Store, query: EpisodeQuery | Mapping[str, Any]) -> list[StoredEpisode]:
    query = parse(EpisodeQuery, query)
    statement = select(EpisodeRow).where(EpisodeRow.tenant_id == query.tenant_id)
    for column, value in (
        (EpisodeRow.agent_id, query.agent_id),
        (EpisodeRow.purpose, query.purpose),
        (EpisodeRow.status, query.status),
        (EpisodeRow.session_id, query.session_id),
        (EpisodeRow.subject, query.subject),
    ):
        if value is not None:
            statement = statement.where(column == value)
    statement = statement.where(~_forgotten_since_received()).order_by(
        EpisodeRow.occurred_at, EpisodeRow.episode_id
    )
    with store.begin() as unit:
        found = unit.session.scalars(statement.limit(query.limit))
        return [StoredEpisode.model_validate(row) for row in found]


def _forgotten_since_received() -> Any:
    """The episode's subject was forgotten after it came in: nothing of it is shown any more
    (its text stays stored until a purge erases it)."""
    return (
        select(EventRow.event_id)
        .where(
            EventRow.tenant_id == EpisodeRow.tenant_id,
            EventRow.subject == EpisodeRow.subject,
            EventRow.kind.in_([EventKind.FORGET, EventKind.PURGE]),
            EventRow.occurred_at >= EpisodeRow.received_at,
        )
        .exists()
    )


def show_episode(
    store: Store,
    tenant_id: str,
    episode_id: str,
    *,
    agent_id: str | None = None,
    purpose: str | None = None,
    reviewer: bool = True,
) -> EpisodeDetail:
    """The episode, the candidates it supports, the decisions taken for it and the facts it
    is the source of, in the episode's scope. Another tenant's episode, one outside the
    `agent_id`/`purpose` asked for, and one whose subject was forgotten since are reported
    exactly like a missing one. Without `reviewer`, what only a reviewer may read elsewhere is
    left out: quarantined facts, the buffer's candidates and the decisions' payloads."""
    missing = NotFound(f"no episode {episode_id} in tenant {tenant_id}")
    with store.begin() as unit:
        row = unit.session.scalars(
            select(EpisodeRow).where(
                EpisodeRow.tenant_id == tenant_id,
                EpisodeRow.episode_id == episode_id,
                ~_forgotten_since_received(),
            )
        ).first()
        outside = row is not None and (
            agent_id not in (None, row.agent_id) or purpose not in (None, row.purpose)
        )
        if row is None or outside:
            raise missing
        in_scope = (FactRow.agent_id == row.agent_id, FactRow.purpose == row.purpose)
        statuses = [FactStatus.ACTIVE] + ([FactStatus.QUARANTINED] if reviewer else [])
        facts = unit.session.scalars(
            select(FactRow)
            .where(
                FactRow.tenant_id == tenant_id,
                FactRow.source_episode_id == episode_id,
                *in_scope,
                FactRow.status.in_(statuses),
                FactRow.superseded_at.is_(None),
                FactRow.forgotten_at.is_(None),
            )
            .order_by(FactRow.attribute, FactRow.valid_from)
        ).all()
        candidates = (
            unit.session.scalars(
                select(CandidateRow)
                .join(SupportRow, SupportRow.candidate_id == CandidateRow.candidate_id)
                .where(
                    CandidateRow.tenant_id == tenant_id,
                    CandidateRow.agent_id == row.agent_id,
                    CandidateRow.purpose == row.purpose,
                    CandidateRow.forgotten_at.is_(None),
                    SupportRow.episode_id == episode_id,
                )
            ).all()
            if reviewer
            else []
        )
        decisions = unit.session.scalars(
            select(EventRow)
            .where(EventRow.tenant_id == tenant_id, EventRow.episode_id == episode_id)
            .order_by(EventRow.event_id)
        ).all()
        # Done, and not one decision: the text stated nothing the catalogue names.
        unmatched = row.status == EpisodeStatus.DONE and not decisions and not facts
        return EpisodeDetail(
            **dict(StoredEpisode.model_validate(row)),
            candidates=[StoredCandidate.model_validate(c) for c in candidates],
            decisions=[_decision(event, reviewer) for event in decisions],
            facts=[Fact.model_validate(fact, from_attributes=True) for fact in facts],
            note=nothing_matched(unit.settings) if unmatched else None,
        )


def _decision(event: EventRow, reviewer: bool) -> LoggedDecision:
    shown = LoggedDecision.model_validate(event)
    if not reviewer:  # the payload holds claim values and evidence: the log is a reviewer's
        return shown.model_copy(update={"command": None})
    return shown


def reopen_failed(
    unit: Unit, *, tenant_id: str | None = None, episode_ids: Sequence[str] = ()
) -> list[EpisodeKey]:
    """Failed episodes back to `pending` with a fresh budget of attempts; returns their keys.
    Named episodes that are not failed are left as they are."""
    statement = select(EpisodeRow.tenant_id, EpisodeRow.episode_id).where(
        EpisodeRow.status == EpisodeStatus.FAILED, EpisodeRow.text.is_not(None)
    )
    if tenant_id is not None:
        statement = statement.where(EpisodeRow.tenant_id == tenant_id)
    if episode_ids:
        statement = statement.where(EpisodeRow.episode_id.in_(list(episode_ids)))
    keys: list[EpisodeKey] = [(t, e) for t, e in unit.session.execute(statement)]
    if keys:
        unit.session.execute(
            update(EpisodeRow)
            .where(tuple_(EpisodeRow.tenant_id, EpisodeRow.episode_id).in_(keys))
            .values(
                status=EpisodeStatus.PENDING,
                attempts=0,
                lost_attempts=0,
                enqueued_at=unit.clock(),
                finished_at=None,
            )
            .execution_options(synchronize_session=False)
        )
    return keys


@dataclass(frozen=True)
class Stray:
    """Episodes the sweeper queues again: pending ones whose wake-up is overdue (the broker may
    have lost it) and processing ones whose worker's lease ran out."""

    pending: list[EpisodeKey]
    stuck: list[EpisodeKey]

    @property
    def keys(self) -> list[EpisodeKey]:
        return self.pending + self.stuck


def strays(unit: Unit, now: datetime, *, tenant_id: str | None = None) -> Stray:
    """Find them and stamp them as queued now, so that the next sweep leaves them alone for
    a grace period."""
    grace = now - timedelta(seconds=unit.settings.sweep_grace_s)
    statement = select(EpisodeRow.tenant_id, EpisodeRow.episode_id, EpisodeRow.status).where(
        EpisodeRow.enqueued_at <= grace,
        or_(
            EpisodeRow.status == EpisodeStatus.PENDING,
            and_(EpisodeRow.status == EpisodeStatus.PROCESSING, EpisodeRow.lease_until < now),
        ),
    )
    if tenant_id is not None:
        statement = statement.where(EpisodeRow.tenant_id == tenant_id)
    found = unit.session.execute(statement.with_for_update(skip_locked=True)).all()
    pending = [(t, e) for t, e, status in found if status == EpisodeStatus.PENDING]
    stuck = [(t, e) for t, e, status in found if status == EpisodeStatus.PROCESSING]
    if found:
        unit.session.execute(
            update(EpisodeRow)
            .where(tuple_(EpisodeRow.tenant_id, EpisodeRow.episode_id).in_(pending + stuck))
            .values(enqueued_at=now)
            .execution_options(synchronize_session=False)
        )
    return Stray(pending, stuck)


@dataclass
class Waiting:
    """Pending episodes whose wake-up went out within the grace period: the sweeper leaves
    them to the workers until `due` (the first of them is sent again then)."""

    count: int
    due: datetime | None


def within_grace(unit: Unit, now: datetime, *, tenant_id: str | None = None) -> Waiting:
    grace = timedelta(seconds=unit.settings.sweep_grace_s)
    statement = select(func.count(), func.min(EpisodeRow.enqueued_at)).where(
        EpisodeRow.status == EpisodeStatus.PENDING, EpisodeRow.enqueued_at > now - grace
    )
    if tenant_id is not None:
        statement = statement.where(EpisodeRow.tenant_id == tenant_id)
    count, earliest = unit.session.execute(statement).one()
    return Waiting(int(count), None if earliest is None else earliest + grace)
