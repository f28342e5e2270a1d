"""Forgetting a subject: one idempotent event that hides everything about it in the tenant;
with `purge`, its content is erased too."""

from __future__ import annotations

import json

from fastapi import APIRouter
from fastapi.responses import Response

from pipeline.api import answers, operations
from pipeline.api.access import Admin
from pipeline.api.conventions import (
    IdempotencyHeader,
    Opened,
    json_bytes,
)

router = APIRouter(prefix="/v1", tags=["subjects"])


@router.delete(
    "/subjects/{subject}",
    summary="Forget a subject (admin); ?purge=true also erases its content",
    responses={200: {"model": answers.Forgotten}},
)
def forget(
    subject: str,
    key: Admin,
    store: Opened,
    purge: bool = False,
    idempotency: IdempotencyHeader = None,
) -> Response:
    """Forgetting spans every agent and purpose of the tenant, so a key bound to one may not."""
    answer = operations.forget(store, key, subject, purge=purge, idempotency=idempotency)
    return json_bytes(json.dumps(answer).encode())
