"""The HTTP service for chat backends: `create_app()` builds it on the SGAM_* settings.

Handlers are thin: they parse, authorise, call the same pipeline functions as the command
line, and map typed errors to problems (`problems.PROBLEMS`). The pipeline's database work is
synchronous, so handlers that touch it are plain functions that FastAPI runs in its thread
pool; the event loop only parses, authenticates and answers.

Middleware, outermost first: the request's span (when tracing is on) → metrics (every
request, refusals included) → `Cache-Control: no-store` on /v1 and /mcp → authentication and
the rate limit (before any body is read) → the body's size, type and encoding → the hot reads
(`hot_reads.py`: GET facts without FastAPI's per-request work) → the routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Route

from pipeline import open_store
from pipeline.api import conventions, docs_pages, openapi
from pipeline.api.access import Authenticate, KeyCache
from pipeline.api.headers import NoStore
from pipeline.api.hot_reads import HotRead, HotReads
from pipeline.api.limits import ReadBody
from pipeline.api.metrics import Measure, Metrics
from pipeline.api.problems import (
    ApiError,
    MalformedRequest,
    MethodNotAllowed,
    NoRoute,
    problem_response,
)
from pipeline.api.ratelimit import RateLimiter
from pipeline.api.routes import episodes, facts, health, keys, review, subjects, usage
from pipeline.api.traces import Trace
from pipeline.db.store import Store
from pipeline.errors import SgamError
from pipeline.extract import llm
from pipeline.mcp import http as mcp_http
from pipeline.observe.tracing import setup_tracing
from pipeline.settings import Settings, load_settings
from pipeline.ui import create_ui
from pipeline.validation import invalid_field

DESCRIPTION = """Schema-guided agent memory over HTTP: ingest episodes, remember explicit
statements, read facts and context, review the buffer and the quarantine, forget subjects.

Every /v1 request carries `Authorization: Bearer <API key>` (`sgam keys create`). The key fixes
the tenant and, when set, the agent and purpose: a request that names another is refused (403),
and another tenant's resource is answered 404, like a missing one. Roles: reader (reads,
context), writer (+ ingest, remember, put), reviewer (+ candidates, quarantine, promote, log),
admin (+ forget, purge, keys).

