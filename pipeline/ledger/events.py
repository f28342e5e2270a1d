"""The decision log's kinds of event, in one registry, and the one way to append an event.

Each kind names its payload model (what the event's `command` column holds) and, when replay
re-applies it, the function that does. Kinds register where their effect is implemented, so a
new stage (episodes, the recurrence buffer) adds its kinds without touching replay.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from pipeline.db import inserts
from pipeline.db.models import EventRow
from pipeline.db.unit import Unit
from schemas.events import ClaimPayload
from schemas.fields import canonical_json

Apply = Callable[[Unit, Any], None]


class Decision(StrEnum):
    """The ledger's own decision kinds."""

    WRITE = "write"
    SUPERSEDE = "supersede"
    RESTATE = "restate"
    REJECT = "reject"
    CONFLICT = "conflict"
    QUARANTINE = "quarantine"
    PROMOTE = "promote"
    EXPIRE = "expire"
    FORGET = "forget"
    PURGE = "purge"


@dataclass(frozen=True)
class EventKind:
    """`payload`: the model of what the event carries (None: nothing). `apply`: how replay
    re-applies the event (None: replay only copies it, because it changed no state of its
    own or its effect is re-derived from another event)."""

    name: str
    payload: type[BaseModel] | None
    apply: Apply | None = None
    description: str = ""

    @property
    def replayed(self) -> bool:
        return self.apply is not None


KINDS: dict[str, EventKind] = {}


def register(kind: EventKind) -> EventKind:
    if kind.name in KINDS:
        raise ValueError(f"event kind {kind.name!r} is registered twice")
    if len(kind.name) > EventRow.__table__.c.kind.type.length:  # type: ignore[attr-defined]
        raise ValueError(f"event kind {kind.name!r} is longer than the events.kind column")
    KINDS[kind.name] = kind
    return kind


def kind_of(name: str) -> EventKind:
    kind = KINDS.get(name)
    if kind is None:
        raise ValueError(f"unknown event kind {name!r} in the decision log")
    return kind


def parse_payload(kind: EventKind, stored: dict[str, Any] | None) -> BaseModel | None:
    if stored is None:
        return None
    if kind.payload is None:
        raise ValueError(f"event kind {kind.name!r} carries no payload, but one is stored")
    return kind.payload.model_validate(stored)


# Kinds whose effect is re-derived when the event that caused them is replayed. A refused put
# keeps its claim for the audit; a refused promotion has no payload.
register(EventKind(Decision.SUPERSEDE, None, description="another fact got a new version"))
register(EventKind(Decision.REJECT, ClaimPayload, description="lower trust lost; nothing changed"))
register(EventKind(Decision.CONFLICT, ClaimPayload, description="equal-trust disagreement"))


def content_hash(payload: Any) -> str:
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def record(
    unit: Unit,
    kind: str,
    payload: BaseModel | None = None,
    *,
    occurred_at: datetime,
    actor: str,
    tenant_id: str | None,
    subject: str | None = None,
    fact_ids: list[str] | None = None,
    idempotency_key: str | None = None,
    reason: str | None = None,
) -> None:
    """Append one decision of a registered `kind`, in the caller's unit of work."""
    registered = kind_of(kind)
    if payload is not None and not isinstance(payload, registered.payload or ()):
        raise TypeError(f"{kind} events carry {registered.payload}, not {type(payload)}")
    command = payload.model_dump(mode="json") if payload is not None else None
    digest = {"decision": str(kind), "fact_ids": fact_ids or [], "command": command}
    event = {
        "kind": str(kind),
        "tenant_id": tenant_id,
        "subject": subject,
        "actor": actor,
        "occurred_at": occurred_at,
        "idempotency_key": idempotency_key,
        "fact_ids": fact_ids or [],
        "command": command,
        "content_hash": content_hash(digest),
        "reason": reason,
        "episode_id": unit.provenance.get("episode_id"),
        "prompt_version": unit.provenance.get("prompt_version"),
    }
    inserts.insert_rows(unit.session, EventRow, [event])
