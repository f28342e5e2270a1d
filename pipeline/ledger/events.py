"""The one way to append an event to the decision log.

Every kind and the payload model it carries is declared in `schemas.event_kinds`; an event of
a kind whose payload does not match is refused before it is written.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from pipeline.db import inserts
from pipeline.db.base import JsonText
from pipeline.db.models import EventRow
from pipeline.db.unit import Unit
from schemas.event_kinds import PAYLOADS
from schemas.fields import canonical_json
from schemas.lifecycle import EventKind


def content_hash(payload: Any) -> str:
    return _hash(canonical_json(payload))


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest_text(kind: EventKind, fact_ids: list[str], command_text: str) -> str:
    """`canonical_json` of an event's digest ({"decision", "fact_ids", "command"}), spelled out
    around the command's canonical text, which is made once for the hash and the row: the
    keys in sorted order, as `canonical_json` sorts them."""
    decision, ids = canonical_json(str(kind)), canonical_json(fact_ids)
    return f'{{"command":{command_text},"decision":{decision},"fact_ids":{ids}}}'


def record(
    unit: Unit,
    kind: EventKind,
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
    """Append one decision of `kind`, in the caller's unit of work."""
    model = PAYLOADS[kind]
    if payload is not None and not isinstance(payload, model or ()):
        raise TypeError(f"{kind} events carry {model}, not {type(payload)}")
    command = payload.model_dump(mode="json") if payload is not None else None
    command_text = canonical_json(command)
    event = {
        "kind": str(kind),
        "tenant_id": tenant_id,
        "subject": subject,
        "actor": actor,
        "occurred_at": occurred_at,
        "idempotency_key": idempotency_key,
        "fact_ids": fact_ids or [],
        "command": JsonText(command, command_text) if command is not None else None,
        "content_hash": _hash(digest_text(kind, fact_ids or [], command_text)),
        "reason": reason,
        "episode_id": unit.provenance.get("episode_id"),
        "prompt_version": unit.provenance.get("prompt_version"),
    }
    inserts.insert_rows(unit.session, EventRow, [event])
