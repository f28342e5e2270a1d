"""API keys: created with a random secret that is shown once, stored only as a SHA-256 hash,
checked in constant time, revoked for good.

A key reads `sgam_<key id>_<secret>`. The key id is public (it names the key in listings and
is the actor of everything the key changes); the secret is 256 random bits, so a fast hash is
as safe as a slow one and keeps authentication cheap on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import bindparam, select

from pipeline.access.revocations import announce
from pipeline.db.models import ROLES, ApiKeyRow
from pipeline.db.store import Store
from pipeline.errors import InvalidInput, NotFound
from pipeline.validation import parse
from schemas.fields import Identifier, UtcDatetime, UtcInstant

Role = Literal["reader", "writer", "reviewer", "admin"]
_KEY = re.compile(r"sgam_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_KEY_ID = re.compile(r"[0-9a-f]{16}")
_DUMMY_HASH = "0" * 64  # compared against when no key matches, so both paths cost the same


class NewKey(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    role: Role
    agent_id: Identifier | None = None
    purpose: Identifier | None = None
    name: Identifier | None = None
    expires_at: UtcDatetime | None = None


class ApiKey(BaseModel):
    """A stored key as anyone may see it: never its secret nor its hash."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    key_id: str
    prefix: str = Field(description="`sgam_` and the first characters, to tell keys apart")
    tenant_id: str
    role: Role
    agent_id: str | None
    purpose: str | None
    name: str | None
    created_at: UtcInstant
    expires_at: UtcInstant | None
    revoked_at: UtcInstant | None

    def allows(self, role: str) -> bool:
        """Roles are ordered: each one may do everything the ones before it may."""
        return ROLES.index(self.role) >= ROLES.index(role)


class IssuedKey(BaseModel):
    """A new key and its secret, which is shown here once and stored nowhere."""

    model_config = ConfigDict(frozen=True)

    key: ApiKey
    secret: str = Field(description="shown once: only its hash is stored")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def create_key(store: Store, request: NewKey | Mapping[str, Any]) -> tuple[ApiKey, str]:
    """Store a new key; returns it and its secret, which is not kept anywhere."""
    request = parse(NewKey, request)
    now = store.clock()
    if request.expires_at is not None and request.expires_at <= now:
        raise InvalidInput("expires_at", "must be in the future")
    key_id = secrets.token_hex(8)
    secret = f"sgam_{key_id}_{secrets.token_urlsafe(32)}"
    row = ApiKeyRow(
        key_id=key_id,
        prefix=secret[:13],
        secret_hash=_digest(secret),
        created_at=now,
        revoked_at=None,
        **request.model_dump(),
    )
    with store.begin() as unit:
        unit.session.add(row)
    return ApiKey.model_validate(row), secret


def list_keys(store: Store, tenant_id: str) -> list[ApiKey]:
    with store.begin() as unit:
        rows = unit.session.scalars(
            select(ApiKeyRow).where(ApiKeyRow.tenant_id == tenant_id).order_by(ApiKeyRow.created_at)
        )
        return [ApiKey.model_validate(row) for row in rows]


def revoke_key(store: Store, key_id: str, *, tenant_id: str | None = None) -> ApiKey:
    """Revoke a key for good (again: nothing changes). `key_id` is the key's id or the whole
    key (which is never repeated back). With `tenant_id`, a key of another tenant is reported
    exactly like a missing one."""
    whole = _KEY.fullmatch(key_id)
    # Only an id is named in the refusal: anything else may be a secret, or part of one.
    named = key_id if _KEY_ID.fullmatch(key_id) else "matching what was given"
    with store.begin() as unit:
        row = unit.session.get(ApiKeyRow, whole.group(1) if whole else key_id, with_for_update=True)
        stored = row.secret_hash if row is not None and whole else _DUMMY_HASH
        if whole and not hmac.compare_digest(stored, _digest(key_id)):
            row = None
        if row is None or (tenant_id is not None and row.tenant_id != tenant_id):
            where = f" in tenant {tenant_id}" if tenant_id is not None else ""
            raise NotFound(f"no API key {named}{where}")
        if row.revoked_at is None:
            row.revoked_at = store.clock()
            announce(store.settings, row.key_id)  # before the commit: no process trusts it after
        return ApiKey.model_validate(row)


_BY_ID = select(ApiKeyRow.__table__).where(ApiKeyRow.key_id == bindparam("key_id"))
Refusal = Literal["malformed", "unknown", "revoked", "expired"]


def key_by_id(store: Store, key_id: str) -> ApiKey | Refusal:
    """A key that still works, by its id: for a session that was opened with it (the review
    pages' cookie names the key id, never its secret)."""
    with store.reading() as connection:
        found = connection.execute(_BY_ID, {"key_id": key_id}).first()
    if found is None:
        return "unknown"
    return _usable(store, dict(found._mapping))


def _usable(store: Store, row: dict[str, Any]) -> ApiKey | Refusal:
    if row["revoked_at"] is not None:
        return "revoked"
    if row["expires_at"] is not None and row["expires_at"] <= store.clock():
        return "expired"
    return ApiKey.model_validate(row)


def authenticate(store: Store, presented: str) -> ApiKey | Refusal:
    """The key a request presents, or why it is refused. The hash is compared in constant
    time; an unknown key id costs the same comparison."""
    match = _KEY.fullmatch(presented)
    if match is None:
        return "malformed"
    with store.reading() as connection:
        found = connection.execute(_BY_ID, {"key_id": match.group(1)}).first()
    row = dict(found._mapping) if found is not None else None
    stored = row["secret_hash"] if row is not None else _DUMMY_HASH
    if not hmac.compare_digest(stored, _digest(presented)) or row is None:
        return "unknown"
    return _usable(store, row)
