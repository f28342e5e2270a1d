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

    tenant_id: Identifier = Field(description="the tenant that owns the memory")
    subject: Identifier = Field(description="the user or entity the episode is about")
    session_id: Identifier = Field(description="the conversation the episode belongs to")
    source: SourceKind = Field(
        default=SourceKind.MESSAGE,
        description="message, tool_result or business_event; sets the default trust",
    )
    occurred_at: EpisodeTime = Field(description="when it was said or happened (RFC 3339)")
    text: EpisodeText = Field(description="what was said")
    episode_id: Identifier | None = Field(
        default=None, description="the caller's id; a repeat is a duplicate (default: new)"
    )
    agent_id: Identifier = Field(default="default", description="agent scope")
    purpose: Identifier = Field(default="default", description="purpose scope")
    subject_names: list[Identifier] = Field(
        default_factory=list,
        max_length=20,
        description="other names of the subject the text may use (at most 20)",
    )
    trust: Trust | None = Field(default=None, description="overrides the source's default trust")
    idempotency_key: Identifier | None = Field(
        default=None, description="repeat-safe key per tenant: a repeat is a duplicate"
    )
    actor: Identifier | None = Field(
        default=None, description="who sends it (audit): every decision taken for it names this"
    )
    metadata: Annotated[dict[str, Any], AfterValidator(_metadata)] = Field(
        default_factory=dict,
        description=f"the caller's JSON object (at most {MAX_METADATA_BYTES} bytes)",
    )
