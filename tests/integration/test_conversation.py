"""The conversation a model sees before an episode: the earlier turns of its session, in its
scope, the latest SGAM_LLM_CONTEXT_TURNS within SGAM_LLM_CONTEXT_TOKENS, oldest first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.episodes.conversation import earlier_turns, earlier_turns_of
from pipeline.episodes.stage import context_for
from pipeline.extract import RULES, LazyTurns
from pipeline.settings import Settings
from schemas.episodes import Episode
from tests.integration.pipeline_helpers import TENANT, episode


@pytest.fixture
def chat_store(settings: Settings) -> Iterator[Store]:
    store = open_store(settings.model_copy(update={"llm_context_turns": 3}))
    yield store
    store.dispose()


def _said(store: Store, text: str, at: str, session: str = "s1", **extra: str) -> Episode:
    (receipt,) = pipeline.ingest(store, episode(text, at, session, **extra)).receipts
    return _shown(store, receipt.episode_id)


def _shown(store: Store, episode_id: str) -> Episode:
    shown = pipeline.show_episode(store, TENANT, episode_id)
    return Episode.model_validate(
        {
            name: getattr(shown, name)
            for name in (
                "episode_id",
                "tenant_id",
                "agent_id",
                "purpose",
                "subject",
                "session_id",
                "occurred_at",
                "text",
            )
        }
    )


def test_the_latest_earlier_turns_of_the_session_oldest_first(chat_store: Store) -> None:
    for minute in range(5):
        _said(chat_store, f"turn {minute}", f"2026-06-01T09:0{minute}:00Z")
    _said(chat_store, "another session", "2026-06-01T09:04:30Z", session="s2")
    _said(chat_store, "another agent", "2026-06-01T09:04:30Z", agent_id="bot-2")
    _said(chat_store, "Tom asked", "2026-06-01T09:04:40Z", subject="tom", subject_names=["Tom"])
    current = _said(chat_store, "Yes, since March.", "2026-06-01T09:05:00Z")
    _said(chat_store, "later turn", "2026-06-01T09:06:00Z")

    turns = earlier_turns(chat_store, current)

    assert [(t.speaker, t.text) for t in turns] == [
        ("mira", "turn 3"),
        ("mira", "turn 4"),
        ("Tom", "Tom asked"),
    ]


def test_turns_of_one_instant_follow_their_line_in_the_intake(chat_store: Store) -> None:
    """A bulk import gives a session's turns one timestamp: their lines still order them."""
    at = "2026-06-01T09:00:00Z"
    report = pipeline.ingest(
        chat_store, [episode(f"turn {n}", at, "s1", episode_id=f"t{n}") for n in range(5)]
    )
    assert len(report.receipts) == 5
    fourth = _shown(chat_store, "t3")

    assert [t.text for t in earlier_turns(chat_store, fourth)] == ["turn 0", "turn 1", "turn 2"]
    assert earlier_turns(chat_store, _shown(chat_store, "t0")) == []


def test_a_batch_reads_what_each_episode_would_read_alone(chat_store: Store) -> None:
    for minute in range(4):
        _said(chat_store, f"turn {minute}", f"2026-06-01T09:0{minute}:00Z")
    batch = [
        _said(chat_store, "Yes, since March.", "2026-06-01T09:05:00Z"),
        _said(chat_store, "other session", "2026-06-01T09:05:30Z", session="s2"),
        _said(chat_store, "And you?", "2026-06-01T09:06:00Z"),
        _said(chat_store, "no session", "2026-06-01T09:07:00Z").model_copy(
            update={"session_id": None}
        ),
    ]
    together = earlier_turns_of(chat_store, batch)

    for current in batch:
        alone = earlier_turns(chat_store, current)
        assert together.get((current.tenant_id, current.episode_id), []) == alone
    assert [t.text for t in together[(TENANT, batch[2].episode_id)]] == [
        "turn 2",
        "turn 3",
        "Yes, since March.",
    ]


def test_the_token_cap_keeps_the_latest_turns_and_cuts_a_long_one(chat_store: Store) -> None:
    capped = open_store(chat_store.settings.model_copy(update={"llm_context_tokens": 10}))
    try:
        _said(capped, "an old turn that does not fit any more", "2026-06-01T09:00:00Z")
        _said(capped, "x" * 100, "2026-06-01T09:01:00Z")
        current = _said(capped, "Yes.", "2026-06-01T09:02:00Z")
        (turn,) = earlier_turns(capped, current)
        assert turn.text == "…" + "x" * 39
    finally:
        capped.dispose()


def test_no_conversation_without_a_session_or_with_zero_turns(chat_store: Store) -> None:
    _said(chat_store, "turn 0", "2026-06-01T09:00:00Z")
    current = _said(chat_store, "Yes.", "2026-06-01T09:01:00Z")
    assert earlier_turns(chat_store, current.model_copy(update={"session_id": None})) == []
    off = open_store(chat_store.settings.model_copy(update={"llm_context_turns": 0}))
    try:
        assert earlier_turns(off, current) == []
    finally:
        off.dispose()


def test_the_rules_never_read_the_conversation(chat_store: Store) -> None:
    """The worker's context reads the turns lazily: only a model asks for them."""
    _said(chat_store, "turn 0", "2026-06-01T09:00:00Z")
    current = _said(chat_store, "My home city is Lisbon.", "2026-06-01T09:01:00Z")
    context = context_for(chat_store, current)
    assert isinstance(context.earlier, LazyTurns)

    result = RULES.extract(current, context)
    assert [r.update.attribute for r in result.rejected] == ["home_city"]  # ingest wrote it
    assert not context.earlier.read
    assert [t.text for t in context.loaded().earlier] == ["turn 0"]
