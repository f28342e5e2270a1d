"""Small truths of the HTTP service: a body naming one key twice is refused, an unknown
method gets a problem document, a read's invalid input is not titled as a refused write, a
remember that matches nothing names the catalogue, and a fresh Idempotency-Key that meets an
episode stored before answers `duplicate` without claiming to be a replay."""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.server_helpers import Keys, Server, episode_body, rows_of

pytestmark = pytest.mark.postgres
PROBLEM = "application/problem+json"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/remember", '{"subject": "mira", "text": "I live in Oslo", "text": "I live in Rome"}'),
        ("/v1/episodes", json.dumps(episode_body())[:-1] + ', "subject": "jonas"}'),
        ("/v1/facts", '{"subject": "mira", "value": {"a": 1, "a": 2}}'),
    ],
)
def test_a_body_that_names_a_key_twice_is_refused_and_writes_nothing(
    server: Server, keys: Keys, tenant: str, path: str, body: str
) -> None:
    with server.client(keys("admin")) as api:
        refused = api.post(path, content=body, headers={"Content-Type": "application/json"})

    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["type"] == "urn:sgam:problem:malformed-request"
    assert "appears twice" in refused.json()["detail"]
    assert not any(rows_of(server.database_url, tenant).values())


@pytest.mark.parametrize(
    ("method", "status", "kind"),
    [
        ("PATCH", 405, "method-not-allowed"),  # a method HTTP knows, not served here
        ("BREW", 400, "malformed-request"),  # one the server's parser does not read
    ],
)
def test_an_unknown_method_gets_a_problem_document(
    server: Server, keys: Keys, method: str, status: int, kind: str
) -> None:
    with server.client(keys("reader")) as api:
        answer = api.request(method, "/v1/subjects/mira/facts")

    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    assert answer.json()["type"] == f"urn:sgam:problem:{kind}"
    assert answer.json()["status"] == status


def test_an_invalid_read_is_not_titled_nothing_was_written(server: Server, keys: Keys) -> None:
    with server.client(keys("reader")) as api:
        answer = api.get("/v1/subjects/mira/facts", params={"at": "yesterday-ish"})

    assert answer.status_code == 422, answer.text
    assert answer.json()["title"] == "Invalid input"


def test_remember_that_matches_nothing_names_the_catalogue(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        answer = api.post("/v1/remember", json={"subject": "mira", "text": "Hello there."})

    assert answer.status_code == 200, answer.text
    assert answer.json()["facts"] == []
    catalogue = f"the bundled {os.environ['SGAM_CATALOG']!r} catalogue (SGAM_CATALOG)"
    assert catalogue in answer.json()["note"]


def test_a_fresh_idempotency_key_meeting_a_stored_episode_is_a_duplicate_not_a_replay(
    server: Server, keys: Keys
) -> None:
    sent = episode_body(episode_id="ep-stored")
    with server.client(keys("writer")) as api:
        first = api.post("/v1/episodes", json=sent)
        keyed = api.post("/v1/episodes", json=sent, headers={"Idempotency-Key": "fresh-1"})
        again = api.post("/v1/episodes", json=sent, headers={"Idempotency-Key": "fresh-1"})

    assert first.status_code == 200, first.text  # inline: processed in the request
    assert keyed.json()["receipts"][0]["status"] == "duplicate"
    assert "Idempotent-Replayed" not in keyed.headers  # the key was never used before
    # The key wrote nothing, so it kept nothing to replay: its repeat meets the same episode.
    assert again.json()["receipts"] == keyed.json()["receipts"]


def test_a_reviewers_confirm_is_recorded_as_the_reviewers_not_the_users(
    server: Server, keys: Keys
) -> None:
    with server.client(keys("writer")) as api:
        api.post("/v1/episodes", json=episode_body("please contact me by email"))
    with server.client(keys("reviewer")) as api:
        (candidate,) = api.get("/v1/candidates", params={"subject": "mira"}).json()
        confirmed = api.post(f"/v1/candidates/{candidate['candidate_id']}/confirm")
        logged = api.get("/v1/log", params={"subject": "mira"}).json()

    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["fact"]["trust"] == "verified"  # not user_confirmed
    reasons = [event["reason"] for event in logged if event["kind"] == "candidate_confirmed"]
    assert reasons == [f"candidate {candidate['candidate_id']}: confirmed by a reviewer"]
