"""Fact records as they cross the public surface: what a caller writes and what a read returns."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from schemas.fields import format_utc

JsonValue = Any
"""A JSON-compatible value: str, int, float, bool, None, list or dict of those."""


class Trust(StrEnum):
    """Who vouches for a fact. Order matters: a higher level wins a same-instant disagreement."""

    UNTRUSTED = "untrusted"
    INFERRED = "inferred"
    VERIFIED = "verified"
    USER_CONFIRMED = "user_confirmed"

    @property
    def rank(self) -> int:
        return _TRUST_ORDER.index(self)


_TRUST_ORDER = [Trust.UNTRUSTED, Trust.INFERRED, Trust.VERIFIED, Trust.USER_CONFIRMED]


class Cardinality(StrEnum):
    ONE = "one"
    MANY = "many"


class FactStatus(StrEnum):
    """Lifecycle state of one row version of a fact, and `dismissed` for the answer of a
    dismissal: that row keeps `quarantined` (hidden for good by its tombstone), so no row is
    stored as dismissed (`STORED_FACT_STATUSES`)."""

    ACTIVE = "active"
    QUARANTINED = "quarantined"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    DISMISSED = "dismissed"


STORED_FACT_STATUSES = [status for status in FactStatus if status is not FactStatus.DISMISSED]


class Scope(BaseModel):
    """The hard boundary of every read and write: nothing crosses it."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    agent_id: str = "default"
    purpose: str = "default"


class Fact(BaseModel):
    """One row version of the ledger: a value that holds over [valid_from, valid_to)."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    version: int
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    value: JsonValue
    cardinality: Cardinality
    kind: str
    schema_version: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    supersedes_fact_id: str | None
    source_episode_id: str
    evidence: str | None
    confidence: float = Field(ge=0.0, le=1.0)
    trust: Trust
    status: FactStatus
    expires_at: datetime | None

    @field_serializer("valid_from", "valid_to", "recorded_at", "superseded_at", "expires_at")
    def _utc(self, moment: datetime | None) -> str | None:
        return format_utc(moment)


class ClaimRecord(BaseModel):
    """One accepted statement with everything the ledger needs, resolved against the catalogue.

    The decision log stores exactly this, so replay needs neither the catalogue nor an LLM.
    """

    model_config = ConfigDict(frozen=True)

    claim_id: str
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    cardinality: Cardinality
    value: JsonValue
    value_hash: str
    kind: str
    schema_version: str
    valid_from: datetime
    valid_to: datetime | None
    source_episode_id: str
    evidence: str | None
    confidence: float
    trust: Trust
    recorded_at: datetime
    expires_at: datetime | None

    @property
    def slot(self) -> str:
        return self.value_hash if self.cardinality is Cardinality.MANY else ""
