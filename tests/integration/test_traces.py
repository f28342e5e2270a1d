"""Traces of the pipeline in this process (inline mode, the hot path, the model lane against the
stub OpenAI-compatible server), exported through SGAM's OTLP exporter to a local receiver: the
tree of spans, the GenAI attributes, and that no span carries a value — also when things fail
(exception messages can quote what a user sent)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.errors import InvalidLines
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.settings import Settings
from schemas.lifecycle import DecisionAction
from tests.integration.otlp_helpers import OtlpReceiver, Received, Receiver, provider_for, tree
from tests.integration.stub_llm import StubServer

TENANT = "acme"
# Markers: whatever of them reaches a span, an attribute, a status or an event is a leak.
TEXT_MARKER = "Zqxmarkertext"
VALUE_MARKER = "Zqxmarkervalue"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with OtlpReceiver() as received:
        provider = provider_for(received)
        tracing.enable(provider)
        try:
            yield received
        finally:
            tracing.disable()
            provider.shutdown()


def _episode(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "tenant_id": TENANT,
        "subject": "mira",
        "session_id": "s1",
        "occurred_at": "2026-06-01T09:00:00+02:00",
        "text": text,
    } | extra


def _named(spans: list[Received], name: str) -> list[Received]:
    return [span for span in spans if span.name == name]


def assert_no_values(receiver: Receiver, *markers: str) -> None:
    """Not a byte of any marker in what was exported: the raw protobuf is searched, so a
    field the test does not decode cannot hide one."""
    assert receiver.raw, "nothing was exported"
    for body in receiver.raw:
        for marker in markers:
            assert marker.encode() not in body
            assert marker.lower().encode() not in body.lower()


def assert_known_attributes(spans: list[Received]) -> None:
    decisions = {names.decisions_attribute(action.value) for action in DecisionAction}
    unknown = {
        key
        for span in spans
        for key in span.attributes
        if key not in names.ATTRIBUTES and key not in decisions
    }
    assert unknown == set()


def test_an_inline_episode_is_one_trace_from_intake_to_its_decisions(
    receiver: Receiver, store: Store
) -> None:
    text = f"Remember that my passport deadline is 2026-07-15. {TEXT_MARKER}"
    with tracing.span("caller"):
        (receipt,) = pipeline.ingest(store, _episode(text)).receipts
    assert receipt.status == "done"
    spans = receiver.wait_for(lambda got: any(s.name == "caller" for s in got))

    assert len({span.trace_id for span in spans}) == 1
    assert tree(spans) == "\n".join(
        [
            "caller [internal, sgam-test]",
            "  ingest [internal, sgam-test]",
            "    claim [internal, sgam-test]",
            "    process_episode [internal, sgam-test]",
            "      extract [internal, sgam-test]",
            "        search_memory [internal, sgam-test]",
            "      upsert_memory [internal, sgam-test]",
        ]
    )
    (episode,) = _named(spans, "process_episode")
    assert episode.attributes == {
        names.SGAM_TENANT: TENANT,
        names.SGAM_EPISODE: receipt.episode_id,
        names.SGAM_LANE: "background",
        names.SGAM_ATTEMPT: 1,
        names.SGAM_OUTCOME: "done",
    }
    (extract,) = _named(spans, "extract")
    assert extract.attributes == {
        names.SGAM_EXTRACTOR: "rules",
        names.SGAM_CANDIDATES_KEPT: 1,
        names.SGAM_CANDIDATES_REFUSED: 0,
    }
    (search,) = _named(spans, "search_memory")
    assert search.attributes == {
        names.GEN_AI_OPERATION_NAME: "search_memory",
        names.GEN_AI_MEMORY_STORE_ID: f"{TENANT}/default/default",
        names.SGAM_TENANT: TENANT,
        names.GEN_AI_MEMORY_RECORD_COUNT: 0,
    }
    (upsert,) = _named(spans, "upsert_memory")
    assert upsert.attributes == {
        names.GEN_AI_OPERATION_NAME: "upsert_memory",
        names.GEN_AI_MEMORY_STORE_ID: f"{TENANT}/default/default",
        names.SGAM_TENANT: TENANT,
        names.SGAM_EPISODE: receipt.episode_id,
        names.GEN_AI_MEMORY_RECORD_COUNT: 1,
        "sgam.decisions.written": 1,
    }
    assert {span.kind for span in spans} == {"internal"}
    assert all(span.status == "unset" for span in spans)
    assert_known_attributes(spans)
    assert_no_values(receiver, TEXT_MARKER, "2026-07-15", "passport deadline")


def test_the_hot_path_is_one_trace_with_its_decisions(receiver: Receiver, store: Store) -> None:
    with tracing.span("caller"):
        remembered = pipeline.remember(
            store, {"tenant_id": TENANT, "subject": "mira", "text": "my home city is Utrecht"}
        )
    (fact,) = remembered.facts
    spans = receiver.wait_for(lambda got: any(s.name == "caller" for s in got))

    assert tree(spans, attributes=(names.SGAM_LANE, names.SGAM_OUTCOME)) == "\n".join(
        [
            "caller [internal, sgam-test]",
            "  remember [internal, sgam-test] sgam.lane=hot sgam.outcome=done",
            "    extract [internal, sgam-test]",
            "      search_memory [internal, sgam-test]",
            "    upsert_memory [internal, sgam-test]",
        ]
    )
    (upsert,) = _named(spans, "upsert_memory")
    assert upsert.attributes["sgam.decisions.written"] == 1
    assert upsert.attributes[names.SGAM_EPISODE] == remembered.episode_id
    assert_no_values(receiver, fact.value, "home city")


def test_reads_and_refusals_leave_no_value_and_name_only_the_error_class(
    receiver: Receiver, store: Store
) -> None:
    """An invalid episode (whose problem message quotes the field), and an unknown subject's
    read: the spans say the class, never the message."""
    with pytest.raises(InvalidLines):
        pipeline.ingest(store, [_episode("ok"), _episode(TEXT_MARKER, occurred_at=VALUE_MARKER)])
    spans = receiver.wait_for(lambda got: any(s.name == "ingest" for s in got))
    (ingest,) = _named(spans, "ingest")
    assert (ingest.status, ingest.status_message) == ("error", "InvalidLines")
    assert ingest.attributes[names.ERROR_TYPE] == "InvalidLines"
    assert ingest.events == []  # no exception event: its message would quote the line
    assert_no_values(receiver, TEXT_MARKER, VALUE_MARKER)


@pytest.fixture
def model_store(tmp_path: Any) -> Iterator[tuple[Store, Any]]:
    with StubServer() as stub:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            database_url=f"sqlite:///{tmp_path / 'model.sqlite3'}",
            llm_base_url=stub.base_url,
            llm_model="stub-model",
            llm_max_attempts=2,
        )
        store = open_store(settings)
        try:
            yield store, stub
        finally:
            store.dispose()


def _update(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "updates": [
            {
                "evidence": f"my home city is {VALUE_MARKER}",
                "subject": "mira",
                "attribute": "home_city",
                "current_value": None,
                "change": "new",
                "value": VALUE_MARKER,
                "valid_from": None,
            }
        ]
    }


def test_a_model_call_is_a_genai_client_span_with_its_usage(
    receiver: Receiver, model_store: tuple[Store, Any]
) -> None:
    store, stub = model_store
    stub.app.answer = _update
    with tracing.span("caller"):
        (receipt,) = pipeline.ingest(
            store, _episode(f"my home city is {VALUE_MARKER}. {TEXT_MARKER}")
        ).receipts
    assert receipt.status == "done"
    spans = receiver.wait_for(lambda got: any(s.name == "caller" for s in got))

    assert tree(spans) == "\n".join(
        [
            "caller [internal, sgam-test]",
            "  ingest [internal, sgam-test]",
            "    claim [internal, sgam-test]",
            "    process_episode [internal, sgam-test]",
            "      search_memory [internal, sgam-test]",
            "      extract [internal, sgam-test]",
            "        chat stub-model [client, sgam-test]",
            "      upsert_memory [internal, sgam-test]",
        ]
    )
    (chat,) = _named(spans, "chat stub-model")
    usage = pipeline.show_episode(store, TENANT, receipt.episode_id).usage
    assert usage is not None
    assert chat.attributes == {
        names.GEN_AI_OPERATION_NAME: "chat",
        names.GEN_AI_PROVIDER_NAME: "openai",
        names.GEN_AI_REQUEST_MODEL: "stub-model",
        names.GEN_AI_REQUEST_MAX_TOKENS: 1024,
        names.GEN_AI_REQUEST_TEMPERATURE: 0.0,
        names.GEN_AI_OUTPUT_TYPE: "json",
        names.SGAM_PROMPT_VERSION: "extract/v2",
        names.SERVER_ADDRESS: "127.0.0.1",
        names.SERVER_PORT: stub.port,
        names.GEN_AI_USAGE_INPUT_TOKENS: usage["prompt_tokens"],
        names.GEN_AI_USAGE_OUTPUT_TOKENS: usage["completion_tokens"],
        names.GEN_AI_RESPONSE_FINISH_REASONS: ["tool_calls"],
        names.GEN_AI_RESPONSE_MODEL: "stub-model",
        names.SGAM_LLM_ATTEMPTS: 1,
        names.SGAM_LLM_INVALID_ANSWERS: 0,
    }
    assert usage["prompt_tokens"] > 0
    (extract,) = _named(spans, "extract")
    assert extract.attributes[names.SGAM_EXTRACTOR] == "llm:stub-model"
    assert extract.attributes[names.SGAM_PROMPT_VERSION] == "extract/v2"
    assert_known_attributes(spans)
    assert_no_values(receiver, TEXT_MARKER, VALUE_MARKER)


def test_a_failing_model_call_names_its_error_class_and_no_message(
    receiver: Receiver, model_store: tuple[Store, Any]
) -> None:
    """The model answers with a change kind that does not exist, quoting the episode: the
    validation error (re-asked, then given up) quotes the answer, as provider errors may.
    The spans say which SGAM error it became, nothing of its message."""
    store, stub = model_store
    stub.app.answer = lambda request: {
        "updates": [_update(request)["updates"][0] | {"change": TEXT_MARKER}]
    }
    with tracing.span("caller"):
        (receipt,) = pipeline.ingest(store, _episode(f"my home city is {TEXT_MARKER}")).receipts
    assert receipt.status == "failed"
    assert receipt.error is not None
    spans = receiver.wait_for(lambda got: any(s.name == "caller" for s in got))

    (chat,) = _named(spans, "chat stub-model")
    assert (chat.status, chat.status_message) == ("error", "LlmAnswerInvalid")
    assert chat.attributes[names.ERROR_TYPE] == "LlmAnswerInvalid"
    assert chat.attributes[names.SGAM_LLM_INVALID_ANSWERS] == 3  # the answer and two re-asks
    (episode,) = _named(spans, "process_episode")
    assert (episode.status, episode.status_message) == ("error", "LlmAnswerInvalid")
    assert episode.attributes[names.SGAM_OUTCOME] == "failed"
    assert all(span.events == [] for span in spans)
    assert_known_attributes(spans)
    assert_no_values(receiver, TEXT_MARKER)
