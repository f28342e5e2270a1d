"""Idempotency-Key over HTTP, against a real `sgam serve` on PostgreSQL: a repeat of the same
request (endpoint, scope, payload) answers the first status and body again with
`Idempotent-Replayed: true` and writes nothing; the key used for another payload, endpoint or
scope is 409 `idempotency-conflict`; a replay never shows what the replaying key may not read
now, nor a forgotten value; a taken episode id under a new key is 409, never a 500."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from tests.integration.server_helpers import Keys, Server, episode_body, fact_body, rows_of

pytestmark = pytest.mark.postgres

CONFLICT = "urn:sgam:problem:idempotency-conflict"
REPLAYED = "Idempotent-Replayed"
SAID = {"subject": "noor", "text": "my employer is Globex"}


def _key(name: str) -> dict[str, str]:
    return {"Idempotency-Key": name}


def _conflict(answer: httpx2.Response) -> tuple[int, str]:
    return answer.status_code, answer.json().get("type", "")


def test_a_repeated_put_answers_the_first_status_and_body(
    server: Server, keys: Keys, tenant: str
) -> None:
    with server.client(keys("writer")) as api:
        first = api.put("/v1/facts", json=fact_body(), headers=_key("put-1"))
        before = rows_of(server.database_url, tenant)
        again = api.put("/v1/facts", json=fact_body(), headers=_key("put-1"))

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again.headers.get(REPLAYED) == "true"
    assert REPLAYED not in first.headers
    assert again.headers["ETag"] == first.headers["ETag"]
    assert rows_of(server.database_url, tenant) == before


def test_a_repeated_remember_answers_the_first_body_refusals_included(
    server: Server, keys: Keys, tenant: str
) -> None:
    at = "2026-06-01T10:00:00Z"
    held = fact_body(subject="noor", attribute="employer", value="Initech", valid_from=at)
    said = SAID | {"occurred_at": at}
    with server.client(keys("writer")) as api:
        assert api.put("/v1/facts", json=held | {"trust": "user_confirmed"}).status_code == 201
        first = api.post("/v1/remember", json=said, headers=_key("rem-1"))
        before = rows_of(server.database_url, tenant)
        again = api.post("/v1/remember", json=said, headers=_key("rem-1"))

    assert first.status_code == again.status_code == 200
    assert [r["reason"] for r in first.json()["rejected"]] == ["FactConflict"]
    assert again.json() == first.json()
    assert again.headers.get(REPLAYED) == "true"
    assert rows_of(server.database_url, tenant) == before


@pytest.mark.parametrize(
    "sent",
    [[episode_body(), episode_body("my plan is pro")], episode_body("my plan is free")],
    ids=["batch", "single"],
)
def test_a_repeated_episode_intake_answers_the_first_status_and_body(
    server: Server, keys: Keys, tenant: str, sent: Any
) -> None:
    with server.client(keys("writer")) as api:
        first = api.post("/v1/episodes", json=sent, headers=_key("batch-1"))
        before = rows_of(server.database_url, tenant)
        again = api.post("/v1/episodes", json=sent, headers=_key("batch-1"))

    assert first.status_code == again.status_code == 200
    assert {r["status"] for r in first.json()["receipts"]} == {"done"}
    assert again.json() == first.json()
    assert again.headers.get(REPLAYED) == "true"
    assert REPLAYED not in first.headers
    assert rows_of(server.database_url, tenant) == before


@pytest.mark.parametrize(
    ("path", "body", "changed"),
    [
        ("/v1/facts", fact_body(), fact_body(value="Paris")),
        ("/v1/remember", SAID, SAID | {"text": "my employer is Initech"}),
        ("/v1/episodes", episode_body(), episode_body("my home city is Porto")),
        ("/v1/episodes", [episode_body()], [episode_body("my home city is Porto")]),
    ],
    ids=["put", "remember", "episode", "batch"],
)
def test_the_key_with_another_payload_is_a_conflict_and_writes_nothing(
    server: Server, keys: Keys, tenant: str, path: str, body: Any, changed: Any
) -> None:
    method = "PUT" if path == "/v1/facts" else "POST"
    with server.client(keys("writer")) as api:
        assert api.request(method, path, json=body, headers=_key("k-1")).status_code < 300
        before = rows_of(server.database_url, tenant)
        reused = api.request(method, path, json=changed, headers=_key("k-1"))

    assert _conflict(reused) == (409, CONFLICT)
    assert rows_of(server.database_url, tenant) == before


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("put", "remember"),
        ("put", "episodes"),
        ("remember", "put"),
        ("remember", "episodes"),
        ("episodes", "remember"),
        ("episodes", "put"),
    ],
)
def test_a_key_used_on_one_endpoint_is_a_conflict_on_another(
    server: Server, keys: Keys, tenant: str, first: str, then: str
) -> None:
    requests = {
        "put": ("PUT", "/v1/facts", fact_body(subject="noor")),
        "remember": ("POST", "/v1/remember", SAID),
        "episodes": ("POST", "/v1/episodes", episode_body("my employer is Globex", subject="noor")),
    }
    with server.client(keys("writer")) as api:
        method, path, body = requests[first]
        assert api.request(method, path, json=body, headers=_key("shared")).status_code < 300
        before = rows_of(server.database_url, tenant)
        method, path, body = requests[then]
        reused = api.request(method, path, json=body, headers=_key("shared"))

    assert _conflict(reused) == (409, CONFLICT)
    assert rows_of(server.database_url, tenant) == before


@pytest.mark.parametrize("path", ["/v1/facts", "/v1/remember"])
def test_the_key_from_another_scope_or_api_key_is_a_conflict_and_shows_nothing(
    server: Server, keys: Keys, tenant: str, path: str
) -> None:
    """Another agent's key replaying a key sees a 409, never the first agent's fact."""
    method, body = ("PUT", fact_body()) if path == "/v1/facts" else ("POST", SAID)
    value = "Utrecht" if path == "/v1/facts" else "Globex"
    with server.client(keys("writer", agent_id="bot1", purpose="support")) as api:
        assert api.request(method, path, json=body, headers=_key("scoped")).status_code < 300
    others = [
        keys("writer", agent_id="bot2", purpose="support"),
        keys("writer", agent_id="bot1", purpose="billing"),
        keys("writer", agent_id="bot1", purpose="support"),  # the same scope, another key
    ]
    before = rows_of(server.database_url, tenant)
    for secret in others:
        with server.client(secret) as api:
            reused = api.request(method, path, json=body, headers=_key("scoped"))
        assert _conflict(reused) == (409, CONFLICT)
        assert value not in reused.text
    assert rows_of(server.database_url, tenant) == before


def test_keys_are_per_tenant_a_key_of_another_tenant_is_its_own(
    server: Server, keys: Keys, tenant: str
) -> None:
    other = tenant + "-b"
    with server.client(keys("writer")) as api:
        first = api.post("/v1/remember", json=SAID, headers=_key("tenant-key"))
    with server.client(keys("writer", tenant_id=other)) as api:
        theirs = api.post("/v1/remember", json=SAID, headers=_key("tenant-key"))

    assert REPLAYED not in theirs.headers
    assert theirs.json()["episode_id"] != first.json()["episode_id"]
    assert [f["tenant_id"] for f in theirs.json()["facts"]] == [other]


def test_a_replay_after_a_forget_never_shows_the_forgotten_value(
    server: Server, keys: Keys
) -> None:
    put = fact_body(subject="noor", attribute="employer", value="Initech")
    with server.client(keys("admin")) as api:
        remembered = api.post("/v1/remember", json=SAID, headers=_key("rem-f"))
        written = api.put("/v1/facts", json=put, headers=_key("put-f"))
        assert [f["value"] for f in remembered.json()["facts"]] == ["Globex"]
        assert written.status_code == 201
        assert api.delete("/v1/subjects/noor").status_code == 200

        again = api.post("/v1/remember", json=SAID, headers=_key("rem-f"))
        put_again = api.put("/v1/facts", json=put, headers=_key("put-f"))

    assert again.status_code == 200
    assert again.headers.get(REPLAYED) == "true"
    assert again.json()["episode_id"] == remembered.json()["episode_id"]
    assert again.json()["facts"] == []
    assert "Globex" not in again.text
    assert (put_again.status_code, put_again.json()["type"]) == (404, "urn:sgam:problem:not-found")
    assert "Initech" not in put_again.text


def test_a_taken_episode_id_under_a_new_key_is_a_conflict_not_a_500(
    server: Server, keys: Keys, tenant: str
) -> None:
    with server.client(keys("writer")) as api:
        first = api.post(
            "/v1/remember", json=SAID | {"episode_id": "ep-taken"}, headers=_key("first")
        )
        before = rows_of(server.database_url, tenant)
        reused = api.post(
            "/v1/remember", json=SAID | {"episode_id": "ep-taken"}, headers=_key("second")
        )
        sent = api.post("/v1/episodes", json=episode_body("my plan is pro", episode_id="ep-taken"))

    assert first.status_code == 200
    assert _conflict(reused) == (409, CONFLICT)
    assert _conflict(sent) == (409, CONFLICT)
    assert rows_of(server.database_url, tenant) == before


def test_the_openapi_document_names_the_replay_header_and_the_conflict(server: Server) -> None:
    with server.client() as api:
        document = api.get("/openapi.json").json()

    for path, method, status in [
        ("/v1/facts", "put", "201"),
        ("/v1/remember", "post", "200"),
        ("/v1/episodes", "post", "202"),
        ("/v1/subjects/{subject}", "delete", "200"),
    ]:
        responses = document["paths"][path][method]["responses"]
        assert REPLAYED in responses[status]["headers"], path
        assert "idempotency-conflict" in responses["409"]["description"], path


def test_an_episode_id_taken_by_another_episode_is_a_conflict_under_a_new_key(
    server: Server, keys: Keys, tenant: str
) -> None:
    """A key not used before does not make a taken id this episode's: another text under the
    id is 409 whether the key comes in the header or the body, never a `duplicate` that drops
    the new text."""
    with server.client(keys("writer")) as api:
        first = api.post("/v1/episodes", json=episode_body("my plan is pro", episode_id="ep-own"))
        before = rows_of(server.database_url, tenant)
        other = episode_body("my plan is basic", episode_id="ep-own")
        in_header = api.post("/v1/episodes", json=other, headers=_key("fresh-1"))
        in_body = api.post("/v1/episodes", json=other | {"idempotency_key": "fresh-2"})
        in_batch = api.post("/v1/episodes", json=[other], headers=_key("fresh-3"))
        same = api.post(
            "/v1/episodes",
            json=episode_body("my plan is pro", episode_id="ep-own"),
            headers=_key("fresh-4"),
        )

    assert first.status_code in (200, 202)
    assert _conflict(in_header) == (409, CONFLICT)
    assert _conflict(in_body) == (409, CONFLICT)
    assert _conflict(in_batch) == (409, CONFLICT)
    assert same.status_code == 200, same.text  # the same episode again is a duplicate
    assert same.json()["receipts"][0]["status"] == "duplicate"
    assert rows_of(server.database_url, tenant) == before
