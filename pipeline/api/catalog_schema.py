"""The server's catalogue in its OpenAPI document: an `attribute` is one of the catalogue's
names, and a put's `value` has the JSON form of that attribute's type, so a client (or a
generator) working from the document sends attributes and values the server accepts.

Each type's schema is the canonical form the catalogue's normaliser returns
(`schemas/catalog.py`); the normalisers also read a few looser forms ("yes" for true, a
number as text), which the document leaves out.
"""

from __future__ import annotations

import copy
from typing import Any

from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.fields import END, TIMESTAMP_SCHEMA

# A JSON value as check_json accepts it: text without NUL, in values and object keys alike.
# (Its depth limit of 64 is not said.)
_TEXT = {"type": "string", "pattern": rf"^[^\x00]*{END}"}
JSON_VALUE: dict[str, Any] = {
    "anyOf": [
        _TEXT,
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
        {
            "type": "object",
            "propertyNames": _TEXT,
            "additionalProperties": {"$ref": "#/components/schemas/JsonValue"},
        },
    ]
}
_VALUE: dict[ValueType, dict[str, Any]] = {
    ValueType.STRING: _TEXT,
    ValueType.DATE: {"type": "string", "format": "date"},
    ValueType.DATETIME: TIMESTAMP_SCHEMA,
    ValueType.NUMBER: {"type": "number"},
    ValueType.BOOLEAN: {"type": "boolean"},
    ValueType.JSON: {
        "allOf": [{"$ref": "#/components/schemas/JsonValue"}, {"not": {"type": "null"}}]
    },
}


def value_schema(spec: AttributeSpec) -> dict[str, Any]:
    if spec.type is ValueType.ENUM:
        return {"type": "string", "enum": list(spec.values or [])}
    return dict(_VALUE[spec.type])


def describe(document: dict[str, Any], catalog: Catalog) -> None:
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
        "oneOf": [_put_of(body, name, catalog.attributes[name]) for name in names],
        "description": "PutBody, with the value of the attribute's type in the catalogue",
    }


def _put_of(body: dict[str, Any], name: str, spec: AttributeSpec) -> dict[str, Any]:
    schema = copy.deepcopy(body)
    schema.pop("title", None)
    schema["properties"]["attribute"] = {"const": name}
    schema["properties"]["value"] = value_schema(spec)
    schema["properties"]["cardinality"] = {
        "anyOf": [{"const": spec.cardinality.value}, {"type": "null"}]
    }
    return schema
