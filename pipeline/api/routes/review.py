"""Review: the recurrence buffer's candidates (confirm, reject), the quarantine, and the
decision log. Each decision names the reviewer's key as its actor."""

from __future__ import annotations

import json
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import TypeAdapter

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api import answers
from pipeline.api.access import Reviewer, bind
from pipeline.api.conventions import Opened, given, identifier, json_bytes
from pipeline.api.problems import Forbidden
from pipeline.api.routes.owned import require_owned
from pipeline.db.store import Store
from schemas.facts import Fact
from schemas.lifecycle import CandidateStatus

router = APIRouter(prefix="/v1", tags=["review"])
_FACTS: TypeAdapter[list[Fact]] = TypeAdapter(list[Fact])


@router.get(
    "/candidates",
    summary="Candidates waiting in the recurrence buffer, with their support",
    responses={200: {"model": list[answers.Candidate]}},
)
def list_candidates(
    key: Reviewer,
    store: Opened,
    subject: str | None = None,
    status: CandidateStatus | Literal["all"] = CandidateStatus.BUFFERED,
    limit: int = 100,
) -> Response:
    """`status`: a candidate status (buffered by default), or all."""
    query = bind(key, {}) | {"status": None if status == "all" else status, "limit": limit}
    if subject is not None:
        query["subject"] = identifier("subject", subject)
    return json_bytes(json.dumps(pipeline.list_candidates(store, query)).encode())


def _decide(verb: str, candidate_id: str, key: ApiKey, store: Store) -> Response:
    candidate_id = identifier("candidate_id", candidate_id)
    require_owned(store, key, "candidate", candidate_id)
    command = {"tenant_id": key.tenant_id, "candidate_id": candidate_id, "actor": key.key_id}
    result = getattr(pipeline, verb)(store, command)
    answer = answers.Decided(
        candidate_id=result.candidate_id,
        status=result.status,
        fact=result.fact.fact if result.fact is not None else None,
    )
    return json_bytes(answer.model_dump_json().encode())


@router.post(
    "/candidates/{candidate_id}/confirm",
    summary="Confirm a buffered candidate: it becomes a fact valid from its first support",
    responses={200: {"model": answers.Decided}},
)
def confirm(candidate_id: str, key: Reviewer, store: Opened) -> Response:
    """409 when the candidate is no longer buffered, or the ledger refuses the fact."""
    return _decide("confirm", candidate_id, key, store)


@router.post(
    "/candidates/{candidate_id}/reject",
    summary="Drop a buffered candidate for good",
    responses={200: {"model": answers.Decided}},
)
def reject(candidate_id: str, key: Reviewer, store: Opened) -> Response:
    return _decide("reject", candidate_id, key, store)


@router.get(
    "/quarantine",
    summary="Quarantined facts waiting for a reviewer's promotion",
    responses={200: {"model": list[Fact]}},
)
def list_quarantine(
    key: Reviewer, store: Opened, subject: str | None = None, limit: int = 100
) -> Response:
    query = bind(key, {}) | {"limit": limit}
    if subject is not None:
        query["subject"] = identifier("subject", subject)
    return json_bytes(_FACTS.dump_json(pipeline.list_quarantined(store, query)))


@router.get(
    "/log",
    summary="The tenant's decision log, newest first",
    responses={200: {"model": list[dict[str, object]]}},
)
def decision_log(
    key: Reviewer,
    store: Opened,
    subject: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = 100,
    oldest_first: bool = False,
) -> Response:
    """The log spans every agent and purpose of the tenant: a key bound to one may not read
    it."""
    if key.agent_id is not None or key.purpose is not None:
        raise Forbidden("the log spans every agent and purpose; this key is bound to one")
    query = {"tenant_id": key.tenant_id, "limit": limit, "oldest_first": oldest_first}
    query |= given(subject=subject, since=since, until=until)
    return json_bytes(json.dumps(pipeline.decision_log(store, query)).encode())
