"""What one extraction returns: the candidates kept, the proposals refused and what it cost."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from schemas.episodes import Episode
from schemas.extraction import Candidate, Rejection, Usage


class ExtractionResult(BaseModel):
    """Nothing here has been written: the policy stage decides what becomes a fact."""

    model_config = ConfigDict(frozen=True)

    episode: Episode
    kept: list[Candidate]
    rejected: list[Rejection]
    usage: Usage
