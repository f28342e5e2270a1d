"""Setting up what the review pages show, and checking what they did, through the REST API
of the same server (the browser tests' shared helpers)."""

from __future__ import annotations

from typing import Any

from tests.integration.server_helpers import Server


def ingest(server: Server, secret: str, *episodes: dict[str, Any]) -> list[str]:
    with server.client(secret) as api:
        answer = api.post("/v1/episodes", json=list(episodes))
    assert answer.status_code == 200, answer.text  # inline mode: processed before the answer
    receipts = answer.json()["receipts"]
    assert [r["status"] for r in receipts] == ["done"] * len(episodes), receipts
    return [r["episode_id"] for r in receipts]


def buffered(server: Server, secret: str, subject: str = "mira") -> list[dict[str, Any]]:
    with server.client(secret) as api:
        found = api.get("/v1/candidates", params={"subject": subject})
    assert found.status_code == 200, found.text
    result: list[dict[str, Any]] = found.json()
    return result


def log_of(server: Server, secret: str, subject: str = "mira") -> list[dict[str, Any]]:
    with server.client(secret) as api:
        found = api.get("/v1/log", params={"subject": subject})
    assert found.status_code == 200, found.text
    result: list[dict[str, Any]] = found.json()
    return result


def key_id(secret: str) -> str:
    return secret.split("_")[1]


def put_fact(server: Server, secret: str, **fields: Any) -> dict[str, Any]:
    body = {"subject": "mira", "source_episode_id": "crm-1"} | fields
    with server.client(secret) as api:
        answer = api.put("/v1/facts", json=body)
    assert answer.status_code == 201, answer.text
    fact: dict[str, Any] = answer.json()["fact"]
    return fact


def put_home_cities(server: Server, secret: str, *moves: tuple[str, str]) -> None:
    """mira's home city as a history of (city, valid from date) moves, put in the order given."""
    for city, since in moves:
        put_fact(server, secret, attribute="home_city", value=city, valid_from=f"{since}T00:00:00Z")


def facts_of(server: Server, secret: str, subject: str = "mira") -> list[dict[str, Any]]:
    with server.client(secret) as api:
        found = api.get(f"/v1/subjects/{subject}/facts")
    assert found.status_code == 200, found.text
    result: list[dict[str, Any]] = found.json()
    return result


def quarantine_of(server: Server, secret: str, subject: str = "mira") -> list[dict[str, Any]]:
    with server.client(secret) as api:
        found = api.get("/v1/quarantine", params={"subject": subject})
    assert found.status_code == 200, found.text
    result: list[dict[str, Any]] = found.json()
    return result
