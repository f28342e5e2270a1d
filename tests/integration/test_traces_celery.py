"""One episode's trace across processes: `sgam serve` takes the request, a real Celery worker
processes the episode, both export over OTLP (http/protobuf) to a receiver in this test, and
the spans form one tree — the request, the intake, the wake-up sent and processed, the claim,
the extraction, the memory operations — with no value anywhere in what was sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import Store, open_store
from pipeline.observe import conventions as names
from pipeline.settings import Settings
from schemas.lifecycle import DecisionAction
from tests.databases import empty_database
from tests.integration.celery_helpers import (
    REDIS_URL,
    Celery,
    episode_counts,
    flush_redis,
    wait_for,
    worker_env,
)
from tests.integration.otlp_helpers import OtlpReceiver, Received, Receiver, tree
from tests.integration.server_helpers import (
    Server,
    episode_body,
    migrated_database,
    start_server,
    stop_server,
)

pytestmark = [pytest.mark.postgres, pytest.mark.celery, pytest.mark.slow]

TENANT = f"traced-{uuid.uuid4().hex[:8]}"
TEXT_MARKER = "Zqxmarkertext"
CITY_MARKER = "Zqxville"


@pytest.fixture(scope="module")
def traced_url(postgres_url: str) -> str:
    url = migrated_database(postgres_url, "traces")
    empty_database(url)
    return url


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with OtlpReceiver() as received:
        yield received


def _exporting(receiver: Receiver) -> dict[str, str]:
    # Batches leave every 50 ms instead of every 5 s, so the test need not wait.
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}


@pytest.fixture(scope="module")
def processes(
    traced_url: str, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Celery]]:
    flush_redis()
    workdir = tmp_path_factory.mktemp("traces")
    celery = Celery(worker_env(traced_url, **_exporting(receiver)), workdir)
    celery.worker(concurrency=1)
    server = start_server(traced_url, workdir, SGAM_BROKER_URL=REDIS_URL, **_exporting(receiver))
    try:
        yield server, celery
    finally:
        stop_server(server)
        celery.stop()


@pytest.fixture(scope="module")
def writer(traced_url: str) -> str:
    store: Store = open_store(Settings(database_url=traced_url))
    try:
        return create_key(store, {"tenant_id": TENANT, "role": "writer"})[1]
    finally:
        store.dispose()


def _trace_of(spans: list[Received], name: str) -> list[Received]:
    (root,) = [span for span in spans if span.name == name]
    return [span for span in spans if span.trace_id == root.trace_id]


def _finished(spans: list[Received], count: int) -> bool:
    return sum(1 for s in spans if s.name == "process_episode") >= count and any(
        s.name == "POST /v1/episodes" for s in spans
    )


def _no_values(receiver: Receiver, *markers: str) -> None:
    for body in receiver.raw:
        for marker in markers:
            assert marker.lower().encode() not in body.lower()


def test_an_episode_is_one_trace_from_the_request_through_the_worker(
    processes: tuple[Server, Celery], receiver: Receiver, writer: str, traced_url: str
) -> None:
    server, celery = processes
    episodes = [
        episode_body(f"my home city is {CITY_MARKER}. {TEXT_MARKER}"),
        episode_body(f"Remember that my passport deadline is 2026-07-15. {TEXT_MARKER}"),
    ]
    with server.client(writer) as client:
        answer = client.post("/v1/episodes", json=episodes)
    assert answer.status_code == 202, answer.text
    ids = [receipt["episode_id"] for receipt in answer.json()["receipts"]]
    wait_for(lambda: episode_counts(traced_url).get("done", 0) >= 2, 60, "done", celery.logs)
    spans = receiver.wait_for(lambda got: _finished(got, 2))
    trace = _trace_of(spans, "POST /v1/episodes")

    shown = tree(trace, attributes=(names.SGAM_EPISODE, names.SGAM_OUTCOME))
    for number, episode_id in enumerate(ids):
        shown = shown.replace(episode_id, f"<episode {number + 1}>")
    assert shown == "\n".join(
        [
            "POST /v1/episodes [server, sgam-api]",
            "  ingest [internal, sgam-api]",
            "    send sgam.extract_episodes [producer, sgam-api]",
            "      process sgam.extract_episodes [consumer, sgam-worker]",
            "        claim [internal, sgam-worker]",
            "        process_episode [internal, sgam-worker]"
            " sgam.episode.id=<episode 1> sgam.outcome=done",
            "          extract [internal, sgam-worker]",
            "            search_memory [internal, sgam-worker]",
            "          upsert_memory [internal, sgam-worker] sgam.episode.id=<episode 1>",
            "        process_episode [internal, sgam-worker]"
            " sgam.episode.id=<episode 2> sgam.outcome=done",
            "          extract [internal, sgam-worker]",
            "            search_memory [internal, sgam-worker]",
            "          upsert_memory [internal, sgam-worker] sgam.episode.id=<episode 2>",
        ]
    )
    (request,) = [span for span in trace if span.kind == "server"]
    assert request.attributes == {
        names.HTTP_REQUEST_METHOD: "POST",
        names.HTTP_ROUTE: "/v1/episodes",
        names.HTTP_RESPONSE_STATUS_CODE: 202,
        names.SGAM_TENANT: TENANT,
    }
    (consumer,) = [span for span in trace if span.kind == "consumer"]
    assert consumer.attributes == {
        names.MESSAGING_SYSTEM: "celery",
        names.MESSAGING_OPERATION_TYPE: "process",
        names.MESSAGING_DESTINATION_NAME: "extract",
        names.SGAM_EPISODE_COUNT: 2,
        names.SGAM_ATTEMPT: 1,
    }
    upserts = {s.attributes[names.SGAM_EPISODE]: s for s in trace if s.name == "upsert_memory"}
    decided = {
        key: value
        for key, value in upserts[ids[0]].attributes.items()
        if key.startswith(names.SGAM_DECISIONS)
    }
    assert decided == {"sgam.decisions.written": 1}
    known = names.ATTRIBUTES | {names.decisions_attribute(a.value) for a in DecisionAction}
    assert {key for span in trace for key in span.attributes} <= known
    _no_values(receiver, TEXT_MARKER, CITY_MARKER, "2026-07-15", "home city")


def test_the_hot_path_over_http_is_one_trace(
    processes: tuple[Server, Celery], receiver: Receiver, writer: str
) -> None:
    server, _ = processes
    body = {"subject": "mira", "text": f"my home city is {CITY_MARKER}"}
    with server.client(writer) as client:
        answer = client.post("/v1/remember", json=body)
    assert answer.status_code == 200, answer.text
    spans = receiver.wait_for(lambda got: any(s.name == "POST /v1/remember" for s in got))
    trace = _trace_of(spans, "POST /v1/remember")

    assert tree(trace, attributes=(names.SGAM_LANE, names.SGAM_OUTCOME)) == "\n".join(
        [
            "POST /v1/remember [server, sgam-api]",
            "  remember [internal, sgam-api] sgam.lane=hot sgam.outcome=done",
            "    extract [internal, sgam-api]",
            "      search_memory [internal, sgam-api]",
            "    upsert_memory [internal, sgam-api]",
        ]
    )
    _no_values(receiver, TEXT_MARKER, CITY_MARKER, "home city")


def test_a_refused_request_is_traced_by_its_route_and_status_only(
    processes: tuple[Server, Celery], receiver: Receiver, writer: str
) -> None:
    """A body the API refuses, quoting the bad field in its answer: the span has the route's
    template and the status; the caller's text is in no span."""
    server, _ = processes
    bad = episode_body(TEXT_MARKER, occurred_at=f"{TEXT_MARKER}-not-a-time")
    with server.client(writer) as client:
        answer = client.post("/v1/episodes", json=[bad])
        unknown = client.get(f"/v1/subjects/{CITY_MARKER}/facts")
    assert answer.status_code == 422
    assert unknown.status_code == 200
    spans = receiver.wait_for(
        lambda got: (
            any(s.attributes.get(names.HTTP_RESPONSE_STATUS_CODE) == 422 for s in got)
            and any(s.name == "GET /v1/subjects/{subject}/facts" for s in got)
        )
    )
    (refused,) = [s for s in spans if s.attributes.get(names.HTTP_RESPONSE_STATUS_CODE) == 422]
    assert refused.name == "POST /v1/episodes"
    assert refused.status == "unset"  # a 4xx is the caller's error, not the server's
    reads = [s for s in _trace_of(spans, "GET /v1/subjects/{subject}/facts")]
    (search,) = [s for s in reads if s.name == "search_memory"]
    assert search.attributes[names.GEN_AI_MEMORY_RECORD_COUNT] == 0
    _no_values(receiver, TEXT_MARKER, CITY_MARKER)


def test_the_worker_logs_show_no_export_failures(processes: tuple[Server, Celery]) -> None:
    _, celery = processes
    assert "Failed to export" not in celery.logs()
    assert "Failed to export" not in Path(processes[0].log).read_text(errors="replace")
