"""Ids in a path: another tenant's thing, or one outside the key's agent or purpose, is
answered exactly like a missing one."""

from __future__ import annotations

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api.access import owns
from pipeline.db.store import Store
from pipeline.errors import NotFound
from pipeline.read.owners import Kind


def require_owned(store: Store, key: ApiKey, kind: Kind, item_id: str) -> None:
    scope = pipeline.scope_of(store, kind, key.tenant_id, item_id)
    if not owns(key, scope.model_dump() if scope is not None else None):
        raise NotFound(f"no {kind} {item_id} in tenant {key.tenant_id}")
