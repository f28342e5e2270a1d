"""The conversation before an episode: the earlier turns of its session, which a model sees as
context only (`extract/v2`) — "Yes, since March" means something once the question before it
is shown. The guards still demand that evidence quote the episode itself, and decisions stay
per episode.

At most SGAM_LLM_CONTEXT_TURNS turns, the latest ones, within SGAM_LLM_CONTEXT_TOKENS
(estimated): the turn just before the episode is always shown (its end, if it is longer than
the cap), older ones only while they fit whole. Turns are ordered by when they happened, then
by when they were received, then by their line in the intake that brought them (`input_seq`):
a bulk import that gives every turn of a session one timestamp still has an order. Turns with
none of those to tell them apart (stored before the line was kept) are not "earlier". Only the
episode's own scope (tenant, agent, purpose) is read, and purged texts are gone.

An episode that is not stored (`sgam extract` previews one) is read as received after every
stored turn of its instant. A worker reads the turns of a whole claimed batch at once
(`earlier_turns_of`): one query for the batch's positions and one per session, not a
transaction per episode.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Connection, and_, func, or_, select, tuple_, union_all

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.extract.protocol import Turn
from pipeline.read.context import estimate_tokens
from schemas.episodes import Episode

CUT = "…"
Position = tuple[datetime, datetime, int]  # occurred, received, line in its intake
_NO_LINE = -1  # a row stored before lines were kept: ties with every other such row
_LAST = datetime.max.replace(tzinfo=UTC)

_intake_line = func.coalesce(EpisodeRow.input_seq, _NO_LINE)
_TURN = (
    EpisodeRow.subject,
    EpisodeRow.subject_names,
    EpisodeRow.occurred_at,
    EpisodeRow.received_at,
    _intake_line,
    EpisodeRow.text,
)


def earlier_turns(store: Store, episode: Episode) -> list[Turn]:
    """The turns of the episode's session before it, oldest first."""
    return earlier_turns_of(store, [episode]).get((episode.tenant_id, episode.episode_id), [])


def earlier_turns_of(store: Store, episodes: Sequence[Episode]) -> dict[EpisodeKey, list[Turn]]:
    """The earlier turns of each episode (none for one without a session), oldest first."""
    settings = store.settings
    limit = settings.llm_context_turns
    in_sessions = [e for e in episodes if e.session_id is not None]
    if limit == 0 or not in_sessions:
        return {}
    keys = [(e.tenant_id, e.episode_id) for e in in_sessions]
    with store.reading() as connection:
        positions: dict[EpisodeKey, Position] = {
            (tenant, episode_id): (occurred, received, seq)
            for tenant, episode_id, occurred, received, seq in connection.execute(
                select(
                    EpisodeRow.tenant_id,
                    EpisodeRow.episode_id,
                    EpisodeRow.occurred_at,
                    EpisodeRow.received_at,
                    _intake_line,
                ).where(tuple_(EpisodeRow.tenant_id, EpisodeRow.episode_id).in_(keys))
            )
        }
        sessions: dict[tuple[str, str, str, str], list[Episode]] = defaultdict(list)
        for e in in_sessions:
            # One not stored (`sgam extract`'s preview) comes after all its instant holds.
            positions.setdefault((e.tenant_id, e.episode_id), (e.occurred_at, _LAST, _NO_LINE))
            assert e.session_id is not None
            sessions[(e.tenant_id, e.agent_id, e.purpose, e.session_id)].append(e)
        turns: dict[EpisodeKey, list[Turn]] = {}
        for scope, members in sessions.items():
            own = [positions[(e.tenant_id, e.episode_id)] for e in members]
            rows = _session_rows(connection, scope, min(own), max(own), limit)
            for e, position in zip(members, own, strict=True):
                before = [turn for at, turn in rows if at < position][-limit:]
                turns[(e.tenant_id, e.episode_id)] = within_cap(
                    before[::-1], settings.llm_context_tokens
                )
    return turns


def _session_rows(
    connection: Connection,
    scope: tuple[str, str, str, str],
    low: Position,
    high: Position,
    limit: int,
) -> list[tuple[Position, Turn]]:
    """The session's turns from the `limit` before `low` up to just before `high`, oldest
    first: every turn any episode between the two positions may show."""
    tenant, agent, purpose, session = scope
    where: list[ColumnElement[bool]] = [
        EpisodeRow.tenant_id == tenant,
        EpisodeRow.agent_id == agent,
        EpisodeRow.purpose == purpose,
        EpisodeRow.session_id == session,
        EpisodeRow.text.is_not(None),
    ]
    older = (
        select(*_TURN)
        .where(*where, _before(low))
        .order_by(EpisodeRow.occurred_at.desc(), EpisodeRow.received_at.desc(), _intake_line.desc())
        .limit(limit)
        .subquery()
    )
    between = select(*_TURN).where(*where, ~_before(low), _before(high))
    # One round trip: the `limit` turns before the first, and those between (disjoint).
    found = [
        ((occurred, received, seq), _turn(subject, names, occurred, text))
        for subject, names, occurred, received, seq, text in connection.execute(
            union_all(select(*older.c), between)
        )
        if text is not None  # purged: the query leaves those out already
    ]
    return sorted(found, key=lambda pair: pair[0])


def _before(position: Position) -> ColumnElement[bool]:
    """Rows strictly before `position` (written out: SQLite and PostgreSQL alike)."""
    occurred, received, seq = position
    return or_(
        EpisodeRow.occurred_at < occurred,
        and_(EpisodeRow.occurred_at == occurred, EpisodeRow.received_at < received),
        and_(
            EpisodeRow.occurred_at == occurred,
            EpisodeRow.received_at == received,
            _intake_line < seq,
        ),
    )


def _turn(subject: str, names: list[str] | None, occurred_at: datetime, text: str) -> Turn:
    return Turn(names[0] if names else subject, occurred_at, text)


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
