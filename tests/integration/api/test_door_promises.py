"""What operators, readers and agents see at the service's other doors, against a real `sgam
serve`: /metrics wants its token, or answers the loopback address only; X-Forwarded-For is
believed only from a proxy SGAM_FORWARDED_ALLOW_IPS names; the tenant label on tokens is
opt-in; the hot path's model calls are counted; an episode's model usage is an admin's; /v1
answers are `Cache-Control: no-store`; `GET /mcp` is 405; /ui routes carry their prefix in the
metrics; `sgam mcp` traces its tool calls when tracing is on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.integration.api.mcp_helpers import answer, connected
from tests.integration.otlp_helpers import OtlpReceiver, Receiver
from tests.integration.server_helpers import (
    Keys,
    Server,
    episode_body,
    start_server,
    stop_server,
)
from tests.integration.stub_llm import StubServer

pytestmark = pytest.mark.postgres
TOKEN = "scrape-me-please"
OUTSIDE = {"X-Forwarded-For": "203.0.113.9"}  # a documentation address, not loopback


@pytest.fixture(scope="module")
def stub() -> Iterator[Any]:
    with StubServer() as served:
        yield served


@pytest.fixture(scope="module")
def modelled(
    api_database: str, tmp_path_factory: pytest.TempPathFactory, stub: Any
) -> Iterator[Server]:
    """A server with a model, behind a proxy on loopback that it believes."""
    started = start_server(
        api_database,
        tmp_path_factory.mktemp("modelled"),
        SGAM_LLM_BASE_URL=stub.base_url,
        SGAM_LLM_MODEL="stub",
        SGAM_FORWARDED_ALLOW_IPS="127.0.0.1",
    )
    yield started
    stop_server(started)


def _remember_through_the_model(server: Server, secret: str) -> str:
    """A statement the rules read nothing in: the hot path asks the model."""
    with server.client(secret) as api:
        remembered = api.post(
            "/v1/remember", json={"subject": "mira", "text": "the weather was lovely today"}
        )
    assert remembered.status_code == 200, remembered.text
    episode_id: str = remembered.json()["episode_id"]
    return episode_id


def _series(metrics: str, name: str) -> list[str]:
    return [line for line in metrics.splitlines() if line.startswith(name + "{")]


def test_metrics_answer_the_loopback_address_only_and_forwarded_for_from_a_named_proxy(
    modelled: Server, server: Server
) -> None:
    with modelled.client() as proxied, server.client() as direct:
        local = proxied.get("/metrics")
        relayed = proxied.get("/metrics", headers=OUTSIDE)  # the proxy relays a remote client
        spoofed = direct.get("/metrics", headers=OUTSIDE)  # no proxy named: the peer counts

    assert local.status_code == 200
    assert relayed.status_code == 403
    assert "SGAM_METRICS_TOKEN" in relayed.json()["detail"]
    assert spoofed.status_code == 200


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with OtlpReceiver() as receiving:
        yield receiving


@pytest.fixture(scope="module")
def guarded(
    api_database: str, tmp_path_factory: pytest.TempPathFactory, stub: Any, receiver: Receiver
) -> Iterator[Server]:
    """A server whose /metrics wants a token, which labels tokens by tenant, and traces."""
    started = start_server(
        api_database,
        tmp_path_factory.mktemp("guarded"),
        SGAM_LLM_BASE_URL=stub.base_url,
        SGAM_LLM_MODEL="stub",
        SGAM_METRICS_TOKEN=TOKEN,
        SGAM_METRICS_TENANT_LABEL="true",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    yield started
    stop_server(started)


def test_metrics_want_their_token_when_one_is_set(guarded: Server, keys: Keys) -> None:
    with guarded.client() as anyone:
        bare = anyone.get("/metrics")
        wrong = anyone.get("/metrics", headers={"Authorization": "Bearer not-it"})
        api_key = anyone.get("/metrics", headers={"Authorization": f"Bearer {keys('admin')}"})
        right = anyone.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

    assert [bare.status_code, wrong.status_code, api_key.status_code] == [401, 401, 401]
    assert right.status_code == 200
    assert "sgam_http_requests_total" in right.text


def test_the_hot_paths_model_calls_count_and_tokens_name_no_tenant_by_default(
    modelled: Server, keys: Keys, tenant: str
) -> None:
    _remember_through_the_model(modelled, keys("writer"))
    with modelled.client() as local:
        metrics = local.get("/metrics").text

    requests = _series(metrics, "sgam_llm_requests_total")
    assert any('model="stub"' in line and 'outcome="ok"' in line for line in requests), metrics
    tokens = _series(metrics, "sgam_llm_tokens_total")
    assert tokens, metrics
    assert all('tenant="all"' in line for line in tokens), tokens
    assert tenant not in metrics


def test_the_tenant_label_is_opt_in(guarded: Server, keys: Keys, tenant: str) -> None:
    _remember_through_the_model(guarded, keys("writer"))
    with guarded.client() as local:
        metrics = local.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    assert any(f'tenant="{tenant}"' in line for line in _series(metrics, "sgam_llm_tokens_total"))


def test_an_episodes_model_usage_is_shown_to_admins_only(modelled: Server, keys: Keys) -> None:
    episode_id = _remember_through_the_model(modelled, keys("writer"))
    shown = {}
    for role in ("reader", "reviewer", "admin"):
        with modelled.client(keys(role)) as api:
            one = api.get(f"/v1/episodes/{episode_id}").json()
            listed = api.get("/v1/episodes").json()
        shown[role] = (one["usage"], [episode["usage"] for episode in listed])

    assert shown["reader"] == (None, [None])
    assert shown["reviewer"] == (None, [None])
    usage, listed_usage = shown["admin"]
    assert usage is not None
    assert usage["model"] == "stub"
    assert listed_usage == [usage]


def test_v1_answers_are_never_stored_by_a_cache(server: Server, keys: Keys) -> None:
    with server.client(keys("writer")) as api:
        answers = [
            api.post("/v1/episodes", json=episode_body()),
            api.get("/v1/subjects/mira/facts"),
            api.get("/v1/episodes"),
            api.get("/v1/subjects/mira/facts", params={"at": "not a time"}),  # a problem
        ]
    with server.client() as anyone:
        answers.append(anyone.get("/v1/subjects/mira/facts"))  # 401
        probe = anyone.get("/healthz")

    assert [a.status_code for a in answers] == [200, 200, 200, 422, 401]
    assert {a.headers["cache-control"] for a in answers} == {"no-store"}
    assert "cache-control" not in probe.headers  # no personal data there


def test_get_mcp_opens_no_stream_it_is_405(server: Server, keys: Keys) -> None:
    with server.client(keys("reader")) as api:
        stream = api.get("/mcp", headers={"Accept": "text/event-stream"})
        ended = api.delete("/mcp")
    with server.client() as anyone:
        unauthenticated = anyone.get("/mcp")

    for refused in (stream, ended):
        assert refused.status_code == 405, refused.text
        assert refused.headers["allow"] == "POST"
        assert refused.headers["content-type"] == "application/problem+json"
    assert unauthenticated.status_code == 401


def test_ui_requests_are_measured_under_their_mount_prefix(server: Server) -> None:
    with server.client() as anyone:
        assert anyone.get("/ui/sign-in").status_code == 200
        metrics = anyone.get("/metrics").text

    routes = set(re.findall(r'route="([^"]*)"', metrics))
    assert "/ui/sign-in" in routes
    assert "/sign-in" not in routes


def test_ui_requests_are_traced_under_their_mount_prefix(
    guarded: Server, receiver: Receiver
) -> None:
    with guarded.client() as anyone:
        assert anyone.get("/ui/sign-in").status_code == 200
    spans = receiver.wait_for(lambda got: any(s.name.endswith("/sign-in") for s in got))

    (span,) = [s for s in spans if s.name.endswith("/sign-in")]
    assert span.name == "GET /ui/sign-in"
    assert span.attributes["http.route"] == "/ui/sign-in"


def test_sgam_mcp_traces_each_tool_call(server: Server, keys: Keys) -> None:
    async def main(endpoint: str) -> Any:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        async with connected("stdio", server, keys("reader"), **env) as client:
            return answer(await client.call_tool("get_facts", {"subject": "mira"}))

    with OtlpReceiver() as received:
        assert anyio.run(main, received.endpoint) == []
        spans = received.wait_for(lambda got: any(s.name == "execute_tool get_facts" for s in got))

    (call,) = [span for span in spans if span.name == "execute_tool get_facts"]
    assert call.service == "sgam-mcp"
    assert call.attributes["gen_ai.tool.name"] == "get_facts"
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    (read,) = [s for s in spans if s.trace_id == call.trace_id and s.name == "search_memory"]
    assert read.parent_id == call.span_id  # the tool's memory operation, inside its call
