"""API keys of the caller's tenant (admin): list, create (the secret is shown once), revoke.
A key bound to an agent or purpose creates keys bound the same way."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api import answers
from pipeline.api.access import Admin, bind, owns
from pipeline.api.bodies import KeyBody
from pipeline.api.conventions import Opened, identifier, json_bytes
from pipeline.errors import NotFound

router = APIRouter(prefix="/v1", tags=["keys"])


@router.get("/keys", summary="The tenant's keys", responses={200: {"model": list[ApiKey]}})
def list_keys(key: Admin, store: Opened) -> Response:
    found = [k.to_json() for k in pipeline.list_keys(store, key.tenant_id) if owns(key, _scope(k))]
    return json_bytes(json.dumps(found).encode())


@router.post(
    "/keys",
    summary="Create a key; its secret is in this answer only",
    status_code=201,
    responses={201: {"model": answers.NewKey}},
)
def create_key(body: KeyBody, key: Admin, store: Opened) -> Response:
    created, secret = pipeline.create_key(store, bind(key, body.model_dump(exclude_unset=True)))
    return json_bytes(json.dumps({"key": created.to_json(), "secret": secret}).encode(), 201)


@router.delete(
    "/keys/{key_id}", summary="Revoke a key for good", responses={200: {"model": ApiKey}}
)
def revoke_key(key_id: str, request: Request, key: Admin, store: Opened) -> Response:
    key_id = identifier("key_id", key_id)
    found = [k for k in pipeline.list_keys(store, key.tenant_id) if k.key_id == key_id]
    if not found or not owns(key, _scope(found[0])):
        raise NotFound(f"no API key {key_id} in tenant {key.tenant_id}")
    revoked = pipeline.revoke_key(store, key_id, tenant_id=key.tenant_id)
    request.app.state.key_cache.drop(key_id)
    return json_bytes(json.dumps(revoked.to_json()).encode())


def _scope(key: ApiKey) -> dict[str, str | None]:
    return {"tenant_id": key.tenant_id, "agent_id": key.agent_id, "purpose": key.purpose}
