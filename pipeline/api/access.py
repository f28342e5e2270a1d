"""Who is calling and what they may do. Every request under /v1 presents an API key
(`Authorization: Bearer sgam_...`); the key fixes the tenant and, when set, the agent and
purpose, and its role says which operations it may call.

Authentication and the rate limit run as middleware, before the body is read: a request
without a valid key learns nothing about the body it sent. The role is checked by each
route's dependency (`allowed`), which also documents the bearer scheme in OpenAPI.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from pipeline.access.keys import ApiKey, authenticate
from pipeline.api.problems import (
    ApiError,
    Forbidden,
    RateLimited,
    ScopeMismatch,
    Unauthorized,
    problem_response,
)
from pipeline.api.ratelimit import RateLimiter
from pipeline.db.store import Store
from pipeline.errors import SgamError

SCOPE_FIELDS = ("tenant_id", "agent_id", "purpose")
GUARDED = ("/v1/", "/mcp")  # the REST API and the MCP endpoint
REFUSED = {
    "malformed": "the key is not an SGAM API key (sgam_<key id>_<secret>)",
    "unknown": "the key is not valid",
    "revoked": "the key was revoked",
    "expired": "the key has expired",
}


class KeyCache:
    """Keys this process checked lately, by the hash of what was presented: a chat backend
    sends the same key on every request, and a database round trip for each would cost more
    than the read it guards. Only accepted keys are kept, for `seconds`; a key's expiry still
    counts, and a revocation anywhere reaches it on the key's next request: the rate limit's
    round trip reports the revocation's marker (`pipeline.access.revocations`), and the key
    is looked up again. So the server keeps keys only when its buckets are in Redis."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._keys: dict[str, tuple[float, ApiKey]] = {}

    def get(self, presented: str, now: datetime) -> ApiKey | None:
        found = self._keys.get(_fingerprint(presented))
        if found is None or found[0] <= self.clock():
            return None
        key = found[1]
        return key if key.expires_at is None or key.expires_at > now else None

    def put(self, presented: str, key: ApiKey) -> None:
        if self.seconds > 0:
            if len(self._keys) > 10_000:  # bounded: a flood of keys cannot grow it for ever
                self._keys.clear()
            self._keys[_fingerprint(presented)] = (self.clock() + self.seconds, key)

    def drop(self, key_id: str) -> None:
        for fingerprint, (_, key) in list(self._keys.items()):
            if key.key_id == key_id:
                self._keys.pop(fingerprint, None)


def _fingerprint(presented: str) -> str:
    return hashlib.sha256(presented.encode("utf-8", "surrogateescape")).hexdigest()


class Authenticate:
    """ASGI middleware: resolve the bearer key of every /v1 request and spend one of its
    rate-limit tokens; refuse with 401, 429 or 503 before the application sees the request."""

    def __init__(
        self, app: ASGIApp, *, store: Store, limiter: RateLimiter, cache: KeyCache
    ) -> None:
        self.app, self.store, self.limiter, self.cache = app, store, limiter, cache

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(GUARDED):
            await self.app(scope, receive, send)
            return
        try:
            key, remembered = await self._key(scope)
            if await self.limiter.take(key.key_id) and remembered:  # revoked since: look again
                self.cache.drop(key.key_id)
                key, _ = await self._key(scope)
        except (ApiError, SgamError) as error:
            await problem_response(error, scope["path"])(scope, receive, send)
            return
        scope.setdefault("state", {})["key"] = key
        await self.app(scope, receive, send)

    async def _key(self, scope: Scope) -> tuple[ApiKey, bool]:
        """The key presented, and whether it came from the cache rather than the database."""
        given = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(given) != 1:
            raise Unauthorized("send one header: Authorization: Bearer <API key>")
        scheme, _, token = given[0].decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send one header: Authorization: Bearer <API key>")
        presented = token.strip()
        cached = self.cache.get(presented, self.store.clock())
        if cached is not None:
            return cached, True
        address = scope["client"][0] if scope.get("client") else "unknown"
        found = await checked_key(self.store, self.limiter, presented, address)
        self.cache.put(presented, found)
        return found, False


async def checked_key(store: Store, limiter: RateLimiter, presented: str, address: str) -> ApiKey:
    """The key `presented` from `address`, looked up within the address's budget of refused
    keys: RateLimited once it is spent (unless this key was accepted lately), Unauthorized for
    a key refused, which is charged to the budget. The API's bearer keys and the review pages'
    sign-in form share it, so neither is a way around the other's budget."""
    fingerprint = _fingerprint(presented)
    spent = False
    try:
        await limiter.check_address(address)
    except RateLimited:
        # The address guessed too many keys; a key accepted before is still looked up.
        if not await limiter.known(fingerprint):
            raise
        spent = True
    found = await anyio.to_thread.run_sync(authenticate, store, presented)
    if isinstance(found, str):
        if not spent:
            await limiter.refused(address)
        await limiter.disown(fingerprint)
        raise KeyRefused(found)
    await limiter.vouch(fingerprint)
    return found


class KeyRefused(Unauthorized):
    """A key that was looked up and refused; `reason` is a key of REFUSED."""

    def __init__(self, reason: str) -> None:
        super().__init__(REFUSED[reason])
        self.reason = reason


_bearer = HTTPBearer(auto_error=False, description="An API key: `sgam keys create`")


@functools.cache  # one function per role: a hot read recognises it among a route's dependencies
def allowed(role: str) -> Callable[..., Awaitable[ApiKey]]:
    """A dependency: the caller's key, if its role includes `role`."""

    async def key_with_role(
        request: Request,
        _: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008 (documents it)
    ) -> ApiKey:
        key: ApiKey = request.state.key
        if not key.allows(role):
            raise Forbidden(f"a {key.role} key may not do this; it needs the {role} role")
        return key

    return key_with_role


Reader = Annotated[ApiKey, Depends(allowed("reader"))]
Writer = Annotated[ApiKey, Depends(allowed("writer"))]
Reviewer = Annotated[ApiKey, Depends(allowed("reviewer"))]
Admin = Annotated[ApiKey, Depends(allowed("admin"))]


def bind(key: ApiKey, given: Mapping[str, Any]) -> dict[str, Any]:
    """`given` with the key's scope filled in; a tenant, agent or purpose that differs from
    the key's is refused. An agent or purpose the key leaves open is the caller's choice."""
    bound = dict(given)
    fixed = {"tenant_id": key.tenant_id, "agent_id": key.agent_id, "purpose": key.purpose}
    for field in SCOPE_FIELDS:
        wanted = fixed[field]
        if wanted is None:
            continue
        if bound.get(field) is not None and bound[field] != wanted:
            raise ScopeMismatch(
                f"this key acts for another {field.removesuffix('_id')}", field=field
            )
        bound[field] = wanted
    return bound


def owns(key: ApiKey, scope: Mapping[str, Any] | None) -> bool:
    """Whether a stored thing of scope `scope` (None: the tenant has no such thing) is the
    key's to see: an agent- or purpose-bound key sees nothing outside its agent or purpose."""
    if scope is None:
        return False
    return (
        all(
            getattr(key, field) is None or scope[field] == getattr(key, field)
            for field in ("agent_id", "purpose")
        )
        and scope["tenant_id"] == key.tenant_id
    )
