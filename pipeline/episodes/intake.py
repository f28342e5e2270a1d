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

from pipeline.catalog.names import nothing_matched
from pipeline.db.inserts import insert_new
from pipeline.db.keyed import KeyedQuery
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.drive import drive
from pipeline.episodes.records import new_row, text_hash
from pipeline.errors import IdempotencyConflict, InvalidLines
from pipeline.extract.llm import LlmClient
from pipeline.ledger.idempotency import KeyedBatch, KeyedStep
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.policy.decide import Lane
from pipeline.validation import invalid
from schemas.intake import EpisodeIn
from schemas.lifecycle import ReceiptStatus
from schemas.results import IngestReport, Receipt

Progress = Callable[[int], None]
# How soon a repeat of an intake still at work should come back (Retry-After's bound).
_RETRY_S = 5
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
        # A key or an episode id reused for another episode refuses the whole intake before
        # any chunk is stored (and again, under the keys' locks, as each chunk is stored).
        store.run(lambda unit: _check_repeats(unit, [episode for _, episode in valid]))
        started = time.perf_counter()
        settings = store.settings
        for start, end in chunk_bounds(len(valid), settings.lane_batch, settings.ingest_chunk):
            chunk = valid[start:end]
            stored = store.run(partial(_store_chunk, chunk=chunk))
            try:
                receipts = _hand_over(store, stored, report, llm)
            except BaseException:
                _release(store, chunk, stored)
                raise
            _keep_first_receipts(store, chunk, receipts)
            report.receipts += receipts
            if progress is not None:
                progress(len(chunk))
        if opened.is_recording():
            tenants = {episode.tenant_id for _, episode in valid}
            if len(tenants) == 1:
                opened.set_attribute(names.SGAM_TENANT, tenants.pop())
            opened.set_attribute(names.SGAM_INVALID_COUNT, len(bad))
        _log_intake(valid, report, started)
    return report


def chunk_bounds(count: int, first: int, largest: int) -> list[tuple[int, int]]:
    """(start, end) of each transaction of an intake of `count` episodes: the first holds
    `first` (a worker task's batch), each next twice the one before, up to `largest`
    (SGAM_INGEST_CHUNK). The workers can start on nothing before a chunk is committed: with
    1,000 in the first, a backlog of 5,882 waited 0.3 s for it, an eighth of its run."""
    bounds, size, start = [], max(1, min(first, largest)), 0
    while start < count:
        bounds.append((start, min(count, start + size)))
        start, size = start + size, min(largest, size * 2)
    return bounds


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
    lease_s = unit.settings.episode_lease_s
    keyed = KeyedBatch.locked(unit, [episode for _, episode in chunk])
    fresh: list[tuple[int, EpisodeIn, dict[str, Any]]] = []
    stored: Stored = []
    repeats: dict[int, Receipt] = {}
    held: dict[int, dict[str, Any]] = {}
    for line, episode in chunk:
        step = _step(episode, line)
        repeat = keyed.replayed(step)
        if repeat is not None:
            repeats[line] = repeat
            continue
        row = new_row(episode, lane=Lane.BACKGROUND, received_at=now, input_seq=line)
        fresh.append((line, episode, row))
        if step.key is not None:  # a second line with this key repeats this one
            # Reserved until its receipt is kept (_keep_first_receipts), as long as the
            # episode's lease: a repeated request meanwhile is told to come back for it.
            held[line] = keyed.reserve(step, lease_s, episode_id=row["episode_id"])
    rows = [row for _, _, row in fresh]
    inserted: set[tuple[str, str]] = set()
    if rows:
        returned = insert_new(unit.session, EpisodeRow, rows, ("tenant_id", "episode_id"))
        inserted = {(tenant, episode_id) for tenant, episode_id in returned}
    received: dict[int, tuple[Receipt, EpisodeKey | None]] = {}
    for line, episode, row in fresh:
        key = (row["tenant_id"], row["episode_id"])
        if key in inserted:
            inserted.discard(key)  # a second line with the same id is a duplicate of this one
            receipt = Receipt(line=line, episode_id=key[1], status=ReceiptStatus.QUEUED)
            received[line] = (receipt, key)
            if line in held:
                keyed.store(held[line])
        else:
            stored_id = _stored_id(unit, episode, row)
            duplicate = Receipt(line=line, episode_id=stored_id, status=ReceiptStatus.DUPLICATE)
            received[line] = (duplicate, None)
    for line, _ in chunk:
        stored.append(received[line] if line in received else (repeats[line], None))
    return stored


def _release(store: Store, chunk: list[tuple[int, EpisodeIn]], stored: Stored) -> None:
    """The chunk's processing failed: free its keys' reservations (they keep their episode
    ids, no receipt), so a repeat is answered from what was stored at once. Should this fail
    too, the reservations expire with the episodes' lease."""
    try:
        _keep_first_receipts(store, chunk, [receipt for receipt, _ in stored], answered=False)
    except Exception:  # the original failure is what the caller must see
        log.warning("idempotency reservations left to expire", extra={"episodes": len(chunk)})


