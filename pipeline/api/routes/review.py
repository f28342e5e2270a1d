"""Review: the recurrence buffer's candidates (confirm, reject), the quarantine, and the
decision log. Each decision names the reviewer's key as its actor."""

from __future__ import annotations

import json

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import TypeAdapter

import pipeline
from pipeline.api import answers, operations
from pipeline.api.access import Reviewer, bind
from pipeline.api.conventions import (
    IdempotencyHeader,
    Opened,
    given,
    identifier,
    json_bytes,
)
from pipeline.api.operations import CandidateFilter
from pipeline.api.problems import Forbidden
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
    status: CandidateFilter = CandidateStatus.BUFFERED,
    limit: int = 100,
) -> Response:
    """`status`: a candidate status (buffered by default), or all."""
    found = operations.candidates(store, key, subject=subject, status=status, limit=limit)
    return json_bytes(json.dumps(found).encode())


@router.post(
    "/candidates/{candidate_id}/confirm",
    summary="Confirm a buffered candidate: it becomes a fact valid from its first support",
    responses={200: {"model": answers.Decided}},
)
def confirm(candidate_id: str, key: Reviewer, store: Opened) -> Response:
    """409 when the candidate is no longer buffered, or the ledger refuses the fact."""
    return json_bytes(json.dumps(operations.decide(store, key, "confirm", candidate_id)).encode())


@router.post(
    "/candidates/{candidate_id}/reject",
    summary="Drop a buffered candidate for good",
    responses={200: {"model": answers.Decided}},
)
def reject(candidate_id: str, key: Reviewer, store: Opened) -> Response:
    return json_bytes(json.dumps(operations.decide(store, key, "reject", candidate_id)).encode())


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


@router.post(
    "/facts/{fact_id}/dismiss",
    summary="Refuse a quarantined fact: hidden for good, never promoted",
    responses={200: {"model": answers.Written}},
)
def dismiss_fact(
    fact_id: str,
    key: Reviewer,
    store: Opened,
    reason: str | None = None,
    idempotency: IdempotencyHeader = None,
) -> Response:
    """409 (`not-quarantined`) when the fact is not quarantined; `reason` goes to the log."""
    answer = operations.dismiss(store, key, fact_id, reason=reason, idempotency=idempotency)
    return json_bytes(json.dumps(answer).encode())
