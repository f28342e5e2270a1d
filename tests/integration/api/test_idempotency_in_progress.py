"""An Idempotency-Key is reserved before the work starts, against a real `sgam serve` on
PostgreSQL whose model (the stub OpenAI-compatible server) is slow: a repeat while the first
request waits for the model is 409 `idempotency-in-progress` with Retry-After, never an answer
built from what is stored meanwhile; once the first has answered, a repeat replays its answer;
a reservation left by a server that died expires with the episode's lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.integration.server_helpers import Keys, Server, start_server, stop_server
from tests.integration.stub_llm import StubServer

pytestmark = pytest.mark.postgres

IN_PROGRESS = "urn:sgam:problem:idempotency-in-progress"
CONFLICT = "urn:sgam:problem:idempotency-conflict"
# Nothing the rules read, so the hot path asks the model; the model finds the city.
SAID = {"subject": "mira", "text": "Folks here say Zwolle has been my home for a while."}
LEASE_S = 10  # the least SGAM_EPISODE_LEASE_S allows: the crashed server's reservation


def _update(_request: dict[str, Any]) -> dict[str, Any]:
    return {
        "updates": [
            {
                "evidence": "Zwolle has been my home",
                "subject": "mira",
                "attribute": "home_city",
                "current_value": None,
                "change": "new",
                "value": "Zwolle",
                "valid_from": None,
            }
        ]
    }


@pytest.fixture(scope="module")
def stub() -> Iterator[Any]:
    with StubServer(latency_s=0.0) as served:
        served.app.answer = _update
        yield served


def _start(api_database: str, workdir: Path, stub: Any) -> Server:
    return start_server(
        api_database,
        workdir,
        SGAM_LLM_BASE_URL=stub.base_url,
        SGAM_LLM_MODEL="stub",
        SGAM_HOT_PATH_DEADLINE_MS="60000",  # the slow model is waited for, not deferred
        SGAM_EPISODE_LEASE_S=str(LEASE_S),
    )


@pytest.fixture(scope="module")
def server(
    api_database: str, tmp_path_factory: pytest.TempPathFactory, stub: Any
) -> Iterator[Server]:
    started = _start(api_database, tmp_path_factory.mktemp("slow-model"), stub)
    yield started
    stop_server(started)


def _key(name: str) -> dict[str, str]:
    return {"Idempotency-Key": name}


def _in_background(send: Callable[[], httpx2.Response]) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(send()))
    thread.start()
    return thread, answers


def _model_called(stub: Any, before: int) -> None:
    """Wait until the first request is with the model (its key reserved before the call)."""
    deadline = time.monotonic() + 30
    while stub.app.stats.requests <= before:
        assert time.monotonic() < deadline, "the model was never called"
        time.sleep(0.02)


def _sent_or_dropped(client: httpx2.Client, path: str, body: Any, key: str) -> Any:
    """The answer, or the transport error of a server killed before it answered."""
    try:
        return client.post(path, json=body, headers=_key(key))
    except httpx2.TransportError as error:
        return error


def _is_in_progress(answer: httpx2.Response) -> None:
    assert (answer.status_code, answer.json()["type"]) == (409, IN_PROGRESS), answer.text
    assert 1 <= int(answer.headers["Retry-After"]) <= 60
    assert "Idempotent-Replayed" not in answer.headers


def test_a_repeat_while_the_model_works_is_told_to_come_back_then_replays_the_answer(
    server: Server, keys: Keys, stub: Any
) -> None:
    secret = keys("writer")
    stub.app.latency_s = 3.0
    before = stub.app.stats.requests
    try:
        with server.client(secret) as first, server.client(secret) as again:
            thread, answered = _in_background(
                lambda: first.post("/v1/remember", json=SAID, headers=_key("slow-1"))
            )
            _model_called(stub, before)
            meanwhile = again.post("/v1/remember", json=SAID, headers=_key("slow-1"))
            other = again.post(
                "/v1/remember", json=SAID | {"text": "something else"}, headers=_key("slow-1")
            )
            thread.join(timeout=60)
            after = again.post("/v1/remember", json=SAID, headers=_key("slow-1"))
    finally:
        stub.app.latency_s = 0.0

    _is_in_progress(meanwhile)
    assert (other.status_code, other.json()["type"]) == (409, CONFLICT)
    (original,) = answered
    assert original.status_code == 200, original.text
    assert [fact["value"] for fact in original.json()["facts"]] == ["Zwolle"]
    assert (after.status_code, after.headers.get("Idempotent-Replayed")) == (200, "true")
    assert after.json() == original.json()
    assert stub.app.stats.requests == before + 1  # the repeats never reached the model


def test_a_repeated_intake_while_its_episodes_are_processed_is_told_to_come_back(
    server: Server, keys: Keys, stub: Any
) -> None:
    secret = keys("writer")
    episode = SAID | {"session_id": "s1", "occurred_at": "2026-06-01T10:00:00Z"}
    stub.app.latency_s = 3.0
    before = stub.app.stats.requests
    try:
        with server.client(secret) as first, server.client(secret) as again:
            thread, answered = _in_background(
                lambda: first.post("/v1/episodes", json=episode, headers=_key("slow-2"))
            )
            _model_called(stub, before)
            meanwhile = again.post("/v1/episodes", json=episode, headers=_key("slow-2"))
            thread.join(timeout=60)
            after = again.post("/v1/episodes", json=episode, headers=_key("slow-2"))
    finally:
        stub.app.latency_s = 0.0

    _is_in_progress(meanwhile)
    (original,) = answered
    assert original.status_code == 200, original.text
    assert [receipt["status"] for receipt in original.json()["receipts"]] == ["done"]
    assert (after.status_code, after.headers.get("Idempotent-Replayed")) == (200, "true")
    assert after.json() == original.json()


def test_a_reservation_left_by_a_server_that_died_expires_with_the_lease(
    server: Server, api_database: str, tmp_path: Path, keys: Keys, stub: Any
) -> None:
    """A second server on the same database dies while its model thinks; the surviving one
    answers the key's repeats."""
    secret = keys("writer")
    stub.app.latency_s = 30.0  # the server dies long before the model answers
    before = stub.app.stats.requests
    dying = _start(api_database, tmp_path, stub)
    try:
        with dying.client(secret) as client:
            thread, _ = _in_background(
                lambda: _sent_or_dropped(client, "/v1/remember", SAID, "crash-1")
            )
            _model_called(stub, before)
            reserved_at = time.monotonic()
            dying.process.kill()
            dying.process.wait(timeout=10)
            thread.join(timeout=30)
    finally:
        stop_server(dying)
        stub.app.latency_s = 0.0
    with server.client(secret) as client:
        still = client.post("/v1/remember", json=SAID, headers=_key("crash-1"))
        waited = time.monotonic() - reserved_at
        time.sleep(max(0.0, reserved_at + LEASE_S + 1 - time.monotonic()))
        expired = client.post("/v1/remember", json=SAID, headers=_key("crash-1"))

    assert waited < LEASE_S, "the machine was too slow to ask within the lease"
    _is_in_progress(still)
    assert expired.status_code == 200, expired.text  # the key is free: its episode answers
    assert expired.headers.get("Idempotent-Replayed") == "true"
    assert stub.app.stats.requests == before + 1  # the repeats never reached the model
