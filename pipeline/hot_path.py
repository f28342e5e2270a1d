"""The hot path: an explicit "remember this" turn, written synchronously in the caller's request.

The episode is stored, the rules extractor reads it (the model only when one is configured and
the rules found nothing), and the policy applies with the user's own trust (`user_confirmed`):
no recurrence buffer, and a value waiting in the buffer is confirmed. When the model fails or
misses SGAM_HOT_PATH_DEADLINE_MS, the episode moves to the background lane and the answer says
`deferred`: nothing is lost.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema
from sqlalchemy import or_, select

from pipeline.catalog.names import nothing_matched
from pipeline.db.inserts import check_columns
from pipeline.db.models import EPISODES, EpisodeRow, FactRow, IdempotencyRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.drive import drive
from pipeline.episodes.lane_metrics import observe_episode
from pipeline.episodes.process import (
    Claimed,
    decide_episode,
    done_columns,
    finish,
    run_extraction,
)
from pipeline.episodes.records import read_row, text_hash
from pipeline.errors import ConflictError, IdempotencyConflict, LlmFailure, NotFound
from pipeline.extract.backends import RULES
from pipeline.extract.choose import model
from pipeline.extract.llm import LlmClient
from pipeline.extract.result import ExtractionResult
from pipeline.ledger.idempotency import (
    PURGED,
    Fingerprint,
    check_repeat,
    forgotten,
    key_row,
    refusal_of,
    refuse_while_reserved,
    reservation,
    reserved,
    stored_outcome,
    subject_forgotten_since,
    used_keys,
)
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.policy.apply import ACTOR, Decision, Provenance
from pipeline.policy.decide import Lane, episode_trust
from pipeline.validation import parse
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


def remember(
    store: Store, request: RememberIn | Mapping[str, Any], *, llm: LlmClient | None = None
) -> Remembered:
    request = parse(RememberIn, request)
    if request.idempotency_key is not None:
        # A repeat answers before anything is extracted (checked again under the key's lock).
        earlier = store.run(lambda unit: _answered(unit, request))
        if earlier is not None:
            return _noted(store, earlier)
    now = store.clock()
    claimed = _claimed(request, now)
    with tracing.span(
        "remember",
        attributes={
            names.SGAM_TENANT: request.tenant_id,
            names.SGAM_EPISODE: claimed.key[1],
            names.SGAM_LANE: Lane.HOT.value,
        },
    ) as opened:
        remembered = _remember(store, request, claimed, now, llm)
        opened.set_attribute(names.SGAM_OUTCOME, "deferred" if remembered.deferred else "done")
        return _noted(store, remembered)


def _noted(store: Store, answer: Remembered) -> Remembered:
    """The answer with a note naming the catalogue when nothing at all was recognised."""
    if answer.facts or answer.rejected or answer.deferred or answer.conflicts:
        return answer
    return answer.model_copy(update={"note": nothing_matched(store.settings)})


def _remember(
    store: Store, request: RememberIn, claimed: Claimed, now: datetime, llm: LlmClient | None
) -> Remembered:
    started = time.perf_counter()
    row = read_row(
        claimed.episode,
        trust=request.trust,
        idempotency_key=request.idempotency_key,
        actor=request.actor,
        lane=Lane.HOT,
        received_at=now,
    )
    found = run_extraction(store, claimed.episode, RULES)
    if not isinstance(found, ExtractionResult):
        raise found
    fallback = model(store.settings, llm)
    if found.kept or fallback is None:
        # The common case, one transaction: the episode, done, with every decision it caused.
        decided = store.run(lambda unit: _store_decided(unit, request, row, claimed, found))
        if decided is None:
            return _earlier(store, request, claimed.key[1])
        answer, decisions = decided
        if not answer.replayed:
            _observe(claimed, "done", decisions, started)
        return answer
    # The rules found nothing and a model is configured: commit the episode first, so that
    # a slow or failing model loses nothing.
    # Under a lease like any claim: should this process die while the model thinks, the
    # sweeper finds the episode once the lease has run out and a worker finishes it. The
    # idempotency key is reserved as long (a repeat meanwhile is IdempotencyInProgress).
    lease_s = store.settings.episode_lease_s
    leased = row | {"lease_until": now + timedelta(seconds=lease_s)}
    inserted = store.run(
        lambda unit: _answered(unit, request) or _insert_reserving(unit, request, leased, lease_s)
    )
    if isinstance(inserted, Remembered):
        return inserted
    if not inserted:
        return _earlier(store, request, claimed.key[1])
    try:
        seconds = store.settings.hot_path_deadline_ms / 1000
        result = run_extraction(store, claimed.episode, fallback.within(seconds))
        if isinstance(result, LlmFailure):
            _observe(claimed, "deferred", [], started)
            return _kept(store, request, _defer(store, claimed))
        if not isinstance(result, ExtractionResult):
            raise result
        done = store.run(lambda unit: finish(unit, [claimed], {claimed.key: result}))
        outcome = done[claimed.key]
        _observe(claimed, str(outcome.status), outcome.decisions, started)
        return _kept(store, request, _answer(claimed.key[1], result, outcome.decisions))
    except BaseException:
        _release(store, request)
        raise


def _fingerprint(request: RememberIn) -> Fingerprint:
    return Fingerprint.of(request, kind="remember")


def _answered(unit: Unit, request: RememberIn) -> Remembered | None:
    """The first answer of a repeated key (under the key's lock, held to the end of the
    transaction), or None for a key not used before. IdempotencyConflict when the key was
    used for another request: another text, scope or subject, or another endpoint."""
    key = request.idempotency_key
    if key is None:
        return None
    seen = used_keys(unit, [(request.tenant_id, key)]).get((request.tenant_id, key))
    if seen is None:
        return None
    check_repeat(vars(seen), _fingerprint(request), key)
    if reserved(seen.result):  # the first request still waits for its model, or died
        retry_s = unit.settings.hot_path_deadline_ms / 1000
        refuse_while_reserved(seen.result, unit.clock(), key, retry_s=retry_s)
        return None  # it died: its episode is there, answered as a taken one (_earlier)
    return _replayed(unit, request, seen)


def _replayed(unit: Unit, request: RememberIn, seen: IdempotencyRow) -> Remembered:
    """The first answer again, the ledger's refusals included (the exit code's) — less what
    was forgotten since: a forgotten or dismissed fact, and after a forget of the subject
    every value its statements named."""
    first = dict(seen.result)
    refusals = [refusal_of(stored) for stored in first.pop("refusals", [])]
    if seen.command_hash == PURGED or subject_forgotten_since(
        unit.session, request.tenant_id, request.subject, seen.created_at
    ):
        first |= {"facts": [], "rejected": []}
        refusals = []
    else:
        ids = [fact["fact_id"] for fact in first.get("facts", [])]
        gone = forgotten(unit.session, request.tenant_id, ids)
        first["facts"] = [fact for fact in first.get("facts", []) if fact["fact_id"] not in gone]
    conflicts = [refusal for refusal in refusals if refusal is not None]
    answer = Remembered.model_validate(first)
    return answer.model_copy(update={"replayed": True, "conflicts": conflicts})


def _keep(unit: Unit, request: RememberIn, answer: Remembered) -> None:
    """The answer under the request's idempotency key, with the ledger's refusals (in place
    of the key's reservation on the model path)."""
    stored = answer.model_dump(mode="json")
    refusals = [stored_outcome(conflict) for conflict in answer.conflicts]
    stored["refusals"] = [refusal for refusal in refusals if refusal is not None]
    row = key_row(unit, request, _fingerprint(request), stored)
    unit.session.merge(IdempotencyRow(**row))


def _kept(store: Store, request: RememberIn, answer: Remembered) -> Remembered:
    """Store the answer under the request's idempotency key (the model path, whose answer
    comes after its episode was committed)."""
    if request.idempotency_key is not None:
        store.run(lambda unit: _keep(unit, request, answer))
    return answer


def _insert_reserving(unit: Unit, request: RememberIn, row: dict[str, Any], seconds: float) -> bool:
    """`_insert`, and the request's idempotency key reserved for `seconds` (under the key's
    lock, which `_answered` took in this transaction)."""
    if not _insert(unit, row):
        return False
    if request.idempotency_key is not None:
        held = reservation(unit, seconds)
        unit.session.add(IdempotencyRow(**key_row(unit, request, _fingerprint(request), held)))
    return True


def _release(store: Store, request: RememberIn) -> None:
    """The request failed before it answered: free its key's reservation, so that a retry
    is answered from what was stored (its episode, taken over by the workers) at once. Should
    this fail too, the reservation expires with the episode's lease."""
    key = request.idempotency_key
    if key is None:
        return

    def free(unit: Unit) -> None:
        unit.lock(("idempotency", request.tenant_id, key))
        row = unit.session.get(IdempotencyRow, (request.tenant_id, key))
        if row is not None and reserved(row.result):
            unit.session.delete(row)

    try:
        store.run(free)
    except Exception:  # the original failure is what the caller must see
        log.warning("idempotency reservation left to expire", extra={"tenant": request.tenant_id})


def _observe(claimed: Claimed, outcome: str, decisions: list[Decision], started: float) -> None:
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


def _claimed(request: RememberIn, now: datetime) -> Claimed:
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


def _insert(unit: Unit, row: dict[str, Any]) -> bool:
    """Store the episode unless it was received before (its id or idempotency key)."""
    check_columns(EPISODES, [row])
    inserted = unit.session.execute(
        unit.backend.insert_new(EPISODES).returning(EpisodeRow.episode_id), [row]
    ).first()
    return inserted is not None


def _store_decided(
    unit: Unit, request: RememberIn, row: dict[str, Any], claimed: Claimed, result: ExtractionResult
) -> tuple[Remembered, list[Decision]] | None:
    """The episode, done, its decisions and the answer kept under the idempotency key; the
    first answer for a key used since the check; None for an episode id taken."""
    earlier = _answered(unit, request)
    if earlier is not None:
        return earlier, []
    finished = row | done_columns(result) | {"finished_at": unit.clock()}
    if not _insert(unit, finished):
        return None
    decisions = decide_episode(unit, claimed.origin, result)
    answer = _answer(claimed.key[1], result, decisions)
    if request.idempotency_key is not None:
        _keep(unit, request, answer)
    return answer, decisions


def _defer(store: Store, claimed: Claimed) -> Remembered:
    """The model failed or was too slow: the background lane takes the episode over."""

    def hand_over(unit: Unit) -> None:
        row = unit.session.get(EpisodeRow, claimed.key)
        assert row is not None
        row.lane, row.status, row.lease_until = Lane.BACKGROUND.value, EpisodeStatus.PENDING, None
        row.deferred = True  # still the user's own statement, decided with the hot path's trust
        row.enqueued_at = unit.clock()

    store.run(hand_over)
    if store.settings.broker_url is not None:
        drive(store, [claimed.key])
    return Remembered(episode_id=claimed.key[1], deferred=True)


def _answer(episode_id: str, result: ExtractionResult, decisions: list[Decision]) -> Remembered:
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


def _scope_of(request: RememberIn) -> tuple[str, str, str]:
    return request.agent_id, request.purpose, request.subject


def _earlier(store: Store, request: RememberIn, episode_id: str) -> Remembered:
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
            and (row.agent_id, row.purpose, row.subject) == _scope_of(request)
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
