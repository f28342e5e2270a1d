"""What an episode search may answer: the episode rules, as conditions of the ranking
statement itself (so the text index only narrows, and a hidden episode never moves a score)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, bindparam, or_

from pipeline.db.models import EpisodeRow
from schemas.episodes import SOURCE_TRUST
from schemas.facts import Trust


def answerable(known: bool, quarantined: bool) -> list[Any]:
    """The scope and subject, no forget tombstone, a text (not purged), said by `at`,
    received by `known_at` when asked, and trusted unless a reviewer asks."""
    conditions: list[Any] = [
        EpisodeRow.tenant_id == bindparam("tenant_id"),
        EpisodeRow.agent_id == bindparam("agent_id"),
        EpisodeRow.purpose == bindparam("purpose"),
        EpisodeRow.subject == bindparam("subject"),
        EpisodeRow.forgotten_at.is_(None),
        EpisodeRow.text.is_not(None),
        EpisodeRow.occurred_at <= bindparam("at"),
    ]
    if known:
        conditions.append(EpisodeRow.received_at <= bindparam("known_at"))
    if not quarantined:
        untrusted = [
            source.value for source, trust in SOURCE_TRUST.items() if trust is Trust.UNTRUSTED
        ]
        conditions.append(
            or_(
                EpisodeRow.trust != Trust.UNTRUSTED.value,
                and_(EpisodeRow.trust.is_(None), EpisodeRow.source.not_in(untrusted)),
            )
        )
    return conditions
