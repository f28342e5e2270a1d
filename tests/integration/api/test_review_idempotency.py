"""Idempotency-Key on confirm, reject and retry over HTTP and MCP, against a real `sgam serve`
on PostgreSQL: the same request again answers the first status and body with
`Idempotent-Replayed: true` and writes nothing; the key used for another request is 409
`idempotency-conflict`; without a key a repeat is refused as before (not-buffered, not-failed);
two requests with one key at once decide once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest
from mcp import Client
from sqlalchemy import update

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from tests.integration.api.mcp_helpers import DOORS, answer, problem_type, session
from tests.integration.api_setup import buffered, ingest, log_of
from tests.integration.server_helpers import Keys, Server, episode_body, rows_of

pytestmark = pytest.mark.postgres

REPLAYED = "Idempotent-Replayed"
PROBLEM = "urn:sgam:problem:"


def _key(name: str) -> dict[str, str]:
    return {"Idempotency-Key": name}


def _candidate(server: Server, keys: Keys) -> str:
    ingest(server, keys("writer"), episode_body("please contact me by email"))
    (candidate,) = buffered(server, keys("reviewer"))
    return str(candidate["candidate_id"])


def _failed(server: Server, keys: Keys, store: Store, tenant: str) -> str:
    """A failed episode (marked so directly: inline processing does not fail on its own)."""
    (episode_id,) = ingest(server, keys("writer"), episode_body())
    store.run(
        lambda unit: unit.session.execute(
            update(EpisodeRow)
            .where(EpisodeRow.tenant_id == tenant, EpisodeRow.episode_id == episode_id)
            .values(status="failed")
        )
    )
    return episode_id


def _decisions(server: Server, keys: Keys, kind: str) -> int:
    return sum(1 for event in log_of(server, keys("reviewer")) if event["kind"] == kind)


@pytest.mark.parametrize("verb", ["confirm", "reject"])
def test_a_repeated_decision_answers_the_first_status_and_body(
    server: Server, keys: Keys, tenant: str, verb: str
) -> None:
    path = f"/v1/candidates/{_candidate(server, keys)}/{verb}"
    with server.client(keys("reviewer")) as api:
        first = api.post(path, headers=_key(f"{verb}-1"))
        before = rows_of(server.database_url, tenant)
        again = api.post(path, headers=_key(f"{verb}-1"))
        without = api.post(path)

    assert first.status_code == again.status_code == 200
    assert first.json()["status"] == f"{verb}ed"
    assert again.json() == first.json()
    assert again.headers.get(REPLAYED) == "true"
    assert REPLAYED not in first.headers
    assert rows_of(server.database_url, tenant) == before
    assert _decisions(server, keys, f"candidate_{verb}ed") == 1
    assert (without.status_code, without.json()["type"]) == (409, PROBLEM + "not-buffered")


def test_a_repeated_retry_answers_the_first_status_and_body(
    server: Server, keys: Keys, store: Store, tenant: str
) -> None:
    path = f"/v1/episodes/{_failed(server, keys, store, tenant)}/retry"
    with server.client(keys("writer")) as api:
        first = api.post(path, headers=_key("retry-1"))
        before = rows_of(server.database_url, tenant)
        again = api.post(path, headers=_key("retry-1"))
        without = api.post(path)

    assert (first.status_code, first.json()["status"]) == (200, "done")
    assert (again.status_code, again.json()) == (200, first.json())
    assert again.headers.get(REPLAYED) == "true"
    assert REPLAYED not in first.headers
    assert rows_of(server.database_url, tenant) == before
    assert (without.status_code, without.json()["type"]) == (409, PROBLEM + "not-failed")


def test_the_key_with_another_request_is_a_conflict_and_writes_nothing(
    server: Server, keys: Keys, store: Store, tenant: str
) -> None:
    candidate = _candidate(server, keys)
    episode_id = _failed(server, keys, store, tenant)
    with server.client(keys("reviewer")) as api:
        assert api.post(f"/v1/candidates/{candidate}/reject", headers=_key("k-1")).is_success
        before = rows_of(server.database_url, tenant)
        reasoned = api.post(
            f"/v1/candidates/{candidate}/reject", params={"reason": "no"}, headers=_key("k-1")
        )
        confirmed = api.post(f"/v1/candidates/{candidate}/confirm", headers=_key("k-1"))
        retried = api.post(f"/v1/episodes/{episode_id}/retry", headers=_key("k-1"))

    for refused in (reasoned, confirmed, retried):
        assert (refused.status_code, refused.json()["type"]) == (
            409,
            PROBLEM + "idempotency-conflict",
        )
    assert rows_of(server.database_url, tenant) == before


def test_one_key_sent_twice_at_once_confirms_once(server: Server, keys: Keys, tenant: str) -> None:
    path = f"/v1/candidates/{_candidate(server, keys)}/confirm"
    reviewer = keys("reviewer")

    def send(_: int) -> httpx2.Response:
        with server.client(reviewer) as api:
            return api.post(path, headers=_key("at-once"))

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(send, range(2)))

    assert [answer.status_code for answer in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    assert sorted(REPLAYED in answer.headers for answer in answers) == [False, True]
    assert _decisions(server, keys, "candidate_confirmed") == 1


def test_the_openapi_document_names_the_key_and_the_replay_header(server: Server) -> None:
    with server.client() as api:
        document = api.get("/openapi.json").json()

    for path in (
        "/v1/candidates/{candidate_id}/confirm",
        "/v1/candidates/{candidate_id}/reject",
        "/v1/episodes/{episode_id}/retry",
    ):
        operation = document["paths"][path]["post"]
        headers = [p["name"] for p in operation["parameters"] if p["in"] == "header"]
        assert "Idempotency-Key" in headers, path
        assert REPLAYED in operation["responses"]["200"]["headers"], path
        assert "idempotency-conflict" in operation["responses"]["409"]["description"], path


@pytest.mark.parametrize("door", DOORS)
def test_the_mcp_decisions_take_a_key(door: str, server: Server, keys: Keys, tenant: str) -> None:
    candidate = _candidate(server, keys)
    given = {"candidate_id": candidate, "idempotency_key": "mcp-1"}

    async def steps(client: Client) -> list[Any]:
        first = await client.call_tool("confirm_candidate", given)
        again = await client.call_tool("confirm_candidate", given)
        reused = await client.call_tool("reject_candidate", given)
        return [first, again, reused]

    first, again, reused = session(door, server, keys("reviewer"), steps)

    assert answer(first)["status"] == "confirmed"
    assert answer(again) == answer(first)
    assert problem_type(reused) == "idempotency-conflict"
    assert _decisions(server, keys, "candidate_confirmed") == 1
