"""HTTP conventions: idempotent retries, If-Match races between concurrent clients, the
per-key rate limit, readiness with a broker, and the service's refusal to run on an outdated
schema."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis

from pipeline.access.keys import create_key, revoke_key
from pipeline.db.store import Store
from tests.integration.server_helpers import (
    REDIS_URL,
    SGAM,
    Keys,
    Server,
    episode_body,
    fact_body,
    rows_of,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.postgres


def test_retried_posts_store_nothing_twice(server: Server, keys: Keys, tenant: str) -> None:
    def once(endpoint: str) -> dict[str, str]:
        return {"Idempotency-Key": f"retry-{endpoint}"}  # a key is one endpoint's

    with server.client(keys("admin")) as api:
        answers = {
            "put": [api.put("/v1/facts", json=fact_body(), headers=once("put")) for _ in range(2)],
            "ingest": [
                api.post(
                    "/v1/episodes",
                    json=[episode_body(), episode_body("my plan is pro")],
                    headers=once("ingest"),
                )
                for _ in range(2)
            ],
            "remember": [
                api.post(
                    "/v1/remember",
                    json={"subject": "noor", "text": "my employer is Globex"},
                    headers=once("remember"),
                )
                for _ in range(2)
            ],
        }
        written = rows_of(server.database_url, tenant)
        forget = [api.delete("/v1/subjects/noor", headers=once("forget")) for _ in range(2)]
        reused = api.put("/v1/facts", json=fact_body(value="Paris"), headers=once("put"))

    first, second = answers["put"]
    assert (first.status_code, second.status_code) == (201, 201)  # the first answer again
    assert first.json() == second.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    receipts = [[r["status"] for r in a.json()["receipts"]] for a in answers["ingest"]]
    assert receipts == [["done", "done"], ["done", "done"]]  # the first answer again
    assert answers["ingest"][0].json() == answers["ingest"][1].json()
    assert answers["ingest"][1].headers["Idempotent-Replayed"] == "true"
    remembered = [a.json() for a in answers["remember"]]
    assert remembered[0] == remembered[1]
    assert written["episodes"] == 3
    assert forget[0].json() == forget[1].json()
    assert forget[1].headers["Idempotent-Replayed"] == "true"
    assert (reused.status_code, reused.json()["type"]) == (
        409,
        "urn:sgam:problem:idempotency-conflict",
    )


def _race(
    server: Server, secret: str, requests: list[tuple[str, str, dict[str, Any]]]
) -> list[httpx2.Response]:
    """Send the requests at once from as many clients (threads with connections of their own)."""
    start = threading.Barrier(len(requests))
    answers: list[httpx2.Response | None] = [None] * len(requests)

    def send(index: int, method: str, path: str, options: dict[str, Any]) -> None:
        with server.client(secret) as api:
            api.get("/healthz")  # connected before the start
            start.wait()
            answers[index] = api.request(method, path, **options)

    threads = [
        threading.Thread(target=send, args=(i, *request)) for i, request in enumerate(requests)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(answer is not None for answer in answers)
    return [answer for answer in answers if answer is not None]


def test_of_concurrent_writers_with_one_if_match_exactly_one_wins(
    server: Server, keys: Keys
) -> None:
    secret = keys("writer")
    with server.client(secret) as api:
        api.put("/v1/facts", json=fact_body(valid_from="2026-01-01T00:00:00Z"))
        api.put("/v1/facts", json=fact_body(value="Oslo", valid_from="2026-09-01T00:00:00Z"))
        api.put("/v1/facts", json=fact_body(value="Rome", valid_from="2026-05-01T00:00:00Z"))
        read = api.get(
            "/v1/subjects/mira/facts",
            params={"attribute": "home_city", "at": "2026-03-01T00:00:00Z"},
        )
    tag = read.headers["ETag"]
    racers = [
        (
            "PUT",
            "/v1/facts",
            {
                "json": fact_body(value=f"City{i}", valid_from="2026-03-01T00:00:00Z"),
                "headers": {"If-Match": tag},
            },
        )
        for i in range(8)
    ]
    answers = _race(server, secret, racers)

    assert sorted(answer.status_code for answer in answers) == [201] + [412] * 7
    winner = next(answer for answer in answers if answer.status_code == 201).json()["fact"]["value"]
    with server.client(secret) as api:
        now = api.get(
            "/v1/subjects/mira/facts",
            params={"attribute": "home_city", "at": "2026-03-01T00:00:00Z"},
        )
    assert [fact["value"] for fact in now.json()] == [winner]


def test_a_stale_etag_is_refused_even_when_a_new_fact_has_the_same_version(
    server: Server, keys: Keys
) -> None:
    """Two writers read the same ETag; the first writes a new fact (version 1, like the one
    both read). The second's If-Match must not match the newer fact."""
    secret = keys("writer")
    with server.client(secret) as api:
        api.put("/v1/facts", json=fact_body(valid_from="2026-01-01T00:00:00Z"))
        tag = api.get("/v1/subjects/mira/facts", params={"attribute": "home_city"}).headers["ETag"]
        first = api.put(
            "/v1/facts",
            json=fact_body(value="Paris", valid_from="2026-03-01T00:00:00Z"),
            headers={"If-Match": tag},
        )
        second = api.put(
            "/v1/facts",
            json=fact_body(value="Rome", valid_from="2026-03-01T00:00:00Z"),
            headers={"If-Match": tag},
        )
        now = api.get("/v1/subjects/mira/facts", params={"attribute": "home_city"})

    assert first.status_code == 201
    assert first.json()["fact"]["version"] == 1  # the version the stale reader also saw
    assert (second.status_code, second.json()["type"]) == (412, "urn:sgam:problem:version-conflict")
    assert second.json()["expected_etag"] == tag
    assert second.json()["current_etag"] == first.headers["ETag"] == now.headers["ETag"]
    assert [fact["value"] for fact in now.json()] == ["Paris"]


