"""Thin tasks: ids in, one pipeline call, nothing else. Each worker process opens its store
once."""

from __future__ import annotations

from functools import cache

from celery import Task

from pipeline import open_store
from pipeline.consolidation import consolidate as consolidate_all
from pipeline.db.store import Store
from pipeline.episodes.dispatch import (
    CONSOLIDATE_TASK,
    EXTRACT_QUEUE,
    EXTRACT_TASK,
    SWEEP_TASK,
    TRACE_HEADER,
)
from pipeline.episodes.drive import sweep as sweep_strays
from pipeline.episodes.process import process_episodes
from pipeline.errors import RetryableError
from pipeline.observe import conventions as names
from pipeline.observe import tracing
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
    # The trace of the intake that sent the wake-up goes on here (`dispatch.TRACE_HEADER`).
    carried = (self.request.headers or {}).get(TRACE_HEADER)
    with tracing.span(
        f"process {EXTRACT_TASK}",
        kind="consumer",
        parent=tracing.context_from(carried),
        attributes={
            names.MESSAGING_SYSTEM: "celery",
            names.MESSAGING_OPERATION_TYPE: "process",
            names.MESSAGING_DESTINATION_NAME: EXTRACT_QUEUE,
            names.SGAM_EPISODE_COUNT: len(keys),
            names.SGAM_ATTEMPT: self.request.retries + 1,
        },
    ):
        # The message is a wake-up: the model lane goes on with the episodes that wait.
        outcomes = process_episodes(
            store(), [(tenant, episode) for tenant, episode in keys], more=True
        )
    waiting = [
        list(key) for key, outcome in outcomes.items() if outcome.status == ReceiptStatus.PENDING
    ]
    if waiting:  # an LLM failure that may pass: try those episodes again, later
        raise self.retry(args=[waiting], countdown=min(60, 2 ** (self.request.retries + 1)))


@app.task(name=SWEEP_TASK)
def sweep() -> None:
    # The root of the trace in which the episodes it re-queues are processed.
    with tracing.span(f"process {SWEEP_TASK}", kind="consumer"):
        sweep_strays(store())


@app.task(name=CONSOLIDATE_TASK)
def consolidate() -> None:
    with tracing.span(f"process {CONSOLIDATE_TASK}", kind="consumer"):
        consolidate_all(store(), {})
