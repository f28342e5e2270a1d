"""The pipeline with a model: the endpoint fails (through an injected transport), episodes end
`failed` with the reason and the hot path defers; once it recovers, `retry` and the sweeper
complete them through the real server's recorded answers (tests/cassettes/README.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.extract.llm import LlmClient
from tests.integration.cassettes import MODEL, RECORDED_PROMPT, cassette, recorded_tokens
from tests.integration.cassettes import settings as llm_settings
from tests.integration.pipeline_helpers import TENANT, episode

# Nothing the rules extractor matches: only the model can read anything from it. With this
# text and earlier turn the small model's fourth recorded answer was valid JSON (an earlier
# turn of "We moved here in May." got none in four): see tests/cassettes/README.md.
TEXT = "The river view from my Lisbon flat is lovely."
EARLIER = "Hi, it is me again."


class Switch(httpx2.BaseTransport):
    """The endpoint as the pipeline sees it: refusing connections until switched up, then the
    real HTTP transport (which vcrpy replays from the cassette)."""

    def __init__(self) -> None:
        self.down = True
        self.refused = 0
        self.real = httpx2.HTTPTransport()

    def close(self) -> None:
        self.real.close()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.down:
            self.refused += 1
            raise httpx2.ConnectError("connection refused", request=request)
        return self.real.handle_request(request)


@pytest.fixture
def llm_store(tmp_path: Path) -> Iterator[Store]:
    settings = llm_settings(
        database_url=f"sqlite:///{tmp_path / 'llm.sqlite3'}",
        llm_max_attempts=1,  # one request per extraction: no transport retries
        llm_max_reasks=3,  # a model this small needs a few tries to answer in valid JSON
        episode_max_attempts=2,
    )
    store = open_store(settings)
    yield store
    store.dispose()


def _assert_done_by_the_model(store: Store, episode_id: str, played: Any) -> None:
    shown = pipeline.show_episode(store, TENANT, episode_id)
    assert (shown.status, shown.extractor) == ("done", f"llm:{MODEL}")
    assert shown.prompt_version == RECORDED_PROMPT
    usage = shown.usage
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == recorded_tokens(played)
    # Every answer but the last failed validation and was re-asked; the last one validated.
    requests = len(played.requests)
    assert (usage["attempts"], usage["invalid_answers"]) == (requests, requests - 1)
    # The validated answer's one update quotes nothing of the episode (the small model
    # answered with fragments of its own earlier output): refused, nothing kept or written.
    assert (shown.candidates, shown.facts) == ([], [])
    (processed,) = shown.decisions
    assert (processed.kind, processed.reason) == ("episode_processed", "0 kept, 1 refused")
    assert processed.command is not None
    assert processed.command["refused"] == [
        {"attribute": "meeting_at", "reason": "evidence_not_quoted"}
    ]
    for decision in shown.decisions:
        assert (decision.episode_id, decision.prompt_version) == (episode_id, RECORDED_PROMPT)


def test_failed_episodes_say_why_and_retry_completes_them(
    llm_store: Store, request: pytest.FixtureRequest
) -> None:
    switch = Switch()
    client = LlmClient(llm_store.settings, switch)
    request.addfinalizer(client.close)

    (receipt,) = pipeline.ingest(
        llm_store, episode("My plan is pro.", "2026-06-01T09:00:00Z", "s1"), llm=client
    ).receipts

    assert receipt.status == "failed"
    assert receipt.error is not None
    assert receipt.error.startswith("LlmUnavailable")
    assert switch.refused == 2  # SGAM_EPISODE_MAX_ATTEMPTS attempts, then failed for good
    failed = pipeline.show_episode(llm_store, TENANT, receipt.episode_id)
    assert (failed.status, failed.attempts) == ("failed", 2)

    switch.down = False
    with cassette(request) as played:
        keys, driven = pipeline.retry(llm_store, tenant_id=TENANT, llm=client)

    assert keys == [(TENANT, receipt.episode_id)]
    assert driven.outcomes[keys[0]].status == "done"
    _assert_done_by_the_model(llm_store, receipt.episode_id, played)


def test_the_hot_path_defers_when_the_model_fails_and_the_sweeper_completes_it(
    llm_store: Store, request: pytest.FixtureRequest
) -> None:
    switch = Switch()
    client = LlmClient(llm_store.settings, switch)
    request.addfinalizer(client.close)

    # An earlier turn of the same session, ingested while the endpoint is down (it fails, but
    # its text is the conversation): extract/v2 shows it to the model as context only.
    (before,) = pipeline.ingest(
        llm_store, episode(EARLIER, "2026-06-01T08:59:00Z", "s1"), llm=client
    ).receipts
    assert before.status == "failed"
    # Fixed times: the prompt names them, and the cassette is matched on the prompt.
    said_at = "2026-06-01T09:00:00Z"
    said = pipeline.remember(
        llm_store,
        {"tenant_id": TENANT, "subject": "mira", "text": TEXT, "at": said_at, "session_id": "s1"},
        llm=client,
    )

    assert (said.deferred, said.facts) == (True, [])
    waiting = pipeline.show_episode(llm_store, TENANT, said.episode_id)
    assert (waiting.status, waiting.lane) == ("pending", "background")

    switch.down = False
    later = datetime.now(UTC) + timedelta(seconds=llm_store.settings.sweep_grace_s + 1)
    with cassette(request) as played:
        pending, stuck, driven = pipeline.sweep(llm_store, now=later, llm=client)

    assert (pending, stuck) == (1, 0)
    assert driven.outcomes[(TENANT, said.episode_id)].status == "done"
    _assert_done_by_the_model(llm_store, said.episode_id, played)
    prompt = json.loads(played.requests[0].body)["messages"][-1]["content"]
    context, _, episode_part = prompt.partition("Episode (")
    assert f"- mira (2026-06-01T08:59:00+00:00): {EARLIER}" in context
    assert "context only" in context
    assert episode_part.endswith(TEXT)
    assert EARLIER not in episode_part
