"""A server span for every HTTP request, named by its route's template (`POST /v1/episodes`),
continuing the caller's trace when it sends a `traceparent`.

Written here rather than taken from OpenTelemetry's ASGI instrumentation, which records the
request's full path and query (`url.path`, `url.query`): in SGAM those name subjects and carry
search words, and no span may. Only the method, the route's template, the status and the
tenant of the key are recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.observe import conventions as names
from pipeline.observe import tracing


class Trace:
    """ASGI middleware, outermost: the span covers refusals (401, 413, 429) too."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute]) -> None:
        self.app, self.routes = app, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not tracing.enabled():
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in (b"traceparent", b"tracestate")
        }
        method, root = scope["method"], scope.get("root_path", "")
        opened = tracing.start_span(
            method,
            kind="server",
            parent=tracing.context_from_headers(headers),
            attributes={names.HTTP_REQUEST_METHOD: method},
        )
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with tracing.using(opened):
            try:
                await self.app(scope, receive, sent)
            finally:
                route = template(scope, self.routes, root)
                opened.set_attribute(names.HTTP_RESPONSE_STATUS_CODE, status)
                if route is not None:
                    opened.set_attribute(names.HTTP_ROUTE, route)
                    opened.update_name(f"{method} {route}")
                key = scope.get("state", {}).get("key")
                if key is not None:
                    opened.set_attribute(names.SGAM_TENANT, key.tenant_id)
                if status >= 500:
                    tracing.failed(opened, str(status))


def template(scope: Scope, routes: Sequence[BaseRoute], root: str = "") -> str | None:
    """The template of the route that answered (or would have answered a refused request),
    with the prefix of the application it is mounted in (`/ui/candidates`, not `/candidates`):
    `root` is the scope's root_path before routing, which a mount extends."""
    route = scope.get("route")
    if route is None:  # refused before routing (401, 413, 429): find its route anyway
        route = next((r for r in routes if r.matches(scope)[0] is Match.FULL), None)
    path = getattr(route, "path", None)
    mounted = str(scope.get("root_path", ""))
    prefix = mounted[len(root) :] if mounted.startswith(root) else ""
    return None if path is None else prefix + path
