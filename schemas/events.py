"""What the decision log's events carry: one payload model per kind of state change.

A payload is the resolved command with the ids and clock it was applied with, so replaying the
log re-applies exactly what was decided, with no catalogue and no model. The `op` field keeps
each stored payload self-describing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.facts import ClaimRecord
from schemas.fields import UtcInstant


class Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClaimPayload(Payload):
    """An accepted (or refused) claim, resolved against the catalogue."""

    op: Literal["put"] = "put"
    claim: ClaimRecord


class PromotePayload(Payload):
    op: Literal["promote"] = "promote"
    fact_id: str
    now: UtcInstant


class DismissPayload(Payload):
    op: Literal["dismiss"] = "dismiss"
    fact_id: str
    now: UtcInstant
    reason: str | None = None


class SlotRef(Payload):
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    slot: str


class ExpirePayload(Payload):
    op: Literal["expire"] = "expire"
    key: SlotRef
    now: UtcInstant


class ForgetPayload(Payload):
    op: Literal["forget"] = "forget"
    tenant_id: str
    subject: str
    purge: bool
    now: UtcInstant
