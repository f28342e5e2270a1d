"""Intake: validate episodes, commit them, then wake a worker (or, with no broker configured,
process them in this process at once: the embedded default).

Validation comes first and is all or nothing: one invalid episode stores nothing (InvalidLines
names every bad one) unless `skip_invalid`. Episodes are stored in chunks, one transaction
each; an episode id or idempotency key seen before (per tenant) is a duplicate, reported and
not stored twice — also when two intakes race, since the database refuses the second row.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select

from pipeline.db.inserts import check_columns
from pipeline.db.models import EPISODES, EpisodeRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.drive import drive
from pipeline.episodes.records import new_row
from pipeline.errors import InvalidLines
from pipeline.extract.llm import LlmClient
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.policy.decide import Lane
from pipeline.validation import invalid
from schemas.intake import EpisodeIn
from schemas.lifecycle import ReceiptStatus
from schemas.results import IngestReport, Receipt

Progress = Callable[[int], None]
log = logging.getLogger("sgam.intake")


def parse_episodes(
    items: Iterable[EpisodeIn | Mapping[str, Any]], line_numbers: Sequence[int] | None = None
) -> tuple[list[tuple[int, EpisodeIn]], list[tuple[int, str, str]]]:
    """Every item checked: (line, episode) for the valid ones, (line, field, problem) for the
    others. Lines count from 1 unless `line_numbers` says where each item stood."""
    valid: list[tuple[int, EpisodeIn]] = []
    bad: list[tuple[int, str, str]] = []
    listed = list(items)
    numbers = line_numbers if line_numbers is not None else range(1, len(listed) + 1)
    for line, item in zip(numbers, listed, strict=True):
        if isinstance(item, EpisodeIn):
            valid.append((line, item))
            continue
        try:
            valid.append((line, EpisodeIn.model_validate(item)))
        except ValidationError as exc:
            problem = invalid(exc)
            bad.append((line, problem.field, problem.problem))
    return valid, bad


def ingest(
    store: Store,
    episodes: EpisodeIn | Mapping[str, Any] | Iterable[EpisodeIn | Mapping[str, Any]],
    *,
    skip_invalid: bool = False,
    progress: Progress | None = None,
    line_numbers: Sequence[int] | None = None,
    llm: LlmClient | None = None,
) -> IngestReport:
    """Store episodes (one or many) and hand them to the workers; receipts in input order."""
    items = [episodes] if isinstance(episodes, EpisodeIn | Mapping) else list(episodes)
    with tracing.span("ingest", attributes={names.SGAM_EPISODE_COUNT: len(items)}) as opened:
        valid, bad = parse_episodes(items, line_numbers)
        if bad and not skip_invalid:
            raise InvalidLines(bad)
        report = IngestReport(invalid=bad)
        started = time.perf_counter()
        chunk_size = store.settings.ingest_chunk
        for start in range(0, len(valid), chunk_size):
            chunk = valid[start : start + chunk_size]
            stored = store.run(partial(_store_chunk, chunk=chunk))
            report.receipts += _hand_over(store, stored, report, llm)
            if progress is not None:
                progress(len(chunk))
        if opened.is_recording():
            tenants = {episode.tenant_id for _, episode in valid}
            if len(tenants) == 1:
                opened.set_attribute(names.SGAM_TENANT, tenants.pop())
            opened.set_attribute(names.SGAM_INVALID_COUNT, len(bad))
        _log_intake(valid, report, started)
    return report


def _log_intake(valid: list[tuple[int, EpisodeIn]], report: IngestReport, started: float) -> None:
    """One line an intake (the tenant, and the episode when there is one); one an episode at
    debug level. Ids and counts only."""
    if not log.isEnabledFor(logging.INFO):
        return
    tenants = {episode.tenant_id for _, episode in valid}
    single = report.receipts[0].episode_id if len(report.receipts) == 1 else None
    log.info(
        "episodes accepted",
        extra={
            "tenant": next(iter(tenants)) if len(tenants) == 1 else None,
            "episode_id": single,
            "episodes": dict(Counter(str(receipt.status) for receipt in report.receipts)),
            "outcome": "broker down" if report.broker_down else "ok",
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    )
    if log.isEnabledFor(logging.DEBUG):
        for (_, episode), receipt in zip(valid, report.receipts, strict=False):
            log.debug(
                "episode accepted",
                extra={
                    "tenant": episode.tenant_id,
                    "episode_id": receipt.episode_id,
                    "outcome": str(receipt.status),
                },
            )


Stored = list[tuple[Receipt, EpisodeKey | None]]


def _store_chunk(unit: Unit, *, chunk: list[tuple[int, EpisodeIn]]) -> Stored:
    now = unit.clock()
    rows = [
        new_row(episode, lane=Lane.BACKGROUND, received_at=now, input_seq=line)
        for line, episode in chunk
    ]
    check_columns(EPISODES, rows)
    returned = unit.session.execute(
        unit.backend.insert_new(EPISODES).returning(EpisodeRow.tenant_id, EpisodeRow.episode_id),
        rows,
    )
    inserted = {(tenant, episode_id) for tenant, episode_id in returned}
    stored: Stored = []
    for (line, episode), row in zip(chunk, rows, strict=True):
        key = (row["tenant_id"], row["episode_id"])
        if key in inserted:
            inserted.discard(key)  # a second line with the same id is a duplicate of this one
            stored.append((Receipt(line=line, episode_id=key[1], status=ReceiptStatus.QUEUED), key))
        else:
            stored_id = _stored_id(unit, episode, key[1])
            duplicate = Receipt(line=line, episode_id=stored_id, status=ReceiptStatus.DUPLICATE)
            stored.append((duplicate, None))
    return stored


def _stored_id(unit: Unit, episode: EpisodeIn, episode_id: str) -> str:
    """The id under which a duplicate is stored: its own, or that of the episode that used
    its idempotency key first."""
    if episode.idempotency_key is None:
        return episode_id
    stored = unit.session.scalar(
        select(EpisodeRow.episode_id).where(
            EpisodeRow.tenant_id == episode.tenant_id,
            EpisodeRow.idempotency_key == episode.idempotency_key,
        )
    )
    return stored if stored is not None else episode_id


def _hand_over(
    store: Store, stored: Stored, report: IngestReport, llm: LlmClient | None
) -> list[Receipt]:
    """Process what was stored right here when no broker is configured (each episode ends
    `done` or `failed`); else wake the workers. A broker that is down loses nothing: the
    episodes stay `pending` and the sweeper queues them again."""
    driven = drive(store, [key for _, key in stored if key is not None], llm=llm)
    report.broker_down = report.broker_down or driven.broker_down
    receipts = []
    for receipt, key in stored:
        outcome = driven.outcomes.get(key) if key is not None else None
        if outcome is not None:
            receipt = receipt.model_copy(update={"status": outcome.status, "error": outcome.error})
        elif driven.broker_down and receipt.status is ReceiptStatus.QUEUED:
            # nothing was queued: the sweeper will
            receipt = receipt.model_copy(update={"status": ReceiptStatus.STORED})
        receipts.append(receipt)
    return receipts
