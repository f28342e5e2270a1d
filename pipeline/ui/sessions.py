"""Sign-in sessions and CSRF tokens of the review pages.

Signing in presents an API key once; the session cookie then names only the key's id, a random
session id and when the session ends, signed with the server's secret (SGAM_UI_SESSION_SECRET),
never the key's secret. Every request looks the key up again, so a revoked or expired key ends
its sessions at once, and the key fixes tenant, scope and role exactly as over REST. Signing out
ends the session on the server too (`EndedSessions`): a copy of the cookie no longer works.
Every signed-in request spends one of the key's rate-limit tokens, as a bearer request does.

Over HTTPS the cookies carry the `__Host-` prefix (Secure, Path=/, no Domain), so no other
host or path can plant one; over plain HTTP they are scoped to /ui.

CSRF: a form's token is an HMAC of the session cookie (before sign-in, of a random nonce
cookie), so only a page the server rendered for this browser can post it; cookies are
SameSite=Strict as a second wall.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import Response
from redis.exceptions import RedisError
from starlette.types import ASGIApp, Receive, Scope, Send

from pipeline.access.keys import ApiKey, key_by_id
from pipeline.api.problems import RateLimited
from pipeline.api.ratelimit import RateLimiter
from pipeline.db.store import Store
from pipeline.errors import StoreUnavailable

SESSION = "sgam_ui"
NONCE = "sgam_ui_nonce"  # before sign-in: what the sign-in form's CSRF token is bound to
CSRF_FIELD = "csrf_token"
SECURE_PREFIX = "__Host-"


class SignedOut(Exception):
    """No valid session: the page sends the browser to the sign-in form."""


class CsrfRefused(Exception):
    """A state-changing form arrived without the token this browser's page carried."""


@dataclass(frozen=True)
class Session:
    key_id: str
    session_id: str
    ends: int


@dataclass(frozen=True)
class Signer:
    secret: bytes
    lifetime_s: float

    def sign(self, message: str) -> str:
        digest = hmac.new(self.secret, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def session_for(self, key: ApiKey) -> str:
        ends = int(time.time() + self.lifetime_s)
        body = f"{key.key_id}.{secrets.token_urlsafe(18)}.{ends}"
        return f"{body}.{self.sign('session.' + body)}"

    def session_of(self, cookie: str | None) -> Session | None:
        """The session a valid, unexpired cookie names."""
        if not cookie or cookie.count(".") != 3:
            return None
        key_id, session_id, ends, signature = cookie.split(".")
        good = hmac.compare_digest(signature, self.sign(f"session.{key_id}.{session_id}.{ends}"))
        if not good or not ends.isdecimal() or not ends.isascii() or int(ends) < time.time():
            return None
        return Session(key_id, session_id, int(ends))

    def csrf_for(self, bound_to: str) -> str:
        return self.sign("csrf." + bound_to)

    def csrf_ok(self, bound_to: str | None, token: str | None) -> bool:
        if not bound_to or not token:
            return False
        return hmac.compare_digest(token, self.csrf_for(bound_to))


@dataclass
class EndedSessions:
    """Sessions signed out before their cookie expires: in the rate limiter's Redis, shared by
    every server process; with the rate limit off (no Redis), in this process only."""

    limiter: RateLimiter
    local: dict[str, float] = field(default_factory=dict)

    async def end(self, session: Session) -> None:
        ttl = max(1, session.ends - int(time.time()) + 1)
        self.local[session.session_id] = time.time() + ttl
        if self.limiter.redis is not None:
            await self._redis("set", f"sgam:ui:ended:{session.session_id}", 1, ex=ttl)

    async def ended(self, session: Session) -> bool:
        if self.local.get(session.session_id, 0) > time.time():
            return True
        if self.limiter.redis is None:
            return False
        return bool(await self._redis("exists", f"sgam:ui:ended:{session.session_id}"))

    async def _redis(self, command: str, *args: object, **options: object) -> object:
        try:
            return await getattr(self.limiter.redis, command)(*args, **options)
        except RedisError as error:
            raise StoreUnavailable(
                f"the review pages' Redis is unavailable ({type(error).__name__})"
            ) from error


class ResolveSession:
    """ASGI middleware of the review pages: the request's session, when its cookie is valid and
    was not signed out, goes into `request.state.session`, and one of its key's rate tokens is
    spent. A spent budget or an unreachable Redis is kept in `request.state.refused` for the
    page to show (raised by `viewer`)."""

    def __init__(self, app: ASGIApp, *, signer: Signer, ended: EndedSessions) -> None:
        self.app, self.signer, self.ended = app, signer, ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            state = scope.setdefault("state", {})
            state["session"], state["refused"] = None, None
            request = Request(scope)
            session = self.signer.session_of(request.cookies.get(cookie_name(request, SESSION)))
            try:
                if session is not None and not await self.ended.ended(session):
                    state["session"] = session
                    await self.ended.limiter.take(session.key_id)
            except (RateLimited, StoreUnavailable) as error:
                state["refused"] = error
        await self.app(scope, receive, send)


def viewer(request: Request, store: Store) -> ApiKey:
    """The key of this browser's session; SignedOut when there is none or it stopped working."""
    session: Session | None = request.state.session
    if session is None:
        raise SignedOut
    if request.state.refused is not None:
        raise request.state.refused
    found = key_by_id(store, session.key_id)
    if isinstance(found, str):
        raise SignedOut
    return found


def csrf_token(request: Request, signer: Signer, *, signed_in: bool = True) -> str:
    """The token this page's forms carry: bound to the session, or for the sign-in form to the
    nonce cookie (`ensure_nonce`), also when a session is open (signing in with another key)."""
    bound = request.cookies.get(cookie_name(request, SESSION)) if signed_in else None
    return signer.csrf_for(bound or request.state.nonce)


def check_csrf(request: Request, signer: Signer, token: str | None, *, signed_in: bool) -> None:
    bound = request.cookies.get(cookie_name(request, SESSION if signed_in else NONCE))
    if not signer.csrf_ok(bound, token):
        raise CsrfRefused


def ensure_nonce(request: Request) -> str | None:
    """The nonce cookie to set, when the browser has none yet."""
    given = request.cookies.get(cookie_name(request, NONCE))
    if given:
        request.state.nonce = given
        return None
    request.state.nonce = secrets.token_urlsafe(24)
    return str(request.state.nonce)


def secure(request: Request) -> bool:
    """Served over HTTPS (also behind a proxy that says so in X-Forwarded-Proto, which uvicorn
    trusts only from the addresses SGAM_FORWARDED_ALLOW_IPS names)."""
    return request.url.scheme == "https"


def cookie_name(request: Request, name: str) -> str:
    return SECURE_PREFIX + name if secure(request) else name


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    """HttpOnly and SameSite=Strict always; over HTTPS Secure with the `__Host-` prefix."""
    response.set_cookie(
        cookie_name(request, name),
        value,
        max_age=max_age,
        path="/" if secure(request) else "/ui",
        httponly=True,
        samesite="strict",
        secure=secure(request),
    )


def delete_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(
        cookie_name(request, name),
        path="/" if secure(request) else "/ui",
        secure=secure(request),
        httponly=True,
        samesite="strict",
    )
