"""One shape per result: every endpoint's answer validates against the model the OpenAPI
document names for it (no undocumented field, no missing required one), and the Python API's
answer to the same call, as the command line prints it, is the HTTP answer."""

from __future__ import annotations

import copy
from typing import Any

import httpx2
import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import update

import pipeline
from pipeline.cli.output import plain
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from tests.integration.server_helpers import Keys, Server, episode_body, fact_body

pytestmark = pytest.mark.postgres


class Shapes:
    """Checks answers against the document and remembers which operations it saw."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.components = copy.deepcopy(document["components"])
        for name, schema in self.components["schemas"].items():
            # Pydantic leaves extra keys allowed; an answer must not carry undocumented ones.
            if "properties" in schema and "additionalProperties" not in schema:
                schema["additionalProperties"] = name == "Problem"
        self.seen: set[tuple[str, str]] = set()

    def check(self, answer: httpx2.Response, template: str, status: int) -> Any:
        method = answer.request.method
        assert answer.status_code == status, (method, template, answer.text)
        responses = self.document["paths"][template][method.lower()]["responses"]
        documented = responses[str(status)]["content"]["application/json"]["schema"]
        validator = Draft202012Validator({**documented, "components": self.components})
        body = answer.json()
        problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert problems == [], (method, template, problems)
        self.seen.add((method, template))
        return body

    def documented(self) -> set[tuple[str, str]]:
        """Every operation whose success the document describes as a JSON model."""
        return {
            (method.upper(), path)
            for path, operations in self.document["paths"].items()
            for method, operation in operations.items()
            if any(
                status.startswith("2") and "application/json" in response.get("content", {})
                for status, response in operation["responses"].items()
            )
        }


def test_every_answer_is_its_documented_model_and_the_python_apis_answer(
    server: Server, store: Store, keys: Keys, tenant: str
) -> None:
    with server.client() as anyone:
        shapes = Shapes(anyone.get("/openapi.json").json())
        shapes.check(anyone.get("/healthz"), "/healthz", 200)
        shapes.check(anyone.get("/readyz"), "/readyz", 200)
    scope = {"tenant_id": tenant}
    secret = keys("admin")
    key_id = secret.split("_")[1]

    with server.client(secret) as api:
        # Intake: a batch (processed inline: 200), then one episode on its own.
        batch = [episode_body(), episode_body("I prefer concise answers", session_id="s2")]
        ingested = shapes.check(api.post("/v1/episodes", json=batch), "/v1/episodes", 200)
        assert [r["status"] for r in ingested["receipts"]] == ["done", "done"]
        assert "error" not in ingested["receipts"][0]  # absent, not null, when it did not fail
        one = episode_body("please contact me by email", session_id="s3")
        shapes.check(api.post("/v1/episodes", json=one), "/v1/episodes", 200)

        # The hot path; the same request again from Python answers what the first one wrote.
        said = {"subject": "mira", "text": "Remember that my passport deadline is June 30, 2026."}
        remembered = api.post("/v1/remember", json=said, headers={"Idempotency-Key": "rem-1"})
        remembered_json = shapes.check(remembered, "/v1/remember", 200)
        assert remembered_json["rejected"] == []  # the branch where a repeat answers the same
        again = pipeline.remember(
            store, scope | said | {"idempotency_key": "rem-1", "actor": key_id}
        )
        assert plain(again) == remembered_json

        # Puts: a new fact (201), a restatement (200, from HTTP and from Python alike).
        noor = fact_body(subject="noor")
        shapes.check(api.put("/v1/facts", json=noor), "/v1/facts", 201)
        restated = shapes.check(api.put("/v1/facts", json=noor), "/v1/facts", 200)
        assert restated["written"] is False
        assert plain(pipeline.put(store, scope | noor)) == restated
        untrusted = fact_body(
            subject="noor", attribute="employer", value="Globex", trust="untrusted"
        )
        shapes.check(api.put("/v1/facts", json=untrusted), "/v1/facts", 201)

        # Reads: the Python API gives the same answer.
        facts_path = "/v1/subjects/{subject}/facts"
        facts = shapes.check(api.get("/v1/subjects/mira/facts"), facts_path, 200)
        assert {f["attribute"] for f in facts} == {"home_city", "passport_deadline"}
        assert plain(pipeline.get(store, scope | {"subject": "mira"})) == facts
        history_path = "/v1/subjects/{subject}/attributes/{attribute}/history"
        history = shapes.check(
            api.get("/v1/subjects/noor/attributes/home_city/history"), history_path, 200
        )
        noor_city = scope | {"subject": "noor", "attribute": "home_city"}
        assert plain(pipeline.history(store, noor_city)) == history
        asked = {"query": "passport"}
        context = shapes.check(
            api.get("/v1/subjects/mira/context", params=asked),
            "/v1/subjects/{subject}/context",
            200,
        )
        assert context["text"].startswith("- passport_deadline (since, source):\n")
        assert plain(pipeline.assemble(store, scope | {"subject": "mira"} | asked)) == context
        sought = {"query": "Utrecht home city", "limit": "5"}
        found = shapes.check(
            api.get("/v1/subjects/mira/search", params=sought),
            "/v1/subjects/{subject}/search",
            200,
        )
        assert [f["attribute"] for f in found["facts"]] == ["home_city"]
        assert found["episodes"]
        assert all(e["score"] > 0 for e in found["episodes"])
        python = pipeline.search(store, scope | {"subject": "mira"} | sought)
        assert plain(python) == found

        episodes = shapes.check(api.get("/v1/episodes"), "/v1/episodes", 200)
        assert len(episodes) == 4  # three ingested, one remembered
        assert plain(pipeline.list_episodes(store, scope | {"limit": 100})) == episodes
        first = ingested["receipts"][0]["episode_id"]
        shown = shapes.check(api.get(f"/v1/episodes/{first}"), "/v1/episodes/{episode_id}", 200)
        assert [f["value"] for f in shown["facts"]] == ["Utrecht"]
        assert plain(pipeline.show_episode(store, tenant, first)) == shown

        # A failed episode (marked so directly: inline processing does not fail on its own).
        store.run(
            lambda unit: unit.session.execute(
                update(EpisodeRow)
                .where(EpisodeRow.tenant_id == tenant, EpisodeRow.episode_id == first)
                .values(status="failed")
            )
        )
        retried = shapes.check(
            api.post(f"/v1/episodes/{first}/retry"), "/v1/episodes/{episode_id}/retry", 200
        )
        assert retried == {"episode_id": first, "status": "done"}

        # Review: the buffer, decisions on it, the quarantine, promotion, the log.
        waiting = shapes.check(api.get("/v1/candidates"), "/v1/candidates", 200)
        assert plain(pipeline.list_candidates(store, scope | {"limit": 100})) == waiting
        by_attribute = {c["attribute"]: c["candidate_id"] for c in waiting}
        assert set(by_attribute) == {"answer_style", "contact_channel"}
        confirmed = shapes.check(
            api.post(f"/v1/candidates/{by_attribute['contact_channel']}/confirm"),
            "/v1/candidates/{candidate_id}/confirm",
            200,
        )
        assert confirmed["fact"]["value"] == "email"
        rejected = shapes.check(
            api.post(f"/v1/candidates/{by_attribute['answer_style']}/reject"),
            "/v1/candidates/{candidate_id}/reject",
            200,
        )
        assert rejected["fact"] is None
        quarantined = shapes.check(api.get("/v1/quarantine"), "/v1/quarantine", 200)
        assert plain(pipeline.list_quarantined(store, scope | {"limit": 100})) == quarantined
        (held,) = quarantined
        promoted = shapes.check(
            api.post(f"/v1/facts/{held['fact_id']}/promote"), "/v1/facts/{fact_id}/promote", 200
        )
        assert promoted["fact"]["trust"] == "verified"
        refused = fact_body(
            subject="lena", attribute="employer", value="Initech", trust="untrusted"
        )
        held = shapes.check(api.put("/v1/facts", json=refused), "/v1/facts", 201)
        dismissed = shapes.check(
            api.post(f"/v1/facts/{held['fact']['fact_id']}/dismiss"),
            "/v1/facts/{fact_id}/dismiss",
            200,
        )
        assert dismissed["fact"]["fact_id"] == held["fact"]["fact_id"]
        log = shapes.check(api.get("/v1/log"), "/v1/log", 200)
        assert plain(pipeline.decision_log(store, scope | {"limit": 100})) == log

        # What the model lane spent (nothing: the rules read every episode here).
        usage = shapes.check(api.get("/v1/usage"), "/v1/usage", 200)
        assert plain(pipeline.llm_usage(store, scope)) == usage

        # Keys.
        created = shapes.check(api.post("/v1/keys", json={"role": "reader"}), "/v1/keys", 201)
        listed = shapes.check(api.get("/v1/keys"), "/v1/keys", 200)
        assert plain(pipeline.list_keys(store, tenant)) == listed
        shapes.check(api.delete(f"/v1/keys/{created['key']['key_id']}"), "/v1/keys/{key_id}", 200)

        # Forgetting; the same request again from Python answers the first result.
        forgot = shapes.check(
            api.delete("/v1/subjects/noor", headers={"Idempotency-Key": "forget-1"}),
            "/v1/subjects/{subject}",
            200,
        )
        assert forgot == {"hidden": 2, "purged": False, "files_scrubbed": None}
        repeated = pipeline.forget(
            store, scope | {"subject": "noor", "idempotency_key": "forget-1", "actor": key_id}
        )
        assert plain(repeated) == forgot

    assert shapes.seen == shapes.documented(), shapes.documented() ^ shapes.seen
