"""The reads a chat backend sends on every turn, answered without FastAPI's per-request work.

FastAPI solves a route's dependencies on every request (for GET facts: the role check, the
bearer scheme, the store, the scope's three parameters, the two query checks), inspecting each
parameter's annotation again each time, then hands a plain handler to anyio's thread pool:
about 0.3 ms of the event loop's CPU per GET facts, half of what the read itself costs.

A hot read is one of the documented GET routes, served by this middleware (innermost, after
authentication and the rate limit) when the request is one the route would answer: its path
and query parse, every query parameter is one the route documents and is given once, and the
key has the route's role. Each parameter is validated by the route's own field (the same
annotated type, so the same values are read), the answer is built by the function the route
itself calls, in the loop's default executor (cheaper than anyio's hand-off), with the
request's context (its trace). Any other request, and any the route would refuse, goes on to
the route: every refusal is still FastAPI's and the document's, never a second copy of it.

At start, a hot read checks that its route depends on exactly what the hot read replaces (the
role, the store, the named dependencies): a dependency added to the route later is an error
then, not a check silently skipped here.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.datastructures import URL, QueryParams
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from pipeline.access.keys import ApiKey
from pipeline.api.access import allowed
from pipeline.api.conventions import store_of
from pipeline.api.problems import ApiError, problem_response
from pipeline.db.store import Store
from pipeline.errors import SgamError

# How a hot read answers: the store, the caller's key and the parsed path and query values
# (every documented parameter, defaults filled in) to the route's response.
Serve = Callable[[Store, ApiKey, Mapping[str, Any]], Response]


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for below in dependant.dependencies:
        yield from _dependants(below)


class HotRead:
    """GET `route` answered by `serve`, for a key with `role`, where the route's dependencies
    are that role's check, the store and `replaces`."""

    def __init__(
        self, route: APIRoute, role: str, serve: Serve, replaces: Collection[Callable[..., Any]]
    ) -> None:
        found = {below.call for below in route.dependant.dependencies}
        expected = {allowed(role), store_of, *replaces}
        if found != expected or route.methods != {"GET"}:
            raise TypeError(f"{route.name}: its dependencies are not the ones the hot read runs")
        every = list(_dependants(route.dependant))
        if any(d.header_params or d.cookie_params or d.body_params for d in every):
            raise TypeError(f"{route.name}: a hot read takes only path and query parameters")
        self.route, self.role, self.serve = route, role, serve
        self.query = {field.alias: field for d in every for field in d.query_params}
        self.path = {field.alias: field for d in every for field in d.path_params}
        self.pattern = compile_path(route.path)[0]

    def matches(self, path: str) -> Mapping[str, str] | None:
        found = self.pattern.match(path)
        return None if found is None else found.groupdict()

    def parse(self, path_values: Mapping[str, str], query: bytes) -> dict[str, Any] | None:
        """Every parameter's value as the route would read it, or None for a request the
        route is left to answer (or refuse)."""
        sent = QueryParams(query) if query else None
        values: dict[str, Any] = {}
        if sent is not None:
            names = [name for name, _ in sent.multi_items()]
            if len(set(names)) != len(names) or not set(names) <= self.query.keys():
                return None  # given twice, or not a parameter of this route
        for place, fields, given in (
            ("path", self.path, path_values),
            ("query", self.query, sent or {}),
        ):
            for alias, field in fields.items():
                raw = given.get(alias)
                if raw is None:
                    if field.field_info.is_required():
                        return None
                    values[field.name] = field.get_default()
                    continue
                value, errors = field.validate(raw, values, loc=(place, alias))
                if errors:
                    return None
                values[field.name] = value
        return values


class HotReads:
    """ASGI middleware, innermost: the hot reads, in the loop's default executor."""

    def __init__(self, app: ASGIApp, *, store: Store, reads: Sequence[HotRead]) -> None:
        self.app, self.store, self.reads = app, store, reads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        key: ApiKey | None = scope.get("state", {}).get("key")
        path = _route_path(scope)
        for read in self.reads:
            matched = read.matches(path)
            if matched is None:
                continue
            values = None
            if key is not None and key.allows(read.role):
                values = read.parse(matched, scope.get("query_string", b""))
            if key is None or values is None:
                break  # the route answers it, or refuses it in its own words
            scope["route"] = read.route  # what the metrics and the request's span name
            await self._answer(read, key, values, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _answer(
        self,
        read: HotRead,
        key: ApiKey,
        values: Mapping[str, Any],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        context = contextvars.copy_context()  # the request's span, as the thread pool keeps
        loop = asyncio.get_running_loop()
        try:
            response = await loop.run_in_executor(
                None, context.run, read.serve, self.store, key, values
            )
        except (ApiError, SgamError) as error:  # as the app's handler answers them
            response = problem_response(error, URL(scope=scope).path)
        await response(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path the routes match: without the root path the server was told it is under."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root + "/") else path
