"""The hot path's idempotency: a repeated request answers what the first one wrote and writes
nothing; a key or an episode id reused for another request is IdempotencyConflict (409 over
HTTP), never a 500, another scope's fact or a forgotten value."""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

import pipeline
from pipeline.db.models import EpisodeRow, EventRow
from pipeline.db.store import Store
from pipeline.errors import IdempotencyConflict, IdempotencyInProgress
from tests.integration.in_flight import first_call_in_flight
from tests.integration.ledger_helpers import cli
from tests.integration.server_helpers import SGAM

ASK = {
    "tenant_id": "acme",
    "subject": "mira",
    "text": "My home city is Lisbon.",
    "idempotency_key": "turn-1",
    "occurred_at": "2026-06-01T10:00:00Z",
}


def _counts(store: Store) -> tuple[int, int]:
    with store.begin() as unit:
        episodes = unit.session.scalar(select(func.count()).select_from(EpisodeRow)) or 0
        events = unit.session.scalar(select(func.count()).select_from(EventRow)) or 0
    return episodes, events


def test_a_repeat_answers_the_first_result_and_writes_nothing(store: Store) -> None:
    first = pipeline.remember(store, ASK)
    before = _counts(store)

    again = pipeline.remember(store, ASK)

    assert again.episode_id == first.episode_id
    assert [f.fact_id for f in again.facts] == [f.fact_id for f in first.facts]
    assert _counts(store) == before


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"text": "My home city is Porto."}, "another text under the same key"),
        ({"agent_id": "bot2"}, "the same key from another agent's scope"),
        ({"subject": "omar"}, "another subject under the same key"),
        ({"idempotency_key": "turn-2", "episode_id": "ep-1"}, "a taken episode id, new key"),
    ],
)
def test_a_reused_key_or_episode_id_for_another_request_is_a_conflict(
    store: Store, change: dict[str, Any], why: str
) -> None:
    pipeline.remember(store, ASK | {"episode_id": "ep-1"})
    before = _counts(store)

    with pytest.raises(IdempotencyConflict, match="another request"):
        pipeline.remember(store, ASK | {"episode_id": "ep-1"} | change)

    assert _counts(store) == before, why
    held = pipeline.get(store, {"tenant_id": "acme", "subject": "mira"})
    assert [fact.value for fact in held] == ["Lisbon"], why


def test_a_repeat_after_a_forget_returns_no_forgotten_value(store: Store) -> None:
    first = pipeline.remember(store, ASK)
    assert first.facts, "the first request wrote a fact"
    pipeline.forget(store, {"tenant_id": "acme", "subject": "mira"})

    again = pipeline.remember(store, ASK)

    assert again.episode_id == first.episode_id
    assert again.facts == []


def test_a_repeat_answers_the_ledgers_refusals_again(store: Store) -> None:
    held = {"tenant_id": "acme", "subject": "mira", "attribute": "home_city", "value": "Porto"}
    held |= {
        "valid_from": ASK["occurred_at"],
        "source_episode_id": "crm",
        "trust": "user_confirmed",
    }
    pipeline.put(store, held)
    first = pipeline.remember(store, ASK)
    before = _counts(store)

    again = pipeline.remember(store, ASK)

    assert [type(c).__name__ for c in first.conflicts] == ["FactConflict"]
    assert [str(c) for c in again.conflicts] == [str(c) for c in first.conflicts]
    assert again.model_dump() == first.model_dump()
    assert (first.replayed, again.replayed) == (False, True)
    assert _counts(store) == before  # no second refusal logged


def test_intake_refuses_a_key_or_an_episode_id_reused_for_another_episode(store: Store) -> None:
    episode = {
        "tenant_id": "acme",
        "subject": "mira",
        "session_id": "s1",
        "occurred_at": "2026-06-01T10:00:00Z",
        "text": "My home city is Lisbon.",
    }
    keyed = episode | {"idempotency_key": "in-1"}
    named = episode | {"episode_id": "ep-9"}
    first = pipeline.ingest(store, [keyed, named])
    before = _counts(store)

    again = pipeline.ingest(store, [keyed, named])
    for changed in (keyed | {"text": "My home city is Porto."}, named | {"subject": "omar"}):
        with pytest.raises(IdempotencyConflict):
            pipeline.ingest(store, [episode | {"text": "A new one."}, changed])

    assert [r.status for r in again.receipts] == ["duplicate", "duplicate"]
    assert [r.episode_id for r in again.receipts] == [r.episode_id for r in first.receipts]
    assert _counts(store) == before  # not even the new episode sent beside a conflict


@pytest.mark.parametrize(
    "command",
    [
        ["remember", "--subject", "mira", "--text", "My home city is Porto."],
        ["put", "--subject", "mira", "--attribute", "home_city", "--value", "Porto"]
        + ["--valid-from", "2026-06-01T10:00:00Z", "--source", "crm"],
    ],
    ids=["remember", "put"],
)
def test_the_cli_refuses_a_reused_key_with_exit_2(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    pipeline.remember(store, ASK)
    before = _counts(store)

    code, _, err = cli(capsys, *command, "--tenant", "acme", "--idempotency-key", "turn-1")

    assert code == 2
    assert err.startswith("sgam: IdempotencyConflict: idempotency key 'turn-1' was already used")
    assert _counts(store) == before


@pytest.mark.postgres
def test_a_repeat_while_the_model_works_is_in_progress_in_python_and_exit_5_on_the_cli(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is reserved before the model is asked: a repeat meanwhile is refused with a
    typed, retryable error (the CLI's exit 5, one line), then answered like any repeat."""
    ask = ASK | {"tenant_id": f"slow-{uuid.uuid4()}", "text": "Zwolle has been my home."}
    with first_call_in_flight(
        postgres_url, lambda store: pipeline.remember(store, ask), hot_path_deadline_ms=600_000
    ) as first:
        with pytest.raises(IdempotencyInProgress) as refused:
            pipeline.remember(first.store, ask)
        monkeypatch.setenv("SGAM_DATABASE_URL", postgres_url)
        monkeypatch.setenv("SGAM_LLM_BASE_URL", first.base_url)
        monkeypatch.setenv("SGAM_LLM_MODEL", "stub")
        done = subprocess.run(
            [SGAM, "remember", "--tenant", ask["tenant_id"], "--subject", "mira"]
            + ["--text", ask["text"], "--idempotency-key", "turn-1"]
            + ["--occurred-at", ask["occurred_at"]],
            capture_output=True,
            text=True,
            timeout=300,  # a CLI start on a loaded machine; the model waits for it
        )
        original = first.join()
        again = pipeline.remember(first.store, ask)
    assert refused.value.key == "turn-1"
    assert refused.value.retry_after >= 1
    assert isinstance(refused.value, pipeline.RetryableError)
    assert done.returncode == 5, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("sgam: IdempotencyInProgress: idempotency key 'turn-1'")
    assert again.replayed
    assert again.model_dump(mode="json") == original.model_dump(mode="json")
