"""HTTP conventions the handlers share: the store, the Idempotency-Key and If-Match headers,
ETags, and identifiers in the path and query."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Depends, Header, Query, Request
from pydantic import TypeAdapter, ValidationError, WithJsonSchema

from pipeline.api.bodies import Subject
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from pipeline.validation import invalid_field
from schemas.fields import TIMESTAMP_SCHEMA, Identifier, Text

_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_SUBJECT: TypeAdapter[str] = TypeAdapter(Subject)
_VERSION = re.compile(r'"(\d{1,18})"|(\d{1,18})')
_STATE = re.compile(r'"([0-9a-f]{1,64})"')


async def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


Opened = Annotated[Store, Depends(store_of)]
IdempotencyHeader = Annotated[Identifier | None, Header(alias="Idempotency-Key")]
# If-Match is checked by expected_state / expected_version, whose messages say what to send;
# the patterns only tell the OpenAPI document the same.
IfMatchHeader = Annotated[
    str | None, Header(alias="If-Match", json_schema_extra={"pattern": f"^(?:{_STATE.pattern})$"})
]
IfMatchVersion = Annotated[
    str | None, Header(alias="If-Match", json_schema_extra={"pattern": f"^(?:{_VERSION.pattern})$"})
]
# Query parameters, typed as the pipeline's queries check them, so the document says so.
IdQuery = Annotated[Identifier | None, Query()]
TextQuery = Annotated[Text | None, Query()]
TimeQuery = Annotated[Annotated[str, WithJsonSchema(TIMESTAMP_SCHEMA)] | None, Query()]
Limit = Annotated[int, Query(ge=1, le=100_000)]  # every list query's bounds


def identifier(name: str, value: str, *, subject: bool = False) -> str:
    """A path or query identifier validated like a body's: InvalidInput names `name`."""
    try:
        return (_SUBJECT if subject else _IDENTIFIER).validate_python(value)
    except ValidationError as exc:
        error = invalid_field(exc.errors()[0] | {"loc": ()}, default_field=name)
        raise InvalidInput(name, error.problem) from None


def given(**options: Any) -> dict[str, Any]:
    """The options the request gave; the rest is left to the pipeline's defaults."""
    return {name: value for name, value in options.items() if value is not None}


def idempotency_key(header: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """The Idempotency-Key header becomes the command's idempotency key."""
    if header is None:
        return body
    key = identifier("Idempotency-Key", header)
    if body.get("idempotency_key") not in (None, key):
        raise InvalidInput("Idempotency-Key", "differs from the body's idempotency_key")
    return body | {"idempotency_key": key}


def expected_version(if_match: str | None) -> int | None:
    """If-Match carries the version the caller read (the fact's ETag); 0 means none held."""
    if if_match is None:
        return None
    found = _VERSION.fullmatch(if_match.strip())
    if found is None:
        raise InvalidInput("If-Match", 'must be one ETag of a fact, e.g. "3" ("0": none held)')
    return int(found.group(1) or found.group(2))


def expected_state(if_match: str | None) -> str | None:
    """If-Match on a put carries the key's ETag as the caller read it (`"0"`: nothing held)."""
    if if_match is None:
        return None
    found = _STATE.fullmatch(if_match.strip())
    if found is None:
        raise InvalidInput("If-Match", "must be one ETag as a GET of the attribute sent it")
    return found.group(1)


def etag(version: int | str) -> str:
    return f'"{version}"'
