"""Every endpoint through a real `sgam serve`, and what each role may call."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.server_helpers import Keys, Server, episode_body, fact_body

pytestmark = pytest.mark.postgres


def test_a_chat_backend_ingests_remembers_and_reads_context(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        ingested = api.post("/v1/episodes", json=[episode_body(), episode_body("hello there")])
        remembered = api.post(
            "/v1/remember",
            json={
                "subject": "mira",
                "text": "Remember that my passport deadline is June 30, 2026.",
            },
        )
        facts = api.get("/v1/subjects/mira/facts")
        context = api.get("/v1/subjects/mira/context", params={"query": "passport"})

    assert ingested.status_code == 200  # no broker: processed in the request
    assert [r["status"] for r in ingested.json()["receipts"]] == ["done", "done"]
    assert [r["line"] for r in ingested.json()["receipts"]] == [1, 2]
    assert remembered.status_code == 200
    answer = remembered.json()
    assert answer["deferred"] is False
    assert [(f["attribute"], f["value"]) for f in answer["facts"]] == [
        ("passport_deadline", "2026-06-30")
    ]
    assert {(f["attribute"], f["value"]) for f in facts.json()} == {
        ("home_city", "Utrecht"),
        ("passport_deadline", "2026-06-30"),
    }
    assert context.json()["items"][0]["attribute"] == "passport_deadline"
    assert context.json()["text"].startswith(
        "- passport_deadline (since, source):\n  - 2026-06-30 ("
    )


def test_put_get_history_and_etags(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        first = api.put("/v1/facts", json=fact_body())
        again = api.put("/v1/facts", json=fact_body())  # a restatement writes nothing
        moved = api.put(
            "/v1/facts",
            json=fact_body(value="Paris", valid_from="2026-03-01T00:00:00Z"),
            headers={"If-Match": first.headers["ETag"]},
        )
        now = api.get("/v1/subjects/mira/facts", params={"attribute": "home_city"})
        before = api.get(
            "/v1/subjects/mira/facts",
            params={"attribute": "home_city", "at": "2026-02-01T00:00:00Z"},
        )
        nothing = api.get("/v1/subjects/mira/facts", params={"attribute": "passport_deadline"})
        timeline = api.get("/v1/subjects/mira/attributes/home_city/history")
        versions = api.get(
            "/v1/subjects/mira/attributes/home_city/history", params={"versions": "true"}
        )

    assert (first.status_code, first.json()["written"]) == (201, True)
    assert first.headers["ETag"] not in ('"0"', '"1"')  # the key's state, not a version
    assert (again.status_code, again.json()["written"]) == (200, False)
    assert moved.status_code == 201
    assert [f["value"] for f in now.json()] == ["Paris"]
    assert now.headers["ETag"] == moved.headers["ETag"]  # nothing written since
    assert [f["value"] for f in before.json()] == ["Utrecht"]
    assert (nothing.json(), nothing.headers["ETag"]) == ([], '"0"')
    assert [f["value"] for f in timeline.json()] == ["Utrecht", "Paris"]
    assert timeline.json()[1]["supersedes_fact_id"] == first.json()["fact"]["fact_id"]
    assert len(versions.json()) == 3  # Utrecht open, Utrecht closed, Paris


def test_episodes_show_list_and_retry(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        receipt = api.post("/v1/episodes", json=episode_body()).json()["receipts"][0]
        shown = api.get(f"/v1/episodes/{receipt['episode_id']}")
        listed = api.get("/v1/episodes", params={"subject": "mira"})
        retried = api.post(f"/v1/episodes/{receipt['episode_id']}/retry")
        missing = api.post("/v1/episodes/no-such-episode/retry")

    episode = shown.json()
    assert episode["status"] == "done"
    assert [f["value"] for f in episode["facts"]] == ["Utrecht"]
    assert episode["actor"] is not None  # the key that sent it
    assert [e["episode_id"] for e in listed.json()] == [receipt["episode_id"]]
    assert retried.status_code == 409
    assert retried.json()["type"] == "urn:sgam:problem:not-failed"
    assert missing.status_code == 404


def test_the_key_is_the_actor_of_every_decision(server: Server, keys: Keys, store: Any) -> None:
    writer = keys("writer")
    key_id = writer.split("_")[1]
    with server.client(writer) as api:
        api.put("/v1/facts", json=fact_body())
        api.post("/v1/remember", json={"subject": "mira", "text": "my plan is pro"})
        api.post("/v1/episodes", json=episode_body("my employer is Globex"))
    with server.client(keys("admin")) as api:
        log = api.get("/v1/log", params={"limit": 100}).json()

    assert log, "decisions were logged"
    assert {event["actor"] for event in log} == {key_id}


def test_review_candidates_quarantine_and_promote(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        api.post("/v1/episodes", json=episode_body("please contact me by email", session_id="a"))
        api.post("/v1/episodes", json=episode_body("I prefer concise answers", session_id="b"))
        api.put("/v1/facts", json=fact_body(trust="untrusted", source_episode_id="tool-1"))
    with server.client(keys("reviewer")) as api:
        buffered = api.get("/v1/candidates", params={"subject": "mira"}).json()
        by_attribute = {c["attribute"]: c["candidate_id"] for c in buffered}
        confirmed = api.post(f"/v1/candidates/{by_attribute['contact_channel']}/confirm")
        rejected = api.post(f"/v1/candidates/{by_attribute['answer_style']}/reject")
        twice = api.post(f"/v1/candidates/{by_attribute['answer_style']}/reject")
        quarantined = api.get("/v1/quarantine").json()
        hidden = api.get("/v1/subjects/mira/facts", params={"include_quarantined": "true"})
        stale = api.post(
            f"/v1/facts/{quarantined[0]['fact_id']}/promote", headers={"If-Match": '"7"'}
        )
        promoted = api.post(
            f"/v1/facts/{quarantined[0]['fact_id']}/promote",
            headers={"If-Match": f'"{quarantined[0]["version"]}"'},
        )
        visible = api.get("/v1/subjects/mira/facts", params={"attribute": "home_city"})

    assert set(by_attribute) == {"contact_channel", "answer_style"}
    assert confirmed.json()["status"] == "confirmed"
    assert confirmed.json()["fact"]["value"] == "email"
    assert rejected.json() == {
        "candidate_id": by_attribute["answer_style"],
        "status": "rejected",
        "fact": None,
    }
    assert (twice.status_code, twice.json()["type"]) == (409, "urn:sgam:problem:not-buffered")
    assert [(f["attribute"], f["status"]) for f in quarantined] == [("home_city", "quarantined")]
    assert "home_city" in {f["attribute"] for f in hidden.json()}
    assert (stale.status_code, stale.json()["type"]) == (412, "urn:sgam:problem:version-conflict")
    assert promoted.status_code == 200
    assert promoted.json()["fact"]["trust"] == "verified"
    assert promoted.headers["ETag"] == f'"{promoted.json()["fact"]["version"]}"'
    assert [f["value"] for f in visible.json()] == ["Utrecht"]


def test_forget_and_purge(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        api.put("/v1/facts", json=fact_body())
        api.put("/v1/facts", json=fact_body(subject="noor"))
    with server.client(keys("admin")) as api:
        forgot = api.delete("/v1/subjects/mira")
        purged = api.delete("/v1/subjects/noor", params={"purge": "true"})
        after = (
            api.get("/v1/subjects/mira/facts").json() + api.get("/v1/subjects/noor/facts").json()
        )

    assert forgot.json() == {"hidden": 1, "purged": False, "files_scrubbed": None}
    assert purged.json()["hidden"] == 1
    assert purged.json()["purged"] is True
    assert purged.json()["files_scrubbed"] is False  # PostgreSQL: purge-vacuum finishes it
    assert after == []


def test_admins_manage_their_tenants_keys(server: Server, keys: Keys, tenant: str) -> None:
    with server.client(keys("admin")) as api:
        created = api.post("/v1/keys", json={"role": "reader", "name": "bot"})
        listed = api.get("/v1/keys").json()
        secret = created.json()["secret"]
        with server.client(secret) as reader:
            works = reader.get("/v1/subjects/mira/facts").status_code
            revoked = api.delete(f"/v1/keys/{created.json()['key']['key_id']}")
            refused = reader.get("/v1/subjects/mira/facts")

    assert created.status_code == 201
    assert created.json()["key"]["tenant_id"] == tenant
    assert secret.startswith(created.json()["key"]["prefix"])
    assert {k["name"] for k in listed} >= {"bot"}
    assert all("secret" not in k and "secret_hash" not in k for k in listed)
    assert works == 200
    assert revoked.json()["revoked_at"] is not None
    assert (refused.status_code, refused.json()["detail"]) == (401, "the key was revoked")


# (method, path, body) per endpoint, and the least role that may call it.
CALLS: list[tuple[str, str, str, dict[str, Any] | list[Any] | None]] = [
    ("reader", "GET", "/v1/subjects/mira/facts", None),
    ("reader", "GET", "/v1/subjects/mira/attributes/home_city/history", None),
    ("reader", "GET", "/v1/subjects/mira/context", None),
    ("reader", "GET", "/v1/episodes", None),
    ("reader", "GET", "/v1/episodes/missing", None),
    ("writer", "POST", "/v1/episodes", episode_body()),
    ("writer", "POST", "/v1/episodes/missing/retry", None),
    ("writer", "POST", "/v1/remember", {"subject": "mira", "text": "my plan is pro"}),
    ("writer", "PUT", "/v1/facts", fact_body()),
    ("reviewer", "GET", "/v1/candidates", None),
    ("reviewer", "POST", "/v1/candidates/missing/confirm", None),
    ("reviewer", "POST", "/v1/candidates/missing/reject", None),
    ("reviewer", "GET", "/v1/quarantine", None),
    ("reviewer", "POST", "/v1/facts/missing/promote", None),
    ("reviewer", "POST", "/v1/facts/missing/dismiss", None),
    ("reviewer", "GET", "/v1/log", None),
    ("admin", "DELETE", "/v1/subjects/mira", None),
    ("admin", "GET", "/v1/keys", None),
    ("admin", "POST", "/v1/keys", {"role": "reader"}),
    ("admin", "DELETE", "/v1/keys/missing", None),
]
ROLES = ["reader", "writer", "reviewer", "admin"]


@pytest.mark.parametrize("role", ROLES)
def test_each_role_may_call_exactly_its_endpoints(server: Server, keys: Keys, role: str) -> None:
    with server.client(keys(role)) as api:
        for least, method, path, body in CALLS:
            answer = api.request(method, path, json=body)
            if ROLES.index(role) >= ROLES.index(least):
                assert answer.status_code in (200, 201, 404), (method, path, answer.text)
            else:
                assert answer.status_code == 403, (method, path, answer.text)
                assert answer.json()["type"] == "urn:sgam:problem:forbidden"


def test_only_reviewers_see_quarantined_facts(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        refused = api.get("/v1/subjects/mira/facts", params={"include_quarantined": "true"})
    assert refused.status_code == 403


def test_probes_metrics_and_the_openapi_document(server: Server, keys: Keys) -> None:
    with server.client() as anyone:
        healthy = anyone.get("/healthz")
        ready = anyone.get("/readyz")
        document = anyone.get("/openapi.json").json()
        docs = anyone.get("/docs")
        with server.client(keys("reader")) as api:
            api.get("/v1/subjects/mira/facts")
        anyone.get("/v1/subjects/mira/facts")  # 401
        metrics = anyone.get("/metrics").text

    assert healthy.json()["status"] == "ok"
    assert ready.json() == {"status": "ok", "checks": {"database": "ok", "rate_limit_redis": "ok"}}
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()
    route = 'route="/v1/subjects/{subject}/facts"'
    assert f'sgam_http_requests_total{{method="GET",{route},status="200"}}' in metrics
    assert f'sgam_http_requests_total{{method="GET",{route},status="401"}}' in metrics
    assert (
        f'sgam_http_request_duration_seconds_bucket{{le="0.01",method="GET",{route},status="200"}}'
        in metrics
    )
    assert 'sgam_episodes{state="done"}' in metrics
    schemas = document["components"]["schemas"]
    assert {"Problem", "Fact", "EpisodeBody", "PutBody", "RememberBody", "Remembered"} <= set(
        schemas
    )
    for path, operations in document["paths"].items():
        for operation in operations.values():
            if path.startswith("/v1/"):
                assert operation["security"] == [{"HTTPBearer": []}], path
                for status in ("401", "403", "404", "422", "429", "503"):
                    content = operation["responses"][status]["content"]
                    assert content["application/problem+json"]["schema"] == {
                        "$ref": "#/components/schemas/Problem"
                    }
    assert "urn:sgam:problem:version-conflict" in document["info"]["description"]


def test_a_reviewer_dismisses_a_quarantined_fact(server: Server, keys: Keys) -> None:
    writer, reviewer = keys("writer"), keys("reviewer")
    with server.client(writer) as api:
        api.post("/v1/episodes", json=episode_body(source="tool_result"))
    with server.client(reviewer) as api:
        (held_back,) = api.get("/v1/quarantine").json()
        path = f"/v1/facts/{held_back['fact_id']}/dismiss"
        dismissed = api.post(path, params={"reason": "a scraped page"})
        again = api.post(path)
        left = api.get("/v1/quarantine").json()
        log = api.get("/v1/log", params={"subject": "mira"}).json()
    assert dismissed.status_code == 200
    assert dismissed.json()["fact"]["fact_id"] == held_back["fact_id"]
    assert dismissed.json()["fact"]["status"] == "dismissed"  # as the dismissal left it
    assert again.status_code == 404  # gone for good
    assert left == []
    assert (log[0]["kind"], log[0]["reason"]) == ("dismiss", "a scraped page")
