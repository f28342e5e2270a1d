"""The processing stage a worker runs for a batch of episodes: claim them, extract candidates,
then — in one unit of work — apply the policy to every candidate, log what was decided and
mark each episode done. A redelivered or duplicated message changes nothing: only `pending`
episodes (or `processing` ones whose lease ran out) are claimed, and an episode is finished
only by the claim that still owns it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, tuple_, update
from sqlalchemy.orm import load_only

from pipeline.db.models import EPISODES, EpisodeRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.conversation import earlier_turns, earlier_turns_of
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.inflight import run_in_flight
from pipeline.episodes.lane_metrics import observe_episode, observe_extraction, observe_model
from pipeline.episodes.records import as_episode, stated_on
from pipeline.episodes.traces import (
    EpisodeSpans,
    extract_traced,
    record_decisions,
    searching,
    upserting,
)
from pipeline.errors import LlmFailure, RetryableError, SgamError
from pipeline.extract.backends import RULES
from pipeline.extract.choose import choose
from pipeline.extract.guards import CurrentValues, current_values
from pipeline.extract.llm import LlmClient
from pipeline.extract.protocol import ExtractionContext, Extractor, LazyTurns, LazyValues
from pipeline.extract.result import ExtractionResult
from pipeline.ledger import events
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.policy.apply import ACTOR, Decision, Provenance, apply_candidate
from pipeline.policy.decide import Lane
from pipeline.read.facts import get
from schemas.episodes import Episode
from schemas.extraction import Usage
from schemas.lifecycle import EpisodeError, EpisodeStatus, EventKind, ReceiptStatus
from schemas.pipeline_events import EpisodeProcessedPayload, RefusalRecord

log = logging.getLogger("sgam.episodes")


@dataclass(frozen=True)
class Outcome:
    """`done`, `failed` (for good: attempts used up or a permanent error), `pending` (a
    retryable failure: it will be tried again) or `skipped` (not this claim's to finish)."""

    status: ReceiptStatus
    error: str | None = None
    decisions: list[Decision] = field(default_factory=list)
    extraction: ExtractionResult | None = None
    error_type: str | None = None  # the failure's class: all a trace may say about it


@dataclass(frozen=True)
class Claimed:
    key: EpisodeKey
    attempt: int  # the claim's fencing token: the row's attempts when it was claimed
    origin: Provenance  # the episode as extraction reads it, and how it came in
    # What the episode's earlier model extractions spent, as its row had it when claimed (no
    # one else writes it while the claim holds).
    spent_before: dict[str, Any] | None = None

    @property
    def episode(self) -> Episode:
        return self.origin.episode


Extracted = ExtractionResult | SgamError | Exception


def process_episodes(
    store: Store,
    keys: Sequence[EpisodeKey],
    *,
    llm: LlmClient | None = None,
    more: bool = False,
) -> dict[EpisodeKey, Outcome]:
    """Claim, extract and finish `keys`, a batch (SGAM_WORKER_BATCH) at a time. The rules
    take microseconds an episode: one unit of work per batch. A model takes as long as the
    endpoint does: every episode's call in flight at once, each committed when its answer is
    in, and the next batch claimed while the last one's calls are out (`inflight`). `more`
    (a worker's task, whose message is only a wake-up): once `keys` are claimed, the model lane
    goes on claiming episodes that wait for their first attempt, for a quarter of
    SGAM_TASK_TIME_LIMIT_S at most (the task must end well within its limit)."""
    extractor = choose(store.settings, llm=llm)
    if extractor is not RULES:
        return _with_model(store, keys, extractor, more=more)
    batch = store.settings.worker_batch
    outcomes: dict[EpisodeKey, Outcome] = {}
    for start in range(0, len(keys), batch):
        claimed = _claim(store, partial(claim, keys=keys[start : start + batch]), batch)
        if claimed:
            outcomes |= _with_rules(store, claimed, extractor)
    return outcomes


def _claim(store: Store, claiming: Callable[[Unit], list[Claimed]], asked: int) -> list[Claimed]:
    with tracing.span("claim", attributes={names.SGAM_EPISODE_COUNT: asked}) as opened:
        claimed = store.run(claiming)
        opened.set_attribute(names.SGAM_CLAIMED_COUNT, len(claimed))
    return claimed


def _with_rules(
    store: Store, claimed: list[Claimed], extractor: Extractor
) -> dict[EpisodeKey, Outcome]:
    spans = EpisodeSpans(claimed)
    try:
        extracted: dict[EpisodeKey, Extracted] = {}
        for item in claimed:
            with spans.current(item.key):
                extracted[item.key] = run_extraction(store, item.episode, extractor)
        outcomes = store.run(lambda unit: finish(unit, claimed, extracted, spans))
        observed(claimed, extracted, outcomes, spans, by_tenant=store.settings.metrics_tenant_label)
        spans.end(outcomes)
        return outcomes
    except BaseException as error:
        spans.close(error)
        raise
    finally:
        spans.close()


def _with_model(
    store: Store, keys: Sequence[EpisodeKey], extractor: Extractor, *, more: bool
) -> dict[EpisodeKey, Outcome]:
    given = list(keys)
    spans = EpisodeSpans(())
    feed_until = time.monotonic() + store.settings.task_time_limit_s / 4

    def feed(room: int) -> list[Claimed]:
        nonlocal given
        while given:
            chunk, given = given[:room], given[room:]
            claimed = _claim(store, partial(claim, keys=chunk), len(chunk))
            if claimed:
                spans.add(claimed)
                return claimed
        if more and time.monotonic() < feed_until:
            claimed = _claim(store, partial(claim_waiting, limit=room), room)
            spans.add(claimed)
            return claimed
        return []

    def prepare(batch: Sequence[Claimed]) -> dict[EpisodeKey, Callable[[], Extracted]]:
        contexts = batch_contexts(store, [item.episode for item in batch], spans)

        def work(item: Claimed) -> Callable[[], Extracted]:
            def run() -> Extracted:
                with spans.current(item.key):
                    return extract_traced(extractor, item.episode, contexts[item.key])

            return run

        return {item.key: work(item) for item in batch}

    def commit(
        done: list[Claimed], results: dict[EpisodeKey, Extracted]
    ) -> dict[EpisodeKey, Outcome]:
        recorded = store.run(lambda unit: record_spend(unit, done, results))
        outcomes = store.run(lambda unit: finish(unit, done, results, spans, recorded=recorded))
        observed(done, results, outcomes, spans, by_tenant=store.settings.metrics_tenant_label)
        spans.end(outcomes)
        return outcomes

    try:
        return run_in_flight(store, feed, prepare, commit)
    except BaseException as error:
        spans.close(error)
        raise
    finally:
        spans.close()


def observed(
    claimed: Sequence[Claimed],
    results: dict[EpisodeKey, Extracted],
    outcomes: dict[EpisodeKey, Outcome],
    spans: EpisodeSpans,
    *,
    by_tenant: bool = False,
) -> None:
    """Count what was spent and how each episode ended (`lane_metrics`), and log it in the
    episode's span: one line an episode, ids, counts and the outcome only."""
    for item in claimed:
        tenant_id = item.key[0]
        result, outcome = results[item.key], outcomes.get(item.key)
        usage = result.usage if isinstance(result, ExtractionResult | LlmFailure) else None
        if usage is not None:
            observe_extraction(usage)
            if usage.model is not None:
                failure = result if isinstance(result, LlmFailure) else None
                observe_model(tenant_id, usage, failure, by_tenant=by_tenant)
        if outcome is None:
            continue
        lane = item.origin.lane.value
        actions = [str(decision.action) for decision in outcome.decisions]
        observe_episode(lane, str(outcome.status), actions)
        with spans.current(item.key):
            _log_processed(item, outcome, usage, actions)


def _log_processed(
    item: Claimed, outcome: Outcome, usage: Usage | None, actions: list[str]
) -> None:
    tenant_id, episode_id = item.key
    log.info(
        "episode processed",
        extra={
            "tenant": tenant_id,
            "episode_id": episode_id,
            "lane": item.origin.lane.value,
            "outcome": str(outcome.status),
            "extractor": usage.extractor if usage else None,
            "duration_ms": usage.latency_ms if usage else None,
            "decisions": dict(Counter(actions)),
            "error": outcome.error,
        },
    )


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
    return _take(unit, unit.session.scalars(query))


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
    claimed = []
    budget = unit.settings.episode_max_attempts
    for row in rows:
        if row.text is None:  # purged while it waited: nothing left to read
            row.status, row.last_error, row.finished_at = EpisodeStatus.FAILED, "purged", now
            continue
        if row.status == EpisodeStatus.PROCESSING:  # the last claim's lease ran out: lost
            row.lost_attempts += 1
        if row.lost_attempts >= budget:  # a crash (or a kill) each time: stop here for now
            row.status, row.finished_at = EpisodeStatus.FAILED, now
            row.error_kind = EpisodeError.RETRYABLE  # consolidation re-drives it
            row.last_error = f"gave up after {row.lost_attempts} attempts that did not finish"
            row.lease_until = None
            continue
        row.status = EpisodeStatus.PROCESSING
        row.attempts += 1
        row.started_at = now
        row.lease_until = now + timedelta(seconds=unit.settings.episode_lease_s)
        claimed.append(claimed_from(row))
    return claimed


def claimed_from(row: EpisodeRow) -> Claimed:
    origin = Provenance(as_episode(row), stated_on(row), actor=row.actor or ACTOR)
    return Claimed((row.tenant_id, row.episode_id), row.attempts, origin, row.usage)


def run_extraction(store: Store, episode: Episode, extractor: Extractor) -> Extracted:
    """Candidates for one episode; a failure is returned, to be recorded on the episode."""
    try:
        return extract_traced(extractor, episode, context_for(store, episode))
    except Exception as error:  # recorded on the episode, which stays retryable
        return error


def context_for(store: Store, episode: Episode) -> ExtractionContext:
    """What the extractor may consult; the subject's current values and the conversation's
    earlier turns are read only when it asks (both always for a model's prompt; the rules read
    the values once they found something, and never the conversation)."""
    return ExtractionContext(
        store.catalog,
        LazyValues(lambda: _current(store, episode)),
        day_first=store.settings.dates_day_first,
        earlier=LazyTurns(lambda: earlier_turns(store, episode)),
    )


def batch_contexts(
    store: Store, episodes: Sequence[Episode], spans: EpisodeSpans | None = None
) -> dict[EpisodeKey, ExtractionContext]:
    """The model's context for every episode of a claimed batch, read here at once: the
    conversation of each session in one go, each subject's values once. Read per episode
    on the pool's threads, they cost a transaction each and more CPU than the model call;
    the calls of a batch are in flight together, so none of them could see what another
    one's answer will write anyway. A subject's read is traced in the span of the first of
    its episodes (of `spans`, if given)."""
    turns = earlier_turns_of(store, episodes)
    values: dict[tuple[str, str, str, str], CurrentValues] = {}
    contexts: dict[EpisodeKey, ExtractionContext] = {}
    for episode in episodes:
        scope = (episode.tenant_id, episode.agent_id, episode.purpose, episode.subject)
        key = (episode.tenant_id, episode.episode_id)
        if scope not in values:
            with spans.current(key) if spans is not None else nullcontext():
                values[scope] = _current(store, episode)
        contexts[key] = ExtractionContext(
            store.catalog,
            values[scope],
            day_first=store.settings.dates_day_first,
            earlier=turns.get(key, []),
        )
    return contexts


def _current(store: Store, episode: Episode) -> dict[str, list[Any]]:
    scope = {
        "tenant_id": episode.tenant_id,
        "agent_id": episode.agent_id,
        "purpose": episode.purpose,
        "subject": episode.subject,
    }
    with searching(episode) as opened:
        facts = get(store, scope)
        opened.set_attribute(names.GEN_AI_MEMORY_RECORD_COUNT, len(facts))
    return current_values(facts)


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
                EpisodeRow.status, EpisodeRow.attempts, EpisodeRow.lost_attempts, EpisodeRow.usage
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
                outcomes[item.key] = _apply(unit, row, item, result)
        else:
            outcomes[item.key] = _failed(unit, row, result)
        if row.usage is not None and row.usage is not spent_before:  # this try recorded its spend
            row.usage = with_earlier(row.usage, spent_before)
        row.lease_until = None
        if row.status != EpisodeStatus.PENDING:
            row.finished_at = now
    return outcomes


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


def _apply(unit: Unit, row: EpisodeRow, item: Claimed, result: ExtractionResult) -> Outcome:
    decisions = decide_episode(unit, item.origin, result)
    for column, value in done_columns(result).items():
        setattr(row, column, value)
    return Outcome(ReceiptStatus.DONE, decisions=decisions, extraction=result)


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


def _failed(unit: Unit, row: EpisodeRow, error: BaseException) -> Outcome:
    retryable = isinstance(error, RetryableError)
    failed_attempts = row.attempts - row.lost_attempts  # this one included
    again = retryable and failed_attempts < unit.settings.episode_max_attempts
    row.status = EpisodeStatus.PENDING if again else EpisodeStatus.FAILED
    row.last_error = describe(error)
    row.error_kind = EpisodeError.RETRYABLE if retryable else EpisodeError.PERMANENT
    if isinstance(error, LlmFailure):
        row.usage = error.usage.model_dump(mode="json")
    return Outcome(ReceiptStatus(row.status), row.last_error, error_type=type(error).__name__)


def describe(error: BaseException) -> str:
    """One line for the episode's record: the class, and the message of SGAM's own errors
    (they never hold stored values); an unexpected error is named, not quoted."""
    if isinstance(error, SgamError):
        return f"{type(error).__name__}: {error}".splitlines()[0][:500]
    return f"internal error ({type(error).__name__})"
