"""The episode view shows a key only what that key may read elsewhere: its scope's facts;
quarantined facts, the buffer's candidates and the decisions' payloads for reviewer and up;
nothing of a subject forgotten since the episode came in."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.server_helpers import Keys, Server, episode_body, fact_body

pytestmark = pytest.mark.postgres
BOT1 = {"agent_id": "bot1", "purpose": "support"}


def _episode_with_facts_in_two_scopes(server: Server, keys: Keys) -> str:
    with server.client(keys("writer", **BOT1)) as bot1:
        posted = bot1.post("/v1/episodes", json=episode_body(episode_id="ep-1"))
        assert posted.status_code == 200, posted.text
        quarantined = bot1.put(
            "/v1/facts",
            json=fact_body(attribute="employer", value="Globex", source_episode_id="ep-1")
            | {"trust": "untrusted"},
        )
        assert quarantined.status_code == 201
    with server.client(keys("writer", agent_id="bot2", purpose="billing")) as bot2:
        other = bot2.put("/v1/facts", json=fact_body(value="Oslo", source_episode_id="ep-1"))
        assert other.status_code == 201
    return "ep-1"


def _facts(shown: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((f["agent_id"], f["attribute"], f["status"]) for f in shown["facts"])


def test_a_bound_reviewer_sees_only_its_scope(server: Server, keys: Keys) -> None:
    episode_id = _episode_with_facts_in_two_scopes(server, keys)
    with server.client(keys("reviewer", **BOT1)) as api:
        shown = api.get(f"/v1/episodes/{episode_id}")

    assert shown.status_code == 200
    assert _facts(shown.json()) == [
        ("bot1", "employer", "quarantined"),
        ("bot1", "home_city", "active"),
    ]
    assert shown.json()["candidates"] == [] or all(
        candidate["agent_id"] == "bot1" for candidate in shown.json()["candidates"]
    )


def test_a_key_of_another_scope_gets_404(server: Server, keys: Keys) -> None:
    episode_id = _episode_with_facts_in_two_scopes(server, keys)
    with server.client(keys("reviewer", agent_id="bot2", purpose="billing")) as api:
        assert api.get(f"/v1/episodes/{episode_id}").status_code == 404


def test_a_reader_sees_no_quarantined_value_no_candidate_and_no_payload(
    server: Server, keys: Keys
) -> None:
    episode_id = _episode_with_facts_in_two_scopes(server, keys)
    with server.client(keys("reader")) as api:
        shown = api.get(f"/v1/episodes/{episode_id}").json()
    with server.client(keys("reviewer")) as api:
        reviewed = api.get(f"/v1/episodes/{episode_id}").json()

    assert _facts(shown) == [("bot1", "home_city", "active")]
    assert "Globex" not in str(shown)
    assert "Oslo" not in str(shown)
    assert shown["candidates"] == []
    assert shown["decisions"], "the decisions are listed"
    assert {decision["command"] for decision in shown["decisions"]} == {None}
    # The reviewer's view of the same episode does carry them.
    assert ("bot1", "employer", "quarantined") in _facts(reviewed)
    assert any(decision["command"] is not None for decision in reviewed["decisions"])


@pytest.mark.parametrize("purge", [False, True])
def test_nothing_of_a_forgotten_subject_is_shown(server: Server, keys: Keys, purge: bool) -> None:
    episode_id = _episode_with_facts_in_two_scopes(server, keys)
    with server.client(keys("admin")) as admin:
        forgotten = admin.delete("/v1/subjects/mira", params={"purge": str(purge).lower()})
        assert forgotten.status_code == 200, forgotten.text
        shown = admin.get(f"/v1/episodes/{episode_id}")
        listed = admin.get("/v1/episodes")

    assert shown.status_code == 404
    assert listed.json() == []
    assert "Utrecht" not in shown.text + listed.text
