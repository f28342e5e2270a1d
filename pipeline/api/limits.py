"""ASGI middleware that reads a request's body before any handler does: refused when it is
larger than SGAM_API_MAX_BODY_BYTES (413, also for a chunked body that never says its
length), not JSON (415), not UTF-8 (400) or naming one key twice in an object (400), and a
path or query that is not UTF-8 once percent-decoded (400). The application then reads the
checked bytes."""

from __future__ import annotations

import json
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.api.problems import (
    MalformedRequest,
    PayloadTooLarge,
    UnsupportedMediaType,
    problem_response,
)
from pipeline.validation import DuplicateKey, refuse_duplicates

_JSON_TYPES = ("application/json", "application/problem+json")
_FORM = b"application/x-www-form-urlencoded"


def _utf8_target(scope: Scope) -> bool:
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
    query: bytes = scope.get("query_string", b"").replace(b"+", b" ")
    try:
        unquote_to_bytes(raw_path).decode("utf-8")
        unquote_to_bytes(query).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class ReadBody:
    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _utf8_target(scope):
            # Starlette would decode the bytes as U+FFFD and serve another subject's name.
            refused = MalformedRequest("the path or query is not valid UTF-8 once %-decoded")
            await problem_response(refused, "/")(scope, receive, send)
            return
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read(scope, receive)
        except (PayloadTooLarge, UnsupportedMediaType, MalformedRequest) as error:
            await problem_response(error, scope["path"])(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # only a disconnect is left to wait for
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes:
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        too_large = PayloadTooLarge(f"the body may have at most {self.limit} bytes")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            raise too_large if declared.isdigit() else MalformedRequest("bad Content-Length")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body:
            media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            forms = scope["path"].startswith("/ui/") and media == _FORM  # the review pages
            if media.decode("latin-1") not in _JSON_TYPES and not forms:
                raise UnsupportedMediaType("send the body as application/json")
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as error:
                raise MalformedRequest(
                    f"the body is not valid UTF-8 (at byte {error.start})"
                ) from None
            if not forms:
                _refuse_duplicate_keys(text)
        return body


def _refuse_duplicate_keys(text: str) -> None:
    """MalformedRequest when an object of the body names a key twice (which value was meant
    is a guess); a body that is not JSON is left to the route, which says where it breaks."""
    try:
        json.loads(text, object_pairs_hook=refuse_duplicates)
    except DuplicateKey as duplicate:
        raise MalformedRequest(f"the body is refused: {duplicate}") from None
    except (ValueError, RecursionError):
        return
