"""Every input limit the OpenAPI document states is the one the server keeps: each is read
from a real server's `/openapi.json` (JSON Schema's own keywords, or the `x-` keywords and
words where JSON Schema cannot say it) and sent at the limit (accepted) and one past it
(refused, nothing written)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.integration.server_helpers import Keys, Server, episode_body, fact_body, rows_of

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def document(server: Server) -> dict[str, Any]:
    with server.client() as api:
        found: dict[str, Any] = api.get("/openapi.json").json()
    return found


def schema(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = document["components"]["schemas"][name]
    return found


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def refused(answer: Any, field: str) -> None:
    assert answer.status_code == 422, answer.text[:300]
    assert field in answer.text, answer.text[:300]  # named (a batch's errors name it too)


def test_episode_metadata_size_and_depth(
    server: Server, keys: Keys, tenant: str, document: dict[str, Any]
) -> None:
    metadata = schema(document, "EpisodeBody")["properties"]["metadata"]
    size, depth = metadata["x-max-bytes"], metadata["x-max-depth"]
    assert (size, depth) == (16 * 1024, 64)
    assert f"{size} bytes" in metadata["description"]
    assert f"{depth} deep" in metadata["description"]
    padding = size - len('{"k":""}')  # canonical JSON of {"k": "a" * padding}

    def sent(meta: dict[str, Any], n: int) -> Any:
        body = episode_body(metadata=meta, episode_id=f"e{n}")
        with server.client(keys("writer")) as api:
            return api.post("/v1/episodes", json=body)

    # Its own keys are text without NUL, as its values' are (the document left them open).
    assert re.search(metadata["propertyNames"]["pattern"], "a\x00") is None
    refused(sent({"a\x00": 1}, 0), "metadata")
    refused(sent({"k": "a" * (padding + 1)}, 1), "metadata")
    refused(sent({"k": nested(depth)}, 2), "metadata")  # 1 + 64 levels
    assert set(rows_of(server.database_url, tenant).values()) == {0}
    assert sent({"k": "a" * padding}, 3).status_code in (200, 202)
    assert sent({"k": nested(depth - 1)}, 4).status_code in (200, 202)


def test_a_values_size(server: Server, keys: Keys, document: dict[str, Any]) -> None:
    put = document["paths"]["/v1/facts"]["put"]["requestBody"]["content"]["application/json"]
    (city,) = [
        choice
        for choice in put["schema"]["oneOf"]
        if choice["properties"]["attribute"]["const"] == "home_city"
    ]
    value = city["properties"]["value"]
    assert value["x-max-bytes"] == 64 * 1024  # SGAM_MAX_VALUE_BYTES's default
    assert value["maxLength"] == value["x-max-bytes"] - 2  # the quotes
    with server.client(keys("writer")) as api:
        over = api.put("/v1/facts", json=fact_body(value="a" * (value["maxLength"] + 1)))
        within = api.put("/v1/facts", json=fact_body(value="a" * value["maxLength"]))

    refused(over, "value")
    assert within.status_code == 201, within.text[:300]


def test_a_bodys_size(server: Server, keys: Keys, document: dict[str, Any]) -> None:
    body = document["paths"]["/v1/facts"]["put"]["requestBody"]
    limit = body["x-max-bytes"]
    assert f"At most {limit} bytes" in body["description"]
    text = json.dumps(fact_body(subject="big")).encode()
    headers = {"Content-Type": "application/json"}
    with server.client(keys("writer")) as api:
        over = api.put("/v1/facts", content=text + b" " * (limit + 1 - len(text)), headers=headers)
        within = api.put("/v1/facts", content=text + b" " * (limit - len(text)), headers=headers)

    assert over.status_code == 413, over.text[:300]
    assert within.status_code == 201, within.text[:300]


def test_an_episodes_text_and_names(server: Server, keys: Keys, document: dict[str, Any]) -> None:
    properties = schema(document, "EpisodeBody")["properties"]
    chars, names = properties["text"]["maxLength"], properties["subject_names"]["maxItems"]
    assert (chars, names) == (20_000, 20)
    with server.client(keys("writer")) as api:
        long = api.post("/v1/episodes", json=episode_body("a" * (chars + 1)))
        many = api.post("/v1/episodes", json=episode_body(subject_names=["n"] * (names + 1)))
        within = api.post(
            "/v1/episodes",
            json=episode_body("a" * chars, subject_names=[f"n{n}" for n in range(names)]),
        )

    assert long.status_code == 422, long.text[:300]
    assert many.status_code == 422, many.text[:300]
    assert within.status_code in (200, 202), within.text[:300]


def test_an_identifiers_length_as_sent_and_in_nfc(
    server: Server, keys: Keys, tenant: str, document: dict[str, Any]
) -> None:
    """Before, a decomposed name of 202 characters (101 in NFC) was read though the document
    says 200 at most, and 200 characters that NFC lengthens were refused unannounced."""
    subject = schema(document, "RememberBody")["properties"]["subject"]
    limit = subject["maxLength"]
    assert subject["x-nfc-max-length"] == limit == 200
    with server.client(keys("writer")) as api:
        as_sent = api.post(
            "/v1/remember", json={"subject": "e\u0301" * (limit // 2 + 1), "text": "x"}
        )
        in_nfc = api.post("/v1/remember", json={"subject": "\u0958" * limit, "text": "x"})
        path = api.get(f"/v1/subjects/{'e%CC%81' * (limit // 2 + 1)}/facts")
        written = rows_of(server.database_url, tenant)
        within = api.put("/v1/facts", json=fact_body(subject="e\u0301" * (limit // 2)))
        read = api.get(f"/v1/subjects/{'%C3%A9' * (limit // 2)}/facts")

    refused(as_sent, "subject")
    refused(in_nfc, "subject")
    refused(path, "subject")
    assert set(written.values()) == {0}
    assert within.status_code == 201, within.text[:300]
    assert [fact["value"] for fact in read.json()] == ["Utrecht"]  # stored composed
