"""Validated field types shared by every command: identifiers, UTC timestamps, JSON values."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, PlainSerializer

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_ID_LENGTH = 200


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid UTF-8") from None
    return text


def _identifier(text: str) -> str:
    _utf8(text)
    if not text.strip():
        raise ValueError("must not be empty")
    if text != text.strip():
        raise ValueError("must not start or end with whitespace")
    if len(text) > MAX_ID_LENGTH:
        raise ValueError(f"must be at most {MAX_ID_LENGTH} characters")
    if _CONTROL.search(text):
        raise ValueError("must not contain control characters")
    return text


def _text(text: str) -> str:
    _utf8(text)
    if "\x00" in text:
        raise ValueError("must not contain NUL characters")
    return text


def to_utc(value: object) -> datetime:
    """Accept an aware datetime or an ISO 8601 / RFC 3339 string with an offset; return UTC.

    Naive timestamps are refused: guessing a zone silently reorders facts.
    """
    if isinstance(value, str):
        _utf8(value)
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value!r} is not an ISO 8601 timestamp (e.g. 2026-06-03T10:00:00Z)"
            ) from None
    if not isinstance(value, datetime):
        raise ValueError("must be an ISO 8601 timestamp string or a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("has no UTC offset; add Z or +HH:MM (naive timestamps are ambiguous)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            "is out of range: outside the years 1 to 9999 once converted to UTC"
        ) from None


def format_utc(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC with a Z suffix; microseconds only when present."""
    if moment is None:
        return None
    text = moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def canonical_json(value: Any) -> str:
    """The one text form of a value: used for equality, hashing and size limits."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _json_value(value: Any) -> Any:
    try:
        text = canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"is not JSON-serialisable ({exc})") from None
    _utf8(text)
    if "\\u0000" in text:
        raise ValueError("must not contain NUL characters")
    return value


Identifier = Annotated[str, AfterValidator(_identifier)]
Text = Annotated[str, AfterValidator(_text)]
UtcDatetime = Annotated[datetime, BeforeValidator(to_utc)]
# An instant as the decision log stores it: RFC 3339 UTC with Z in JSON, aware UTC in Python.
UtcInstant = Annotated[
    datetime, BeforeValidator(to_utc), PlainSerializer(format_utc, when_used="json")
]
JsonPayload = Annotated[Any, AfterValidator(_json_value)]
