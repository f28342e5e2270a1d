"""What the model lane spent for the caller's tenant (admin): per model and UTC day."""

from __future__ import annotations

from fastapi import APIRouter

from pipeline.api.access import Admin
from pipeline.api.conventions import Opened, TimeQuery, given
from pipeline.api.problems import Forbidden
from pipeline.episodes.usage import llm_usage
from schemas.usage import UsageReport

router = APIRouter(prefix="/v1", tags=["admin"])


@router.get(
    "/usage",
    summary="Model requests, attempts, tokens, latency and cost per model and day",
    response_model=UsageReport,
)
def usage(key: Admin, store: Opened, since: TimeQuery = None) -> UsageReport:
    """Cost is given when the server has SGAM_LLM_PRICE_IN/OUT. Usage spans every agent and
    purpose of the tenant: a key bound to one may not read it."""
    if key.agent_id is not None or key.purpose is not None:
        raise Forbidden("usage spans every agent and purpose; this key is bound to one")
    return llm_usage(store, {"tenant_id": key.tenant_id} | given(since=since))
