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
from collections.abc import Callable, Sequence
from functools import partial

from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.embedding import settle
from pipeline.episodes.claimed import Claimed, Extracted, Outcome
from pipeline.episodes.claiming import claim, claim_waiting
from pipeline.episodes.contexts import batch_contexts, run_extraction
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.finishing import decide_and_finish, record_spend
from pipeline.episodes.inflight import run_in_flight
from pipeline.episodes.lane_metrics import observe_episode, observe_extraction, observe_model
from pipeline.episodes.traces import EpisodeSpans, extract_traced
from pipeline.errors import LlmFailure
from pipeline.extract.backends import RULES
from pipeline.extract.choose import choose
from pipeline.extract.llm import LlmClient
from pipeline.extract.protocol import Extractor
from pipeline.extract.result import ExtractionResult
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from schemas.extraction import Usage

log = logging.getLogger("sgam.episodes")


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
        outcomes = _with_model(store, keys, extractor, more=more)
    else:
        batch = store.settings.batch_for(model=False)
        outcomes = {}
        for start in range(0, len(keys), batch):
            claimed = _claim(store, partial(claim, keys=keys[start : start + batch]), batch)
            if claimed:
                outcomes |= _with_rules(store, claimed, extractor)
    # The vectors the batches' commits queued for the embedding arm (the store's after-commit
    # hook) are made before the task ends, not in whatever task comes next; what fails is the
    # next pass's (`sgam embed`, the nightly consolidation). Returns at once when none was.
    settle()
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
        outcomes = decide_and_finish(store, claimed, extracted, spans)
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
        outcomes = decide_and_finish(store, done, results, spans, recorded=recorded)
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
