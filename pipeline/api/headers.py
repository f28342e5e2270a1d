"""`Cache-Control: no-store` on every answer of /v1 and /mcp, refusals included: they carry
what users said (facts, episode text, the log), which no browser, proxy or CDN may keep."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.api.access import GUARDED


class NoStore:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(GUARDED):
            await self.app(scope, receive, send)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() != b"cache-control"
                ]
                message["headers"] = [*headers, (b"cache-control", b"no-store")]
            await send(message)

        await self.app(scope, receive, marked)