@pytest.mark.parametrize("held", ["a fact", "nothing"])
def test_of_16_concurrent_writers_with_one_etag_exactly_one_wins_whatever_their_valid_from(
    server: Server, keys: Keys, held: str
) -> None:
    secret = keys("writer")
    with server.client(secret) as api:
        if held == "a fact":
            api.put("/v1/facts", json=fact_body(valid_from="2026-03-01T00:00:00Z"))
        read = api.get("/v1/subjects/mira/facts", params={"attribute": "home_city"})
    tag = read.headers["ETag"]
    assert (tag == '"0"') == (held == "nothing")
    # Before, at, and after the fact that holds; each writer a day of its own.
    racers = [
        (
            "PUT",
            "/v1/facts",
            {
                "json": fact_body(value=f"City{i}", valid_from=f"2026-{1 + i // 4:02d}-1{i % 4}"),
                "headers": {"If-Match": tag},
            },
        )
        for i in range(16)
    ]
    answers = _race(server, secret, racers)

    assert sorted(answer.status_code for answer in answers) == [201] + [412] * 15
    winner = next(answer for answer in answers if answer.status_code == 201)
    with server.client(secret) as api:
        timeline = api.get("/v1/subjects/mira/attributes/home_city/history").json()
    written = {fact["value"] for fact in timeline} - {"Utrecht"}
    assert written == {winner.json()["fact"]["value"]}


def test_of_concurrent_promotions_with_one_if_match_exactly_one_wins(
    server: Server, keys: Keys
) -> None:
    secret = keys("reviewer")
    with server.client(secret) as api:
        fact = api.put("/v1/facts", json=fact_body(trust="untrusted")).json()["fact"]
    racers = [
        (
            "POST",
            f"/v1/facts/{fact['fact_id']}/promote",
            {"headers": {"If-Match": f'"{fact["version"]}"'}},
        )
        for _ in range(6)
    ]
    answers = _race(server, secret, racers)
    assert sorted(answer.status_code for answer in answers) == [200] + [412] * 5


