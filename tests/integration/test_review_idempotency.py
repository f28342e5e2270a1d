"""Idempotency keys on confirm, reject and retry, in Python and on the command line, on both
stores: a repeat answers the first decision or retry again (`replayed`) and writes nothing;
the key used for another request is IdempotencyConflict; a repeat without a key is refused as
before (NotBuffered, NotFailed); a replay after a forget is NotFound; two threads sending one
key at once write once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select, update

import pipeline
from pipeline.db.models import EpisodeRow, EventRow, IdempotencyRow
from pipeline.db.store import Store
from pipeline.errors import IdempotencyConflict, IdempotencyInProgress, NotFound
from pipeline.ledger.forget import forget
from tests.integration.ledger_helpers import cli
from tests.integration.pipeline_helpers import TENANT, candidates, episode


def _buffered(store: Store, text: str = "My contact channel is email.") -> str:
    """A candidate waiting in the buffer (a weak signal: one session)."""
    pipeline.ingest(store, episode(text, "2026-06-01T09:00:00Z", "s1"))
    (waiting,) = candidates(store)
    return waiting.candidate_id


def _failed(store: Store) -> str:
    """A failed episode (marked so directly: inline processing does not fail on its own)."""
    text = "Remember that my passport deadline is 2026-07-15."
    (receipt,) = pipeline.ingest(store, episode(text, "2026-06-01T09:00:00Z", "s1")).receipts
    store.run(
        lambda unit: unit.session.execute(
            update(EpisodeRow)
            .where(EpisodeRow.tenant_id == TENANT, EpisodeRow.episode_id == receipt.episode_id)
            .values(status="failed")
        )
    )
    return receipt.episode_id


def _events(store: Store) -> int:
    with store.begin() as unit:
        return unit.session.scalar(select(func.count()).select_from(EventRow)) or 0


def _decided(store: Store, kind: str) -> int:
    logged = pipeline.decision_log(store, {"tenant_id": TENANT, "limit": 1000})
    return sum(1 for entry in logged if entry.kind == kind)


@pytest.mark.parametrize("verb", ["confirm", "reject"])
def test_a_repeated_decision_answers_the_first_and_writes_nothing(store: Store, verb: str) -> None:
    decide = getattr(pipeline, verb)
    command = {"tenant_id": TENANT, "candidate_id": _buffered(store), "idempotency_key": "d-1"}
    first = decide(store, command)
    events = _events(store)

    again = decide(store, command)

    assert again.model_dump(mode="json") == first.model_dump(mode="json")
    assert (first.replayed, again.replayed) == (False, True)
    assert first.status == f"{verb}ed"
    assert (first.fact is not None) == (verb == "confirm")
    assert _events(store) == events  # no second decision logged
    assert _decided(store, f"candidate_{verb}ed") == 1
    with pytest.raises(pipeline.NotBuffered):  # without the key: refused as before
        decide(store, command | {"idempotency_key": None})


def test_a_decision_key_used_for_another_request_is_a_conflict(store: Store) -> None:
    candidate_id = _buffered(store)
    command = {"tenant_id": TENANT, "candidate_id": candidate_id, "idempotency_key": "d-2"}
    pipeline.reject(store, command | {"reason": "a joke"})
    events = _events(store)

    with pytest.raises(IdempotencyConflict):
        pipeline.reject(store, command | {"reason": "another reason"})
    with pytest.raises(IdempotencyConflict):
        pipeline.confirm(store, command)
    with pytest.raises(IdempotencyConflict):  # a key is one operation's, on every endpoint
        pipeline.retry_episode(
            store, {"tenant_id": TENANT, "episode_id": "e", "idempotency_key": "d-2"}
        )

    assert _events(store) == events


def test_a_decision_replayed_after_a_forget_is_not_found(store: Store) -> None:
    confirm = {"tenant_id": TENANT, "candidate_id": _buffered(store), "idempotency_key": "c"}
    pipeline.confirm(store, confirm)
    forget(store, {"tenant_id": TENANT, "subject": "mira", "purge": True})

    with pytest.raises(NotFound, match="forgotten since"):
        pipeline.confirm(store, confirm)


def test_a_rejection_replayed_after_a_forget_is_not_found(store: Store) -> None:
    reject = {"tenant_id": TENANT, "candidate_id": _buffered(store), "idempotency_key": "r"}
    pipeline.reject(store, reject)
    forget(store, {"tenant_id": TENANT, "subject": "mira"})

    with pytest.raises(NotFound, match="forgotten since"):
        pipeline.reject(store, reject)


def test_a_repeated_retry_answers_the_first_and_processes_nothing(store: Store) -> None:
    command = {"tenant_id": TENANT, "episode_id": _failed(store), "idempotency_key": "t-1"}
    events = _events(store)
    first = pipeline.retry_episode(store, command)
    processed = _events(store)

    again = pipeline.retry_episode(store, command)

    assert (first.status, first.replayed) == ("done", False)  # processed here: no broker
    assert again.model_dump(mode="json") == first.model_dump(mode="json")
    assert again.replayed
    assert processed > events  # the first retry processed the episode again
    assert _events(store) == processed
    with pytest.raises(pipeline.NotFailed):  # without the key: refused as before
        pipeline.retry_episode(store, command | {"idempotency_key": None})
    with pytest.raises(IdempotencyConflict):
        pipeline.retry_episode(store, command | {"episode_id": _failed(store)})
    forget(store, {"tenant_id": TENANT, "subject": "mira"})
    with pytest.raises(NotFound, match="forgotten since"):
        pipeline.retry_episode(store, command)


def test_a_retry_of_an_episode_not_failed_keeps_nothing(store: Store) -> None:
    command = {"tenant_id": TENANT, "episode_id": _failed(store), "idempotency_key": "t-2"}
    pipeline.retry_episode(store, command | {"idempotency_key": None})

    with pytest.raises(pipeline.NotFailed):
        pipeline.retry_episode(store, command)
    with pytest.raises(pipeline.NotFailed):  # a refusal is not kept: the same again
        pipeline.retry_episode(store, command)
    with store.begin() as unit:
        assert unit.session.get(IdempotencyRow, (TENANT, "t-2")) is None


def _at_once(work: Callable[[], Any], count: int = 2) -> list[Any]:
    """`work` in `count` threads released together; each one's answer or error."""
    barrier = threading.Barrier(count)
    answers: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait()
        try:
            answers[index] = work()
        except Exception as error:  # the answer to compare
            answers[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return answers


def test_one_key_from_two_threads_at_once_confirms_once(store: Store) -> None:
    command = {"tenant_id": TENANT, "candidate_id": _buffered(store), "idempotency_key": "c-2"}

    answers = _at_once(lambda: pipeline.confirm(store, command))

    assert all(isinstance(answer, pipeline.Decided) for answer in answers), answers
    assert sorted(answer.replayed for answer in answers) == [False, True]
    assert len({answer.model_dump_json() for answer in answers}) == 1
    assert _decided(store, "candidate_confirmed") == 1


def test_one_key_from_two_threads_at_once_retries_once(store: Store) -> None:
    command = {"tenant_id": TENANT, "episode_id": _failed(store), "idempotency_key": "t-3"}
    processed = _decided(store, "episode_processed")

    answers = _at_once(lambda: pipeline.retry_episode(store, command))

    first = [a for a in answers if isinstance(a, pipeline.Retried) and not a.replayed]
    others = [a for a in answers if a not in first]
    assert len(first) == 1, answers
    # The other came while the first processed the episode (told to come back), or after.
    (other,) = others
    assert isinstance(other, IdempotencyInProgress) or other == first[0].model_copy(
        update={"replayed": True}
    ), other
    assert _decided(store, "episode_processed") == processed + 1


def test_the_cli_takes_a_key_on_confirm_reject_and_retry(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate_id = _buffered(store)
    confirm = ["confirm", candidate_id, "--tenant", TENANT, "--idempotency-key", "cli-1"]
    code, out, err = cli(capsys, *confirm)
    events = _events(store)
    again = cli(capsys, *confirm)

    assert (code, err) == (0, "")
    assert again == (0, out, "unchanged: a repeat of the request first sent with this key\n")
    assert _events(store) == events
    assert cli(capsys, *confirm[:-2])[0] == 3  # no key: NotBuffered, as before
    reused = cli(capsys, "reject", candidate_id, "--tenant", TENANT, "--idempotency-key", "cli-1")
    assert reused[0] == 2
    assert reused[2].startswith("sgam: IdempotencyConflict: idempotency key 'cli-1'")

    episode_id = _failed(store)
    retry = ["episodes", "retry", episode_id, "--tenant", TENANT, "--idempotency-key", "cli-2"]
    code, out, err = cli(capsys, *retry)
    events = _events(store)
    assert (code, json.loads(out), err) == (0, {"retried": 1, "episodes": {episode_id: "done"}}, "")
    assert cli(capsys, *retry)[:2] == (0, out)
    assert _events(store) == events
    assert cli(capsys, *retry[:-1], "cli-3")[0] == 3  # a new key: NotFailed
    no_tenant = cli(capsys, "episodes", "retry", episode_id, "--idempotency-key", "cli-4")
    assert no_tenant[0] == 2
    assert no_tenant[2] == "sgam: --idempotency-key: retries one EPISODE_ID, with --tenant\n"
