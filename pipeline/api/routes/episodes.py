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
from pipeline.api import operations
from pipeline.api.access import Reader, Writer, bind
from pipeline.api.bodies import RememberBody
from pipeline.api.conventions import (
    IdempotencyHeader,
    IdQuery,
    Limit,
    Opened,
    mark_replayed,
)
from pipeline.api.json_answers import model_answer
from pipeline.api.problems import MalformedRequest
from pipeline.hot_path import Remembered
from schemas.fields import Identifier
from schemas.lifecycle import EpisodeStatus
from schemas.results import EpisodeDetail, IngestReport, Retried, StoredEpisode

router = APIRouter(prefix="/v1", tags=["episodes"])

_BATCH_SCHEMA = {
    "oneOf": [
        {"$ref": "#/components/schemas/EpisodeBody"},
        {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/EpisodeBody"}},
    ]
}


@router.post(
    "/episodes",
    summary="Store episodes (one or a batch) and hand them to the workers",
    response_model=IngestReport,
    responses={200: {"model": IngestReport, "description": "processed here, or duplicates"}},
    status_code=202,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _BATCH_SCHEMA}},
        }
    },
)
async def post_episodes(
    request: Request,
    response: Response,
    key: Writer,
    store: Opened,
    idempotency: IdempotencyHeader = None,
) -> IngestReport:
    """One episode object or a list of them. All are checked first: one invalid episode
    stores nothing (422 naming each by index); at most SGAM_API_MAX_BATCH. With
    Idempotency-Key, a batch's episodes get the keys `KEY:1`, `KEY:2`, ... so a retried
    request stores nothing twice (they may then not carry their own; a single episode's own
    must equal the header). 202 when the
    workers have episodes to process; 200 when all were processed here (no broker) or were
    duplicates. The same request again under its Idempotency-Key answers its first status and
    receipts again, with `Idempotent-Replayed: true`."""
    try:
        sent = json.loads(await request.body())
    except ValueError as error:
        raise MalformedRequest(f"the body is not JSON: {error}") from None
    except RecursionError:  # the parser's own limit; the pipeline refuses more than 64 levels
        raise MalformedRequest("the body is not JSON: it is nested too deeply") from None
    report, queued, replayed = await run_in_threadpool(
        operations.ingest, store, key, sent, idempotency
    )
    response.status_code = 202 if queued else 200
    mark_replayed(response, replayed)
    return report


@router.post(
    "/remember",
    summary="Remember an explicit statement now (the hot path)",
    response_model=Remembered,
)
def remember(
    body: RememberBody,
    key: Writer,
    store: Opened,
    idempotency: IdempotencyHeader = None,
) -> Response:
    """The same answer as `sgam remember --json`; a write the ledger refused is listed under
    `rejected` with the reason (FactConflict, TrustRejected). Retrying with the same
    Idempotency-Key answers the first request's body again (less what was forgotten since),
    with `Idempotent-Replayed: true`; the key used for another request is 409. A body's own
    idempotency_key must equal the header."""
    fields = body.model_dump(exclude_unset=True)
    result = operations.remember(store, key, fields, idempotency)
    answer = model_answer(result)  # serialised once, in this thread
    mark_replayed(answer, result.replayed)
    return answer


@router.get(
    "/episodes",
    summary="A tenant's episodes with their states",
    response_model=list[StoredEpisode],
)
def list_episodes(
    key: Reader,
    store: Opened,
    status: EpisodeStatus | None = None,
    session_id: IdQuery = None,
    subject: IdQuery = None,
    limit: Limit = 100,
) -> list[StoredEpisode]:
    query = bind(key, {}) | {"status": status, "session_id": session_id, "subject": subject}
    query["limit"] = limit
    listed = pipeline.list_episodes(store, {k: v for k, v in query.items() if v is not None})
    if key.allows("admin"):  # what the model cost is an admin's, as /v1/usage
        return listed
    return [episode.model_copy(update={"usage": None}) for episode in listed]


@router.get(
    "/episodes/{episode_id}",
    summary="An episode, its candidates, the decisions taken for it and its facts",
    response_model=EpisodeDetail,
)
def get_episode(episode_id: Identifier, key: Reader, store: Opened) -> EpisodeDetail:
    return operations.episode(store, key, episode_id)


@router.post(
    "/episodes/{episode_id}/retry",
    summary="A failed episode back to work",
    response_model=Retried,
)
def retry_episode(
    episode_id: Identifier,
    response: Response,
    key: Writer,
    store: Opened,
    idempotency: IdempotencyHeader = None,
) -> Retried:
    """409 when the episode is not failed. The same request again under its Idempotency-Key
    answers the first answer again, with `Idempotent-Replayed: true`, and reopens nothing (409
    `idempotency-in-progress` while the first is still processing the episode)."""
    retried = operations.retry(store, key, episode_id, idempotency)
    mark_replayed(response, retried.replayed)
    return retried