@pytest.fixture(scope="module")
def limited(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with a tight rate limit and a broker that no worker drains."""
    started = start_server(
        api_database,
        tmp_path_factory.mktemp("limited"),
        SGAM_API_RATE_PER_S="1",
        SGAM_API_RATE_BURST="3",
        SGAM_BROKER_URL=REDIS_URL,
    )
    yield started
    stop_server(started)


def test_each_key_has_its_own_token_bucket(limited: Server, store: Store, tenant: str) -> None:
    first = create_key(store, {"tenant_id": tenant, "role": "reader"})[1]
    second = create_key(store, {"tenant_id": tenant, "role": "reader"})[1]
    with limited.client(first) as api:
        statuses = [api.get("/v1/subjects/mira/facts").status_code for _ in range(5)]
        refused = api.get("/v1/subjects/mira/facts")
    with limited.client(second) as other:
        unaffected = other.get("/v1/subjects/mira/facts").status_code

    assert statuses[:3] == [200, 200, 200]
    assert statuses[3:] == [429, 429]
    assert refused.json()["type"] == "urn:sgam:problem:rate-limited"
    assert int(refused.headers["Retry-After"]) >= 1
    assert unaffected == 200


def test_unknown_keys_are_rate_limited_per_client_address(
    limited: Server, store: Store, tenant: str
) -> None:
    with limited.client(f"sgam_nosuchkey_{tenant}") as guesser:
        statuses = [guesser.get("/v1/subjects/mira/facts").status_code for _ in range(8)]
        refused = guesser.get("/v1/subjects/mira/facts")
    secret = create_key(store, {"tenant_id": tenant, "role": "reader"})[1]
    time.sleep(int(refused.headers["Retry-After"]) + 0.5)  # the address's bucket refills
    with limited.client(secret) as api:
        valid = api.get("/v1/subjects/mira/facts").status_code

    assert statuses[:3] == [401, 401, 401]  # the burst of refused keys
    assert set(statuses[3:]) == {429}  # then no lookup at all until the bucket refills
    assert refused.json()["type"] == "urn:sgam:problem:rate-limited"
    assert int(refused.headers["Retry-After"]) >= 1
    assert valid == 200


@pytest.fixture(scope="module")
def guarded(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A budget of 3 refused keys per address that refills once in 100 s, and no key trusted
    from memory: every request goes to the bad-key budget or to Redis's known keys."""
    started = start_server(
        api_database,
        tmp_path_factory.mktemp("guarded"),
        SGAM_API_RATE_PER_S="0.01",
        SGAM_API_RATE_BURST="3",
        SGAM_API_KEY_CACHE_S="0",
    )
    yield started
    stop_server(started)


@pytest.fixture
def address_budget() -> Iterator[None]:
    """127.0.0.1's refused-key bucket, which every test server shares in Redis, full before
    the test and again after it: a spent one would refuse the next test's new keys."""
    client = redis.Redis.from_url(REDIS_URL)
    client.delete("sgam:rate:refused:127.0.0.1")
    yield
    client.delete("sgam:rate:refused:127.0.0.1")
    client.close()


@pytest.mark.usefixtures("address_budget")
def test_past_an_addresss_bad_key_budget_keys_accepted_before_still_pass(
    guarded: Server, store: Store, tenant: str
) -> None:
    used, unseen = (create_key(store, {"tenant_id": tenant, "role": "reader"}) for _ in range(2))
    with guarded.client(used[1]) as api:  # a user's key, accepted once
        before = api.get("/v1/subjects/mira/facts").status_code
    with guarded.client(f"sgam_nosuchkey_{tenant}") as guesser:  # behind the same address
        guessed = [guesser.get("/v1/subjects/mira/facts").status_code for _ in range(5)]
    with guarded.client(used[1]) as api:
        after = api.get("/v1/subjects/mira/facts").status_code
    with guarded.client(unseen[1]) as api:
        never_used = api.get("/v1/subjects/mira/facts")
    revoke_key(store, used[0].key_id, tenant_id=tenant)  # it no longer passes the spent budget
    with guarded.client(used[1]) as api:
        revoked = [api.get("/v1/subjects/mira/facts").status_code for _ in range(2)]

    assert before == 200
    assert guessed == [401, 401, 401, 429, 429]
    assert after == 200  # the guesser did not lock the user out
    assert never_used.status_code == 429  # a key never seen waits for the budget, like a guess
    assert never_used.json()["type"] == "urn:sgam:problem:rate-limited"
    assert revoked == [401, 429]  # refused once (a lookup), then no longer vouched for


def test_with_a_broker_episodes_wait_in_the_queue(
    limited: Server, store: Store, tenant: str
) -> None:
    secret = create_key(store, {"tenant_id": tenant, "role": "writer"})[1]
    with limited.client(secret) as api:
        ingested = api.post("/v1/episodes", json=episode_body())
    with limited.client() as anyone:
        ready = anyone.get("/readyz").json()
        metrics = anyone.get("/metrics").text

    assert ingested.status_code == 202
    assert ingested.json()["receipts"][0]["status"] == "queued"
    assert ready["checks"] == {"database": "ok", "broker": "ok", "rate_limit_redis": "ok"}
    depth = next(
        line
        for line in metrics.splitlines()
        if line.startswith('sgam_queue_depth{queue="extract"}')
    )
    assert float(depth.split()[-1]) >= 1
    assert 'sgam_episodes{state="pending"}' in metrics


def test_not_ready_while_the_broker_is_down(
    api_database: str, tmp_path: Path, store: Store, tenant: str
) -> None:
    down = start_server(
        api_database, tmp_path, SGAM_BROKER_URL="redis://127.0.0.1:1/0", SGAM_API_RATE_PER_S="0"
    )
    try:
        secret = create_key(store, {"tenant_id": tenant, "role": "writer"})[1]
        with down.client(secret) as api:
            ready = api.get("/readyz")
            ingested = api.post("/v1/episodes", json=episode_body())
            metrics = api.get("/metrics")
    finally:
        stop_server(down)
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"database": "ok", "broker": "unreachable"}
    assert ingested.json()["broker_down"] is True  # stored: the sweeper queues it later
    assert ingested.status_code == 202
    assert ingested.json()["receipts"][0]["status"] == "stored"  # not "queued": nothing was
    assert metrics.status_code == 200  # the pipeline's gauges, without the broker's depth
    assert 'sgam_episodes{state="pending"}' in metrics.text
    assert "sgam_queue_depth{" not in metrics.text


