"""Driving episodes to an end: send them to the workers when a broker is configured, else
process them here and now (inline mode, the embedded default) until each is `done` or
`failed`. Also the two re-drives: `retry` for failed episodes, `sweep` for lost ones."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.episodes.claimed import Outcome
from pipeline.episodes.dispatch import EpisodeKey, send_extract
from pipeline.episodes.process import process_episodes
from pipeline.episodes.states import Waiting, reopen_failed, strays, within_grace
from pipeline.errors import NotFailed, NotFound, StoreUnavailable
from pipeline.extract.llm import LlmClient
from schemas.lifecycle import ReceiptStatus
from schemas.results import Retried

log = logging.getLogger("sgam.episodes")

# Inline mode retries a retryable failure after these pauses (seconds), within the budget of
# SGAM_EPISODE_MAX_ATTEMPTS attempts per episode.
INLINE_BACKOFF = (0.2, 0.5, 1.0, 2.0)


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
    broker = store.settings.broker_url
    if broker is None:
        return Driven(outcomes=process_until_settled(store, keys, llm=llm))
    try:
        return Driven(sent=send_extract(broker, keys, store.settings.worker_batch))
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
    store: Store, tenant_id: str, episode_id: str, *, llm: LlmClient | None = None
) -> Retried:
    """One failed episode back to work: `queued`, or where inline processing left it.
    NotFound when the tenant has no such episode, NotFailed when it is not failed."""
    keys, driven = retry(store, tenant_id=tenant_id, episode_ids=[episode_id], llm=llm)
    if keys:
        outcome = driven.outcomes.get(keys[0])
        return Retried(
            episode_id=episode_id,
            status=outcome.status if outcome is not None else ReceiptStatus.QUEUED,
        )
    with store.reading() as connection:
        status = connection.execute(
            select(EpisodeRow.status).where(
                EpisodeRow.tenant_id == tenant_id, EpisodeRow.episode_id == episode_id
            )
        ).scalar()
    if status is None:
        raise NotFound(f"no episode {episode_id} in tenant {tenant_id}")
    raise NotFailed(
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
