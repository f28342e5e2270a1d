"""The server's catalogue in its OpenAPI document: an `attribute` is one of the catalogue's
names, and a put's `value` has the JSON form of that attribute's type, so a client (or a
generator) working from the document sends attributes and values the server accepts.

Each type's schema is the canonical form the catalogue's normaliser returns
(`schemas/catalog.py`). The normalisers also read looser forms ("yes" for true, a number as
text, an enum value in any case) for the CLI, the extractors and the Python API; over HTTP a
put's value is read only in the form the document states (`check_sent_value`), so a client
that keeps to the document and one that does not are told apart.

Limits no JSON Schema keyword can state are said in words and in `x-` keywords the tests
compare with the validators: a JSON value's depth (`x-max-depth`), a value's and an episode
metadata's size as canonical JSON (`x-max-bytes`).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pipeline.errors import InvalidInput
from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.fields import (
    DATE_SCHEMA,
    END,
    MAX_JSON_DEPTH,
    RFC3339,
    RFC3339_DATE,
    TIMESTAMP_SCHEMA,
)

# A JSON value as check_json accepts it: text without NUL, in values and object keys alike,
# nested at most MAX_JSON_DEPTH deep (said in words and in x-max-depth).
TEXT = {"type": "string", "pattern": rf"^[^\x00]*{END}"}
JSON_VALUE: dict[str, Any] = {
    "description": f"any JSON value without NUL in its text, lists and objects nested at most "
    f"{MAX_JSON_DEPTH} deep (deeper is 422)",
    "x-max-depth": MAX_JSON_DEPTH,
    "anyOf": [
        TEXT,
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
        {
            "type": "object",
            "propertyNames": TEXT,
            "additionalProperties": {"$ref": "#/components/schemas/JsonValue"},
        },
    ],
}
_VALUE: dict[ValueType, dict[str, Any]] = {
    ValueType.STRING: TEXT,
    ValueType.DATE: DATE_SCHEMA,
    ValueType.DATETIME: TIMESTAMP_SCHEMA,
    ValueType.NUMBER: {"type": "number"},
    ValueType.BOOLEAN: {"type": "boolean"},
    # Sent as JSON, not as JSON text in a string (the normaliser reads that for the CLI).
    ValueType.JSON: {
        "allOf": [
            {"$ref": "#/components/schemas/JsonValue"},
            {"not": {"type": ["null", "string"]}},
        ]
    },
}


def value_schema(spec: AttributeSpec, max_bytes: int) -> dict[str, Any]:
    """The JSON form of `spec`'s values, at most `max_bytes` as canonical JSON (a string's
    two quotes count: it has at most max_bytes - 2 characters, fewer when they take more than
    one byte each or need escaping)."""
    if spec.type is ValueType.ENUM:
        schema: dict[str, Any] = {"type": "string", "enum": list(spec.values or [])}
    else:
        schema = copy.deepcopy(_VALUE[spec.type])
    if spec.type is ValueType.STRING:
        schema["maxLength"] = max_bytes - 2
    schema["x-max-bytes"] = max_bytes
    schema["description"] = (
        f"{spec.type.phrase}, at most {max_bytes} bytes as canonical JSON in UTF-8 "
        "(SGAM_MAX_VALUE_BYTES)"
    )
    return schema


_SENT: dict[ValueType, tuple[Any, str]] = {
    ValueType.DATE: (lambda v: isinstance(v, str) and re.fullmatch(RFC3339_DATE, v), "YYYY-MM-DD"),
    ValueType.DATETIME: (
        lambda v: isinstance(v, str) and re.fullmatch(RFC3339, v),
        "RFC 3339 with an offset, e.g. 2026-06-03T10:00:00Z",
    ),
    ValueType.NUMBER: (
        lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "a JSON number",
    ),
    ValueType.BOOLEAN: (lambda v: isinstance(v, bool), "true or false"),
    ValueType.JSON: (
        lambda v: not isinstance(v, str),
        "a JSON value other than a string (not JSON text in a string)",
    ),
}


def sent_problem(spec: AttributeSpec, value: Any) -> str | None:
    """Why `value` is not in the JSON form the document states for `spec`'s type, or None
    (the normaliser, which reads looser forms, checks the rest)."""
    if spec.type is ValueType.ENUM and value not in (spec.values or []):
        return f"must be one of {', '.join(spec.values or [])}, as written"
    sent = _SENT.get(spec.type)
    if sent is not None and not sent[0](value):
        return f"must be {sent[1]}"
    return None


def check_sent_value(catalog: Catalog, attribute: str, value: Any) -> None:
    """InvalidInput naming `value` unless it has the JSON form the document states for the
    attribute's type."""
    spec = catalog.attributes.get(attribute)
    problem = None if spec is None else sent_problem(spec, value)  # (the ledger names
    if spec is not None and problem is not None:  # an unknown attribute)
        raise InvalidInput("value", f"{problem} ({attribute} is {spec.type.phrase})")


def describe(document: dict[str, Any], catalog: Catalog, max_value_bytes: int) -> None:
    """Name the catalogue's attributes wherever the document takes one, and give each put
    the value schema of its attribute."""
    names = sorted(catalog.attributes)
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "attribute":
                    parameter["schema"] = {"type": "string", "enum": names}
    put = document["paths"]["/v1/facts"]["put"]["requestBody"]["content"]["application/json"]
    body = document["components"]["schemas"]["PutBody"]
    put["schema"] = {
        "oneOf": [_put_of(body, name, catalog.attributes[name], max_value_bytes) for name in names],
        "description": "PutBody, with the value of the attribute's type in the catalogue",
    }


def _put_of(body: dict[str, Any], name: str, spec: AttributeSpec, max_bytes: int) -> dict[str, Any]:
    schema = copy.deepcopy(body)
    schema.pop("title", None)
    schema["properties"]["attribute"] = {"const": name}
    schema["properties"]["value"] = value_schema(spec, max_bytes)
    schema["properties"]["cardinality"] = {
        "anyOf": [{"const": spec.cardinality.value}, {"type": "null"}]
    }
    return schema
