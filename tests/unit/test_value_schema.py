"""The OpenAPI document's schema for a put's value, and for any JSON value (episode metadata),
accepts exactly what the HTTP service accepts: JSON Schema's keywords where they can say it,
and the `x-max-bytes` / `x-max-depth` the document states in words where they cannot (a
value's size as canonical JSON, a JSON value's nesting). So a client generating from the
document sends nothing the server refuses, and nothing the document forbids is read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pipeline.api import catalog_schema
from schemas.catalog import AttributeSpec, ValueType
from schemas.fields import canonical_json, check_json

MAX_BYTES = 64  # small, so that generated values reach the limit
SPECS: dict[ValueType, AttributeSpec] = {
    value_type: AttributeSpec(
        type=value_type,
        values=["dog", "cat", "guinea pig"] if value_type is ValueType.ENUM else None,
    )
    for value_type in ValueType
}
# Forms the normalisers read and the document does not (or does), mixed with arbitrary JSON.
EDGES = st.sampled_from(
    [
        "yes", "true", "on", "1", "42", " 42", "+42", "4.5", "1e3", "1_000", "Dog", "dog",
        "guinea pig", "2026-06-30", " 2026-06-30", "20260630", "2026-02-30", "2026-06-30T10:00:00Z",
        "2026-06-30T10:00:00.5+02:00", "2026-06-30T10:00Z", "2026-06-30 10:00:00Z",
        "2026-06-30t10:00:00z", "2026-06-30T23:59:60Z", "0001-01-01T00:00:00Z", "9999-12-31",
        True, False, 0, 42, 4.5, -1e300, None, "", "a" * (MAX_BYTES - 2), "é" * 40,
    ]
)  # fmt: skip
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)  # JSON carries neither
    | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
# JSON that check_json reads but for its depth: finite numbers, text without NUL.
CLEAN_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("ab", max_size=3), inner),
    max_leaves=8,
)
FORMATS = Draft202012Validator.FORMAT_CHECKER


def described(schema: dict[str, Any], value: Any) -> bool:
    """As a JSON Schema validator reads the document (with `format` checked: a date-time's
    date part too, which this jsonschema leaves to an optional package), plus the limits the
    document states in its `x-` keywords."""
    definitions = {"$defs": {"JsonValue": refs_local(catalog_schema.JSON_VALUE)}}
    validator = Draft202012Validator(schema | definitions, format_checker=FORMATS)
    if not bool(validator.is_valid(value)):
        return False
    if schema.get("format") == "date-time" and not bool(FORMATS.conforms(value[:10], "date")):
        return False
    return len(canonical_json(value).encode("utf-8")) <= schema["x-max-bytes"]


def accepted(spec: AttributeSpec, value: Any) -> bool:
    """As PUT /v1/facts reads a value: a JSON value (the command's own check), in the form
    sent the document states, through the normaliser, within the size limit."""
    if catalog_schema.sent_problem(spec, value) is not None:
        return False
    try:
        stored = spec.normalise(check_json(value))
    except ValueError:
        return False
    return len(canonical_json(stored).encode("utf-8")) <= MAX_BYTES


def refs_local(schema: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(schema).replace("#/components/schemas/", "#/$defs/")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@pytest.mark.parametrize("value_type", list(SPECS), ids=[t.value for t in SPECS])
@settings(max_examples=400, deadline=None)
@given(value=EDGES | JSON)
@example(value="a" * (MAX_BYTES - 1))
def test_a_values_schema_accepts_what_a_put_accepts(value_type: ValueType, value: Any) -> None:
    spec = SPECS[value_type]
    schema = refs_local(catalog_schema.value_schema(spec, MAX_BYTES))
    assert schema["x-max-bytes"] == MAX_BYTES
    assert str(MAX_BYTES) in schema["description"]
    assert described(schema, value) == accepted(spec, value), repr(value)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(min_value=0, max_value=80), value=CLEAN_JSON)
def test_a_json_values_stated_depth_is_the_validators(depth: int, value: Any) -> None:
    """`x-max-depth` (and the description) say the depth check_json allows: lists and objects
    nested at most that deep."""
    limit = catalog_schema.JSON_VALUE["x-max-depth"]
    assert str(limit) in catalog_schema.JSON_VALUE["description"]
    deep = [value, nested(depth)]  # containers: 1 + depth (+ the value's own)
    try:
        check_json(deep)
        read = True
    except ValueError:
        read = False
    levels = 1 + max(depth, _depth(value))
    assert read == (levels <= limit), levels


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0
