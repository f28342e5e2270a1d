"""What every review page shares: the templates, the signed-in key, the CSRF check on forms,
pagination, and the security headers."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from pipeline.access.keys import ApiKey
from pipeline.api.problems import Forbidden, MalformedRequest
from pipeline.db.store import Store
from pipeline.ui import notices, sessions, words
from pipeline.ui.sessions import Signer
from schemas.fields import format_utc

HERE = Path(__file__).parent
templates = Jinja2Templates(
    env=Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined
    )
)
PAGE_SIZE = 20
# No script at all, no inline style attribute, nothing from elsewhere, never in a frame.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def signer_of(request: Request) -> Signer:
    signer: Signer = request.app.state.signer
    return signer


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def signed_in(request: Request) -> ApiKey:
    """The session's key (SignedOut sends the browser to the sign-in form)."""
    return sessions.viewer(request, store_of(request))


def need(key: ApiKey, role: str) -> None:
    if not key.allows(role):
        raise Forbidden(f"a {key.role} key may not do this; it needs the {role} role")


async def posted(request: Request, *, signed_in: bool = True) -> dict[str, str]:
    """The form's fields, once its CSRF token checked out (CsrfRefused otherwise)."""
    body = (await request.body()).decode("utf-8", "replace")
    fields = {name: values[-1] for name, values in parse_qs(body).items()}
    token = fields.pop(sessions.CSRF_FIELD, None)
    sessions.check_csrf(request, signer_of(request), token, signed_in=signed_in)
    return fields


def page(
    request: Request, template: str, key: ApiKey | None, status: int = 200, **context: Any
) -> HTMLResponse:
    if key is not None:
        context["csrf"] = sessions.csrf_token(request, signer_of(request))
    if key is not None:
        context.setdefault("notice", notices.notice_of(request, store_of(request), key))
    context.setdefault("notice", None)
    context |= {"key": key, "path": request.url.path}
    response: HTMLResponse = templates.TemplateResponse(
        request, template, context, status_code=status
    )
    return response


def back_to(path: str, **query: str) -> RedirectResponse:
    """After a form: see the page again (303, so a reload does not post twice)."""
    return RedirectResponse(f"{path}?{urlencode(query)}" if query else path, status_code=303)


@dataclass(frozen=True)
class Paging:
    """Page `number` (from 1) of a list read `size + 1` at a time: the extra one says whether
    a next page exists."""

    number: int
    size: int = PAGE_SIZE

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size

    def window(self, items: list[Any]) -> tuple[list[Any], bool]:
        return items[: self.size], len(items) > self.size


LAST_PAGE = math.ceil(100_000 / PAGE_SIZE)


def paging(request: Request) -> Paging:
    """The page asked for: 1 to LAST_PAGE in ASCII digits, anything else a 400 (`²` passes
    str.isdigit but not int())."""
    given = request.query_params.get("page", "1")
    if not (given.isascii() and given.isdecimal()) or not 1 <= int(given) <= LAST_PAGE:
        raise MalformedRequest(f"page must be a whole number from 1 to {LAST_PAGE}")
    return Paging(int(given))


def page_link(request: Request, number: int) -> str:
    query = dict(request.query_params) | {"page": str(number)}
    for name in NOTICE_FIELDS:
        query.pop(name, None)
    return f"{request.url.path}?{urlencode(query)}"


NOTICE_FIELDS = ("notice", "what", "hidden")


def when(stamp: datetime | str | None) -> str:
    """An instant (or its RFC 3339 UTC stamp) as people read it, everywhere on the pages in one
    format: `2026-03-01 09:00 UTC`."""
    if isinstance(stamp, datetime):
        stamp = format_utc(stamp)
    return "" if stamp is None else stamp[:16].replace("T", " ") + " UTC"


# The form field that carries a decision's Idempotency-Key (`action(..., keyed=True)`).
IDEMPOTENCY_FIELD = "idempotency_key"


def click_key() -> str:
    """A fresh Idempotency-Key for one button as a page draws it: the same form sent twice (a
    double click, a reload that sends it again) is one decision, answered again the second
    time; the next page draws new ones."""
    return f"ui-{uuid.uuid4().hex}"


templates.env.globals["page_link"] = page_link
templates.env.globals["click_key"] = click_key
templates.env.globals["idempotency_field"] = IDEMPOTENCY_FIELD
templates.env.globals["trust_words"] = words.trust_words
templates.env.filters["when"] = when
templates.env.filters["source_words"] = words.source_words