def _keep_first_receipts(
    store: Store,
    chunk: list[tuple[int, EpisodeIn]],
    receipts: list[Receipt],
    *,
    answered: bool = True,
) -> None:
    """Each keyed episode's key keeps the receipt its first intake answered (in place of its
    reservation), so a repeated request can answer the same again (`first_receipts`); with
    `answered` False, only its episode id. One statement for the chunk, and no transaction at
    all when none of its episodes has a key."""
    keyed = {line: episode for line, episode in chunk if episode.idempotency_key is not None}
    kept = [
        (
            episode,
            {"episode_id": receipt.episode_id}
            | ({"receipt": receipt.model_dump(mode="json")} if answered else {}),
        )
        for receipt in receipts
        if (episode := keyed.get(receipt.line)) is not None
        and receipt.status is not ReceiptStatus.DUPLICATE
    ]
    if kept:
        store.run(lambda unit: KeyedBatch.keep_all(unit, kept))


def first_receipts(store: Store, tenant_id: str, keys: Sequence[str]) -> list[Receipt] | None:
    """The receipts the first intake under these keys answered, in their order; None when a
    key kept none (stored before receipts were kept, not an intake's key, or reserved by an
    intake that died). IdempotencyInProgress while that intake is still at work."""

    def read(unit: Unit) -> list[Receipt] | None:
        kept = KeyedBatch.kept(unit, tenant_id, keys, retry_s=_RETRY_S)
        if any(first is None or "receipt" not in first for first in kept):
            return None
        return [Receipt.model_validate(first["receipt"]) for first in kept if first is not None]

    return store.run(read)


def _step(episode: EpisodeIn, line: int) -> KeyedStep[Receipt]:
    """An episode's key: a repeat is a duplicate of the episode its first intake stored, also
    once that intake's reservation ran out (the episode stays stored)."""

    def replay(_unit: Unit, seen: Any, _forgotten: Any) -> Receipt:
        stored_id = seen.result["episode_id"]
        return Receipt(line=line, episode_id=stored_id, status=ReceiptStatus.DUPLICATE)

    # A retry may name the id the first request's episode was stored under: the same episode.
    return KeyedStep.of(
        episode,
        replay,
        lambda _receipt: None,
        kind="episode",
        ignored={"episode_id"},
        retry_s=_RETRY_S,
        replay_expired=True,
    )


_EPISODES_BY_ID = KeyedQuery.of(EpisodeRow, ("tenant_id", "episode_id"))
# Keys per lookup: SQLite binds two parameters a key and refuses past 32,766.
_LOOKUP_SLICE = 1000


def _check_repeats(unit: Unit, episodes: list[EpisodeIn]) -> None:
    """IdempotencyConflict for a key used before for another request (another episode, or
    another endpoint's), or an episode id taken by another episode."""
    used = KeyedBatch.check(unit.session, [_step(episode, 0) for episode in episodes])
    # A key not used before does not make a taken episode id this episode's.
    named = [
        e
        for e in episodes
        if e.episode_id is not None and (e.tenant_id, e.idempotency_key) not in used
    ]
    # Looked up in one statement per slice: one SELECT an episode was a quarter of the rules
    # lane's intake on PostgreSQL (bench/README.md, pipeline_flow).
    for start in range(0, len(named), _LOOKUP_SLICE):
        asked = {(e.tenant_id, e.episode_id): e for e in named[start : start + _LOOKUP_SLICE]}
        for row in _EPISODES_BY_ID.rows(unit.session, list(asked)):
            _check_same(row, asked[row.tenant_id, row.episode_id])


def _check_same(row: EpisodeRow, episode: EpisodeIn) -> None:
    """A repeated episode id is a duplicate only when it is the same episode again."""
    same = (row.agent_id, row.purpose, row.subject, row.text_hash) == (
        episode.agent_id,
        episode.purpose,
        episode.subject,
        text_hash(episode.text),
    )
    if not same:
        raise IdempotencyConflict(
            f"episode {row.episode_id} was stored by another request (a different scope, "
            "subject or text); send a new episode_id",
            key=row.episode_id,
        )


def _stored_id(unit: Unit, episode: EpisodeIn, row: dict[str, Any]) -> str:
    """The id under which a duplicate is stored: its own, checked to be the same episode, or
    that of an earlier episode with its idempotency key (sent before keys were kept apart)."""
    if episode.idempotency_key is None:
        stored = unit.session.get(EpisodeRow, (row["tenant_id"], row["episode_id"]))
        if stored is not None:
            _check_same(stored, episode)
        return str(row["episode_id"])
    found = unit.session.scalar(
        select(EpisodeRow.episode_id).where(
            EpisodeRow.tenant_id == episode.tenant_id,
            EpisodeRow.idempotency_key == episode.idempotency_key,
        )
    )
    if found is not None:
        return found
    stored = unit.session.get(EpisodeRow, (row["tenant_id"], row["episode_id"]))
    if stored is not None:  # the id was taken under another key (or none): the same episode?
        _check_same(stored, episode)
    return str(row["episode_id"])


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
            unmatched = outcome.status is ReceiptStatus.DONE and not outcome.decisions
            note = nothing_matched(store.settings) if unmatched else None
            receipt = receipt.model_copy(
                update={"status": outcome.status, "error": outcome.error, "note": note}
            )
        elif driven.broker_down and receipt.status is ReceiptStatus.QUEUED:
            # nothing was queued: the sweeper will
            receipt = receipt.model_copy(update={"status": ReceiptStatus.STORED})
        receipts.append(receipt)
    return receipts
