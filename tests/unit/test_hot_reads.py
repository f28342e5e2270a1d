"""A hot read (`pipeline/api/hot_reads.py`) parses a request as its route would, leaves to
the route what it would not answer, and refuses at start a route whose dependencies it does
not run."""

from __future__ import annotations

from typing import Annotated

import pytest
from fastapi import APIRouter, Depends, Header
from fastapi.routing import APIRoute
from starlette.responses import Response

from pipeline.api.access import Reader, allowed
from pipeline.api.conventions import IdQuery, Opened, store_of
from pipeline.api.hot_reads import HotRead
from pipeline.api.routes import facts
from pipeline.api.routes.facts import Scope, scope_query


def _route(router: APIRouter, name: str) -> APIRoute:
    (route,) = [r for r in router.routes if isinstance(r, APIRoute) and r.name == name]
    return route


def _answer(*_: object) -> Response:
    return Response(b"[]")


@pytest.fixture
def read() -> HotRead:
    (found,) = facts.hot_reads()
    return found


def test_a_request_the_route_answers_is_parsed_as_the_route_reads_it(read: HotRead) -> None:
    values = read.parse({"subject": "mira"}, b"attribute=home_city&at=2026-06-01")
    assert values == {
        "subject": "mira",
        "tenant_id": None,
        "agent_id": None,
        "purpose": None,
        "attribute": "home_city",
        "at": "2026-06-01",  # a date alone, checked; the read takes it as its midnight
        "known_at": None,
        "include_quarantined": False,
    }
    assert read.parse({"subject": "mira"}, b"include_quarantined=true") is not None


@pytest.mark.parametrize(
    "query",
    [
        b"at=2026-01-01&at=2027-01-01",  # twice
        b"include_quarantine=true",  # not a parameter of the route
        b"include_quarantined=yes",  # not true or false
        b"at=yesterday",
        b"attribute=",
    ],
)
def test_what_the_route_would_refuse_is_left_to_it(read: HotRead, query: bytes) -> None:
    assert read.parse({"subject": "mira"}, query) is None


def test_only_its_own_path_matches(read: HotRead) -> None:
    assert read.matches("/v1/subjects/mira/facts") == {"subject": "mira"}
    assert read.matches("/v1/subjects/mira/facts/x") is None
    assert read.matches("/v1/subjects/mira/search") is None


def test_a_route_with_a_dependency_the_hot_read_does_not_run_is_refused_at_start() -> None:
    router = APIRouter()

    async def audited() -> None:
        return None

    @router.get("/v1/subjects/{subject}/facts", dependencies=[Depends(audited)])
    def guarded(subject: str, key: Reader, store: Opened, named: Scope) -> None:
        return None

    @router.get("/v1/subjects/{subject}/other")
    def headed(
        subject: str,
        key: Reader,
        store: Opened,
        named: Scope,
        trace: Annotated[str | None, Header()] = None,
        attribute: IdQuery = None,
    ) -> None:
        return None

    with pytest.raises(TypeError, match="dependencies"):
        HotRead(_route(router, "guarded"), "reader", _answer, replaces=[scope_query])
    with pytest.raises(TypeError, match="dependencies"):  # it needs the writer role, not reader
        HotRead(_route(router, "headed"), "writer", _answer, replaces=[scope_query])
    with pytest.raises(TypeError, match="only path and query"):
        HotRead(_route(router, "headed"), "reader", _answer, replaces=[scope_query])
    assert allowed("reader") is allowed("reader")  # what the check recognises
    assert store_of in {d.call for d in _route(router, "headed").dependant.dependencies}
