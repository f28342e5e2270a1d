"""The recurrence buffer's records and the payloads of its decisions in the log. Replay
re-applies these, so the buffer is rebuilt with the ledger."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from schemas.events import Payload
from schemas.facts import JsonValue
from schemas.fields import UtcInstant
from schemas.lifecycle import CandidateStatus


class SupportRecord(BaseModel):
    """One episode that supports a candidate."""

    model_config = ConfigDict(frozen=True)

    episode_id: str
    session_id: str | None
    occurred_at: UtcInstant
    valid_from: UtcInstant
    evidence: str | None


class CandidateRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    value: JsonValue
    value_hash: str
    created_at: UtcInstant


class BufferedPayload(Payload):
    """A new candidate with its first support."""

    op: Literal["buffer"] = "buffer"
    candidate: CandidateRecord
    support: SupportRecord


class SupportedPayload(Payload):
    """Another episode supports an open candidate."""

    op: Literal["support"] = "support"
    candidate_id: str
    support: SupportRecord


class DecidedPayload(Payload):
    """A candidate left the buffer: promoted, confirmed, rejected, expired or reset."""

    op: Literal["decide"] = "decide"
    candidate_id: str
    status: CandidateStatus
    now: UtcInstant
    fact_id: str | None = None
    reason: str | None = None

    @field_validator("status")
    @classmethod
    def _left_the_buffer(cls, status: CandidateStatus) -> CandidateStatus:
        if status is CandidateStatus.BUFFERED:
            raise ValueError("a decided candidate is no longer buffered")
        return status
