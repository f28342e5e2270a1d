"""The LLM client's error paths through an injected httpx transport (no network, no cassette):
transport faults are retried below the client, invalid answers are re-asked with the error
shown to the model, and what finally fails is one typed error carrying attempts and usage."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest

from pipeline.cli.errors import exit_code
from pipeline.errors import LlmAnswerInvalid, LlmRequestRejected, LlmUnavailable, RetryableError
from pipeline.extract import extract
from pipeline.extract.llm import LlmClient
from pipeline.extract.protocol import Turn
from pipeline.extract.result import ExtractionResult
from pipeline.settings import Settings
from schemas.extraction import MAX_UPDATES, RejectReason, Usage
from tests.unit.extract_helpers import PASSPORT_UPDATE, catalog, episode

TEXT = "Remember that my passport deadline is June 30, 2026."
GOOD = {"updates": [PASSPORT_UPDATE]}
Reply = httpx2.Response | Exception


def completion(arguments: str, prompt_tokens: int = 100, completion_tokens: int = 20) -> Reply:
    """A chat completion whose tool call carries `arguments`, as OpenAI-compatible servers
    send it in tool mode."""
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_780_000_000,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "Extraction", "arguments": arguments},
                            }
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


def error(status: int, headers: dict[str, str] | None = None) -> Reply:
    return httpx2.Response(status, headers=headers, json={"error": {"message": f"status {status}"}})


class Endpoint:
    """Plays replies in order and records every request it receives."""

    def __init__(self, replies: list[Reply]) -> None:
        self._replies: Iterator[Reply] = iter(replies)
        self.requests: list[dict[str, Any]] = []
        self.sleeps: list[float] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        reply = next(self._replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def client(self, **settings: Any) -> LlmClient:
        configured = Settings(
            _env_file=None,  # type: ignore[call-arg]
            llm_base_url="http://llm.test/v1",
            llm_model="test-model",
            **settings,
        )
        return LlmClient(configured, transport=httpx2.MockTransport(self), sleep=self.sleeps.append)


def spent(usage: Usage) -> tuple[int, int, int, int]:
    """Requests, invalid answers, prompt and completion tokens."""
    return usage.attempts, usage.invalid_answers, usage.prompt_tokens, usage.completion_tokens


def run(endpoint: Endpoint, **settings: Any) -> ExtractionResult:
    llm = endpoint.client(**settings)
    return extract(episode(TEXT), catalog=catalog(), settings=llm.settings, llm=llm)


def test_the_happy_path_is_one_call() -> None:
    endpoint = Endpoint([completion(json.dumps(GOOD))])
    result = run(endpoint)
    assert [c.value for c in result.kept] == ["2026-06-30"]
    assert spent(result.usage) == (1, 0, 100, 20)
    usage = result.usage
    assert (usage.extractor, usage.model, usage.prompt_version) == (
        "llm:test-model",
        "test-model",
        "extract/v2",
    )
    request = endpoint.requests[0]
    assert request["model"] == "test-model"
    assert request["temperature"] == 0.0
    assert request["tool_choice"]["function"]["name"] == "Extraction"


def test_429_with_retry_after_then_success() -> None:
    endpoint = Endpoint([error(429, {"retry-after": "2"}), completion(json.dumps(GOOD))])
    result = run(endpoint)
    assert endpoint.sleeps == [2.0]
    assert (result.usage.attempts, len(result.kept)) == (2, 1)


def test_500_then_success() -> None:
    endpoint = Endpoint([error(500), completion(json.dumps(GOOD))])
    result = run(endpoint)
    (sleep,) = endpoint.sleeps
    assert 0 <= sleep <= 20
    assert (result.usage.attempts, result.usage.prompt_tokens, len(result.kept)) == (2, 100, 1)


def test_a_timeout_then_success() -> None:
    endpoint = Endpoint([httpx2.ReadTimeout("slow"), completion(json.dumps(GOOD))])
    result = run(endpoint)
    assert (result.usage.attempts, len(result.kept)) == (2, 1)


def test_malformed_json_then_a_successful_reask() -> None:
    endpoint = Endpoint([completion('{"updates": [{"evidence": '), completion(json.dumps(GOOD))])
    result = run(endpoint)
    assert spent(result.usage) == (2, 1, 200, 40)
    assert len(result.kept) == 1
    reask = json.dumps(endpoint.requests[1]["messages"])
    assert len(endpoint.requests[1]["messages"]) > len(endpoint.requests[0]["messages"])
    assert "json" in reask.lower() or "error" in reask.lower()


def test_a_schema_violating_answer_then_a_reask() -> None:
    wrong = {"updates": [GOOD["updates"][0] | {"change": "perhaps"}]}
    endpoint = Endpoint([completion(json.dumps(wrong)), completion(json.dumps(GOOD))])
    result = run(endpoint)
    assert (result.usage.attempts, result.usage.invalid_answers) == (2, 1)
    assert "perhaps" in json.dumps(endpoint.requests[1]["messages"])
    assert [c.attribute for c in result.kept] == ["passport_deadline"]


def test_an_off_catalogue_attribute_refuses_that_update_and_keeps_the_rest() -> None:
    wrong = GOOD["updates"][0] | {"attribute": "favourite_colour"}
    endpoint = Endpoint([completion(json.dumps({"updates": [wrong, GOOD["updates"][0]]}))])
    result = run(endpoint)
    assert (result.usage.attempts, result.usage.invalid_answers) == (1, 0)  # no re-ask
    assert [c.attribute for c in result.kept] == ["passport_deadline"]
    assert [(r.update.attribute, r.reason) for r in result.rejected] == [
        ("favourite_colour", RejectReason.UNKNOWN_ATTRIBUTE)
    ]
    # The model is still shown the catalogue's names as the only choice.
    schema = endpoint.requests[0]["tools"][0]["function"]["parameters"]
    assert (
        "favourite_colour" not in schema["$defs"]["MemoryUpdate"]["properties"]["attribute"]["enum"]
    )


def test_more_updates_than_the_limit_refuses_the_extras() -> None:
    text = " ".join(f"I speak Lang{n}." for n in range(MAX_UPDATES + 2))
    updates = [
        {
            "evidence": f"I speak Lang{n}",
            "subject": "I",
            "attribute": "languages",
            "current_value": None,
            "change": "new",
            "value": f"Lang{n}",
            "valid_from": None,
        }
        for n in range(MAX_UPDATES + 2)
    ]
    endpoint = Endpoint([completion(json.dumps({"updates": updates}))])
    llm = endpoint.client()
    result = extract(episode(text), catalog=catalog(), settings=llm.settings, llm=llm)
    assert (result.usage.attempts, result.usage.invalid_answers) == (1, 0)
    assert [c.value for c in result.kept] == [f"Lang{n}" for n in range(MAX_UPDATES)]
    assert [r.reason for r in result.rejected] == [RejectReason.OVER_LIMIT] * 2
    schema = endpoint.requests[0]["tools"][0]["function"]["parameters"]
    assert schema["properties"]["updates"]["maxItems"] == MAX_UPDATES  # still asked for


def _cut_at_max_tokens(arguments: str) -> Reply:
    reply = completion(arguments)
    assert isinstance(reply, httpx2.Response)
    body = json.loads(reply.content)
    body["choices"][0]["finish_reason"] = "length"
    return httpx2.Response(200, json=body)


def _cut_body() -> Reply:
    whole = completion(json.dumps(GOOD))
    assert isinstance(whole, httpx2.Response)
    return httpx2.Response(
        200, headers={"content-type": "application/json"}, content=whole.content[:200]
    )


class _BreaksOff(httpx2.SyncByteStream):
    """A body whose connection closes before the declared length arrived."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data[:50]
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete body")


