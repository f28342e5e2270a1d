"""GET facts served by the hot read (`pipeline/api/hot_reads.py`) answers exactly what its
FastAPI route answers: the same status, body and headers for every request, those the hot
read serves and those it leaves to the route (refusals, unknown or repeated parameters, a role
the key lacks). Both apps run in-process on the same real store, one with the hot read and one
without."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from starlette.responses import Response
from starlette.testclient import TestClient

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api.app import create_app
from pipeline.api.hot_reads import Serve
from pipeline.api.routes import facts
from pipeline.db.store import Store
from tests.factories import put_fact

F = "/v1/subjects/mira/facts"
# (key, path, query, the status both answer, whether the hot read served it).
REQUESTS: list[tuple[str, str, dict[str, str] | list[tuple[str, str]], int, bool]] = [
    ("reader", F, {}, 200, True),
    ("reader", "/v1/subjects/nobody/facts", {}, 200, True),
    ("reader", F, {"attribute": "home_city"}, 200, True),  # single-valued: an ETag
    ("reader", F, {"attribute": "home_city", "known_at": "2030-01-01"}, 200, True),
    ("reader", F, {"attribute": "languages"}, 200, True),
    ("reader", F, {"at": "2025-06-01"}, 200, True),
    ("reader", F, {"at": "2026-06-01T00:00:00Z"}, 200, True),
    ("reader", F, {"tenant_id": "acme", "agent_id": "bot"}, 200, True),
    ("reader", F, {"include_quarantined": "false"}, 200, True),
    ("reviewer", F, {"include_quarantined": "true"}, 200, True),
    ("bound", F, {}, 200, True),
    ("bound", F, {"agent_id": "bot"}, 200, True),
    # Refused by the read itself, which the hot read runs as the route does:
    ("reader", F, {"include_quarantined": "true"}, 403, True),  # the reviewer role
    ("reader", F, {"tenant_id": "other"}, 403, True),  # another tenant
    ("bound", F, {"agent_id": "other"}, 403, True),  # another agent
    ("reader", F, {"attribute": "Home City"}, 422, True),  # not in the catalogue
    # Left to the route, which refuses them:
    ("reader", F, {"at": "yesterday"}, 422, False),
    ("reader", F, {"include_quarantined": "yes"}, 422, False),
    ("reader", F, {"include_quarantine": "true"}, 422, False),  # not a parameter
    ("reader", F, [("at", "2026-01-01"), ("at", "2027-01-01")], 422, False),  # twice
    ("reader", F, {"attribute": ""}, 422, False),
    ("reader", "/v1/subjects/%20mira/facts", {}, 422, False),  # not a subject
    ("none", F, {}, 401, False),  # refused before either
]


@pytest.fixture
def keys(store: Store) -> dict[str, str]:
    made = {
        role: pipeline.create_key(store, {"tenant_id": "acme", "role": role})[1]
        for role in ("reader", "reviewer")
    }
    bound = {"tenant_id": "acme", "role": "reader", "agent_id": "bot"}
    return made | {"bound": pipeline.create_key(store, bound)[1], "none": "sgam_nothing_here"}


@pytest.fixture
def served(store: Store) -> Iterator[tuple[TestClient, TestClient, list[str]]]:
    """The app with the hot read (whose answers are counted) and the app without it."""
    put_fact(store)
    put_fact(store, attribute="languages", value="Dutch")
    put_fact(store, attribute="languages", value="Frisian")
    put_fact(store, agent_id="bot", attribute="answer_style", value="concise")
    put_fact(store, attribute="employer", value="Globex", trust="untrusted")  # quarantined
    counted: list[str] = []
    (read,) = facts.hot_reads()
    read.serve = _counting(read.serve, counted)
    with (
        TestClient(create_app(store.settings, store, hot_reads=[read])) as hot,
        TestClient(create_app(store.settings, store, hot_reads=[])) as routed,
    ):
        yield hot, routed, counted


def _counting(serve: Serve, counted: list[str]) -> Serve:
    def counted_serve(store: Store, key: ApiKey, values: Mapping[str, Any]) -> Response:
        counted.append(values["subject"])
        return serve(store, key, values)

    return counted_serve


def test_the_hot_read_answers_as_its_route(
    served: tuple[TestClient, TestClient, list[str]], keys: dict[str, str]
) -> None:
    hot, routed, counted = served
    for who, path, query, status, by_hot_read in REQUESTS:
        headers = {"Authorization": f"Bearer {keys[who]}"}
        before = len(counted)
        first, second = (app.get(path, params=query, headers=headers) for app in (hot, routed))
        assert (first.status_code, first.headers, first.content) == (
            second.status_code,
            second.headers,
            second.content,
        ), (who, path, query)
        assert (first.status_code, len(counted) - before) == (status, int(by_hot_read)), query
    reader = {"Authorization": f"Bearer {keys['reader']}"}
    etags = [
        hot.get(F, params={"attribute": name}, headers=reader).headers.get("etag")
        for name in ("home_city", "languages")
    ]
    assert etags[0] is not None  # a single-valued key's state
    assert etags[1] is None  # a multi-valued attribute has none
