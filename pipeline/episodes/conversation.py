"""The conversation before an episode: the earlier turns of its session, which a model sees as
context only (`extract/v2`) — "Yes, since March" means something once the question before it
is shown. The guards still demand that evidence quote the episode itself, and decisions stay
per episode.

At most SGAM_LLM_CONTEXT_TURNS turns, the latest ones, within SGAM_LLM_CONTEXT_TOKENS
(estimated): the turn just before the episode is always shown (its end, if it is longer than
the cap), older ones only while they fit whole. A turn is "earlier" when it happened before
the episode, or at the same instant but was received before it; turns of the same instant
received together have no order and are left out. Only the episode's own scope (tenant,
agent, purpose) is read, and purged texts are gone.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.extract.protocol import Turn
from pipeline.read.context import estimate_tokens
from schemas.episodes import Episode

CUT = "…"


def earlier_turns(store: Store, episode: Episode) -> list[Turn]:
    """The turns of the episode's session before it, oldest first."""
    settings = store.settings
    if episode.session_id is None or settings.llm_context_turns == 0:
        return []
    with store.begin() as unit:
        this = unit.session.get(EpisodeRow, (episode.tenant_id, episode.episode_id))
        received = this.received_at if this is not None else None
        at = episode.occurred_at
        before = EpisodeRow.occurred_at < at
        if received is not None:
            before = or_(
                before, and_(EpisodeRow.occurred_at == at, EpisodeRow.received_at < received)
            )
        query = (
            select(
                EpisodeRow.subject,
                EpisodeRow.subject_names,
                EpisodeRow.occurred_at,
                EpisodeRow.text,
            )
            .where(
                EpisodeRow.tenant_id == episode.tenant_id,
                EpisodeRow.agent_id == episode.agent_id,
                EpisodeRow.purpose == episode.purpose,
                EpisodeRow.session_id == episode.session_id,
                EpisodeRow.episode_id != episode.episode_id,
                EpisodeRow.text.is_not(None),
                before,
            )
            .order_by(EpisodeRow.occurred_at.desc(), EpisodeRow.received_at.desc())
            .limit(settings.llm_context_turns)
        )
        rows = unit.session.execute(query).all()
    return within_cap(
        [
            Turn(names[0] if names else subject, occurred_at, text)
            for subject, names, occurred_at, text in rows
            if text is not None  # purged: the query leaves those out already
        ],
        settings.llm_context_tokens,
    )


def within_cap(latest_first: list[Turn], cap: int) -> list[Turn]:
    """The turns that fit `cap` estimated tokens, oldest first: the latest always (cut to its
    end if it alone is too long), older ones while they fit whole."""
    if cap == 0 or not latest_first:
        return []
    kept: list[Turn] = []
    left = cap
    for turn in latest_first:
        cost = estimate_tokens(turn.text)
        if cost > left:
            if not kept:
                kept.append(Turn(turn.speaker, turn.occurred_at, CUT + turn.text[-4 * cap + 1 :]))
            break
        kept.append(turn)
        left -= cost
    return kept[::-1]
