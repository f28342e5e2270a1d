"""Forgetting a subject: one idempotent event that hides everything about it in the tenant;
with `purge`, its content is erased too."""

from __future__ import annotations

from fastapi import APIRouter

import pipeline
from pipeline.api.access import Admin
from pipeline.api.conventions import (
    IdempotencyHeader,
    Opened,
    idempotency_key,
    identifier,
)
from pipeline.api.problems import Forbidden
from pipeline.ledger.forget import ForgetResult

router = APIRouter(prefix="/v1", tags=["subjects"])


@router.delete(
    "/subjects/{subject}",
    summary="Forget a subject (admin); ?purge=true also erases its content",
    response_model=ForgetResult,
)
def forget(
    subject: str,
    key: Admin,
    store: Opened,
    purge: bool = False,
    idempotency: IdempotencyHeader = None,
) -> ForgetResult:
    """Forgetting spans every agent and purpose of the tenant, so a key bound to one may not."""
    if key.agent_id is not None or key.purpose is not None:
        raise Forbidden("forgetting spans every agent and purpose; this key is bound to one")
    command = {
        "tenant_id": key.tenant_id,
        "subject": identifier("subject", subject, subject=True),
        "purge": purge,
        "actor": key.key_id,
    }
    return pipeline.forget(store, idempotency_key(idempotency, command))
