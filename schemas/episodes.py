"""Episodes: what extraction reads. Everything the application decides about provenance —
tenant, scope, source, trust — comes from here, never from a model's answer."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from schemas.facts import Trust
from schemas.fields import END, Described, Identifier, Text, TimestampSchema, to_utc

MAX_EPISODE_CHARS = 20_000


class SourceKind(StrEnum):
    MESSAGE = "message"
    TOOL_RESULT = "tool_result"
    BUSINESS_EVENT = "business_event"


# The trust an episode's statements get from its source, unless the caller set the episode's.
SOURCE_TRUST = {
    SourceKind.MESSAGE: Trust.INFERRED,
    SourceKind.TOOL_RESULT: Trust.UNTRUSTED,
    SourceKind.BUSINESS_EVENT: Trust.VERIFIED,
}


class Lane(StrEnum):
    BACKGROUND = "background"  # queued episodes, processed by workers
    HOT = "hot"  # an explicit "remember this", written in the caller's request


def _aware(value: object) -> object:
    # Validates like every other timestamp (naive refused, range checked) but keeps the
    # episode's own offset: "tomorrow" is resolved on the speaker's calendar, not on UTC's.
    to_utc(value)
    return value


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


# An episode's instant, validated like every timestamp but with the sender's offset kept.
EpisodeTime = Annotated[AwareDatetime, BeforeValidator(_aware), TimestampSchema()]


def _not_too_long(text: str) -> str:
    if len(text) > MAX_EPISODE_CHARS:
        raise ValueError(f"must be at most {MAX_EPISODE_CHARS:,} characters (got {len(text):,})")
    return text


# The limit as a validator: Field(max_length) after a validator counts "items".
EpisodeText = Annotated[
    Text,
    AfterValidator(_not_blank),
    AfterValidator(_not_too_long),
    Described(maxLength=MAX_EPISODE_CHARS, pattern=rf"^(?=[\s\S]*\S)[^\x00]*{END}"),
]


class Episode(BaseModel):
    """One message, tool result or business event about `subject`, as it was received."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    episode_id: Identifier
    tenant_id: Identifier
    agent_id: Identifier = "default"
    purpose: Identifier = "default"
    subject: Identifier = Field(description="the user or entity the episode is about")
    subject_names: list[Identifier] = Field(
        default_factory=list,
        description="how the text may name the subject besides its id, e.g. a display name",
    )
    session_id: Identifier | None = None
    source: SourceKind = SourceKind.MESSAGE
    occurred_at: EpisodeTime
    text: EpisodeText
    trust: Trust = Field(
        default=Trust.VERIFIED, description="how far the caller vouches for this source"
    )
