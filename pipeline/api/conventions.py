"""HTTP conventions the handlers share: the store, the Idempotency-Key and If-Match headers,
ETags, and identifiers in the path and query."""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any

from annotated_types import Interval
from fastapi import Depends, Header, Query, Request, Response
from pydantic import AfterValidator, BeforeValidator, TypeAdapter, ValidationError, WithJsonSchema

from pipeline.api.bodies import Subject
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from pipeline.validation import invalid_field
from schemas.fields import TIMESTAMP_OR_DATE_SCHEMA, Identifier, Text, as_sent_timestamp

_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_SUBJECT: TypeAdapter[str] = TypeAdapter(Subject)
# A quarantined fact's version, from 1 (promote's If-Match).
_VERSION = re.compile(r'"([1-9]\d{0,17})"|([1-9]\d{0,17})')
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
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")


def _flag(value: object) -> object:
    """A boolean in the query as the document states it: `true` or `false`, nothing else
    (pydantic would also read yes/on/1/t...)."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError("must be true or false")
    return value


def _integer(value: object) -> object:
    """An integer in the query as JSON writes it (pydantic would also read " 5", "+5", "05",
    "5.0" and "1_000")."""
    if isinstance(value, str) and _INTEGER.fullmatch(value) is None:
        raise ValueError("must be an integer written in decimal digits, e.g. 100")
    return value


# Query parameters, typed as the pipeline's queries check them and read only in the forms the
# document states (a timestamp as RFC 3339 or a date alone, a flag as true/false, an integer in
# digits), so the document says what is read.
IdQuery = Annotated[Identifier | None, Query()]
TextQuery = Annotated[Text | None, Query()]
_Instant = Annotated[
    str,
    AfterValidator(functools.partial(as_sent_timestamp, date_alone=True)),
    WithJsonSchema(TIMESTAMP_OR_DATE_SCHEMA),
]
TimeQuery = Annotated[_Instant | None, Query()]
Flag = Annotated[bool, BeforeValidator(_flag), Query()]
# An integer query parameter in digits: the bounds inside the validator (Query(ge=...) on a
# validated type reaches the document as an unknown "ge" keyword).
DIGITS = BeforeValidator(_integer)
Limit = Annotated[Annotated[int, Interval(ge=1, le=100_000)], DIGITS, Query()]  # list bounds


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
    """If-Match carries the version of the quarantined fact the caller read (its ETag)."""
    if if_match is None:
        return None
    found = _VERSION.fullmatch(if_match.strip())
    if found is None:
        raise InvalidInput("If-Match", 'must be one ETag of a quarantined fact, e.g. "3"')
    return int(found.group(1) or found.group(2))


def expected_state(if_match: str | None) -> str | None:
    """If-Match on a put carries the key's ETag as the caller read it (`"0"`: nothing held)."""
    if if_match is None:
        return None
    found = _STATE.fullmatch(if_match.strip())
    if found is None:
        raise InvalidInput("If-Match", "must be one ETag as a GET of the attribute sent it")
    return found.group(1)


def mark_replayed(response: Response, replayed: bool) -> None:
    """A repeated Idempotency-Key's answer says so (the first request's status and body)."""
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"


def etag(version: int | str) -> str:
    return f'"{version}"'


async def single_query(request: Request) -> None:
    """A query parameter given twice is refused (422): only one of the two would be read, and
    the answer would not be the one asked for (every parameter here takes one value)."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name in seen:
            raise InvalidInput(name, "is given more than once; give it once")
        seen.add(name)
