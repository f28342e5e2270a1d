"""Review: the recurrence buffer's candidates (confirm, reject), the quarantine, and the
decision log. Each decision names the reviewer's key as its actor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

import pipeline
from pipeline.api import operations
from pipeline.api.access import Reviewer, bind
from pipeline.api.conventions import (
    Flag,
    IdempotencyHeader,
    IdQuery,
    Limit,
    Opened,
    TimeQuery,
    given,
    identifier,
    mark_replayed,
)
from pipeline.api.operations import CandidateFilter
from pipeline.api.problems import Forbidden
from pipeline.ledger.results import PutResult
from schemas.facts import Fact
from schemas.fields import Identifier, Text
from schemas.lifecycle import CandidateStatus
from schemas.results import Decided, LoggedDecision, SupportedCandidate

router = APIRouter(prefix="/v1", tags=["review"])
Reason = Annotated[Text | None, Query(max_length=500)]  # as DismissFact bounds it


@router.get(
    "/candidates",
    summary="Candidates waiting in the recurrence buffer, with their support",
    response_model=list[SupportedCandidate],
)
def list_candidates(
    key: Reviewer,
    store: Opened,
    subject: IdQuery = None,
    status: CandidateFilter = CandidateStatus.BUFFERED,
    limit: Limit = 100,
) -> list[SupportedCandidate]:
    """`status`: a candidate status (buffered by default), or all."""
    return operations.candidates(store, key, subject=subject, status=status, limit=limit)


@router.post(
    "/candidates/{candidate_id}/confirm",
    summary="Confirm a buffered candidate: it becomes a fact valid from its first support",
    response_model=Decided,
)
def confirm(
    candidate_id: Identifier,
    response: Response,
    key: Reviewer,
    store: Opened,
    idempotency: IdempotencyHeader = None,
) -> Decided:
    """409 when the candidate is no longer buffered, or the ledger refuses the fact. The same
    request again under its Idempotency-Key answers the first decision (or refusal) again,
    with `Idempotent-Replayed: true`."""
    decided = operations.decide(store, key, "confirm", candidate_id, idempotency=idempotency)
    mark_replayed(response, decided.replayed)
    return decided


@router.post(
    "/candidates/{candidate_id}/reject",
    summary="Drop a buffered candidate for good",
    response_model=Decided,
)
def reject(
    candidate_id: Identifier,
    response: Response,
    key: Reviewer,
    store: Opened,
    reason: Reason = None,
    idempotency: IdempotencyHeader = None,
) -> Decided:
    """`reason` goes to the log. The same request again under its Idempotency-Key answers the
    first rejection again, with `Idempotent-Replayed: true`."""
    decided = operations.decide(
        store, key, "reject", candidate_id, reason=reason, idempotency=idempotency
    )
    mark_replayed(response, decided.replayed)
    return decided


@router.get(
    "/quarantine",
    summary="Quarantined facts waiting for a reviewer's promotion",
    response_model=list[Fact],
)
def list_quarantine(
    key: Reviewer, store: Opened, subject: IdQuery = None, limit: Limit = 100
) -> list[Fact]:
    query = bind(key, {}) | {"limit": limit}
    if subject is not None:
        query["subject"] = identifier("subject", subject)
    return pipeline.list_quarantined(store, query)


@router.get(
    "/log",
    summary="The tenant's decision log, newest first",
    response_model=list[LoggedDecision],
)
def decision_log(
    key: Reviewer,
    store: Opened,
    subject: IdQuery = None,
    since: TimeQuery = None,
    until: TimeQuery = None,
    limit: Limit = 100,
    oldest_first: Flag = False,
) -> list[LoggedDecision]:
    """The log spans every agent and purpose of the tenant: a key bound to one may not read
    it."""
    if key.agent_id is not None or key.purpose is not None:
        raise Forbidden("the log spans every agent and purpose; this key is bound to one")
    query = {"tenant_id": key.tenant_id, "limit": limit, "oldest_first": oldest_first}
    query |= given(subject=subject, since=since, until=until)
    return pipeline.decision_log(store, query)


@router.post(
    "/facts/{fact_id}/dismiss",
    summary="Refuse a quarantined fact: hidden for good, never promoted",
    response_model=PutResult,
)
def dismiss_fact(
    fact_id: Identifier,
    response: Response,
    key: Reviewer,
    store: Opened,
    reason: Reason = None,
    idempotency: IdempotencyHeader = None,
) -> PutResult:
    """409 (`not-quarantined`) when the fact is not quarantined; `reason` goes to the log."""
    found = operations.dismiss(store, key, fact_id, reason=reason, idempotency=idempotency)
    result = found.as_first_answered()
    mark_replayed(response, result.replayed)
    return result