def test_several_processes_share_the_rate_limit_and_sum_their_metrics(
    api_database: str, tmp_path: Path, store: Store, tenant: str
) -> None:
    # One token a minute: however slow the machine, the 14 requests see the burst of 10 and
    # almost no refill, while two unshared buckets would let all 14 through.
    two = start_server(
        api_database,
        tmp_path,
        "--workers",
        "2",
        SGAM_API_RATE_PER_S=str(1 / 60),
        SGAM_API_RATE_BURST="10",
    )
    try:
        secret = create_key(store, {"tenant_id": tenant, "role": "reader"})[1]
        statuses = []
        for _ in range(14):  # a connection each: the kernel spreads them over both processes
            with two.client(secret) as api:
                statuses.append(api.get("/v1/subjects/mira/facts").status_code)
        with two.client() as anyone:
            metrics = anyone.get("/metrics").text
    finally:
        stop_server(two)
    assert statuses.count(200) in (10, 11)  # the burst, and at most one token refilled
    assert statuses.count(429) == 14 - statuses.count(200)
    counted = {
        status: sum(
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("sgam_http_requests_total{")
            and 'route="/v1/subjects/{subject}/facts"' in line
            and f'status="{status}"' in line
        )
        for status in (200, 429)
    }
    assert counted == {200: statuses.count(200), 429: statuses.count(429)}


def test_serve_refuses_an_outdated_schema(postgres_url: str, tmp_path: Path) -> None:
    from sqlalchemy import make_url

    from tests.databases import create_database as create_database

    url = make_url(postgres_url)
    empty = url.set(database=f"{url.database}_http_empty").render_as_string(hide_password=False)
    create_database(empty)
    done = subprocess.run(
        [SGAM, "serve", "--port", "1"],
        env={"SGAM_DATABASE_URL": empty, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "sgam db upgrade" in done.stderr
