"""What a chat backend hands the pipeline: one episode per JSON object (`sgam ingest` reads one
per line), with the caller's ids and options. The pipeline stores it as received."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from schemas.episodes import EpisodeText, EpisodeTime, SourceKind
from schemas.facts import Trust
from schemas.fields import Identifier, canonical_json, check_json

MAX_METADATA_BYTES = 16 * 1024


def _metadata(value: dict[str, Any]) -> dict[str, Any]:
    check_json(value)
    if len(canonical_json(value).encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValueError(f"must be at most {MAX_METADATA_BYTES} bytes as JSON")
    return value


class EpisodeIn(BaseModel):
    """One episode as the caller sends it. `episode_id` is generated when absent; a repeated
    `episode_id` or `idempotency_key` (per tenant) is a duplicate, reported and not stored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    subject: Identifier = Field(description="the user or entity the episode is about")
    session_id: Identifier
    source: SourceKind = SourceKind.MESSAGE
    occurred_at: EpisodeTime
    text: EpisodeText
    episode_id: Identifier | None = None
    agent_id: Identifier = "default"
    purpose: Identifier = "default"
    subject_names: list[Identifier] = Field(default_factory=list, max_length=20)
    trust: Trust | None = Field(default=None, description="overrides the source's default trust")
    idempotency_key: Identifier | None = None
    actor: Identifier | None = Field(
        default=None, description="who sends it (audit): every decision taken for it names this"
    )
    metadata: Annotated[dict[str, Any], AfterValidator(_metadata)] = Field(default_factory=dict)
