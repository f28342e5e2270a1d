"""Thin tasks: ids in, one pipeline call, nothing else. Each worker process opens its store
once."""

from __future__ import annotations

from functools import cache

from celery import Task

from pipeline.consolidation import consolidate as consolidate_all
from pipeline.db.store import Store, open_store
from pipeline.episodes.dispatch import CONSOLIDATE_TASK, EXTRACT_TASK, SWEEP_TASK
from pipeline.episodes.drive import sweep as sweep_strays
from pipeline.episodes.process import process_episodes
from pipeline.errors import RetryableError
from schemas.lifecycle import ReceiptStatus
from workers.app import app, settings


@cache
def store() -> Store:
    return open_store(settings)


@app.task(
    name=EXTRACT_TASK,
    bind=True,
    # The store busy or down, or the whole batch's transaction failing on contention: a few
    # retries with backoff; the episodes stay in the database whatever happens.
    autoretry_for=(RetryableError,),
    max_retries=settings.episode_max_attempts,
    retry_backoff=True,
    retry_backoff_max=60,
    retry_jitter=True,
)
def extract_episodes(self: Task, keys: list[list[str]]) -> None:
    outcomes = process_episodes(store(), [(tenant, episode) for tenant, episode in keys])
    waiting = [
        list(key) for key, outcome in outcomes.items() if outcome.status == ReceiptStatus.PENDING
    ]
    if waiting:  # an LLM failure that may pass: try those episodes again, later
        raise self.retry(args=[waiting], countdown=min(60, 2 ** (self.request.retries + 1)))


@app.task(name=SWEEP_TASK)
def sweep() -> None:
    sweep_strays(store())


@app.task(name=CONSOLIDATE_TASK)
def consolidate() -> None:
    consolidate_all(store(), {})
