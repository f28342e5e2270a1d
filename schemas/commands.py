"""Write commands. Each is validated at the edge, applied by the ledger and stored verbatim in the
decision log, so replaying the log re-applies exactly what was accepted."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from schemas.facts import Cardinality, Trust
from schemas.fields import Identifier, JsonPayload, Text, UtcDatetime


class Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    actor: Identifier = "api"
    idempotency_key: Identifier | None = None


class ScopedCommand(Command):
    agent_id: Identifier = "default"
    purpose: Identifier = "default"


class PutFact(ScopedCommand):
    """Assert that `value` holds for subject.attribute from `valid_from` on."""

    subject: Identifier
    attribute: Identifier
    value: JsonPayload
    valid_from: UtcDatetime
    valid_to: UtcDatetime | None = None
    source_episode_id: Identifier
    evidence: Text | None = None
    trust: Trust = Trust.VERIFIED
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    cardinality: Cardinality | None = None
    expires_at: UtcDatetime | None = None
    expected_version: int | None = Field(default=None, ge=0)
    # The key's state tag as last read (HTTP's ETag, pipeline/ledger/state_tag.py): any write
    # to the key since then refuses this one.
    expected_state: str | None = Field(default=None, pattern=r"^[0-9a-f]{1,64}$")

    @field_validator("value")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null; end a fact with valid_to instead")
        return value

    @field_validator("confidence")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number between 0 and 1")
        return value

    @field_validator("valid_to")
    @classmethod
    def _after_start(cls, value: object, info: ValidationInfo) -> object:
        start = info.data.get("valid_from")
        if value is not None and start is not None and value <= start:
            raise ValueError("must be later than valid_from (intervals are [from, to))")
        return value


class PromoteFact(Command):
    """Release a quarantined fact: it becomes verified and takes part in supersession."""

    fact_id: Identifier
    expected_version: int | None = Field(default=None, ge=1)


class DismissFact(Command):
    """Refuse a quarantined fact: it is hidden for good and can never be promoted."""

    fact_id: Identifier
    expected_version: int | None = Field(default=None, ge=1)
    # Text: PostgreSQL's text cannot hold NUL, which would fail the write instead of the input.
    reason: Text | None = Field(default=None, max_length=500, description="why, for the log")


class ForgetSubject(Command):
    """Hide every fact about a subject in a tenant; with purge, also erase its content."""

    subject: Identifier
    purge: bool = False


class CandidateCommand(Command):
    """Confirm a buffered candidate: it becomes a fact valid from its first support."""

    candidate_id: Identifier
    by: Literal["user", "reviewer"] = Field(
        default="user",
        description="who decides: the user (a confirmed fact has the user's own trust) or a "
        "reviewer (verified, as a promotion is)",
    )


class RejectCommand(CandidateCommand):
    """Drop a buffered candidate for good."""

    reason: Text | None = Field(default=None, max_length=500, description="why, for the log")


class RetryEpisode(BaseModel):
    """Send a failed episode back to work (not a ledger command: nothing of it is logged but
    what processing the episode decides)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    episode_id: Identifier
    idempotency_key: Identifier | None = None


class ExpireFacts(BaseModel):
    """Mark every fact whose retention has passed at `now` (default: the clock) as expired,
    in one tenant or in all of them (the nightly run)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier | None = None
    actor: Identifier = "api"
    now: UtcDatetime | None = None
    force: bool = Field(
        default=False,
        description="allow a `now` after the clock: expires facts whose retention has not passed",
    )
