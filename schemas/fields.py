"""Validated field types shared by every command: identifiers, UTC timestamps, JSON values."""

from __future__ import annotations

import copy
import json
import math
import re
import sys
import unicodedata
from datetime import UTC, date, datetime
from functools import cache
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    GetJsonSchemaHandler,
    PlainSerializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

# C0 and C1 control characters, DEL, and the bidirectional embeddings, overrides and isolates
# that make an identifier display as something it is not.
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MAX_ID_LENGTH = 200
# Deepest nesting of lists and objects a JSON value may have.
MAX_JSON_DEPTH = 64
# The end of the text in a JSON Schema pattern: not `$`, which in Python also matches before a
# final newline.
END = r"(?![\s\S])"


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid UTF-8") from None
    return text


def _identifier(text: str) -> str:
    """Identifiers are compared exactly (case-sensitive) in Unicode NFC, so that a composed and
    a decomposed "José" name the same subject. The length limit holds as sent and in NFC (the
    form stored and read back): NFC shortens a decomposed name and lengthens a few characters
    (U+0958 is two), and a name must fit either way."""
    # The common case, checked at once: ASCII is its own NFC, and a printable ASCII character
    # is either a space or visible.
    ascii_name = text.isascii() and text.isprintable() and 0 < len(text) <= MAX_ID_LENGTH
    if ascii_name and text == text.strip():
        return text
    _utf8(text)
    sent = len(text)
    text = unicodedata.normalize("NFC", text)
    if not text.strip():
        raise ValueError("must not be empty")
    if text != text.strip():
        raise ValueError("must not start or end with whitespace")
    if max(sent, len(text)) > MAX_ID_LENGTH:
        raise ValueError(f"must be at most {MAX_ID_LENGTH} characters, as sent and in NFC")
    if _FORBIDDEN.search(text):
        raise ValueError("must not contain control characters or bidirectional overrides")
    if all(_invisible(character) for character in text):
        raise ValueError("must contain a visible character")
    return text


def _invisible(character: str) -> bool:
    # Format characters (zero-width space, word joiner, BOM, ...) and separators show nothing.
    return character.isspace() or unicodedata.category(character) in ("Cf", "Zs", "Zl", "Zp")


@cache
def identifier_pattern(*, segment: bool = False) -> str:
    """`_identifier`'s rules as one regular expression, for the JSON Schema of the OpenAPI
    document: no forbidden character, no whitespace at either end, a visible character
    somewhere (`segment`: also no `/`, and not `.` or `..`). Built from the same predicates,
    so the document cannot drift from the validator; the length is `maxLength`."""
    # Escapes every regex engine reads (Python's, ECMA's, Rust's); no surrogate can be sent.
    forbidden = r"\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069" + ("/" if segment else "")
    edge = forbidden + _ranges(lambda c: c.isspace())
    visible = forbidden + _ranges(_invisible)
    dots = rf"(?!\.\.?{END})" if segment else ""
    return f"^{dots}(?=.*[^{visible}])[^{edge}](?:[^{forbidden}]*[^{edge}])?{END}"


def _ranges(wanted: Any) -> str:
    """The characters for which `wanted` holds, as the inside of a regex character class."""
    parts: list[str] = []
    start = previous = -2
    for point in range(0x80, sys.maxunicode + 1):  # ASCII's are listed by hand
        if 0xD800 <= point <= 0xDFFF or not wanted(chr(point)):
            continue
        if point != previous + 1:
            if start >= 0:
                parts.append(_span(start, previous))
            start = point
        previous = point
    if start >= 0:
        parts.append(_span(start, previous))
    return (" " if wanted(" ") else "") + "".join(parts)


def _span(first: int, last: int) -> str:
    return chr(first) if first == last else f"{chr(first)}-{chr(last)}"


# What JSON Schema cannot say of an identifier, in its description: the length in NFC.
IDENTIFIER_RULE = (
    f"at most {MAX_ID_LENGTH} characters as sent and in Unicode NFC (the form it is stored in)"
)


class IdentifierSchema:
    """An identifier's JSON Schema: a string of 1 to MAX_ID_LENGTH characters matching
    `identifier_pattern`, with the NFC rule in `x-nfc-max-length` and in words (a field's own
    description comes first). Computed when a document is built, not at import."""

    def __init__(self, *, segment: bool = False) -> None:
        self.segment = segment

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(
            minLength=1, maxLength=MAX_ID_LENGTH, pattern=identifier_pattern(segment=self.segment)
        )
        schema["x-nfc-max-length"] = MAX_ID_LENGTH
        schema.setdefault("description", IDENTIFIER_RULE)
        return schema


