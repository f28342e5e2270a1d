"""Why a candidate waits: the promotion rule the policy applies to it now, how far its support
has got (distinct sessions within the window), and each supporting episode with its text and
the evidence quoted from it — what a reviewer needs before confirming or rejecting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select

from pipeline.buffer.candidates import supports_of
from pipeline.buffer.review import CandidateQuery, list_candidates
from pipeline.buffer.rules import sessions
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.policy.apply import promotion_rule
from pipeline.validation import parse
from schemas.fields import format_utc
from schemas.results import SupportedCandidate


class Support(BaseModel):
    episode_id: str
    session_id: str | None
    occurred_at: str
    evidence: str | None = Field(description="null once purged")
    text: str | None = Field(description="the episode's text; null once purged")


class CandidateReview(BaseModel):
    candidate: SupportedCandidate = Field(description="the candidate as `list_candidates` has it")
    needs_sessions: int | None = Field(description="sessions that promote it; null: confirm only")
    window_days: float | None = Field(description="within how many days; null: not catalogued")
    sessions_in_window: int = Field(description="distinct supporting sessions in the window")
    supports: list[Support]


def review_candidates(
    store: Store, query: CandidateQuery | Mapping[str, Any], *, offset: int = 0
) -> list[CandidateReview]:
    """The candidates `list_candidates` finds from `offset` on (at most `limit` of them), each
    with its rule and its supporting episodes in the order they occurred."""
    query = parse(CandidateQuery, query)
    listed = list_candidates(store, query.model_copy(update={"offset": offset}))
    reviews: list[CandidateReview] = []
    with store.begin() as unit:
        for candidate in listed:
            supports = sorted(
                supports_of(unit, candidate.candidate_id), key=lambda s: s.occurred_at
            )
            texts = {
                episode_id: text
                for episode_id, text in unit.session.execute(
                    select(EpisodeRow.episode_id, EpisodeRow.text).where(
                        EpisodeRow.tenant_id == candidate.tenant_id,
                        EpisodeRow.episode_id.in_([s.episode_id for s in supports]),
                    )
                )
            }
            rule = promotion_rule(unit, candidate.attribute)
            window = rule.window if rule is not None else None
            reviews.append(
                CandidateReview(
                    candidate=candidate,
                    needs_sessions=rule.times if rule is not None else None,
                    window_days=window.total_seconds() / 86400 if window is not None else None,
                    sessions_in_window=sessions(supports, window),
                    supports=[
                        Support(
                            episode_id=s.episode_id,
                            session_id=s.session_id,
                            occurred_at=format_utc(s.occurred_at) or "",
                            evidence=s.evidence,
                            text=texts.get(s.episode_id),
                        )
                        for s in supports
                    ],
                )
            )
    return reviews
