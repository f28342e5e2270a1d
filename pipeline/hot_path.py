"""The hot path: an explicit "remember this" turn, written synchronously in the caller's request.

The episode is stored, the rules extractor reads it (the model only when one is configured and
the rules found nothing), and the policy applies with the user's own trust (`user_confirmed`):
no recurrence buffer, and a value waiting in the buffer is confirmed. When the model fails or
misses SGAM_HOT_PATH_DEADLINE_MS, the episode moves to the background lane and the answer says
`deferred`: nothing is lost. A forget of the subject that wins the race is NotFound. What it
wrote gets its vectors in the background, unwaited for, as every committed unit's rows do
(`Store.run`'s after-commit hooks).

It uses the episode stage through its seam (`pipeline/episodes/stage.py`) and its idempotency
key through the keyed-operation step (`pipeline/ledger/idempotency.py: KeyedStep`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.stage import (
    Claimed,
    Remembered,
    RememberIn,
    answer_of,
    claimed_now,
    decide_and_finish,
    defer,
    earlier,
    finish_new,
    insert_new,
    noted,
    observe_remembered,
    observe_remembered_model,
    one_time_name,
    read_row,
    run_extraction,
)
from pipeline.errors import LlmFailure, NotFound
from pipeline.extract.backends import RULES
from pipeline.extract.choose import model
from pipeline.extract.llm import LlmClient
from pipeline.extract.result import ExtractionResult
from pipeline.ledger.idempotency import Forgotten, KeyedStep, StoredKey, answer_kept, kept_answer
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.policy.apply import Decision
from pipeline.policy.decide import Lane
from pipeline.validation import parse

__all__ = ["RememberIn", "Remembered", "one_time_name", "remember"]

log = logging.getLogger("sgam.hot_path")
Keyed = KeyedStep[Remembered]


def remember(
    store: Store, request: RememberIn | Mapping[str, Any], *, llm: LlmClient | None = None
) -> Remembered:
    request = parse(RememberIn, request)
    keyed = KeyedStep.of(
        request,
        _replayed,
        lambda answer: answer_kept(answer, answer.conflicts),
        kind="remember",
        retry_s=store.settings.hot_path_deadline_ms / 1000,
    )
    if request.idempotency_key is not None:
        # A repeat answers before anything is extracted (checked again under the key's lock).
        answered = store.run(keyed.replayed)
        if answered is not None:
            return noted(store, answered)
    now = store.clock()
    claimed = claimed_now(request, now)
    attributes = {
        names.SGAM_TENANT: request.tenant_id,
        names.SGAM_EPISODE: claimed.key[1],
        names.SGAM_LANE: Lane.HOT.value,
    }
    with tracing.span("remember", attributes=attributes) as opened:
        remembered = _remember(store, request, keyed, claimed, now, llm)
        opened.set_attribute(names.SGAM_OUTCOME, "deferred" if remembered.deferred else "done")
        return noted(store, remembered)


def _remember(
    store: Store,
    request: RememberIn,
    keyed: Keyed,
    claimed: Claimed,
    now: datetime,
    llm: LlmClient | None,
) -> Remembered:
    started = time.perf_counter()
    row = read_row(
        claimed.episode,
        trust=request.trust,
        idempotency_key=request.idempotency_key,
        actor=request.actor,
        lane=Lane.HOT,
        received_at=now,
    )
    found = run_extraction(store, claimed.episode, RULES)
    if not isinstance(found, ExtractionResult):
        raise found
    fallback = model(store.settings, llm)
    if found.kept or fallback is None:
        # The common case, one transaction: the episode, done, with every decision it caused.
        decided = store.run(lambda unit: _decided(unit, keyed, row, claimed, found))
        if decided is None:
            return earlier(store, request, claimed.key[1])
        answer, decisions = decided
        if not answer.replayed:
            observe_remembered(claimed, "done", decisions, started)
        return answer
    # The rules found nothing and a model is configured: commit the episode first, under a
    # lease like any claim, so that a slow or failing model loses nothing (should this process
    # die, the sweeper finds it once the lease has run out). The key is reserved as long.
    lease_s = store.settings.episode_lease_s
    leased = row | {"lease_until": now + timedelta(seconds=lease_s)}
    inserted = store.run(lambda unit: keyed.replayed(unit) or _reserve(unit, keyed, leased))
    if isinstance(inserted, Remembered):
        return inserted
    if not inserted:
        return earlier(store, request, claimed.key[1])
    try:
        seconds = store.settings.hot_path_deadline_ms / 1000
        result = run_extraction(store, claimed.episode, fallback.within(seconds))
        observe_remembered_model(store, claimed, result)
        if isinstance(result, LlmFailure):
            observe_remembered(claimed, "deferred", [], started)
            return _kept(store, keyed, defer(store, claimed.key))
        if not isinstance(result, ExtractionResult):
            raise result
        finished = decide_and_finish(store, [claimed], {claimed.key: result})
        outcome = finished[claimed.key]
        if outcome.forgotten:
            raise NotFound(outcome.error or f"subject {request.subject} was forgotten")
        observe_remembered(claimed, str(outcome.status), outcome.decisions, started)
        return _kept(store, keyed, answer_of(claimed.key[1], result, outcome.decisions))
    except BaseException:
        _release(store, keyed)
        raise


def _decided(
    unit: Unit, keyed: Keyed, row: dict[str, Any], claimed: Claimed, result: ExtractionResult
) -> tuple[Remembered, list[Decision]] | None:
    """The episode, done, its decisions and the answer kept under the idempotency key; the
    first answer for a key used since; None for an episode id taken."""
    answered = keyed.replayed(unit)
    if answered is not None:
        return answered, []
    decisions = finish_new(unit, row, claimed, result)
    if decisions is None:
        return None
    answer = answer_of(claimed.key[1], result, decisions)
    keyed.keep(unit, answer)
    return answer, decisions


def _reserve(unit: Unit, keyed: Keyed, row: dict[str, Any]) -> bool:
    """The episode stored (False when its id or key was taken), its key reserved as long as
    its lease."""
    if not insert_new(unit, row):
        return False
    keyed.reserve(unit, unit.settings.episode_lease_s)
    return True


def _replayed(unit: Unit, seen: StoredKey, forgotten_facts: Forgotten) -> Remembered:
    """The first answer again, the ledger's refusals included (the exit code's), less what
    was forgotten since."""
    first, conflicts = kept_answer(unit, seen, forgotten_facts)
    answer = Remembered.model_validate(first)
    return answer.model_copy(update={"replayed": True, "conflicts": conflicts})


def _kept(store: Store, keyed: Keyed, answer: Remembered) -> Remembered:
    """Keep the answer under the key, in place of its reservation (the model path)."""
    if keyed.request.idempotency_key is not None:
        store.run(lambda unit: keyed.keep(unit, answer))
    return answer


def _release(store: Store, keyed: Keyed) -> None:
    """The request failed before it answered: free its key's reservation (should this fail
    too, the reservation expires with the episode's lease)."""
    try:
        store.run(keyed.release)
    except Exception:  # the original failure is what the caller must see
        log.warning(
            "idempotency reservation left to expire", extra={"tenant": keyed.request.tenant_id}
        )
