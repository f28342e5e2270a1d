"""The hot lane's request and answer: what `remember` is sent (`RememberIn`), what it answers
(`Remembered`, one model for the Python answer, the CLI's JSON and the HTTP body), and the
steps of the stage only the hot lane takes: the episode read at once as claimed, its answer
built from its decisions, a repeated episode answered from what the first request wrote, and
the hand-over to the background lane when the model fails or is too slow."""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema
from sqlalchemy import or_, select

from pipeline.catalog.names import nothing_matched
from pipeline.db.models import EpisodeRow, FactRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.claimed import Claimed
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.drive import drive
from pipeline.episodes.lane_metrics import observe_episode
from pipeline.episodes.records import text_hash
from pipeline.errors import ConflictError, IdempotencyConflict, NotFound
from pipeline.extract.result import ExtractionResult
from pipeline.policy.apply import ACTOR, Decision, Provenance
from pipeline.policy.decide import Lane, episode_trust
from schemas.episodes import Episode, EpisodeText, EpisodeTime, SourceKind
from schemas.facts import Fact, Trust
from schemas.fields import Identifier
from schemas.lifecycle import UNFINISHED, EpisodeStatus
from schemas.results import Rejection, absent_when_none

log = logging.getLogger("sgam.hot_path")


def one_time_name(data: Any) -> Any:
    """Both names of the time are one field given twice, not an unknown field `at`."""
    if isinstance(data, Mapping) and "occurred_at" in data and "at" in data:
        raise ValueError("give occurred_at or its older name at, not both")
    return data


