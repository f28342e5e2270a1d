"""Deciding and finishing: in one unit of work, apply the policy to every candidate of the
episodes a claim still owns, log what was decided and mark each episode done (or failed); and
what each model call spent, written as soon as its answer is in.

A forget wins every race: once its decisions hold their subjects' locks, `finish` asks whether
a subject was forgotten since its episode was received, and an episode that lost is finished as
failed (NotFound) with nothing written (`decide_and_finish` runs the unit again without it).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, tuple_, update
from sqlalchemy.orm import load_only

from pipeline.db.models import EPISODES, EpisodeRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.db.updates import update_loaded
from pipeline.episodes.claimed import Claimed, Extracted, Outcome
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.records import insert_new
from pipeline.episodes.traces import EpisodeSpans, record_decisions, upserting
from pipeline.errors import LlmFailure, NotFound, RetryableError, SgamError
from pipeline.extract.result import ExtractionResult
from pipeline.ledger import events
from pipeline.ledger.forgets import latest_forgets
from pipeline.policy.apply import Decision, Provenance, apply_candidate
from schemas.lifecycle import EpisodeError, EpisodeStatus, EventKind, ReceiptStatus
from schemas.pipeline_events import EpisodeProcessedPayload, RefusalRecord


def finish(
    unit: Unit,
    claimed: Sequence[Claimed],
    extracted: dict[EpisodeKey, Extracted],
    spans: EpisodeSpans | None = None,
    *,
    recorded: frozenset[EpisodeKey] = frozenset(),
) -> dict[EpisodeKey, Outcome]:
    """Apply and record every episode this claim still owns, in the caller's unit of work
    (each under its own span of `spans`, if given, else under the current span). `recorded`:
    the episodes whose spend this claim already wrote (`record_spend`), not to count twice."""
    if not claimed:
        return {}
    now = unit.clock()
    tokens = {item.key: item.attempt for item in claimed}
    query = (
        select(EpisodeRow)
        .where(
            tuple_(EpisodeRow.tenant_id, EpisodeRow.episode_id).in_(list(tokens)),
            EpisodeRow.status == EpisodeStatus.PROCESSING,
        )
        # What the fencing and the usage read: the text and the names are not loaded again.
        .options(
            load_only(
                EpisodeRow.status,
                EpisodeRow.attempts,
                EpisodeRow.lost_attempts,
                EpisodeRow.usage,
                EpisodeRow.received_at,
            )
        )
        .with_for_update()
    )
    rows = {
        (row.tenant_id, row.episode_id): row
        for row in unit.session.scalars(query)
        if row.attempts == tokens[(row.tenant_id, row.episode_id)]
    }
    outcomes: dict[EpisodeKey, Outcome] = {}
    # Each row's new columns, grouped by which they are: one UPDATE a group (`update_loaded`).
    finished: dict[tuple[str, ...], list[tuple[EpisodeRow, dict[str, Any]]]] = {}
    for item in claimed:
        row = rows.get(item.key)
        if row is None:
            outcomes[item.key] = Outcome(ReceiptStatus.SKIPPED)
            continue
        result = extracted[item.key]
        spent_before = row.usage
        if item.key in recorded:  # this try's spend is on the row already: keep only the earlier
            spent_before = {"earlier": (spent_before or {}).get("earlier", [])}
        if isinstance(result, ExtractionResult):
            with spans.current(item.key) if spans is not None else nullcontext():
                outcomes[item.key], columns = _apply(unit, item, result)
        else:
            outcomes[item.key], columns = _failed(unit, row, result)
        usage = columns.get("usage", row.usage)
        if usage is not None and usage is not spent_before:  # this try recorded its spend
            columns["usage"] = with_earlier(usage, spent_before)
        columns["lease_until"] = None
        if columns["status"] != EpisodeStatus.PENDING:
            columns["finished_at"] = now
        if columns["status"] == EpisodeStatus.DONE:
            unit.written.episode(*item.key)
        finished.setdefault(tuple(columns), []).append((row, columns))
    for group in finished.values():
        update_loaded(unit.session, group)
    decided = {item.key: item.episode.subject for item in claimed if outcomes[item.key].decisions}
    lost = forgotten_meanwhile(
        unit, {key: (subject, rows[key].received_at) for key, subject in decided.items()}
    )
    if lost:
        raise ForgottenMeanwhile(lost)
    return outcomes


class ForgottenMeanwhile(Exception):
    """Episodes whose subject a forget (or purge) hid after they were received: their unit of
    work is rolled back and run again with them finished as failed."""

    def __init__(self, keys: frozenset[EpisodeKey]) -> None:
        super().__init__(f"{len(keys)} episodes forgotten while they were read")
        self.keys = keys


def forgotten_meanwhile(
    unit: Unit, received: dict[EpisodeKey, tuple[str, datetime]]
) -> frozenset[EpisodeKey]:
    """Those of the episodes (each with its subject and when it was received) whose subject was
    forgotten since: asked once their decisions hold the subjects' locks, so that a forget
    either committed before (and is seen here) or waits for this unit to commit."""
    since: dict[tuple[str, str], datetime] = {}
    for (tenant_id, _), (subject, at) in received.items():
        key = (tenant_id, subject)
        since[key] = min(since.get(key, at), at)
    latest = latest_forgets(unit.session, since)
    return frozenset(
        key
        for key, (subject, at) in received.items()
        if (moment := latest.get((key[0], subject))) is not None and moment >= at
    )


def finish_new(
    unit: Unit, row: dict[str, Any], claimed: Claimed, result: ExtractionResult
) -> list[Decision] | None:
    """An episode received and decided in one unit of work (the hot path's common case):
    stored done with every decision it caused; None when its id (or idempotency key) was
    taken. NotFound when a forget of its subject won the race (the unit must roll back)."""
    finished = row | done_columns(result) | {"finished_at": unit.clock()}
    if not insert_new(unit, finished):
        return None
    unit.written.episode(*claimed.key)
    decisions = decide_episode(unit, claimed.origin, result)
    subject = claimed.episode.subject
    if decisions and forgotten_meanwhile(unit, {claimed.key: (subject, row["received_at"])}):
        raise NotFound(f"subject {subject} was forgotten while episode {claimed.key[1]} was read")
    return decisions


def decide_and_finish(
    store: Store,
    claimed: Sequence[Claimed],
    extracted: dict[EpisodeKey, Extracted],
    spans: EpisodeSpans | None = None,
    *,
    recorded: frozenset[EpisodeKey] = frozenset(),
) -> dict[EpisodeKey, Outcome]:
    """`finish` in a transaction of its own; the episodes a forget won are finished as failed
    (NotFound), nothing of theirs written (that unit rolled back: its rows reach no
    after-commit hook)."""
    results, lost = dict(extracted), set[EpisodeKey]()
    while True:
        try:
            outcomes = store.run(
                lambda unit: finish(unit, claimed, results, spans, recorded=recorded)
            )
        except ForgottenMeanwhile as forgotten:
            lost |= forgotten.keys
            for key in forgotten.keys:
                results[key] = NotFound(
                    f"the subject of episode {key[1]} was forgotten after the episode was received"
                )
            continue
        return outcomes | {key: replace(outcomes[key], forgotten=True) for key in lost}


def record_spend(
    unit: Unit, claimed: Sequence[Claimed], extracted: dict[EpisodeKey, Extracted]
) -> frozenset[EpisodeKey]:
    """Write what each model call spent (tokens, latency, attempts) on its episode's row as
    soon as its answer is in, committed before the answer is decided: a crash or a lost lease
    between the two still leaves the spend in the usage report. One statement for the group;
    a row another claim took since is left alone (fenced by the attempt). The keys written."""
    rows: list[dict[str, Any]] = []
    written: list[EpisodeKey] = []
    for item in claimed:
        result = extracted[item.key]
        if isinstance(result, ExtractionResult | LlmFailure) and result.usage.model is not None:
            spent = with_earlier(result.usage.model_dump(mode="json"), item.spent_before)
            rows.append(
                {"k_tenant": item.key[0], "k_episode": item.key[1], "k_attempt": item.attempt}
                | {"k_usage": spent}
            )
            written.append(item.key)
    if not rows:
        return frozenset()
    table = EPISODES.c
    unit.session.execute(
        update(EPISODES)
        .where(
            table.tenant_id == bindparam("k_tenant"),
            table.episode_id == bindparam("k_episode"),
            table.attempts == bindparam("k_attempt"),
            table.status == EpisodeStatus.PROCESSING,
        )
        .values(usage=bindparam("k_usage", type_=table.usage.type)),
        rows,
    )
    # A row this statement missed is no longer this claim's: `finish` skips it as well.
    return frozenset(written)


def with_earlier(spent: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    """This extraction's usage with every earlier model extraction of the episode kept beside
    it (`earlier`, oldest first): the tries that failed before a retry spent tokens too."""
    if not before:
        return spent
    earlier = list(before.get("earlier", []))
    if before.get("model"):
        earlier.append({k: v for k, v in before.items() if k != "earlier"})
    return spent | {"earlier": earlier} if earlier else spent


def _apply(unit: Unit, item: Claimed, result: ExtractionResult) -> tuple[Outcome, dict[str, Any]]:
    """The episode decided, and its row's new columns."""
    decisions = decide_episode(unit, item.origin, result)
    outcome = Outcome(ReceiptStatus.DONE, decisions=decisions, extraction=result)
    return outcome, done_columns(result)


def decide_episode(unit: Unit, origin: Provenance, result: ExtractionResult) -> list[Decision]:
    """Apply the policy to every candidate of one episode, and log what was decided."""
    usage = result.usage
    origin = replace(origin, extractor=usage.extractor)
    with (
        upserting(origin.episode, usage.prompt_version) as opened,
        unit.deciding_for(origin.episode_id, usage.prompt_version),
    ):
        decisions = [apply_candidate(unit, origin, candidate) for candidate in result.kept]
        if decisions or result.rejected:  # chatter with nothing to decide leaves no record
            _record(unit, origin, result, decisions)
        record_decisions(opened, len(result.kept), decisions)
    return decisions


def done_columns(result: ExtractionResult) -> dict[str, Any]:
    """What a finished episode's row says about how it was read."""
    usage = result.usage
    return {
        "status": EpisodeStatus.DONE,
        "last_error": None,
        "error_kind": None,
        "extractor": usage.extractor,
        "prompt_version": usage.prompt_version,
        "usage": usage.model_dump(mode="json"),
    }


def _record(
    unit: Unit, origin: Provenance, result: ExtractionResult, decisions: list[Decision]
) -> None:
    """The episode's audit record in the log: what was kept, decided and refused."""
    usage = result.usage
    payload = EpisodeProcessedPayload(
        episode_id=origin.episode_id,
        lane=origin.lane.value,
        extractor=usage.extractor,
        prompt_version=usage.prompt_version,
        decisions=[decision.record() for decision in decisions],
        refused=[
            RefusalRecord(attribute=refusal.update.attribute, reason=refusal.reason.value)
            for refusal in result.rejected
        ],
    )
    events.record(
        unit,
        EventKind.EPISODE_PROCESSED,
        payload,
        occurred_at=unit.clock(),
        actor=origin.actor,
        tenant_id=origin.episode.tenant_id,
        subject=origin.episode.subject,
        fact_ids=[d.fact.fact_id for d in decisions if d.fact is not None],
        reason=f"{len(result.kept)} kept, {len(result.rejected)} refused",
    )


def _failed(unit: Unit, row: EpisodeRow, error: BaseException) -> tuple[Outcome, dict[str, Any]]:
    """The episode failed (or waits for a retry), and its row's new columns."""
    retryable = isinstance(error, RetryableError)
    failed_attempts = row.attempts - row.lost_attempts  # this one included
    again = retryable and failed_attempts < unit.settings.episode_max_attempts
    columns: dict[str, Any] = {
        "status": EpisodeStatus.PENDING if again else EpisodeStatus.FAILED,
        "last_error": describe(error),
        "error_kind": EpisodeError.RETRYABLE if retryable else EpisodeError.PERMANENT,
    }
    if isinstance(error, LlmFailure):
        columns["usage"] = error.usage.model_dump(mode="json")
    outcome = Outcome(
        ReceiptStatus(columns["status"]), columns["last_error"], error_type=type(error).__name__
    )
    return outcome, columns


def describe(error: BaseException) -> str:
    """One line for the episode's record: the class, and the message of SGAM's own errors
    (they never hold stored values); an unexpected error is named, not quoted."""
    if isinstance(error, SgamError):
        return f"{type(error).__name__}: {error}".splitlines()[0][:500]
    return f"internal error ({type(error).__name__})"
