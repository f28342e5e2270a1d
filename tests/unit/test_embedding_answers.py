"""What the embedding client makes of an endpoint's answer (`pipeline/embedding/client.py`):
the vectors in the order of the texts, each of unit length, the tokens counted; an answer of
the wrong shape or count is one `EmbeddingFailed` naming what is wrong, never retried."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from pipeline.embedding.client import EmbeddingClient, EmbeddingFailed
from pipeline.settings import Settings


def _client(answer: Any, requests: list[dict[str, Any]]) -> EmbeddingClient:
    def endpoint(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        embedding_model="m",
        embedding_base_url="http://embeddings.invalid/v1",
    )
    return EmbeddingClient(settings, httpx2.MockTransport(endpoint), sleep=lambda _: None)


def test_the_vectors_come_in_the_texts_order_scaled_to_unit_length() -> None:
    requests: list[dict[str, Any]] = []
    answer = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 2.0]},
            {"object": "embedding", "index": 0, "embedding": [3.0, 4.0]},
        ],
        "model": "m",
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }

    embedded = _client(answer, requests).embed(["first", "second"])

    assert embedded.vectors == [[0.6, 0.8], [0.0, 1.0]]
    assert (embedded.tokens, embedded.attempts) == (7, 1)
    assert requests == [{"input": ["first", "second"], "model": "m", "encoding_format": "float"}]


def test_an_answer_without_usage_counts_no_tokens() -> None:
    answer = {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}

    assert _client(answer, []).embed(["one"]).tokens == 0


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"data": [{"index": 0, "embedding": "AAAA"}]},
            "malformed answer at data.0.embedding: Input should be a valid array",
        ),
        ({"vectors": []}, "malformed answer at data: Field required"),
        (b"<html>busy</html>", "malformed answer: Invalid JSON"),
        ({"data": [{"index": 0, "embedding": [1.0]}]}, "1 vectors for 2 texts"),
    ],
)
def test_an_answer_of_the_wrong_shape_fails_once_naming_what_is_wrong(
    answer: Any, message: str
) -> None:
    requests: list[dict[str, Any]] = []

    with pytest.raises(EmbeddingFailed) as failed:
        _client(answer, requests).embed(["one", "two"])

    assert str(failed.value).startswith(message)
    assert failed.value.attempts == 1
    assert len(requests) == 1
