"""Payloads of the pipeline's own entries in the decision log."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas.events import Payload
from schemas.lifecycle import DecisionAction


class DecisionRecord(BaseModel):
    """What was done with one candidate; ids and reasons, never the value or the evidence."""

    model_config = ConfigDict(frozen=True)

    attribute: str
    action: DecisionAction
    reason: str
    fact_id: str | None = None
    candidate_id: str | None = None


class RefusalRecord(BaseModel):
    """A proposal a guard refused: the attribute the model named and the reason code."""

    model_config = ConfigDict(frozen=True)

    attribute: str
    reason: str


class EpisodeProcessedPayload(Payload):
    """The audit record of one episode's extraction and policy decisions."""

    op: Literal["episode"] = "episode"
    episode_id: str
    lane: str
    extractor: str
    prompt_version: str | None
    decisions: list[DecisionRecord]
    refused: list[RefusalRecord]


class ConsolidationPayload(Payload):
    """The report of one consolidation run: counts per action."""

    op: Literal["consolidate"] = "consolidate"
    now: str
    tenant_id: str | None
    counts: dict[str, int]
