"""What the pipeline answers, one model per result: the Python API returns these, the command
line's `--json` prints them and the HTTP service sends them (its OpenAPI document describes
them), so the three never disagree. Timestamps are aware UTC in Python and RFC 3339 with `Z` in
JSON; a field that is absent rather than null in JSON says so (`exclude_if`).

Results that carry a pipeline type (an error, a role check) live beside their concept instead:
`PutResult` (ledger/results.py), `ForgetResult` (ledger/forget.py), `Remembered` (hot_path.py),
`ApiKey` (access/keys.py), `ImportReceipt` (ledger/imports.py), `Report` (consolidation.py),
`Context` (read/context.py).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from schemas.buffer import SupportRecord
from schemas.episodes import SourceKind
from schemas.facts import Fact, JsonValue, Trust
from schemas.fields import UtcInstant
from schemas.lifecycle import CandidateStatus, EpisodeStatus, ReceiptStatus


class Result(BaseModel):
    model_config = ConfigDict(frozen=True)


def absent_when_none(value: object) -> bool:
    """For `exclude_if`: the field is left out of the JSON answer rather than null."""
    return value is None


class Receipt(Result):
    """What happened to one episode of an intake: `queued` (stored, a worker will process it),
    `duplicate` (seen before; `episode_id` is the stored one), `done` or `failed` (processed in
    this process, in inline mode)."""

    line: int = Field(description="the episode's position in the input, from 1")
    episode_id: str
    status: ReceiptStatus
    error: str | None = Field(
        default=None, exclude_if=absent_when_none, description="why it failed (absent: none)"
    )
    note: str | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="done, but nothing in it was recognised: the catalogue it was read with "
        "(absent: something was, or it is not processed yet)",
    )


class IngestReport(BaseModel):
    """The receipts in input order; `invalid` (skipped lines: line, field, problem) is for the
    command line's messages and is not part of the JSON answer."""

    receipts: list[Receipt] = Field(default_factory=list)
    broker_down: bool = Field(
        default=False, description="stored, but the workers wait for the sweeper"
    )
    invalid: SkipJsonSchema[list[tuple[int, str, str]]] = Field(default_factory=list, exclude=True)


class Rejection(Result):
    """A statement that was not remembered: the extractor's guards or the ledger refused it."""

    update: dict[str, Any]
    reason: str
    message: str


class StoredCandidate(Result):
    """A candidate of the recurrence buffer with its support (distinct sessions)."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    candidate_id: str
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    value: JsonValue = Field(description="null once purged")
    status: CandidateStatus
    support: int
    first_seen_at: UtcInstant
    last_seen_at: UtcInstant
    valid_from: UtcInstant
    decided_at: UtcInstant | None
    fact_id: str | None
    reason: str | None


class SupportedCandidate(StoredCandidate):
    """A candidate as `list_candidates` has it: with every supporting episode (its evidence is
    erased by a purge), so a reviewer decides on the statements themselves."""

    supporting: list[SupportRecord] = Field(description="every supporting episode")


class LoggedDecision(Result):
    """One event of the decision log: what was decided, by whom, about which facts."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    event_id: int
    kind: str
    tenant_id: str | None
    subject: str | None
    actor: str
    occurred_at: UtcInstant
    idempotency_key: str | None
    fact_ids: list[str]
    command: dict[str, Any] | None = Field(description="the command replay re-applies")
    content_hash: str
    reason: str | None
    episode_id: str | None
    prompt_version: str | None


class StoredEpisode(Result):
    """An episode with its processing state."""

    model_config = ConfigDict(frozen=True, from_attributes=True, populate_by_name=True)

    episode_id: str
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    subject_names: list[str] = Field(description="how the text may name the subject")
    session_id: str | None
    source: SourceKind
    occurred_at: UtcInstant
    text: str | None = Field(description="null once purged")
    trust: Trust | None = Field(description="the caller's override of the source's trust")
    idempotency_key: str | None
    actor: str | None = Field(description="who sent it (an API key's id over HTTP)")
    lane: str = Field(description="hot | background")
    deferred: bool = Field(description="a hot-path statement handed to the background lane")
    status: EpisodeStatus
    attempts: int
    lost_attempts: int = Field(description="attempts lost to a crash or an expired lease")
    last_error: str | None
    extractor: str | None
    prompt_version: str | None
    usage: dict[str, Any] | None = Field(
        description="the model's tokens and cost; over HTTP, shown to admin keys only"
    )
    received_at: UtcInstant
    started_at: UtcInstant | None
    finished_at: UtcInstant | None
    metadata: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("meta", "metadata")
    )

    @field_validator("metadata", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return {} if value is None else value


class EpisodeDetail(StoredEpisode):
    """An episode with the candidates it supports, every decision taken for it and the
    current facts it is the source of."""

    candidates: list[StoredCandidate]
    decisions: list[LoggedDecision]
    facts: list[Fact]
    note: str | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="when the episode is done and nothing in it was recognised: the "
        "catalogue it was read with (absent: something was, or it is not done)",
    )


class Decided(Result):
    """A reviewer's (or the user's) decision on a buffered candidate; `fact` when it was
    confirmed."""

    candidate_id: str
    status: CandidateStatus = Field(description="confirmed or rejected")
    fact: Fact | None = None

    # A repeated idempotency key's answer (HTTP's Idempotent-Replayed; not in the JSON).
    replayed: SkipJsonSchema[bool] = Field(default=False, exclude=True)


class Retried(Result):
    """A failed episode sent back to work."""

    episode_id: str
    status: ReceiptStatus = Field(description="queued, or where inline processing left it")

    # A repeated idempotency key's answer (HTTP's Idempotent-Replayed; not in the JSON).
    replayed: SkipJsonSchema[bool] = Field(default=False, exclude=True)


class CatalogProblem(Result):
    """A stored fact that the current catalogue would orphan or mis-type."""

    fact_id: str
    tenant_id: str
    subject: str
    attribute: str
    schema_version: str
    problem: str


class SearchKind(StrEnum):
    """What a search reads: the ledger's facts, the episodes' texts, or both."""

    FACTS = "facts"
    EPISODES = "episodes"


class VectorArm(StrEnum):
    FUSED = "fused"
    FAILED = "failed"


class FoundFact(Fact):
    """A fact as `get` returns it, with its relevance to the query (BM25, or with the
    embedding arm on the reciprocal-rank fusion of BM25 and cosine; higher first)."""

    score: float


class FoundEpisode(Result):
    """An episode whose text matches the query: when it was said, a snippet, its relevance."""

    episode_id: str
    occurred_at: UtcInstant
    session_id: str | None
    snippet: str = Field(description="the episode's text, cut to about 300 characters")
    score: float


class SearchResult(Result):
    """What a search found, best first within each kind: the same answer on every door."""

    query: str
    facts: list[FoundFact] = Field(default_factory=list)
    episodes: list[FoundEpisode] = Field(default_factory=list)
    vectors: VectorArm | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="the embedding arm (absent: off): `fused` (cosine and BM25 fused by "
        "reciprocal rank), `failed` (the query could not be embedded: this answer is lexical)",
    )

    @property
    def found(self) -> bool:
        return bool(self.facts or self.episodes)