def _broken_off_stream() -> Reply:
    whole = completion(json.dumps(GOOD))
    assert isinstance(whole, httpx2.Response)
    length = str(len(whole.content))
    headers = {"content-type": "application/json", "content-length": length}
    return httpx2.Response(200, headers=headers, stream=_BreaksOff(whole.content))


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("tool arguments stopped at max_tokens", lambda: _cut_at_max_tokens('{"updates": [')),
        ("tool arguments that end before their JSON", lambda: completion('{"updates": [{"e')),
        ("an HTTP body cut short", _cut_body),
        ("a connection closed mid-body", _broken_off_stream),
    ],
)
def test_an_answer_cut_short_is_retryable_not_permanent(
    name: str, reply: Callable[[], Reply]
) -> None:
    endpoint = Endpoint([reply() for _ in range(3)])
    with pytest.raises(LlmUnavailable) as raised:
        run(endpoint, llm_max_reasks=2, llm_max_attempts=1)
    assert isinstance(raised.value, RetryableError), name
    assert "cut short" in str(raised.value) or "RemoteProtocolError" in raised.value.last_error
    assert exit_code(raised.value) == 5  # the same as an endpoint that is down


def test_a_cut_answer_then_a_whole_one_succeeds_on_the_reask() -> None:
    endpoint = Endpoint([completion('{"updates": [{"evid'), completion(json.dumps(GOOD))])
    result = run(endpoint)
    assert (result.usage.attempts, [c.attribute for c in result.kept]) == (
        2,
        ["passport_deadline"],
    )


