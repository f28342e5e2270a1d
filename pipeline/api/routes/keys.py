"""API keys of the caller's tenant (admin): list, create (the secret is shown once), revoke.
A key bound to an agent or purpose creates keys bound the same way."""

from __future__ import annotations

from fastapi import APIRouter, Request

import pipeline
from pipeline.access.keys import ApiKey, IssuedKey
from pipeline.api.access import Admin, bind, owns
from pipeline.api.bodies import KeyBody
from pipeline.api.conventions import Opened, identifier
from pipeline.errors import NotFound
from schemas.fields import Identifier

router = APIRouter(prefix="/v1", tags=["keys"])


@router.get("/keys", summary="The tenant's keys", response_model=list[ApiKey])
def list_keys(key: Admin, store: Opened) -> list[ApiKey]:
    return [k for k in pipeline.list_keys(store, key.tenant_id) if owns(key, _scope(k))]


@router.post(
    "/keys",
    summary="Create a key; its secret is in this answer only",
    status_code=201,
    response_model=IssuedKey,
)
def create_key(body: KeyBody, key: Admin, store: Opened) -> IssuedKey:
    created, secret = pipeline.create_key(store, bind(key, body.model_dump(exclude_unset=True)))
    return IssuedKey(key=created, secret=secret)


@router.delete("/keys/{key_id}", summary="Revoke a key for good", response_model=ApiKey)
def revoke_key(key_id: Identifier, request: Request, key: Admin, store: Opened) -> ApiKey:
    key_id = identifier("key_id", key_id)
    found = [k for k in pipeline.list_keys(store, key.tenant_id) if k.key_id == key_id]
    if not found or not owns(key, _scope(found[0])):
        raise NotFound(f"no API key {key_id} in tenant {key.tenant_id}")
    revoked = pipeline.revoke_key(store, key_id, tenant_id=key.tenant_id)
    request.app.state.key_cache.drop(key_id)
    return revoked


def _scope(key: ApiKey) -> dict[str, str | None]:
    return {"tenant_id": key.tenant_id, "agent_id": key.agent_id, "purpose": key.purpose}
