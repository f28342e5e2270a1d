"""Forgetting a subject: one idempotent event that hides everything about it in the tenant;
with `purge`, its content is erased too."""

from __future__ import annotations

from fastapi import APIRouter, Response

from pipeline.api import operations
from pipeline.api.access import Admin
from pipeline.api.bodies import Subject
from pipeline.api.conventions import Flag, IdempotencyHeader, Opened, mark_replayed
from pipeline.ledger.forget import ForgetResult

router = APIRouter(prefix="/v1", tags=["subjects"])


@router.delete(
    "/subjects/{subject}",
    summary="Forget a subject (admin); ?purge=true also erases its content",
    response_model=ForgetResult,
)
def forget(
    subject: Subject,
    response: Response,
    key: Admin,
    store: Opened,
    purge: Flag = False,
    idempotency: IdempotencyHeader = None,
) -> ForgetResult:
    """Forgetting spans every agent and purpose of the tenant, so a key bound to one may not."""
    result = operations.forget(store, key, subject, purge=purge, idempotency=idempotency)
    mark_replayed(response, result.replayed)
    return result
