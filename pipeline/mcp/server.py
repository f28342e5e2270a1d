"""The MCP server: SGAM's tools for agents, on the official SDK's low-level `Server`.

The caller's API key decides everything, as over REST: `tools/list` shows only the tools its
role allows, and a call is authorised, validated and run by the same operation as the
matching REST route (in a worker thread: the pipeline's database work is synchronous). A
refusal is a tool error (`isError`) whose structured content is the problem REST would send
(`type`, `title`, `status`, `detail`, `field`), with nothing written.

Where the key comes from is the transport's business (`KeyOf`): over streamable HTTP the
service's authentication middleware has checked the bearer key of each request; over stdio
the key of `SGAM_API_KEY` is checked again before each call (through a cache of its own, so
a revocation takes effect within SGAM_API_KEY_CACHE_S; the HTTP service refuses it at once).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, TypeAdapter, ValidationError, create_model

from pipeline.access.keys import ApiKey, authenticate
from pipeline.api.access import REFUSED, KeyCache
from pipeline.api.problems import ApiError, Forbidden, NoRoute, Unauthorized, problem
from pipeline.db.store import Store
from pipeline.errors import SgamError
from pipeline.mcp.tools import TOOLS, Tool, acting
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.validation import invalid_field

KeyOf = Callable[[ServerRequestContext[Any, Any]], Awaitable[ApiKey]]
INSTRUCTIONS = """SGAM is this agent's long-term memory: typed facts with the time they held
and the time they were learnt, each citing the episode it came from. Call `remember` when the
user states something to keep, `get_context` or `get_facts` before answering about them, and
`get_history` for how something changed. The API key fixes the tenant."""


def build(store: Store, key_of: KeyOf) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], _: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            key = await key_of(ctx)
        except ApiError as error:
            raise MCPError(types.INVALID_REQUEST, str(error)) from None
        return types.ListToolsResult(
            tools=[described(tool) for tool in TOOLS.values() if key.allows(tool.role)]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            key = await key_of(ctx)
            tool = TOOLS.get(params.name)
            if tool is None:
                raise NoRoute(f"no tool named {params.name}")
            if not key.allows(tool.role):
                raise Forbidden(f"a {key.role} key may not call {tool.name}; it needs {tool.role}")
            try:
                given = tool.arguments.model_validate(params.arguments or {})
            except ValidationError as exc:
                raise invalid_field(exc.errors()[0]) from None
            with tool_span(tool, key):
                result = await anyio.to_thread.run_sync(tool.run, store, acting(key, given), given)
        except (ApiError, SgamError) as error:
            return refused(error, params.name)
        answer = _adapter(tool).dump_python(result, mode="json")
        structured = answer if isinstance(answer, dict) else {"result": answer}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(structured))],
            structured_content=structured,
        )

    def input_schema(name: str) -> dict[str, Any] | None:
        tool = TOOLS.get(name)
        return described(tool).input_schema if tool is not None else None

    return Server(
        "sgam",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schema,
    )


def tool_span(tool: Tool, key: ApiKey) -> AbstractContextManager[Any]:
    """The call's span (`execute_tool get_facts`): over HTTP a child of the request's, over
    stdio a trace's root; the tool's memory operations are its children. Only a listed
    tool's name is recorded, never its arguments."""
    return tracing.span(
        f"{names.EXECUTE_TOOL} {tool.name}",
        attributes={
            names.GEN_AI_OPERATION_NAME: names.EXECUTE_TOOL,
            names.GEN_AI_TOOL_NAME: tool.name,
            names.SGAM_TENANT: key.tenant_id,
        },
    )


@cache
def described(tool: Tool) -> types.Tool:
    """The tool as `tools/list` shows it: its arguments' and its answer's JSON schemas."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.arguments.model_json_schema(),
        output_schema=_answer_model(tool).model_json_schema(mode="serialization"),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


@cache
def _adapter(tool: Tool) -> TypeAdapter[Any]:
    """The answer's JSON form, as REST sends it."""
    return TypeAdapter(tool.answer)


def _answer_model(tool: Tool) -> type[BaseModel]:
    """A structured result is an object: a list answer travels as {"result": [...]}."""
    if isinstance(tool.answer, type) and issubclass(tool.answer, BaseModel):
        return tool.answer
    return create_model(f"{tool.arguments.__name__}Answer", result=(tool.answer, ...))


def refused(error: Exception, name: str) -> types.CallToolResult:
    """The problem REST would answer, as a tool error; `detail` is its one-line message."""
    _, body, _ = problem(error, f"tools/{name}")
    line = f"{body['type']}: {body.get('detail', body['title'])}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=line)],
        structured_content=body,
        is_error=True,
    )


async def request_key(ctx: ServerRequestContext[Any, Any]) -> ApiKey:
    """Over streamable HTTP: the key the service's middleware checked for this request."""
    state = getattr(ctx.request, "scope", {}).get("state", {})
    key = state.get("key")
    if not isinstance(key, ApiKey):
        raise Unauthorized("send one header: Authorization: Bearer <API key>")
    return key


def presented_key(store: Store, secret: str, cache: KeyCache) -> KeyOf:
    """Over stdio: the one key the process was started with, checked before each request."""

    async def key_of(_: ServerRequestContext[Any, Any]) -> ApiKey:
        cached = cache.get(secret, store.clock())
        if cached is not None:
            return cached
        found = await anyio.to_thread.run_sync(authenticate, store, secret)
        if isinstance(found, str):
            raise Unauthorized(REFUSED[found])
        cache.put(secret, found)
        return found

    return key_of
