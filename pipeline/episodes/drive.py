"""Driving episodes to an end: send them to the workers when a broker is configured, else
process them here and now (inline mode, the embedded default) until each is `done` or
`failed`. Also the two re-drives: `retry` for failed episodes, `sweep` for lost ones."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.claimed import Outcome
from pipeline.episodes.dispatch import EpisodeKey, send_extract
from pipeline.episodes.process import process_episodes
from pipeline.episodes.states import Waiting, reopen_failed, strays, within_grace
from pipeline.errors import NotFailed, NotFound, SgamError, StoreUnavailable
from pipeline.extract.llm import LlmClient
from pipeline.ledger.idempotency import KeyedStep
from pipeline.ledger.keyed_steps import retry_step
from pipeline.validation import parse
from schemas.commands import RetryEpisode
from schemas.lifecycle import ReceiptStatus
from schemas.results import Retried

log = logging.getLogger("sgam.episodes")

# Inline mode retries a retryable failure after these pauses (seconds), within the budget of
# SGAM_EPISODE_MAX_ATTEMPTS attempts per episode.
INLINE_BACKOFF = (0.2, 0.5, 1.0, 2.0)
# How soon a repeat of a retry still at work should come back (Retry-After's bound).
_RETRY_S = 5


@dataclass
class Driven:
    """`sent`: wake-ups put on the broker (0 inline); `outcomes`: inline results per episode;
    `broker_down`: the broker could not be reached — the episodes wait for the sweeper."""

    sent: int = 0
    outcomes: dict[EpisodeKey, Outcome] = field(default_factory=dict)
    broker_down: bool = False


def drive(store: Store, keys: Sequence[EpisodeKey], *, llm: LlmClient | None = None) -> Driven:
    if not keys:
        return Driven()
    settings = store.settings
    broker = settings.broker_url
    if broker is None:
        return Driven(outcomes=process_until_settled(store, keys, llm=llm))
    # The workers' lane is their settings' (the same as this process's, as deployed).
    try:
        return Driven(sent=send_extract(broker, keys, settings.lane_batch))
    except StoreUnavailable:
        return Driven(broker_down=True)


def process_until_settled(
    store: Store, keys: Sequence[EpisodeKey], *, llm: LlmClient | None = None
) -> dict[EpisodeKey, Outcome]:
    outcomes: dict[EpisodeKey, Outcome] = {}
    waiting = list(keys)
    for pause in (0.0, *INLINE_BACKOFF):
        if not waiting:
            break
        time.sleep(pause)
        outcomes |= process_episodes(store, waiting, llm=llm)  # a batch at a time
        waiting = [
            key
            for key in waiting
            if outcomes.get(key, Outcome(ReceiptStatus.PENDING)).status == ReceiptStatus.PENDING
        ]
    return outcomes


def retry(
    store: Store,
    *,
    tenant_id: str | None = None,
    episode_ids: Sequence[str] = (),
    llm: LlmClient | None = None,
) -> tuple[list[EpisodeKey], Driven]:
    """Failed episodes (all, a tenant's, or the named ones) back to work."""
    keys = store.run(lambda unit: reopen_failed(unit, tenant_id=tenant_id, episode_ids=episode_ids))
    return keys, drive(store, keys, llm=llm)


def retry_episode(
    store: Store, command: RetryEpisode | Mapping[str, Any], *, llm: LlmClient | None = None
) -> Retried:
    """One failed episode back to work: `queued`, or where inline processing left it.
    NotFound when the tenant has no such episode, NotFailed when it is not failed. With an
    idempotency key, a repeat answers the first answer again and reopens nothing: the key is
    reserved with the reopening and keeps the answer once the episode is driven (a repeat
    meanwhile is IdempotencyInProgress)."""
    command = parse(RetryEpisode, command)
    step = retry_step(command, retry_s=_RETRY_S)

    def reopen(unit: Unit) -> Retried | list[EpisodeKey]:
        earlier = step.replayed(unit)
        if earlier is not None:
            return earlier
        keys = reopen_failed(unit, tenant_id=command.tenant_id, episode_ids=[command.episode_id])
        if keys:  # as long as a claim of it may hold: the answer is kept before then
            step.reserve(unit, unit.settings.episode_lease_s)
        return keys

    reopened = store.run(reopen)
    if isinstance(reopened, Retried):
        return reopened
    if not reopened:
        raise _not_retried(store, command)
    queued = Retried(episode_id=command.episode_id, status=ReceiptStatus.QUEUED)
    try:
        outcome = drive(store, reopened, llm=llm).outcomes.get(reopened[0])
    except BaseException:
        # The episode was reopened: it waits for the sweeper, and a repeat says so at once.
        _keep(store, step, queued, quietly=True)
        raise
    answer = queued if outcome is None else queued.model_copy(update={"status": outcome.status})
    _keep(store, step, answer)
    return answer


def _keep(
    store: Store, step: KeyedStep[Retried], answer: Retried, *, quietly: bool = False
) -> None:
    """Keep the answer under the key, in place of its reservation (none without a key);
    `quietly`: should this fail too, the reservation expires with the lease."""
    if step.key is None:
        return
    try:
        store.run(lambda unit: step.keep(unit, answer))
    except Exception:
        if not quietly:
            raise
        log.warning("idempotency reservation left to expire", extra={"tenant": step.key[0]})


def _not_retried(store: Store, command: RetryEpisode) -> SgamError:
    tenant_id, episode_id = command.tenant_id, command.episode_id
    with store.reading() as connection:
        status = connection.execute(
            select(EpisodeRow.status).where(
                EpisodeRow.tenant_id == tenant_id, EpisodeRow.episode_id == episode_id
            )
        ).scalar()
    if status is None:
        return NotFound(f"no episode {episode_id} in tenant {tenant_id}")
    return NotFailed(
        f"episode {episode_id} is {status}; only a failed episode can be retried",
        episode_id=episode_id,
    )


def sweep(
    store: Store,
    *,
    now: datetime | None = None,
    tenant_id: str | None = None,
    llm: LlmClient | None = None,
) -> tuple[int, int, Driven]:
    """Queue again what waits too long: (pending re-queued, stuck re-queued, how)."""
    found = store.run(lambda unit: strays(unit, now or unit.clock(), tenant_id=tenant_id))
    driven = drive(store, found.keys, llm=llm)
    if found.keys:  # a sweep that found nothing (the usual minute) says nothing
        log.info(
            "episodes swept",
            extra={
                "tenant": tenant_id,
                "episodes": {"pending": len(found.pending), "stuck": len(found.stuck)},
            },
        )
    return len(found.pending), len(found.stuck), driven


def waiting(store: Store, *, now: datetime | None = None, tenant_id: str | None = None) -> Waiting:
    """The pending episodes a sweep leaves alone for now, and when the first is sent again."""
    return store.run(lambda unit: within_grace(unit, now or unit.clock(), tenant_id=tenant_id))
