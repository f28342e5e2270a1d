"""Whether a subject was forgotten (or purged) since a moment: what every state change that acts
on earlier evidence asks under the lock it writes with, so that a forget wins every race.

Writers hold a subject's lock shared and forget holds it exclusively (`slots.subject_lock_name`):
once a writer holds its lock, a forget either committed before (and its event is seen here) or
waits for the writer's commit (and hides what it wrote).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from pipeline.db.models import EventRow
from schemas.lifecycle import EventKind

SubjectKey = tuple[str, str]  # (tenant, subject)
_FORGETTING = [EventKind.FORGET.value, EventKind.PURGE.value]


def subject_forgotten_since(
    session: Session, tenant_id: str, subject: str, since: datetime
) -> bool:
    """Whether `subject` was forgotten (or purged) at or after `since`."""
    return (tenant_id, subject) in forgotten_since(session, {(tenant_id, subject): since})


def forgotten_since(session: Session, since: Mapping[SubjectKey, datetime]) -> set[SubjectKey]:
    """Those of the subjects that were forgotten (or purged) at or after their moment in
    `since`."""
    latest = latest_forgets(session, since)
    return {key for key, at in latest.items() if at >= since[key]}


def latest_forgets(
    session: Session, since: Mapping[SubjectKey, datetime]
) -> dict[SubjectKey, datetime]:
    """When each of the subjects was last forgotten (or purged), for those forgotten at or
    after their moment in `since`: one statement for them all."""
    if not since:
        return {}
    rows = session.execute(
        select(EventRow.tenant_id, EventRow.subject, func.max(EventRow.occurred_at))
        .where(
            tuple_(EventRow.tenant_id, EventRow.subject).in_(sorted(since)),
            EventRow.kind.in_(_FORGETTING),
            EventRow.occurred_at >= min(since.values()),
        )
        .group_by(EventRow.tenant_id, EventRow.subject)
    )
    return {(str(tenant), str(subject)): at for tenant, subject, at in rows if at is not None}