`Idempotency-Key` makes a POST, PUT or DELETE safe to retry: the same request again answers the
first status and body with `Idempotent-Replayed: true`; the key used for another payload,
endpoint or scope is 409 (`idempotency-conflict`). A `GET` of a single-valued attribute sends
the state of its key as the `ETag`, and so does a `PUT`'s answer; a `PUT` sends it back in
`If-Match` and is 412 when the key was written since (promote's `If-Match` is the quarantined
fact's `version`). Errors are RFC 9457
`application/problem+json` with a stable `type` per error class:

"""


def create_app(
    settings: Settings | None = None,
    store: Store | None = None,
    hot_reads: Sequence[HotRead] | None = None,
) -> FastAPI:
    """`hot_reads`: the reads served without FastAPI's per-request work (default: GET facts;
    none: every request through its route, as the tests compare)."""
    settings = settings or load_settings()
    setup_tracing(settings, "sgam-api")
    store = store or open_store(settings)
    if settings.llm_configured:
        llm.import_sdk()  # at start, not in the first request that asks the model
    limiter = RateLimiter(settings)
    metrics = Metrics(store)
    # Keys are trusted from memory only where a revocation's marker reaches every request
    # (the token bucket's Redis round trip): without it, each request looks its key up.
    cache = KeyCache(settings.api_key_cache_s if limiter.shared else 0)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with agents.run():
            yield
        await limiter.close()
        store.dispose()

    app = FastAPI(
        title="SGAM",
        version="0.1.0",
        description=DESCRIPTION + openapi.problem_table(),
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN: docs_pages serves its own
        redoc_url=None,
        # FastAPI's own spans record the request's path and query (subjects, search words):
        # SGAM traces requests itself (`traces.Trace`), and no FastAPI telemetry is wanted.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        # An operation's id is its handler's name (put_fact), which the document's links name.
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.store, app.state.limiter, app.state.metrics = store, limiter, metrics
    app.state.key_cache = cache
    token = settings.metrics_token
    app.state.metrics_token = token.get_secret_value() if token is not None else None
    modules = (episodes, facts, review, subjects, keys, usage, health)
    for module in modules:  # a /v1 query parameter the document does not list is refused
        once = [Depends(openapi.known_query), Depends(conventions.single_query)]
        checks = [] if module is health else once
        app.include_router(module.router, dependencies=checks)
    docs_pages.mount(app)  # /docs and /redoc, with nothing loaded from elsewhere
    agents, mcp_route = mcp_http.mount(app, store)  # MCP for agents, streamable HTTP at /mcp
    # /ui itself: a relative redirect (Starlette's slash redirect would echo the Host header).
    app.add_api_route("/ui", _to_ui, methods=["GET", "HEAD"], include_in_schema=False)
    app.mount("/ui", create_ui(store, settings, limiter))  # the review pages, errors as pages
    routes = [route for module in modules for route in module.router.routes] + [mcp_route]
    _handle_errors(app, routes)
    reads = facts.hot_reads() if hot_reads is None else hot_reads
    app.add_middleware(HotReads, store=store, reads=reads)
    app.add_middleware(ReadBody, limit=settings.api_max_body_bytes)
    app.add_middleware(Authenticate, store=store, limiter=limiter, cache=cache)
    app.add_middleware(NoStore)
    app.add_middleware(Measure, metrics=metrics, routes=routes)
    app.add_middleware(Trace, routes=routes)
    app.openapi = lambda: openapi.build(app)  # type: ignore[method-assign]
    return app


async def _to_ui() -> Response:
    return RedirectResponse("/ui/", status_code=307)


def _one_of(first: dict[str, Any], errors: Sequence[Any]) -> dict[str, Any]:
    """A parameter of a union type (a status or "all") refused by each member: one error
    naming every value it may take, not the first member's under its pydantic tag."""
    members = [dict(e) for e in errors if tuple(e["loc"][:2]) == tuple(first["loc"][:2])]
    expected = [str(e.get("ctx", {}).get("expected", "")) for e in members]
    if len(members) < 2 or not all(expected):
        return first
    values = ", ".join(choice.replace(" or ", ", ") for choice in expected[:-1])
    return first | {"msg": f"Input should be {values} or {expected[-1]}"}


def _handle_errors(app: FastAPI, routes: list[BaseRoute]) -> None:
    async def typed(request: Request, error: Exception) -> Response:
        return problem_response(error, request.url.path)

    async def unreadable(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        first: dict[str, Any] = dict(error.errors()[0])
        if first["type"] == "json_invalid":
            refused: Exception = MalformedRequest(
                f"the body is not JSON: {first.get('ctx', {}).get('error', 'decode error')}"
            )
        else:
            located = first["loc"][:1] in (("body",), ("query",), ("path",), ("header",))
            place = first["loc"][1:] if located else first["loc"]
            if first["loc"][:1] in (("query",), ("path",), ("header",)) and len(place) > 1:
                first = _one_of(first, error.errors())  # a union's members: one parameter
                place = place[:1]
            refused = invalid_field(first | {"loc": place or ("body",)})
        return problem_response(refused, request.url.path)

    async def http(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        refused: Exception
        if error.status_code == 404:
            refused = NoRoute(f"no endpoint at {request.url.path}")
        elif error.status_code == 405:
            allowed = _methods_at(request, routes)
            refused = MethodNotAllowed(
                f"{request.method} is not allowed here; use {', '.join(allowed)}", allow=allowed
            )
        else:
            refused = MalformedRequest(str(error.detail))
        return problem_response(refused, request.url.path)

    app.add_exception_handler(SgamError, typed)
    app.add_exception_handler(ApiError, typed)
    app.add_exception_handler(RequestValidationError, unreadable)
    app.add_exception_handler(HTTPException, http)
    app.add_exception_handler(Exception, typed)


def _methods_at(request: Request, routes: list[BaseRoute]) -> list[str]:
    """Every method some route serves at the request's path, for 405's `Allow` (RFC 9110):
    Starlette names only the first route that matched the path, and GET and POST of one path
    are two routes here."""
    methods: set[str] = set()
    for route in [*routes, *request.app.router.routes]:  # the latter: /openapi.json, /docs
        if isinstance(route, Route) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods or set()
    return sorted(methods)
