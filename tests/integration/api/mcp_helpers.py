"""Talking to SGAM's MCP server the way an agent does: the SDK's own client, over stdio (it
spawns `sgam mcp`, as a desktop client would) or over streamable HTTP (`/mcp` of a running
`sgam serve`). Each helper runs one client session on its own event loop, so the tests stay
plain functions like the rest of the HTTP suite."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.integration.server_helpers import REDIS_URL, SGAM, Server

DOORS = ("stdio", "http")
T = TypeVar("T")


@asynccontextmanager
async def connected(
    door: str, server: Server, secret: str, mode: str = "auto", **env: str
) -> AsyncIterator[Client]:
    """A client session over `door` with the key `secret`, on the server's database. `mode`
    "auto" negotiates the newest protocol (2026-07-28); "legacy" the initialize handshake."""
    if door == "stdio":
        params = StdioServerParameters(
            command=SGAM,
            args=["mcp"],
            env=stdio_env(server.database_url, secret, **env),
            cwd=str(Path(server.log).parent),
        )
        async with Client(params, read_timeout_seconds=60, mode=mode) as client:
            yield client
        return
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(server.url + "/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def stdio_env(database_url: str, secret: str, **env: str) -> dict[str, str]:
    base = {name: value for name, value in os.environ.items() if name != "SGAM_BROKER_URL"}
    return base | {
        "SGAM_DATABASE_URL": database_url,
        "SGAM_REDIS_URL": REDIS_URL,
        "SGAM_API_KEY": secret,
        **env,
    }


def session(
    door: str,
    server: Server,
    secret: str,
    steps: Callable[[Client], Awaitable[T]],
    mode: str = "auto",
) -> T:
    """Run `steps` in one client session and return what they return."""

    async def main() -> T:
        async with connected(door, server, secret, mode) as client:
            return await steps(client)

    return anyio.run(main)


def calls(
    door: str, server: Server, secret: str, *wanted: tuple[str, dict[str, Any]]
) -> list[CallToolResult]:
    """Each (tool, arguments) called in turn in one session."""

    async def steps(client: Client) -> list[CallToolResult]:
        return [await client.call_tool(name, arguments) for name, arguments in wanted]

    return session(door, server, secret, steps)


def tool_names(door: str, server: Server, secret: str) -> list[str]:
    async def steps(client: Client) -> list[str]:
        return [tool.name for tool in (await client.list_tools()).tools]

    return session(door, server, secret, steps)


def answer(result: CallToolResult) -> Any:
    """A successful tool's structured answer, unwrapped to what REST sends."""
    assert not result.is_error, result.structured_content
    structured = result.structured_content
    assert structured is not None
    return structured["result"] if set(structured) == {"result"} else structured


def problem_type(result: CallToolResult) -> str:
    """A refused call's problem type (`urn:sgam:problem:...` minus the prefix)."""
    assert result.is_error, result.structured_content
    assert result.structured_content is not None
    kind: str = result.structured_content["type"]
    assert result.content[0].text.startswith(kind)  # type: ignore[union-attr]
    return kind.removeprefix("urn:sgam:problem:")


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CLOCK = {
    "recorded_at",
    "superseded_at",
    "expires_at",
    "first_seen_at",
    "last_seen_at",
    "decided_at",
}


def normalised(value: Any, tenant: str) -> Any:
    """An answer with what differs between two tenants given the same calls replaced: the
    tenant, generated ids and the recording clock."""
    if isinstance(value, dict):
        return {
            k: "<clock>" if k in _CLOCK and v is not None else normalised(v, tenant)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalised(item, tenant) for item in value]
    if isinstance(value, str):
        return _UUID.sub("<id>", value.replace(tenant, "<tenant>"))
    return value


def flat(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of a JSON value by its path, so a failed comparison names the leaves."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in flat(item, f"{path}.{key}").items()}
    if isinstance(value, list) and value:
        return {k: v for i, item in enumerate(value) for k, v in flat(item, f"{path}[{i}]").items()}
    return {path: value}
