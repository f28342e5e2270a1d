"""The review pages under /ui: server-rendered HTML (Jinja2, one stylesheet, no script) for
people who confirm or reject what the buffer holds, promote the quarantine, read a subject's
timeline and forget a subject.

`create_ui()` builds them as an application of their own, mounted on the HTTP service at /ui:
its errors are pages, not problem documents, and every answer carries the security headers.
The pages call the same pipeline functions as the REST routes, with the same keys and roles.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.api.conventions import single_query
from pipeline.api.problems import ApiError, classify
from pipeline.api.ratelimit import RateLimiter
from pipeline.db.store import Store
from pipeline.errors import SgamError
from pipeline.settings import Settings
from pipeline.ui import render, review, subjects
from pipeline.ui.sessions import CsrfRefused, EndedSessions, ResolveSession, SignedOut, Signer


def create_ui(store: Store, settings: Settings, limiter: RateLimiter) -> FastAPI:
    """`limiter`: the API's, whose budget of refused keys per address the sign-in form spends."""
    secret = settings.ui_session_secret
    ui = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    ui.state.store, ui.state.limiter = store, limiter
    ui.state.signer = Signer(
        secret.get_secret_value().encode() if secret is not None else secrets.token_bytes(32),
        settings.ui_session_hours * 3600,
    )
    ui.state.ended = EndedSessions(limiter)
    once = [Depends(single_query)]  # a repeated query parameter is refused, as on /v1
    ui.include_router(review.router, dependencies=once)
    ui.include_router(subjects.router, dependencies=once)
    ui.mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static")
    _handle_errors(ui)
    ui.add_middleware(ResolveSession, signer=ui.state.signer, ended=ui.state.ended)
    ui.add_middleware(SecurityHeaders)
    return ui


def _handle_errors(ui: FastAPI) -> None:
    async def signed_out(request: Request, error: Exception) -> Response:
        return with_headers(RedirectResponse("/ui/sign-in", status_code=303))

    async def refused(request: Request, error: Exception) -> Response:
        allow = None  # a 405's: Starlette names the methods the path answers
        if isinstance(error, CsrfRefused):
            status, title = 403, "The form could not be verified"
            detail = "It carried no valid CSRF token: reload the page and try again."
        elif isinstance(error, HTTPException) and error.status_code == 405:
            status, title, allow = 405, "Method not allowed", (error.headers or {})["Allow"]
            detail = f"{request.method} is not allowed here; use {allow}."
        elif isinstance(error, HTTPException):
            status, title, detail = error.status_code, "Not found", "There is no such page."
        else:
            status, _, title = classify(error)
            detail = str(error) if status != 500 else "Something went wrong on the server."
        if status == 404:  # another tenant's id reads exactly like a missing one
            title, detail = "Not found", "There is no such page, or it is not yours to see."
        key = None
        with contextlib.suppress(SignedOut):  # the page shows the nav when signed in
            key = render.signed_in(request)
        shown = render.page(request, "error.html", key, status=status, title=title, detail=detail)
        retry_after = getattr(error, "retry_after", None)  # a spent budget (429), a busy store
        if retry_after is not None:
            shown.headers["Retry-After"] = str(retry_after)
        if allow is not None:
            shown.headers["Allow"] = allow
        # A 500 is answered outside every middleware (Starlette's ServerErrorMiddleware).
        return with_headers(shown)

    ui.add_exception_handler(SignedOut, signed_out)
    for kind in (CsrfRefused, HTTPException, SgamError, ApiError, Exception):
        ui.add_exception_handler(kind, refused)


def with_headers(response: Response) -> Response:
    response.headers.update(render.HEADERS)
    return response


class SecurityHeaders:
    """CSP without any script, no framing, no sniffing, no referrer, no caching."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                ours = {k.lower().encode(): v.encode() for k, v in render.HEADERS.items()}
                headers = [(k, v) for k, v in message.get("headers", []) if k not in ours]
                headers += list(ours.items())
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
