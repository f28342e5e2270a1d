"""What the HTTP service answers, as models for the OpenAPI document. Handlers send the
pipeline's own JSON (the same as the command line's `--json`); these models describe it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.access.keys import ApiKey
from pipeline.read.context import ContextItem
from schemas.facts import Fact
from schemas.lifecycle import CandidateStatus, EpisodeStatus, ReceiptStatus


class Problem(BaseModel):
    """RFC 9457 problem details. `type` is stable per error class (`urn:sgam:problem:...`)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["urn:sgam:problem:invalid-input"])
    title: str
    status: int
    detail: str | None = Field(default=None, description="what was wrong; never a stored value")
    instance: str = Field(description="the request's path")
    field: str | None = Field(default=None, description="the input at fault (422, 403)")
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="invalid episodes of a batch: index, field, problem"
    )


class Receipt(BaseModel):
    line: int = Field(description="the episode's position in the request, from 1")
    episode_id: str
    status: ReceiptStatus
    error: str | None = None


class Ingested(BaseModel):
    receipts: list[Receipt]
    broker_down: bool = Field(
        description="the broker could not be reached: the episodes are stored (`stored`) and "
        "the sweeper queues them once it answers; nothing is lost"
    )


class Rejection(BaseModel):
    update: dict[str, Any]
    reason: str
    message: str


class Remembered(BaseModel):
    episode_id: str
    facts: list[Fact]
    rejected: list[Rejection]
    deferred: bool = Field(description="the model was slow or failed: the workers take over")


class Written(BaseModel):
    fact: Fact
    written: bool = Field(description="false: the ledger already held this (or a retry)")


class Cited(BaseModel):
    """The context for a model: the items that fit, the ones skipped, and `text` as a model
    would be given it."""

    subject: str
    budget_tokens: int
    used_tokens: int
    items: list[ContextItem]
    skipped: list[ContextItem]
    text: str


class Support(BaseModel):
    """One episode that supports a candidate (its evidence is erased by a purge)."""

    episode_id: str
    session_id: str | None
    occurred_at: str | None
    valid_from: str | None
    evidence: str | None


class Candidate(BaseModel):
    candidate_id: str
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    value: Any
    status: CandidateStatus
    support: int
    first_seen_at: str | None
    last_seen_at: str | None
    valid_from: str | None
    decided_at: str | None
    fact_id: str | None
    reason: str | None
    supporting: list[Support] = Field(
        default_factory=list, description="every supporting episode (the buffer's list)"
    )


class Decided(BaseModel):
    candidate_id: str
    status: CandidateStatus
    fact: Fact | None = None


class Episode(BaseModel):
    """An episode with its processing state."""

    model_config = ConfigDict(extra="allow")

    episode_id: str
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    session_id: str | None
    source: str
    occurred_at: str
    text: str | None = Field(description="null once purged")
    actor: str | None = Field(description="the key that sent it")
    status: EpisodeStatus
    attempts: int
    last_error: str | None


class EpisodeShown(Episode):
    candidates: list[Candidate]
    decisions: list[dict[str, Any]]
    facts: list[Fact]


class Retried(BaseModel):
    episode_id: str
    status: ReceiptStatus = Field(
        description="queued; stored (the broker was down: the sweeper queues it); duplicate; "
        "or done/failed/pending when processed inline"
    )


class Forgotten(BaseModel):
    hidden: int
    purged: bool
    files_scrubbed: bool | None = Field(
        description="after a purge: no erased content left in the database files"
    )


class NewKey(BaseModel):
    key: ApiKey
    secret: str = Field(description="shown once: only its hash is stored")


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)
