"""Erasing a subject's content for a purge, from every table that holds any: values and
evidence become null, episode texts and metadata are erased, the search read's vectors of
both are deleted, and every hash derived from content is replaced by a token that cannot be
traced back to it (a value from a small domain — a date, a boolean, an enum — could otherwise
be found by hashing each candidate). Free text written about the subject — a refusal's message
("not a number: …" quotes the refused value), a decision's reason (a reviewer's words, a
refusal's text), an episode's last error — is erased too: it may quote a value. Ids,
timestamps and the shape of the history stay for the audit.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm import Session

from pipeline.db.models import (
    CandidateRow,
    ClaimRow,
    EpisodeRow,
    EpisodeVectorRow,
    EventRow,
    FactRow,
    FactVectorRow,
    IdempotencyRow,
    SupportRow,
)
from pipeline.ledger.events import content_hash
from pipeline.ledger.stored_keys import PURGED
from schemas.lifecycle import EventKind

SHREDDED = "~"  # marks a replaced hash; a sha256 hex digest never contains it
ERASED = "erased by purge"  # stands for free text that may have quoted a value
# A forget's reason is SGAM's own count of hidden facts; replay rebuilds it as it was logged.
OWN_REASONS = frozenset({EventKind.FORGET.value, EventKind.PURGE.value})
Shred = Callable[[str], str]


def erase(session: Session, tenant_id: str, subject: str) -> None:
    """Erase the content of every row about the subject, in every table."""
    shred = _shredder()
    primary_keys: list[tuple[type[FactRow] | type[ClaimRow], Any]] = [
        (FactRow, FactRow.row_id),
        (ClaimRow, ClaimRow.claim_id),
    ]
    for table, primary in primary_keys:
        of_subject = (table.tenant_id == tenant_id, table.subject == subject)
        rows = session.execute(
            select(primary, table.value_hash, table.slot).where(*of_subject)
        ).all()
        session.execute(
            update(table)
            .where(*of_subject)
            .values(value=None, evidence=None)
            .execution_options(synchronize_session=False)
        )
        if rows:
            session.connection().execute(
                update(table)
                .where(primary == bindparam("pk"))
                .values(value_hash=bindparam("new_hash"), slot=bindparam("new_slot")),
                [
                    {"pk": pk, "new_hash": shred(value_hash), "new_slot": shred(slot)}
                    for pk, value_hash, slot in rows
                ],
            )
    events = session.scalars(
        select(EventRow).where(
            EventRow.tenant_id == tenant_id,
            EventRow.subject == subject,
        )
    )
    for event in events:
        if event.kind not in OWN_REASONS:
            event.reason = None
        if event.command is not None:
            event.command = _scrub(event.command, shred)
            event.content_hash = content_hash(
                {"decision": event.kind, "fact_ids": event.fact_ids, "command": event.command}
            )
    cached_results = session.scalars(
        select(IdempotencyRow).where(
            IdempotencyRow.tenant_id == tenant_id, IdempotencyRow.subject == subject
        )
    )
    for cached in cached_results:
        cached.result = _scrub(cached.result, shred)
        cached.command_hash = PURGED
    _erase_pipeline(session, tenant_id, subject, shred)
    for vectors in (FactVectorRow, EpisodeVectorRow):  # the embedding arm's: derived content
        session.execute(
            delete(vectors)
            .where(vectors.tenant_id == tenant_id, vectors.subject == subject)
            .execution_options(synchronize_session=False)
        )
    session.flush()


def _erase_pipeline(session: Session, tenant_id: str, subject: str, shred: Shred) -> None:
    """Episode texts and metadata, and the recurrence buffer's values and evidence."""
    episodes = session.scalars(
        select(EpisodeRow).where(EpisodeRow.tenant_id == tenant_id, EpisodeRow.subject == subject)
    )
    for episode in episodes:
        episode.text, episode.meta, episode.subject_names = None, None, []
        episode.last_error = None if episode.last_error is None else ERASED
        episode.text_hash = shred(episode.text_hash)
    candidates = session.scalars(
        select(CandidateRow).where(
            CandidateRow.tenant_id == tenant_id, CandidateRow.subject == subject
        )
    ).all()
    for candidate in candidates:
        candidate.value = None
        candidate.reason = None
        candidate.value_hash = shred(candidate.value_hash)
    if candidates:
        session.execute(
            update(SupportRow)
            .where(SupportRow.candidate_id.in_([c.candidate_id for c in candidates]))
            .values(evidence=None)
            .execution_options(synchronize_session=False)
        )


def _shredder() -> Shred:
    """A keyed replacement for hashes: equal hashes stay equal (so replaying the purged log
    rebuilds the same ledger), but the key is thrown away when the purge ends."""
    secret = secrets.token_bytes(32)

    def shred(digest: str) -> str:
        if not digest or digest.startswith(SHREDDED):
            return digest
        return SHREDDED + hmac.new(secret, digest.encode(), "sha256").hexdigest()[:63]

    return shred


def _scrub(payload: Any, shred: Shred) -> Any:
    """The payload with every value and evidence text replaced by null and every content hash
    shredded, at any depth."""
    if isinstance(payload, dict):
        return {name: _scrub_field(name, item, shred) for name, item in payload.items()}
    if isinstance(payload, list):
        return [_scrub(item, shred) for item in payload]
    return payload


def _scrub_field(name: str, item: Any, shred: Shred) -> Any:
    if name in ("value", "evidence"):
        return None
    if name in ("message", "reason", "error") and isinstance(item, str):
        return ERASED  # a refusal's message or a reviewer's reason may quote a value
    if name in ("value_hash", "slot") and isinstance(item, str):
        return shred(item)
    return _scrub(item, shred)
