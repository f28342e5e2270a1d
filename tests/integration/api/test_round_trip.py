"""Every documented field of the HTTP intake and put paths comes back as it was sent."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import FULL_EPISODE, FULL_PUT
from tests.integration.server_helpers import Keys, Server

pytestmark = pytest.mark.postgres


def test_post_episodes_keeps_every_field(server: Server, keys: Keys, tenant: str) -> None:
    sent = {k: v for k, v in FULL_EPISODE.items() if k not in ("tenant_id", "actor")}
    secret = keys("writer", agent_id="support-bot", purpose="orders")
    with server.client(secret) as api:
        posted = api.post("/v1/episodes", json=sent)
        shown = api.get(f"/v1/episodes/{sent['episode_id']}")
        listed = api.get("/v1/episodes")

    assert posted.status_code == 200, posted.text
    assert shown.status_code == 200
    body = shown.json()
    assert {name: body[name] for name in sent if name != "occurred_at"} == {
        name: value for name, value in sent.items() if name != "occurred_at"
    }
    assert body["occurred_at"] == "2026-06-03T08:00:00Z"
    assert body["tenant_id"] == tenant
    assert [episode["metadata"] for episode in listed.json()] == [sent["metadata"]]


def test_post_remember_takes_occurred_at_and_at(server: Server, keys: Keys) -> None:
    def body(**fields: Any) -> dict[str, Any]:
        return {"subject": "mira", "text": "My home city is Lisbon.", **fields}

    with server.client(keys("writer")) as api:
        new_name = api.post(
            "/v1/remember", json=body(occurred_at="2026-06-03T10:00:00+02:00", episode_id="h1")
        )
        old_name = api.post(
            "/v1/remember", json=body(at="2026-07-03T10:00:00Z", text="My home city is Porto.")
        )

    assert new_name.status_code == 200, new_name.text
    assert [f["valid_from"] for f in new_name.json()["facts"]] == ["2026-06-03T08:00:00Z"]
    assert old_name.status_code == 200, old_name.text
    assert [f["valid_from"] for f in old_name.json()["facts"]] == ["2026-07-03T10:00:00Z"]


def test_put_facts_keeps_every_field(server: Server, keys: Keys) -> None:
    sent = {
        k: v
        for k, v in FULL_PUT.items()
        if k not in ("tenant_id", "actor", "expected_version", "idempotency_key")
    }
    with server.client(keys("writer")) as api:
        put = api.put(
            "/v1/facts", json=sent, headers={"If-Match": '"0"', "Idempotency-Key": "put-full"}
        )
        read = api.get(
            "/v1/subjects/mira/facts",
            params={"agent_id": "support-bot", "purpose": "orders", "at": "2026-06-04T00:00:00Z"},
        )

    assert put.status_code == 201, put.text
    (fact,) = read.json()
    assert {name: fact[name] for name in sent} == sent
