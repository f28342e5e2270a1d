"""Claiming episodes: a worker (or the ingesting process) takes the waiting ones under a lease,
skipping the rows another holds; the claim's attempt count is its fencing token."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, or_, select, tuple_

from pipeline.db.models import EpisodeRow
from pipeline.db.unit import Unit
from pipeline.db.updates import update_loaded
from pipeline.episodes.claimed import Claimed
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.records import as_episode, stated_on
from pipeline.policy.apply import ACTOR, Provenance
from pipeline.policy.decide import Lane
from schemas.lifecycle import EpisodeError, EpisodeStatus


def claim(unit: Unit, keys: Sequence[EpisodeKey], lane: Lane | None = None) -> list[Claimed]:
    """Take the episodes that are waiting (or whose worker's lease ran out); other workers
    skip the rows this one holds. An attempt whose lease ran out was lost (the worker crashed,
    was killed or stalled): it is counted apart, and only SGAM_EPISODE_MAX_ATTEMPTS of those
    fail the episode — as retryable, so that consolidation re-drives it."""
    if not keys:
        return []
    query = (
        select(EpisodeRow)
        .where(
            tuple_(EpisodeRow.tenant_id, EpisodeRow.episode_id).in_(list(keys)),
            or_(
                EpisodeRow.status == EpisodeStatus.PENDING,
                and_(
                    EpisodeRow.status == EpisodeStatus.PROCESSING,
                    EpisodeRow.lease_until < unit.clock(),
                ),
            ),
        )
        .with_for_update(skip_locked=True)
    )
    # Decided in the order they came (the keys'), not the rows' order on disk: that follows
    # where the free space was, and put a correction before what it corrects.
    order = {tuple(key): number for number, key in enumerate(keys)}
    rows = sorted(
        unit.session.scalars(query), key=lambda row: order[(row.tenant_id, row.episode_id)]
    )
    return _take(unit, rows)


def claim_waiting(unit: Unit, limit: int) -> list[Claimed]:
    """Take up to `limit` episodes that wait for their first attempt, oldest first, whatever
    message they came with: their own message, when a worker takes it, finds them taken.
    Episodes waiting for a retry (a retryable failure, its backoff) or a lost lease (the
    sweeper's) are left to those."""
    query = (
        select(EpisodeRow)
        .where(EpisodeRow.status == EpisodeStatus.PENDING, EpisodeRow.attempts == 0)
        .order_by(EpisodeRow.enqueued_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return _take(unit, unit.session.scalars(query))


def _take(unit: Unit, rows: Iterable[EpisodeRow]) -> list[Claimed]:
    now = unit.clock()
    lease_until = now + timedelta(seconds=unit.settings.episode_lease_s)
    budget = unit.settings.episode_max_attempts
    taken: list[tuple[EpisodeRow, dict[str, Any]]] = []
    for row in rows:
        if row.text is None:  # purged while it waited: nothing left to read
            row.status, row.last_error, row.finished_at = EpisodeStatus.FAILED, "purged", now
            continue
        lost = row.lost_attempts
        if row.status == EpisodeStatus.PROCESSING:  # the last claim's lease ran out: lost
            lost += 1
        if lost >= budget:  # a crash (or a kill) each time: stop here for now
            row.lost_attempts = lost
            row.status, row.finished_at = EpisodeStatus.FAILED, now
            row.error_kind = EpisodeError.RETRYABLE  # consolidation re-drives it
            row.last_error = f"gave up after {lost} attempts that did not finish"
            row.lease_until = None
            continue
        claim_of = {
            "status": EpisodeStatus.PROCESSING,
            "attempts": row.attempts + 1,
            "lost_attempts": lost,
            "started_at": now,
            "lease_until": lease_until,
        }
        taken.append((row, claim_of))
    # One statement for the batch's claims (`update_loaded`), not one a row.
    update_loaded(unit.session, taken)
    return [claimed_from(row) for row, _ in taken]


def claimed_from(row: EpisodeRow) -> Claimed:
    origin = Provenance(as_episode(row), stated_on(row), actor=row.actor or ACTOR)
    return Claimed((row.tenant_id, row.episode_id), row.attempts, origin, row.usage)
