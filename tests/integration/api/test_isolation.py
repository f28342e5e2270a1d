"""Tenant isolation over HTTP, as a property: whatever a key of tenant A sends — B's subjects,
fact, episode, candidate and key ids, B's idempotency keys — it reads, changes and learns
nothing of B's. Each request with one of B's ids is answered exactly as the same request with
an id that never existed (after masking ids and clocks), and B's state is unchanged after all.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.access.keys import create_key
from pipeline.db.store import Store
from tests.integration.server_helpers import Keys, Server, episode_body, fact_body

pytestmark = pytest.mark.postgres

SECRET_CITY = "Bcity-" + uuid.uuid4().hex[:8]  # a value only tenant B ever stores


@dataclass
class TenantB:
    tenant: str
    admin: str
    ids: dict[str, list[str]]
    snapshot: dict[str, Any]


def snapshot(api: httpx2.Client, subjects: list[str]) -> dict[str, Any]:
    """Everything tenant B can read about itself."""
    seen: dict[str, Any] = {}
    for subject in subjects:
        seen[f"facts:{subject}"] = api.get(
            f"/v1/subjects/{subject}/facts", params={"include_quarantined": "true"}
        ).json()
        seen[f"versions:{subject}"] = api.get(
            f"/v1/subjects/{subject}/attributes/home_city/history",
            params={"versions": "true"},  # quarantined versions too, for an admin
        ).json()
    for path in ("/v1/episodes", "/v1/quarantine", "/v1/log"):
        seen[path] = api.get(path, params={"limit": 1000}).json()
    seen["/v1/keys"] = api.get("/v1/keys").json()  # (every key: it takes no limit)
    seen["candidates"] = api.get("/v1/candidates", params={"status": "all"}).json()
    return seen


@pytest.fixture(scope="module")
def tenant_b(server: Server, store: Store) -> TenantB:
    tenant = f"b-{uuid.uuid4().hex[:10]}"
    admin = create_key(store, {"tenant_id": tenant, "role": "admin"})[1]
    subjects = ["mira", "noor"]
    with server.client(admin) as api:
        for subject in subjects:
            api.put(
                "/v1/facts",
                json=fact_body(subject=subject, value=SECRET_CITY),
                headers={"Idempotency-Key": f"put-{subject}"},
            )
        api.put("/v1/facts", json=fact_body(subject="noor", trust="untrusted", value="Bq-x"))
        api.post(
            "/v1/remember",
            json={"subject": "mira", "text": "my plan is pro", "episode_id": "b-remember"},
            headers={"Idempotency-Key": "remember-1"},
        )
        api.post(
            "/v1/episodes",
            json=episode_body("please contact me by email", episode_id="b-episode"),
            headers={"Idempotency-Key": "ingest-1"},
        )
        before = snapshot(api, subjects)
    facts = [f["fact_id"] for s in subjects for f in before[f"versions:{s}"]]
    ids = {
        "subject": subjects,
        "fact": facts + [f["fact_id"] for f in before["/v1/quarantine"]],
        "episode": [e["episode_id"] for e in before["/v1/episodes"]],
        "candidate": [c["candidate_id"] for c in before["candidates"]],
        "key": [k["key_id"] for k in before["/v1/keys"]],
        "idempotency": ["put-mira", "put-noor", "remember-1", "ingest-1", "ingest-1:1"],
    }
    assert all(ids.values()), ids
    return TenantB(tenant, admin, ids, before)


# (what it names, method, path, body, headers); {id} is one of B's ids or a fresh one.
OPERATIONS: list[tuple[str, str, str, Any, dict[str, str]]] = [
    ("subject", "GET", "/v1/subjects/{id}/facts?include_quarantined=true", None, {}),
    ("subject", "GET", "/v1/subjects/{id}/attributes/home_city/history?versions=true", None, {}),
    ("subject", "GET", "/v1/subjects/{id}/context", None, {}),
    ("subject", "GET", "/v1/candidates?status=all&subject={id}", None, {}),
    ("subject", "GET", "/v1/quarantine?subject={id}", None, {}),
    ("subject", "GET", "/v1/episodes?subject={id}", None, {}),
    ("subject", "GET", "/v1/log?subject={id}", None, {}),
    ("subject", "DELETE", "/v1/subjects/{id}?purge=true", None, {}),
    ("subject", "PUT", "/v1/facts", fact_body(subject="{id}"), {}),
    ("fact", "POST", "/v1/facts/{id}/promote", None, {}),
    ("episode", "GET", "/v1/episodes/{id}", None, {}),
    ("episode", "POST", "/v1/episodes/{id}/retry", None, {}),
    ("episode", "POST", "/v1/episodes", episode_body(episode_id="{id}"), {}),
    (
        "episode",
        "POST",
        "/v1/remember",
        {"subject": "mira", "text": "hi", "episode_id": "{id}"},
        {},
    ),
    ("candidate", "POST", "/v1/candidates/{id}/confirm", None, {}),
    ("candidate", "POST", "/v1/candidates/{id}/reject", None, {}),
    ("key", "DELETE", "/v1/keys/{id}", None, {}),
    ("idempotency", "PUT", "/v1/facts", fact_body(), {"Idempotency-Key": "{id}"}),
    ("idempotency", "POST", "/v1/episodes", episode_body(), {"Idempotency-Key": "{id}"}),
    (
        "idempotency",
        "POST",
        "/v1/remember",
        {"subject": "mira", "text": "my plan is free"},
        {"Idempotency-Key": "{id}"},
    ),
    ("idempotency", "DELETE", "/v1/subjects/mira", None, {"Idempotency-Key": "{id}"}),
]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")


def _fill(template: Any, value: str) -> Any:
    if isinstance(template, str):
        return template.replace("{id}", value)
    if isinstance(template, dict):
        return {k: _fill(v, value) for k, v in template.items()}
    return template


def _ask(
    server: Server, store: Store, operation: tuple[str, str, str, Any, dict[str, str]], value: str
) -> tuple[int, str, str]:
    """The operation in a fresh tenant A with `value` for {id}: status, masked body, raw body."""
    tenant = f"a-{uuid.uuid4().hex[:10]}"
    key, secret = create_key(store, {"tenant_id": tenant, "role": "admin"})
    _, method, path, body, headers = operation
    with server.client(secret) as api:
        answer = api.request(
            method, _fill(path, value), json=_fill(body, value), headers=_fill(headers, value)
        )
    masked = (
        answer.text.replace(value, "<ID>").replace(tenant, "<TENANT>").replace(key.key_id, "<KEY>")
    )
    return answer.status_code, _TIME.sub("<TIME>", _UUID.sub("<UUID>", masked)), answer.text


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_tenant_learns_nothing_of_another(
    server: Server, store: Store, tenant_b: TenantB, data: st.DataObject
) -> None:
    operation = data.draw(st.sampled_from(OPERATIONS))
    named = data.draw(st.sampled_from(tenant_b.ids[operation[0]]))
    fresh = (
        f"{operation[0]}-{uuid.uuid4().hex[:12]}"
        if operation[0] != "subject"
        else f"s{uuid.uuid4().hex[:8]}"
    )

    status, masked, raw = _ask(server, store, operation, named)
    fresh_status, fresh_masked, _ = _ask(server, store, operation, fresh)

    assert status < 500, raw
    assert (status, masked) == (fresh_status, fresh_masked), (operation, named)
    assert SECRET_CITY not in raw
    assert tenant_b.tenant not in raw


def test_tenant_b_is_unchanged_after_all_that(
    server: Server, store: Store, tenant_b: TenantB
) -> None:
    """Runs after the property above (same module, in order): every request of the other
    tenants left B exactly as it was."""
    for operation in OPERATIONS:  # each at least once, whatever hypothesis drew
        for named in tenant_b.ids[operation[0]]:
            _ask(server, store, operation, named)
    with server.client(tenant_b.admin) as api:
        assert snapshot(api, tenant_b.ids["subject"]) == tenant_b.snapshot


def test_a_request_naming_another_tenant_is_refused(
    server: Server, keys: Keys, tenant_b: TenantB
) -> None:
    other = {"tenant_id": tenant_b.tenant}
    with server.client(keys("admin")) as api:
        answers = [
            api.put("/v1/facts", json=fact_body(**other)),
            api.post("/v1/remember", json={"subject": "mira", "text": "my plan is pro", **other}),
            api.post("/v1/episodes", json=[episode_body(), episode_body(**other)]),
            api.post("/v1/keys", json={"role": "admin", **other}),
            api.get("/v1/subjects/mira/facts", params=other),
            api.get("/v1/subjects/mira/context", params=other),
            api.get("/v1/subjects/mira/attributes/home_city/history", params=other),
        ]
    for answer in answers:
        assert answer.status_code == 403, answer.text
        assert answer.json()["type"] == "urn:sgam:problem:scope-mismatch"
        assert answer.json()["field"] == "tenant_id"
        assert tenant_b.tenant not in answer.text
    with server.client(tenant_b.admin) as api:
        assert snapshot(api, tenant_b.ids["subject"]) == tenant_b.snapshot


def test_a_key_bound_to_an_agent_sees_and_names_no_other(
    server: Server, keys: Keys, tenant: str
) -> None:
    with server.client(keys("admin")) as api:
        other = api.post("/v1/episodes", json=episode_body(agent_id="bot-b")).json()
        episode_id = other["receipts"][0]["episode_id"]
        fact_id = api.get("/v1/subjects/mira/facts", params={"agent_id": "bot-b"}).json()[0][
            "fact_id"
        ]
    bound = keys("reviewer", agent_id="bot-a", purpose="support")
    with server.client(bound) as api:
        wrote = api.put("/v1/facts", json=fact_body(value="Leiden"))
        mine = api.get("/v1/subjects/mira/facts").json()
        refused = [
            api.get("/v1/subjects/mira/facts", params={"agent_id": "bot-b"}),
            api.get("/v1/subjects/mira/context", params={"purpose": "default"}),
            api.put("/v1/facts", json=fact_body(agent_id="bot-b")),
            api.post("/v1/remember", json={"subject": "mira", "text": "hi", "purpose": "sales"}),
            api.get("/v1/log"),
        ]
        hidden = [
            api.get(f"/v1/episodes/{episode_id}"),
            api.post(f"/v1/facts/{fact_id}/promote"),
        ]
        listed = api.get("/v1/episodes").json()

    assert wrote.status_code == 201
    assert (wrote.json()["fact"]["agent_id"], wrote.json()["fact"]["purpose"]) == (
        "bot-a",
        "support",
    )
    assert [f["value"] for f in mine] == ["Leiden"]
    assert [answer.status_code for answer in refused] == [403] * len(refused)
    assert [answer.status_code for answer in hidden] == [404, 404]
    assert listed == []
