"""Sign-in sessions and CSRF tokens of the review pages.

Signing in presents an API key once; the session cookie then names only the key's id and when
the session ends, signed with the server's secret (SGAM_UI_SESSION_SECRET), never the key's
secret. Every request looks the key up again, so a revoked or expired key ends its sessions at
once, and the key fixes tenant, scope and role exactly as over REST.

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
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from pipeline.access.keys import ApiKey, key_by_id
from pipeline.db.store import Store

SESSION = "sgam_ui"
NONCE = "sgam_ui_nonce"  # before sign-in: what the sign-in form's CSRF token is bound to
CSRF_FIELD = "csrf_token"


class SignedOut(Exception):
    """No valid session: the page sends the browser to the sign-in form."""


class CsrfRefused(Exception):
    """A state-changing form arrived without the token this browser's page carried."""


@dataclass(frozen=True)
class Signer:
    secret: bytes
    lifetime_s: float

    def sign(self, message: str) -> str:
        digest = hmac.new(self.secret, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def session_for(self, key: ApiKey) -> str:
        ends = int(time.time() + self.lifetime_s)
        body = f"{key.key_id}.{ends}"
        return f"{body}.{self.sign('session.' + body)}"

    def key_id_of(self, cookie: str | None) -> str | None:
        """The key id a valid, unexpired session cookie names."""
        if not cookie or cookie.count(".") != 2:
            return None
        key_id, ends, signature = cookie.split(".")
        good = hmac.compare_digest(signature, self.sign(f"session.{key_id}.{ends}"))
        if not good or not ends.isdigit() or int(ends) < time.time():
            return None
        return key_id

    def csrf_for(self, bound_to: str) -> str:
        return self.sign("csrf." + bound_to)

    def csrf_ok(self, bound_to: str | None, token: str | None) -> bool:
        if not bound_to or not token:
            return False
        return hmac.compare_digest(token, self.csrf_for(bound_to))


def viewer(request: Request, signer: Signer, store: Store) -> ApiKey:
    """The key of this browser's session; SignedOut when there is none or it stopped working."""
    key_id = signer.key_id_of(request.cookies.get(SESSION))
    if key_id is None:
        raise SignedOut
    found = key_by_id(store, key_id)
    if isinstance(found, str):
        raise SignedOut
    return found


def csrf_token(request: Request, signer: Signer) -> str:
    """The token this page's forms carry: bound to the session, or before sign-in to the
    nonce cookie (`ensure_nonce`)."""
    bound = request.cookies.get(SESSION) or request.state.nonce
    return signer.csrf_for(bound)


def check_csrf(request: Request, signer: Signer, token: str | None, *, signed_in: bool) -> None:
    bound = request.cookies.get(SESSION if signed_in else NONCE)
    if not signer.csrf_ok(bound, token):
        raise CsrfRefused


def ensure_nonce(request: Request) -> str | None:
    """The nonce cookie to set, when the browser has none yet."""
    if request.cookies.get(NONCE):
        request.state.nonce = request.cookies[NONCE]
        return None
    request.state.nonce = secrets.token_urlsafe(24)
    return str(request.state.nonce)


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    """HttpOnly and SameSite=Strict always; Secure when the page was served over HTTPS (also
    behind a proxy that says so in X-Forwarded-Proto, which uvicorn trusts from loopback)."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