# A timestamp as the HTTP service reads it, and as its OpenAPI document says it: RFC 3339 with
# an offset (`T` and `Z` upper-case, seconds required, no leap second). The first and last day
# of the calendar are left out, where an offset can carry the instant past year 1 or 9999 once
# converted to UTC (refused). `to_utc` reads more (a space for `T`, padding, ISO 8601's other
# forms): the CLI and Python API take those; HTTP takes only what its document says.
RFC3339 = (
    r"(?!0000-|0001-01-01T|9999-12-31T)[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
# A date alone, read as its start in UTC where a timestamp may be one (not an episode's time).
RFC3339_DATE = r"(?!0000-)[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
TIMESTAMP_SCHEMA: dict[str, Any] = {
    "type": "string",
    "format": "date-time",
    "pattern": f"^{RFC3339}{END}",
}
DATE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "format": "date",
    "pattern": f"^{RFC3339_DATE}{END}",
}
# Where a date alone is read too (its start in UTC): every timestamp but an episode's.
TIMESTAMP_OR_DATE_SCHEMA: dict[str, Any] = {
    "anyOf": [TIMESTAMP_SCHEMA, DATE_SCHEMA],
    "description": "RFC 3339 with an offset (e.g. 2026-06-03T10:00:00Z), or a date alone "
    "(its start in UTC)",
}


def as_sent_timestamp(value: object, *, date_alone: bool) -> object:
    """`value` if it is a timestamp in the form the HTTP document states (any other text is
    refused, though `to_utc` would read it); non-text is left to the field's own validator."""
    if not isinstance(value, str):
        return value
    if re.fullmatch(RFC3339, value) or (date_alone and re.fullmatch(RFC3339_DATE, value)):
        return value
    alone = " or a date alone (YYYY-MM-DD)" if date_alone else ""
    raise ValueError(
        f"{value[:40]!r} is not an RFC 3339 timestamp with an offset "
        f"(e.g. 2026-06-03T10:00:00Z){alone}"
    )


class Described:
    """Keywords a validator's rule adds to a type's JSON Schema in the OpenAPI document (a
    validator function is invisible to it)."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if handler.mode == "validation":
            schema.update(self.keywords)
        return schema


class TimestampSchema:
    """A timestamp's JSON Schema in the OpenAPI document: TIMESTAMP_SCHEMA, or with
    `date_alone` TIMESTAMP_OR_DATE_SCHEMA. The HTTP bodies check the form as sent
    (`as_sent_timestamp`, pipeline/api/bodies.py)."""

    def __init__(self, *, date_alone: bool = False) -> None:
        self.date_alone = date_alone

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        if handler.mode == "serialization":  # what the server sends: RFC 3339, any instant
            return {"type": "string", "format": "date-time"}
        return copy.deepcopy(TIMESTAMP_OR_DATE_SCHEMA if self.date_alone else TIMESTAMP_SCHEMA)


def _text(text: str) -> str:
    _utf8(text)
    if "\x00" in text:
        raise ValueError("must not contain NUL characters")
    return text


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _is_calendar_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def to_utc(value: object) -> datetime:
    """Accept an aware datetime or an ISO 8601 / RFC 3339 string with an offset; return UTC.
    A date alone (`2026-06-02`) means its start in UTC (`2026-06-02T00:00:00Z`).

    Naive timestamps are refused: guessing a zone silently reorders facts.
    """
    if isinstance(value, str) and _DATE_ONLY.fullmatch(value.strip()):
        try:
            day = date.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r}: the day does not exist") from None
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    if isinstance(value, str):
        _utf8(value)
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            prefix = str(value).strip()[:10]
            if _DATE_ONLY.fullmatch(prefix) and not _is_calendar_date(prefix):
                raise ValueError(f"{value!r}: the day {prefix} does not exist") from None
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


def check_json(value: Any) -> Any:
    """`value` if it is a JSON value SGAM stores, else ValueError saying why: nested at most
    MAX_JSON_DEPTH deep, finite numbers, text in valid UTF-8 without NUL, string keys."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:  # iterative: a value nested 100,000 deep must not exhaust the stack
        item, depth = pending.pop()
        if isinstance(item, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise ValueError(f"is nested more than {MAX_JSON_DEPTH} levels deep")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise ValueError("has an object key that is not a string")
                    _json_text(key)
                    pending.append((child, depth + 1))
            else:
                pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            _json_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError("holds NaN or Infinity, which JSON does not allow")
        elif not (item is None or isinstance(item, bool | int | float)):
            raise ValueError(f"is not JSON: holds a {type(item).__name__}")
    return value


def _json_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds text that is not valid UTF-8 (a lone surrogate?)") from None
    if "\x00" in text:
        raise ValueError("must not contain NUL characters")


Identifier = Annotated[str, AfterValidator(_identifier), IdentifierSchema()]
Text = Annotated[str, AfterValidator(_text), Described(pattern=rf"^[^\x00]*{END}")]
UtcDatetime = Annotated[datetime, BeforeValidator(to_utc), TimestampSchema(date_alone=True)]
# An instant as the decision log stores it: RFC 3339 UTC with Z in JSON, aware UTC in Python.
UtcInstant = Annotated[
    datetime, BeforeValidator(to_utc), PlainSerializer(format_utc, when_used="json")
]
JsonPayload = Annotated[Any, AfterValidator(check_json)]
