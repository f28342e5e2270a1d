"""Episodes in: ingest (one or a batch), the hot path's remember, an episode's state, retry.

Every episode names the key that sent it as its actor, so each decision the workers later take
for it is logged under that key.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

import pipeline
from pipeline.api import answers, operations
from pipeline.api.access import Reader, Writer, bind
from pipeline.api.bodies import RememberBody
from pipeline.api.conventions import (
    IdempotencyHeader,
    Opened,
    identifier,
    json_bytes,
)
from pipeline.api.problems import MalformedRequest
from pipeline.api.routes.owned import require_owned
from schemas.lifecycle import EpisodeStatus, ReceiptStatus

router = APIRouter(prefix="/v1", tags=["episodes"])

_BATCH_SCHEMA = {
    "oneOf": [
        {"$ref": "#/components/schemas/EpisodeBody"},
        {"type": "array", "items": {"$ref": "#/components/schemas/EpisodeBody"}},
    ]
}


@router.post(
    "/episodes",
    summary="Store episodes (one or a batch) and hand them to the workers",
    responses={200: {"model": answers.Ingested}, 202: {"model": answers.Ingested}},
    status_code=202,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _BATCH_SCHEMA}},
        }
    },
)
async def post_episodes(
    request: Request, key: Writer, store: Opened, idempotency: IdempotencyHeader = None
) -> Response:
    """One episode object or a list of them. All are checked first: one invalid episode
    stores nothing (422 naming each by index). With Idempotency-Key, a batch's episodes get
    the keys `KEY:1`, `KEY:2`, ... so a retried request stores nothing twice. 202 when the
    workers have episodes to process; 200 when all were processed here (no broker) or were
    duplicates."""
    try:
        sent = json.loads(await request.body())
    except ValueError as error:
        raise MalformedRequest(f"the body is not JSON: {error}") from None
    except RecursionError:  # the parser's own limit; the pipeline refuses more than 64 levels
        raise MalformedRequest("the body is not JSON: it is nested too deeply") from None
    answer, queued = await run_in_threadpool(operations.ingest, store, key, sent, idempotency)
    return json_bytes(json.dumps(answer).encode(), 202 if queued else 200)


@router.post(
    "/remember",
    summary="Remember an explicit statement now (the hot path)",
    responses={200: {"model": answers.Remembered}},
)
def remember(
    body: RememberBody, key: Writer, store: Opened, idempotency: IdempotencyHeader = None
) -> Response:
    """The same answer as `sgam remember --json`; a write the ledger refused is listed under
    `rejected` with the reason (FactConflict, TrustRejected). Retrying with the same
    Idempotency-Key answers what the first request wrote."""
    answer = operations.remember(store, key, body.model_dump(exclude_unset=True), idempotency)
    return json_bytes(json.dumps(answer).encode())


@router.get(
    "/episodes",
    summary="A tenant's episodes with their states",
    responses={200: {"model": list[answers.Episode]}},
)
def list_episodes(
    key: Reader,
    store: Opened,
    status: EpisodeStatus | None = None,
    session_id: str | None = None,
    subject: str | None = None,
    limit: int = 100,
) -> Response:
    query = bind(key, {}) | {"status": status, "session_id": session_id, "subject": subject}
    query["limit"] = limit
    found = pipeline.list_episodes(store, {k: v for k, v in query.items() if v is not None})
    return json_bytes(json.dumps(found).encode())


@router.get(
    "/episodes/{episode_id}",
    summary="An episode, its candidates, the decisions taken for it and its facts",
    responses={200: {"model": answers.EpisodeShown}},
)
def get_episode(episode_id: str, key: Reader, store: Opened) -> Response:
    episode_id = identifier("episode_id", episode_id)
    require_owned(store, key, "episode", episode_id)
    shown = pipeline.show_episode(
        store,
        key.tenant_id,
        episode_id,
        agent_id=key.agent_id,
        purpose=key.purpose,
        reviewer=key.allows("reviewer"),
    )
    return json_bytes(json.dumps(shown).encode())


@router.post(
    "/episodes/{episode_id}/retry",
    summary="A failed episode back to work",
    responses={200: {"model": answers.Retried}},
)
def retry_episode(episode_id: str, key: Writer, store: Opened) -> Response:
    """409 when the episode is not failed."""
    episode_id = identifier("episode_id", episode_id)
    require_owned(store, key, "episode", episode_id)
    driven = pipeline.retry_episode(store, key.tenant_id, episode_id)
    outcome = driven.outcomes.get((key.tenant_id, episode_id))
    status = outcome.status if outcome is not None else ReceiptStatus.QUEUED
    return json_bytes(json.dumps({"episode_id": episode_id, "status": status}).encode())
