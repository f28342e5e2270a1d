"""A stored idempotency key: what a repeated key is compared by (its fingerprint), the
reservation a first request still at work holds, and the row a key is kept as.

These are the parts of the keyed-operation step (`idempotency.py`); no operation uses them
but through it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from pipeline.db.models import FactRow, IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import IdempotencyConflict, IdempotencyInProgress
from pipeline.ledger.events import content_hash
from schemas.fields import format_utc

# What a purge leaves of a command hash: it cannot be traced back to the erased content.
PURGED = "~purged"
_KEY_AND_CONTENT = {"idempotency_key", "value", "evidence"}
_EPISODE_CONTENT = {"text", "metadata", "subject_names"}


@dataclass(frozen=True)
class Fingerprint:
    """What a repeated key is compared by: the whole command, and (for a key whose command
    was purged since) its shape without content."""

    digest: str
    shape: str

    @classmethod
    def of(
        cls, command: BaseModel, *, kind: str | None = None, ignored: Collection[str] = ()
    ) -> Fingerprint:
        """`kind` names the operation of a command whose fields alone could be mistaken for
        another's (an episode sent to intake or to the hot path); a key is one operation's.
        `ignored`: fields that do not make a request another one."""
        named = {"operation": kind} if kind is not None else {}
        content = _KEY_AND_CONTENT | _EPISODE_CONTENT if kind is not None else _KEY_AND_CONTENT
        left_out = {"idempotency_key", *ignored}
        return cls(
            digest=content_hash(named | command.model_dump(mode="json", exclude=left_out)),
            shape=content_hash(named | command.model_dump(mode="json", exclude=content | left_out)),
        )


class StoredKey(Protocol):
    """A stored key as read: an ORM row, or a batch's plain namespace of its columns."""

    @property
    def tenant_id(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def subject(self) -> str | None: ...
    @property
    def command_hash(self) -> str: ...
    @property
    def shape_hash(self) -> str | None: ...
    @property
    def result(self) -> Any: ...
    @property
    def created_at(self) -> datetime: ...


def check_repeat(seen: StoredKey, fingerprint: Fingerprint) -> None:
    """Raise IdempotencyConflict unless the stored key `seen` was used for the same command."""
    if seen.command_hash == PURGED:
        same = seen.shape_hash == fingerprint.shape
    else:
        same = seen.command_hash == fingerprint.digest
    if not same:
        raise IdempotencyConflict(
            f"idempotency key {seen.key!r} was already used for another request (another "
            "payload, endpoint or scope); send a new key",
            key=seen.key,
        )


# A key whose first request is still at work (a remember waiting for its model, an intake
# processing its episodes) holds a reservation until this instant: a repeat meanwhile is told
# to come back (IdempotencyInProgress) rather than answered from a state half written. Past
# it, the request is taken to have died.
RESERVED = "reserved_until"


def reservation(unit: Unit, seconds: float) -> dict[str, str]:
    """The result a key holds while its first request works, for at most `seconds`."""
    until = format_utc(unit.clock() + timedelta(seconds=seconds))
    assert until is not None
    return {RESERVED: until}


def reserved(result: Mapping[str, Any] | None) -> bool:
    """Whether a stored key holds a reservation (live or expired) rather than an answer."""
    return result is not None and RESERVED in result


def refuse_while_reserved(
    result: Mapping[str, Any], now: datetime, key: str, *, retry_s: float
) -> None:
    """IdempotencyInProgress while the key's reservation holds; nothing once it expired.
    `retry_s`: how soon the first request should have answered (Retry-After's bound)."""
    until = datetime.fromisoformat(result[RESERVED])
    remaining = (until - now).total_seconds()
    if remaining <= 0:
        return
    wait = max(1, math.ceil(min(remaining, retry_s)))
    raise IdempotencyInProgress(
        f"idempotency key {key!r}: the first request with it is still in progress; retry in "
        f"{wait} s for its answer",
        key=key,
        retry_after=wait,
    )


class Keyed(Protocol):
    """A request that may carry an idempotency key: a ledger command, an episode, a remember."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def idempotency_key(self) -> str | None: ...


def key_row(
    unit: Unit, command: Keyed, fingerprint: Fingerprint, result: dict[str, Any]
) -> dict[str, Any]:
    """The stored key of a command that was applied."""
    # The subject lets a purge find and scrub this result; a promote or a confirm names it
    # only there (a rejection names no fact: its answer holds no content).
    subject = getattr(command, "subject", None) or (result.get("fact") or {}).get("subject")
    return {
        "tenant_id": command.tenant_id,
        "key": command.idempotency_key,
        "subject": subject,
        "command_hash": fingerprint.digest,
        "shape_hash": fingerprint.shape,
        "result": result,
        "created_at": unit.clock(),
    }


TenantKey = tuple[str, str]


def stored_keys(session: Session, keys: Collection[TenantKey]) -> dict[TenantKey, IdempotencyRow]:
    """The stored ones among (tenant, key) pairs."""
    found: dict[TenantKey, IdempotencyRow] = {}
    tenants = sorted({tenant for tenant, _ in keys})
    for tenant in tenants:
        names = sorted({key for owner, key in keys if owner == tenant})
        rows = session.scalars(
            select(IdempotencyRow).where(
                IdempotencyRow.tenant_id == tenant, IdempotencyRow.key.in_(names)
            )
        )
        found |= {(row.tenant_id, row.key): row for row in rows}
    return found


def forgotten(session: Session, tenant_id: str, fact_ids: Collection[str]) -> set[str]:
    """Those of `fact_ids` that were forgotten (or dismissed) since: a repeated key never
    answers their values again."""
    if not fact_ids:
        return set()
    return set(
        session.scalars(
            select(FactRow.fact_id).where(
                FactRow.tenant_id == tenant_id,
                FactRow.fact_id.in_(sorted(set(fact_ids))),
                FactRow.forgotten_at.is_not(None),
            )
        )
    )
