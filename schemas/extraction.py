"""What extraction produces. `MemoryUpdate` is the model's answer, its fields in the order the
model fills them (Schema-Guided Reasoning: evidence first, then what is stored, then the
decision); `Candidate` is an update the guards kept, resolved and stamped with the episode's
provenance. The model proposes; the application decides what is written."""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from schemas.catalog import Catalog
from schemas.facts import JsonValue, Trust
from schemas.fields import UtcInstant

MAX_UPDATES = 5
"""Updates kept from one episode; the prompt asks for at most this many."""

Change = Literal["new", "update", "no_change"]


def _compact(schema: dict[str, Any]) -> None:
    """Every token of the schema is sent with every request: drop the field titles (the model's
    title names the tool) and write a nullable string as one type list instead of an anyOf."""
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        options = prop.get("anyOf")
        if options and all("type" in option and "enum" not in option for option in options):
            del prop["anyOf"]
            for option in options:
                prop.update({key: value for key, value in option.items() if key != "type"})
            prop["type"] = [option["type"] for option in options]


class MemoryUpdate(BaseModel):
    """One proposed change to the subject's memory. The descriptions are written for the model."""

    model_config = ConfigDict(frozen=True, json_schema_extra=_compact)

    evidence: str = Field(description="Exact quote from the episode.")
    subject: str = Field(description="Whom the fact is about: the subject id.")
    attribute: str = Field(description="Catalogue attribute name.")
    current_value: str | None = Field(description="The stored value the prompt shows, or null.")
    change: Change = Field(description="no_change when the stored value still holds.")
    value: str | None = Field(
        description="The new value in the attribute's type; dates as YYYY-MM-DD.",
    )
    valid_from: str | None = Field(
        description="When it starts to hold, YYYY-MM-DD; null: at the episode's time.",
    )


class Extraction(BaseModel):
    """The model's whole answer for one episode."""

    model_config = ConfigDict(json_schema_extra=_compact)

    updates: list[MemoryUpdate] = Field(
        default_factory=list,
        max_length=MAX_UPDATES,
        description="Facts the episode states; empty when none.",
    )


def response_model(catalog: Catalog) -> type[Extraction]:
    """`Extraction` whose JSON schema names the catalogued attributes and the most updates
    kept, so the model sees them (a constrained decoder cannot even produce another) and the
    schema stays small. Validation holds the answer to neither: an off-catalogue attribute or
    an update past the limit is refused on its own by the guards (`unknown_attribute`,
    `over_limit`), and the rest of the answer is kept — never a re-ask of the whole answer."""
    return _response_model(tuple(catalog.attributes))


@lru_cache(maxsize=64)
def _response_model(names: tuple[str, ...]) -> type[Extraction]:
    update = create_model(
        "MemoryUpdate",
        __base__=MemoryUpdate,
        attribute=(
            str,
            Field(description="Catalogue attribute name.", json_schema_extra={"enum": [*names]}),
        ),
    )
    return create_model(
        "Extraction",
        __base__=Extraction,
        updates=(
            list[update],
            Field(
                default_factory=list,
                description="Facts the episode states; empty when none.",
                json_schema_extra={"maxItems": MAX_UPDATES},
            ),
        ),
    )


class RejectReason(StrEnum):
    """Why a guard refused a proposed update; callers decide by code, never by message."""

    EVIDENCE_NOT_QUOTED = "evidence_not_quoted"
    UNKNOWN_ATTRIBUTE = "unknown_attribute"
    BAD_VALUE = "bad_value"
    BAD_VALID_FROM = "bad_valid_from"
    FUTURE_VALID_FROM = "future_valid_from"
    FOREIGN_SUBJECT = "foreign_subject"
    RESTATEMENT = "restatement"
    DUPLICATE = "duplicate"
    OVER_LIMIT = "over_limit"


class Rejection(BaseModel):
    model_config = ConfigDict(frozen=True)

    update: MemoryUpdate
    reason: RejectReason
    message: str


class Candidate(BaseModel):
    """An update the guards kept: subject resolved, value normalised by the catalogue,
    valid_from resolved to UTC, and the provenance copied from the episode."""

    model_config = ConfigDict(frozen=True)

    evidence: str
    subject: str
    attribute: str
    current_value: JsonValue | None
    change: Change
    value: JsonValue
    valid_from: UtcInstant
    tenant_id: str
    agent_id: str
    purpose: str
    source_episode_id: str
    trust: Trust


class Usage(BaseModel):
    """What one extraction cost and how it was made; recorded with every candidate it yields."""

    extractor: str = Field(description='"rules" or "llm:MODEL"')
    model: str | None = None
    prompt_version: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = Field(
        default=0,
        description="requests sent to the endpoint, transport retries and re-asks included",
    )
    invalid_answers: int = Field(
        default=0, description="answers that failed validation (each but the last re-asked)"
    )
    latency_ms: float = 0.0
