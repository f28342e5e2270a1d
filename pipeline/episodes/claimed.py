"""What the episode stage's modules share: a claimed episode, what its extraction gave, and how
it ended. Below `process`, `finishing`, `inflight` and `traces`, so none of them imports another
for its types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.episodes.dispatch import EpisodeKey
from pipeline.errors import SgamError
from pipeline.extract.result import ExtractionResult
from pipeline.policy.apply import Decision, Provenance
from schemas.episodes import Episode
from schemas.lifecycle import ReceiptStatus


@dataclass(frozen=True)
class Outcome:
    """`done`, `failed` (for good: attempts used up or a permanent error), `pending` (a
    retryable failure: it will be tried again) or `skipped` (not this claim's to finish)."""

    status: ReceiptStatus
    error: str | None = None
    decisions: list[Decision] = field(default_factory=list)
    extraction: ExtractionResult | None = None
    error_type: str | None = None  # the failure's class: all a trace may say about it
    forgotten: bool = False  # failed because a forget of its subject won the race


@dataclass(frozen=True)
class Claimed:
    key: EpisodeKey
    attempt: int  # the claim's fencing token: the row's attempts when it was claimed
    origin: Provenance  # the episode as extraction reads it, and how it came in
    # What the episode's earlier model extractions spent, as its row had it when claimed (no
    # one else writes it while the claim holds).
    spent_before: dict[str, Any] | None = None

    @property
    def episode(self) -> Episode:
        return self.origin.episode


Extracted = ExtractionResult | SgamError | Exception
