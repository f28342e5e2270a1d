"""Episodes between their three forms: what the caller sent (`EpisodeIn`, or the hot path's
`RememberIn` read at once as an `Episode`), the stored row, and what extraction reads
(`Episode`, which carries the trust its candidates are decided with)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from pipeline.db import inserts
from pipeline.db.models import EpisodeRow
from pipeline.db.unit import Unit
from pipeline.policy.decide import Lane, episode_trust
from schemas.episodes import Episode, SourceKind
from schemas.facts import Trust
from schemas.intake import EpisodeIn
from schemas.lifecycle import EpisodeStatus


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def insert_new(unit: Unit, row: dict[str, Any]) -> bool:
    """Store the episode unless it was received before (its id or idempotency key)."""
    return bool(inserts.insert_new(unit.session, EpisodeRow, [row], ("episode_id",)))


def new_row(
    episode: EpisodeIn, *, lane: Lane, received_at: datetime, input_seq: int | None = None
) -> dict[str, Any]:
    """The row of a newly received episode, `pending`; `input_seq`: its line in the intake."""
    row = _row(
        episode,
        episode_id=episode.episode_id or str(uuid.uuid4()),
        trust=episode.trust,
        idempotency_key=episode.idempotency_key,
        actor=episode.actor,
        meta=episode.metadata or None,
        lane=lane,
        received_at=received_at,
    )
    return row | {"input_seq": input_seq}


def read_row(
    episode: Episode,
    *,
    trust: Trust | None,
    idempotency_key: str | None,
    actor: str | None,
    lane: Lane,
    received_at: datetime,
) -> dict[str, Any]:
    """The row of an episode read as it arrived (the hot path), claimed by its reader:
    `processing`, attempt 1. `trust`: the caller's override, stored as sent."""
    row = _row(
        episode,
        episode_id=episode.episode_id,
        trust=trust,
        idempotency_key=idempotency_key,
        actor=actor,
        meta=None,
        lane=lane,
        received_at=received_at,
    )
    return row | {"status": EpisodeStatus.PROCESSING, "attempts": 1, "started_at": received_at}


def _row(
    episode: EpisodeIn | Episode,
    *,
    episode_id: str,
    trust: Trust | None,
    idempotency_key: str | None,
    actor: str | None,
    meta: dict[str, Any] | None,
    lane: Lane,
    received_at: datetime,
) -> dict[str, Any]:
    offset = episode.occurred_at.utcoffset() or timedelta(0)
    return {
        "tenant_id": episode.tenant_id,
        "episode_id": episode_id,
        "agent_id": episode.agent_id,
        "purpose": episode.purpose,
        "subject": episode.subject,
        "subject_names": list(episode.subject_names),
        "session_id": episode.session_id,
        "source": episode.source.value,
        "occurred_at": episode.occurred_at,
        "utc_offset_s": int(offset.total_seconds()),
        "text": episode.text,
        "text_hash": text_hash(episode.text),
        "trust": trust.value if trust is not None else None,
        "idempotency_key": idempotency_key,
        "actor": actor,
        "metadata": meta,  # column names: an insert ignores "meta"
        "lane": lane.value,
        "deferred": False,
        "status": EpisodeStatus.PENDING,
        "attempts": 0,
        "lost_attempts": 0,
        "last_error": None,
        "error_kind": None,
        "redrives": 0,
        "redriven_at": None,
        "extractor": None,
        "prompt_version": None,
        "usage": None,
        "received_at": received_at,
        "input_seq": None,
        "enqueued_at": received_at,
        "started_at": None,
        "finished_at": None,
        "lease_until": None,
    }


def stated_on(row: EpisodeRow) -> Lane:
    """The lane the episode was stated on: a hot-path statement the background lane took
    over is still the user's own statement."""
    return Lane.HOT if row.deferred else Lane(row.lane)


def trust_of(row: EpisodeRow) -> Trust:
    """The trust the episode's candidates carry: the caller's override, else the source's
    (the user's own on the hot path)."""
    override = Trust(row.trust) if row.trust is not None else None
    return episode_trust(row.source, override, stated_on(row))


def as_episode(row: EpisodeRow) -> Episode:
    """What extraction reads, in the sender's own offset (relative dates use it)."""
    assert row.text is not None, "a purged episode is never processed again"
    local = row.occurred_at.astimezone(timezone(timedelta(seconds=row.utc_offset_s)))
    return Episode(
        episode_id=row.episode_id,
        tenant_id=row.tenant_id,
        agent_id=row.agent_id,
        purpose=row.purpose,
        subject=row.subject,
        subject_names=list(row.subject_names),
        session_id=row.session_id,
        source=SourceKind(row.source),
        occurred_at=local,
        text=row.text,
        trust=trust_of(row),
    )