class RememberIn(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    subject: Identifier
    text: EpisodeText
    session_id: Identifier | None = None
    # `occurred_at`, as on an episode; `at` is the older name, still accepted. (The plugin
    # cannot type an __init__ keyword for two names; the models are built by validation.)
    occurred_at: EpisodeTime | None = Field(  # type: ignore[pydantic-alias]
        default=None,
        validation_alias=AliasChoices("occurred_at", "at"),
        description="when it was said (default: now); relative dates resolve in its offset",
    )
    agent_id: Identifier = "default"
    purpose: Identifier = "default"
    episode_id: Identifier | None = None
    idempotency_key: Identifier | None = None
    trust: Trust | None = None
    source: SourceKind = SourceKind.MESSAGE
    actor: Identifier | None = Field(default=None, description="who asks (audit)")

    _one_name = model_validator(mode="before")(one_time_name)


class Remembered(BaseModel):
    """What the hot path wrote. `deferred`: the model was slow or failed and the workers take
    the episode over. `conflicts` (the ledger's refusals, also listed under `rejected`) are for
    the caller's exit code and are not part of the JSON answer."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    episode_id: str
    facts: list[Fact] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    deferred: bool = Field(
        default=False, description="the model was slow or failed: the workers take over"
    )
    note: str | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="when nothing in the text was recognised: the catalogue it was read with "
        "(absent: something was)",
    )
    conflicts: SkipJsonSchema[list[ConflictError]] = Field(default_factory=list, exclude=True)
    # A repeated request's answer: the first one's, nothing written now (HTTP's
    # Idempotent-Replayed; not part of the JSON answer).
    replayed: SkipJsonSchema[bool] = Field(default=False, exclude=True)


def noted(store: Store, answer: Remembered) -> Remembered:
    """The answer with a note naming the catalogue when nothing at all was recognised."""
    if answer.facts or answer.rejected or answer.deferred or answer.conflicts:
        return answer
    return answer.model_copy(update={"note": nothing_matched(store.settings)})


def claimed_now(request: RememberIn, now: datetime) -> Claimed:
    """The episode as extraction reads it, claimed by this request (attempt 1), with the
    user's own trust unless the caller set another."""
    episode = Episode(
        episode_id=request.episode_id or str(uuid.uuid4()),
        tenant_id=request.tenant_id,
        agent_id=request.agent_id,
        purpose=request.purpose,
        subject=request.subject,
        session_id=request.session_id,
        source=request.source,
        occurred_at=request.occurred_at or now,
        text=request.text,
        trust=episode_trust(request.source, request.trust, Lane.HOT),
    )
    origin = Provenance(episode, Lane.HOT, actor=request.actor or ACTOR)
    return Claimed((episode.tenant_id, episode.episode_id), 1, origin)


def answer_of(episode_id: str, result: ExtractionResult, decisions: list[Decision]) -> Remembered:
    """The answer: the facts written, and every refusal (the guards' and the ledger's)."""
    rejected = [
        Rejection(update=r.update.model_dump(mode="json"), reason=r.reason.value, message=r.message)
        for r in result.rejected
    ]
    conflicts = [d.error for d in decisions if d.error is not None]
    for candidate, decision in zip(result.kept, decisions, strict=True):
        if decision.error is not None:
            update = {"attribute": candidate.attribute, "value": candidate.value}
            reason = type(decision.error).__name__
            rejected.append(Rejection(update=update, reason=reason, message=str(decision.error)))
    facts = [d.fact for d in decisions if d.fact is not None]
    return Remembered(episode_id=episode_id, facts=facts, rejected=rejected, conflicts=conflicts)


def defer(store: Store, key: EpisodeKey) -> Remembered:
    """The model failed or was too slow: the background lane takes the episode over."""

    def hand_over(unit: Unit) -> None:
        row = unit.session.get(EpisodeRow, key)
        assert row is not None
        row.lane, row.status, row.lease_until = Lane.BACKGROUND.value, EpisodeStatus.PENDING, None
        row.deferred = True  # still the user's own statement, decided with the hot path's trust
        row.enqueued_at = unit.clock()

    store.run(hand_over)
    if store.settings.broker_url is not None:
        drive(store, [key])
    return Remembered(episode_id=key[1], deferred=True)


def earlier(store: Store, request: RememberIn, episode_id: str) -> Remembered:
    """A repeated episode id or idempotency key: what the first request wrote, if this is
    the same request again (same scope, subject and text); IdempotencyConflict otherwise — a
    reused key with another payload, or a taken episode id under a new key."""
    taken = [EpisodeRow.episode_id == episode_id]
    if request.idempotency_key is not None:  # the key first: it names the earlier request
        taken.insert(0, EpisodeRow.idempotency_key == request.idempotency_key)
    with store.begin() as unit:
        rows = unit.session.scalars(
            select(EpisodeRow).where(EpisodeRow.tenant_id == request.tenant_id, or_(*taken))
        ).all()
        keyed = [r for r in rows if r.idempotency_key == request.idempotency_key]
        row = keyed[0] if keyed and request.idempotency_key is not None else next(iter(rows), None)
        if row is None:  # the first request's episode is gone: nothing to answer again
            raise NotFound(f"no episode {episode_id} in tenant {request.tenant_id}")
        same = (
            row.idempotency_key == request.idempotency_key
            and (row.agent_id, row.purpose, row.subject)
            == (request.agent_id, request.purpose, request.subject)
            and row.text_hash == text_hash(request.text)
        )
        if not same:
            raise IdempotencyConflict(
                f"episode {row.episode_id} was stored by another request (a different key, "
                "scope, subject or text); send a new episode_id or idempotency key",
                key=request.idempotency_key or episode_id,
            )
        row_id, status = row.episode_id, row.status
        facts = unit.session.scalars(
            select(FactRow).where(
                FactRow.tenant_id == request.tenant_id,
                FactRow.agent_id == row.agent_id,
                FactRow.purpose == row.purpose,
                FactRow.source_episode_id == row_id,
                FactRow.superseded_at.is_(None),
                FactRow.forgotten_at.is_(None),  # a forgotten value is never answered again
            )
        ).all()
        written = [Fact.model_validate(fact, from_attributes=True) for fact in facts]
    deferred = status in UNFINISHED
    return Remembered(episode_id=row_id, facts=written, deferred=deferred, replayed=True)


def observe_remembered(
    claimed: Claimed, outcome: str, decisions: list[Decision], started: float
) -> None:
    """Count the hot lane's episode and its decisions, and log it (ids and counts only)."""
    actions = [str(decision.action) for decision in decisions]
    observe_episode(Lane.HOT.value, outcome, actions)
    tenant_id, episode_id = claimed.key
    log.info(
        "episode remembered",
        extra={
            "tenant": tenant_id,
            "episode_id": episode_id,
            "lane": Lane.HOT.value,
            "outcome": outcome,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "decisions": dict(Counter(actions)),
        },
    )
