"""`sgam mcp`: SGAM's tools for an agent, over MCP on stdin/stdout."""

from __future__ import annotations

import click

from pipeline.cli.options import opened_store


@click.command("mcp")
def mcp_stdio() -> None:
    """Serve the memory tools to an agent over MCP on stdio (an MCP client starts this).

    The agent acts with the API key in SGAM_API_KEY (see `sgam keys create`): the key fixes
    the tenant (and, when bound, the agent and purpose) and its role decides which tools are
    listed. A key that is not valid exits 2 at once; one revoked later refuses the next call."""
    import anyio
    from mcp.server.stdio import stdio_server

    from pipeline.access.keys import authenticate
    from pipeline.api.access import REFUSED, KeyCache
    from pipeline.errors import SettingError
    from pipeline.mcp.server import build, presented_key
    from pipeline.observe import tracing
    from pipeline.observe.tracing import setup_tracing

    with opened_store() as store:
        secret = store.settings.api_key.get_secret_value()
        if not secret:
            raise SettingError("SGAM_API_KEY", "set it to an API key (sgam keys create)")
        found = authenticate(store, secret)
        if isinstance(found, str):
            raise SettingError("SGAM_API_KEY", REFUSED[found])
        cache = KeyCache(store.settings.api_key_cache_s)
        cache.put(secret, found)
        server = build(store, presented_key(store, secret, cache))
        # Each tool call is a trace of its own (`execute_tool NAME`, its memory operations).
        setup_tracing(store.settings, "sgam-mcp")

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        try:
            anyio.run(serve)
        finally:
            tracing.shutdown()  # what was traced is exported before the process ends
