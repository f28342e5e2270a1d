"""The MCP server as streamable HTTP at `/mcp` of the HTTP service.

Stateless, with JSON answers, POST only (GET and DELETE are 405 with `Allow: POST`): each
POST carries one JSON-RPC message and is authenticated on
its own by the service's middleware (`Authorization: Bearer KEY`, the rate limit, the body
limits), so no MCP session can outlive its key or be picked up with another one.
"""

from __future__ import annotations

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.routing import Route

from pipeline.db.store import Store
from pipeline.mcp import server

PATH = "/mcp"


def mount(app: FastAPI, store: Store) -> tuple[StreamableHTTPSessionManager, Route]:
    """Add `/mcp` to `app`. The caller runs the manager in the app's lifespan and counts the
    route's requests in the metrics."""

    manager = StreamableHTTPSessionManager(
        app=server.build(store, server.request_key), stateless=True, json_response=True
    )
    # POST only: GET would open the server's event stream, which a stateless server never
    # writes to and which would outlive the key's revocation; DELETE ends no session here.
    route = Route(PATH, endpoint=StreamableHTTPASGIApp(manager), methods=["POST"])
    app.router.routes.append(route)
    return manager, route