def test_persistent_5xx_is_llm_unavailable_with_attempts_and_usage() -> None:
    endpoint = Endpoint([error(503)] * 4)
    with pytest.raises(LlmUnavailable) as raised:
        run(endpoint, llm_max_attempts=4)
    failure = raised.value
    assert failure.attempts == failure.usage.attempts == 4
    assert "503" in failure.last_error
    assert len(endpoint.sleeps) == 3
    assert exit_code(failure) == 5


def test_persistent_timeouts_are_llm_unavailable() -> None:
    endpoint = Endpoint([httpx2.ConnectTimeout("no answer")] * 3)
    with pytest.raises(LlmUnavailable) as raised:
        run(endpoint, llm_max_attempts=3)
    assert raised.value.attempts == 3
    assert "Timeout" in raised.value.last_error


def test_persistently_invalid_answers_are_llm_answer_invalid() -> None:
    endpoint = Endpoint([completion("not json at all", 50, 5)] * 3)
    with pytest.raises(LlmAnswerInvalid) as raised:
        run(endpoint, llm_max_reasks=2)
    failure = raised.value
    assert failure.attempts == 3
    assert (failure.usage.prompt_tokens, failure.usage.completion_tokens) == (150, 15)
    assert failure.usage.invalid_answers == 3
    assert exit_code(failure) == 6


def test_a_refused_request_is_not_retried() -> None:
    endpoint = Endpoint([error(401)])
    with pytest.raises(LlmRequestRejected) as raised:
        run(endpoint)
    assert raised.value.attempts == 1
    assert endpoint.sleeps == []
    assert exit_code(raised.value) == 2


def test_a_retry_after_past_the_longest_wait_gives_up_at_once() -> None:
    endpoint = Endpoint([error(429, {"retry-after": "600"})])
    with pytest.raises(LlmUnavailable) as raised:
        run(endpoint, llm_max_wait_s=30)
    assert (raised.value.attempts, endpoint.sleeps) == (1, [])


def test_an_unreachable_endpoint_is_llm_unavailable() -> None:
    # A real connection to a closed local port: refused at once.
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        llm_base_url="http://127.0.0.1:9/v1",
        llm_max_attempts=2,
    )
    sleeps: list[float] = []
    llm = LlmClient(settings, sleep=sleeps.append)
    with pytest.raises(LlmUnavailable) as raised:
        extract(episode(TEXT), catalog=catalog(), settings=settings, llm=llm)
    assert raised.value.attempts == 2
    assert raised.value.last_error.startswith("ConnectError")


def test_the_prompt_sent_carries_the_conversation_and_its_version() -> None:
    """What reaches the endpoint (here one that fails, so no answer is needed): extract/v2 with
    the earlier turns as context only, and the prompt's name on the usage."""
    endpoint = Endpoint([error(503)])
    llm = endpoint.client(llm_max_attempts=1)
    earlier = [Turn("Tom", datetime(2026, 6, 3, 9, 59, tzinfo=UTC), "Did you move?")]
    with pytest.raises(LlmUnavailable) as raised:
        extract(
            episode("Yes, since March."),
            catalog=catalog(),
            settings=llm.settings,
            llm=llm,
            earlier=earlier,
        )
    (sent,) = endpoint.requests
    user = sent["messages"][1]["content"]
    assert "- Tom (2026-06-03T09:59:00+00:00): Did you move?" in user
    assert user.endswith("Yes, since March.")
    assert raised.value.usage.prompt_version == "extract/v2"
    pinned = Endpoint([error(503)])
    old = pinned.client(llm_max_attempts=1, llm_prompt="extract/v1")
    with pytest.raises(LlmUnavailable) as raised:
        extract(episode("Yes."), catalog=catalog(), settings=old.settings, llm=old, earlier=earlier)
    assert "Did you move?" not in json.dumps(pinned.requests[0]["messages"])
    assert raised.value.usage.prompt_version == "extract/v1"


def test_an_unknown_prompt_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="must be one of extract/v1, extract/v2"):
        Settings(_env_file=None, llm_prompt="extract/v9")  # type: ignore[call-arg]
