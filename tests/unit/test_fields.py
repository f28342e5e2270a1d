"""Field normalisation: UTC timestamps, catalogue-typed values, and catalogue file errors."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.catalog import bundled_catalog_text, parse_catalog
from pipeline.errors import CatalogError
from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.commands import DismissFact
from schemas.facts import Cardinality
from schemas.fields import canonical_json, to_utc

# -- to_utc -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-03T12:00:00+02:00",
        "2026-06-03T10:00:00Z",
        "2026-06-03T10:00:00+00:00",
        "2026-06-03T05:30:00-04:30",
        "2026-06-03 10:00:00Z",
        "  2026-06-03T10:00:00Z  ",
        "2026-06-03T10:00:00.000000Z",
    ],
)
def test_to_utc_normalises_every_offset_to_the_same_instant(text: str) -> None:
    moment = to_utc(text)
    assert moment == datetime(2026, 6, 3, 10, 0, tzinfo=UTC)
    assert moment.utcoffset() == timedelta(0)
    assert moment.tzinfo is UTC


def test_to_utc_converts_an_aware_datetime() -> None:
    berlin_summer = timezone(timedelta(hours=2))
    moment = to_utc(datetime(2026, 6, 3, 12, 0, tzinfo=berlin_summer))
    assert moment == datetime(2026, 6, 3, 10, 0, tzinfo=UTC)
    assert moment.tzinfo is UTC
    assert (moment.hour, moment.day) == (10, 3)


def test_to_utc_crosses_the_date_line() -> None:
    assert to_utc("2026-06-03T01:00:00+05:00") == datetime(2026, 6, 2, 20, 0, tzinfo=UTC)


def test_to_utc_keeps_microseconds() -> None:
    assert to_utc("2026-06-03T10:00:00.123456Z").microsecond == 123456


@pytest.mark.parametrize(
    "naive",
    ["2026-06-03T10:00:00", datetime(2026, 6, 3, 10, 0)],
)
def test_to_utc_refuses_naive_timestamps(naive: object) -> None:
    with pytest.raises(ValueError, match="no UTC offset"):
        to_utc(naive)


def test_to_utc_reads_a_date_alone_as_its_start_in_utc() -> None:
    assert to_utc("2026-06-02") == datetime(2026, 6, 2, 0, 0, tzinfo=UTC)
    assert to_utc(" 2026-06-02 ") == datetime(2026, 6, 2, 0, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="the day does not exist"):
        to_utc("2026-02-30")


@pytest.mark.parametrize(
    "garbage",
    [
        "yesterday",
        "",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-06-03T25:00:00Z",
        "2026-06-03T10:00:00+25:00",
        "\udcff\udcfe",
    ],
)
def test_to_utc_refuses_garbage_strings(garbage: str) -> None:
    with pytest.raises(ValueError, match=r"ISO 8601|UTF-8|does not exist"):
        to_utc(garbage)


@pytest.mark.parametrize("wrong", [1780480800, 1.5, None, date(2026, 6, 3), ["2026-06-03"]])
def test_to_utc_refuses_non_timestamps(wrong: object) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        to_utc(wrong)


@pytest.mark.parametrize("edge", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00"])
def test_to_utc_refuses_instants_outside_the_utc_range_with_a_value_error(edge: str) -> None:
    # Valid ISO text whose UTC instant does not exist in Python's datetime range: the caller
    # must get a ValueError (an InvalidInput), not an OverflowError that escapes validation.
    with pytest.raises(ValueError, match=r"range|ISO 8601"):
        to_utc(edge)


def test_canonical_json_is_key_order_independent() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == canonical_json({"a": [1, "é"], "b": 1})
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'


# -- catalogue value normalisation ------------------------------------------------------------


def spec(value_type: ValueType, **extra: Any) -> AttributeSpec:
    return AttributeSpec(type=value_type, **extra)


@pytest.mark.parametrize(
    ("value_type", "given", "stored"),
    [
        (ValueType.STRING, "Berlin", "Berlin"),
        (ValueType.DATE, "2026-06-30", "2026-06-30"),
        (ValueType.DATE, " 2026-06-30 ", "2026-06-30"),
        (ValueType.DATE, date(2026, 6, 30), "2026-06-30"),
        (ValueType.DATE, datetime(2026, 6, 30, 23, 0, tzinfo=UTC), "2026-06-30"),
        (ValueType.DATETIME, "2026-06-03T12:00:00+02:00", "2026-06-03T10:00:00Z"),
        (ValueType.NUMBER, "42", 42),
        (ValueType.NUMBER, " 42 ", 42),
        (ValueType.NUMBER, "1e3", 1000),
        (ValueType.NUMBER, 1000.0, 1000),
        (ValueType.NUMBER, "2.5", 2.5),
        (ValueType.NUMBER, -7, -7),
        (ValueType.BOOLEAN, "Yes", True),
        (ValueType.BOOLEAN, "off", False),
        (ValueType.BOOLEAN, False, False),
        (ValueType.JSON, '{"reason": "kyc", "n": 1}', {"reason": "kyc", "n": 1}),
        (ValueType.JSON, {"reason": "kyc"}, {"reason": "kyc"}),
    ],
)
def test_normalise_gives_the_stored_form(value_type: ValueType, given: Any, stored: Any) -> None:
    result = spec(value_type).normalise(given)
    assert result == stored
    assert type(result) is type(stored)


def test_normalise_enum_matches_case_insensitively_to_the_declared_spelling() -> None:
    style = spec(ValueType.ENUM, values=["concise", "detailed"])
    assert style.normalise("CONCISE") == "concise"
    assert style.normalise(" Detailed ") == "detailed"


def test_equal_values_normalise_to_the_same_canonical_text() -> None:
    number = spec(ValueType.NUMBER)
    assert canonical_json(number.normalise("1000")) == canonical_json(number.normalise(1e3))
    when = spec(ValueType.DATETIME)
    assert when.normalise("2026-06-03T12:00:00+02:00") == when.normalise("2026-06-03T10:00:00Z")


@pytest.mark.parametrize(
    ("value_type", "wrong", "message"),
    [
        (ValueType.STRING, 42, "expected a string"),
        (ValueType.DATE, "2026-06-31", "not a date"),
        (ValueType.DATE, "next tuesday", "not a date"),
        (ValueType.DATE, 20260630, "not a date"),
        (ValueType.DATETIME, "2026-06-03T10:00:00", "no UTC offset"),
        (ValueType.NUMBER, "abc", "not a number"),
        (ValueType.NUMBER, True, "boolean"),
        (ValueType.NUMBER, "nan", "finite"),
        (ValueType.NUMBER, float("inf"), "finite"),
        (ValueType.NUMBER, [1], "finite number"),
        (ValueType.BOOLEAN, "maybe", "not a boolean"),
        (ValueType.BOOLEAN, 2, "not a boolean"),
        (ValueType.JSON, "{not json", "not JSON"),
    ],
)
def test_normalise_refuses_values_of_the_wrong_type(
    value_type: ValueType, wrong: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        spec(value_type).normalise(wrong)


@pytest.mark.parametrize("wrong", ["terse", "", 1, None])
def test_normalise_enum_refuses_undeclared_values(wrong: Any) -> None:
    style = spec(ValueType.ENUM, values=["concise", "detailed"])
    with pytest.raises(ValueError, match="is not one of concise, detailed"):
        style.normalise(wrong)


def test_enum_spec_needs_values() -> None:
    with pytest.raises(ValueError, match="non-empty 'values'"):
        AttributeSpec(type=ValueType.ENUM)
    with pytest.raises(ValueError, match="only allowed on enum"):
        AttributeSpec(type=ValueType.STRING, values=["a"])


def test_the_bundled_catalogue_parses_and_declares_the_ledger_attributes() -> None:
    catalog = parse_catalog(bundled_catalog_text("support"), "<support>", toml=False)
    assert isinstance(catalog, Catalog)
    attributes = catalog.attributes
    assert attributes["passport_deadline"].type is ValueType.DATE
    assert attributes["passport_deadline"].cardinality is Cardinality.ONE
    assert attributes["languages"].cardinality is Cardinality.MANY
    assert attributes["open_cases"].cardinality is Cardinality.MANY
    assert attributes["answer_style"].values == ["concise", "detailed"]
    assert catalog.retention("passport_deadline") == timedelta(days=3650)


# -- catalogue files: errors name file and line ----------------------------------------------

YAML_OK = """\
version: "1"
kinds:
  fact:
    retention: P30D
attributes:
  home_city:
    type: string
"""

TOML_OK = """\
version = "1"

[kinds.fact]
retention = "P30D"

[attributes.home_city]
type = "string"
"""


def catalog_error(source: str, name: str, *, toml: bool) -> CatalogError:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(source, name, toml=toml)
    return caught.value


def test_valid_catalogue_files_parse_in_both_formats() -> None:
    from_yaml = parse_catalog(YAML_OK, "cat.yaml", toml=False)
    from_toml = parse_catalog(TOML_OK, "cat.toml", toml=True)
    assert from_yaml == from_toml
    assert from_yaml.attributes["home_city"].type is ValueType.STRING


def test_yaml_wrong_type_names_file_line_and_path() -> None:
    error = catalog_error(YAML_OK.replace("type: string", "type: strin"), "cat.yaml", toml=False)
    assert error.field == "cat.yaml:7"
    assert error.location == "cat.yaml:7"
    assert error.problem.startswith("attributes.home_city.type:")
    assert "'string'" in error.problem
    assert str(error).startswith("cat.yaml:7: attributes.home_city.type:")


def test_yaml_unknown_field_names_its_line() -> None:
    source = YAML_OK + "    colour: blue\n"
    error = catalog_error(source, "cat.yaml", toml=False)
    assert error.field == "cat.yaml:8"
    assert error.problem.startswith("attributes.home_city.colour:")


def test_yaml_bad_duration_names_its_line() -> None:
    error = catalog_error(YAML_OK.replace("P30D", "30 days"), "cat.yaml", toml=False)
    assert error.field == "cat.yaml:4"
    assert error.problem.startswith("kinds.fact.retention:")
    assert "ISO 8601 duration" in error.problem


def test_yaml_enum_without_values_names_the_attributes_line() -> None:
    error = catalog_error(YAML_OK.replace("type: string", "type: enum"), "cat.yaml", toml=False)
    assert error.field == "cat.yaml:6"
    assert "non-empty 'values'" in error.problem


def test_yaml_syntax_error_names_its_line() -> None:
    error = catalog_error('version: "1"\nkinds:\n  fact: [\n', "cat.yaml", toml=False)
    assert error.field.startswith("cat.yaml:")
    assert int(error.field.rsplit(":", 1)[1]) in (3, 4)
    assert error.problem.startswith("not valid YAML")


def test_yaml_unknown_kind_names_the_attributes_line() -> None:
    # The attribute that names the undeclared kind is on line 6, its `kind:` key on line 8.
    source = YAML_OK + "    kind: nope\n"
    error = catalog_error(source, "cat.yaml", toml=False)
    assert "unknown kind 'nope'" in error.problem
    assert error.field in ("cat.yaml:6", "cat.yaml:8")


def test_yaml_invalid_attribute_name_names_its_line() -> None:
    error = catalog_error(YAML_OK.replace("home_city:", "Home-City:"), "cat.yaml", toml=False)
    assert "must match" in error.problem
    assert error.field == "cat.yaml:6"


def test_toml_wrong_type_names_file_line_and_path() -> None:
    error = catalog_error(TOML_OK.replace('"string"', '"strin"'), "cat.toml", toml=True)
    assert error.field == "cat.toml:7"
    assert error.problem.startswith("attributes.home_city.type:")


def test_toml_unknown_field_names_its_line() -> None:
    error = catalog_error(TOML_OK + 'colour = "blue"\n', "cat.toml", toml=True)
    assert error.field == "cat.toml:8"
    assert error.problem.startswith("attributes.home_city.colour:")


def test_toml_bad_duration_names_its_line() -> None:
    error = catalog_error(TOML_OK.replace('"P30D"', '"30 days"'), "cat.toml", toml=True)
    assert error.field == "cat.toml:4"
    assert error.problem.startswith("kinds.fact.retention:")


def test_toml_syntax_error_names_file_and_line() -> None:
    error = catalog_error('version = "1"\n[kinds.fact\n', "cat.toml", toml=True)
    assert error.field.startswith("cat.toml")
    assert error.problem.startswith("not valid TOML")
    assert "cat.toml:2" in str(error) or "line 2" in str(error)


def test_missing_top_level_key_is_reported() -> None:
    error = catalog_error('version: "1"\nkinds: {}\n', "cat.yaml", toml=False)
    assert error.field.startswith("cat.yaml")
    assert "attributes" in error.problem
    assert "required" in error.problem.lower()


def test_messages_name_the_problem_a_user_made() -> None:
    from pipeline.errors import InvalidInput
    from pipeline.validation import parse
    from schemas.intake import EpisodeIn

    episode = {"tenant_id": "t", "subject": "s", "session_id": "x", "text": "hi"}
    with pytest.raises(InvalidInput) as day:
        parse(EpisodeIn, episode | {"occurred_at": "2026-06-31T10:00:00Z"})
    assert (
        str(day.value) == "occurred_at: '2026-06-31T10:00:00Z': the day 2026-06-31 does not exist"
    )
    with pytest.raises(InvalidInput) as long:
        parse(EpisodeIn, episode | {"occurred_at": "2026-06-01T10:00:00Z", "text": "x" * 20_001})
    assert str(long.value) == "text: must be at most 20,000 characters (got 20,001)"
    with pytest.raises(InvalidInput) as reason:
        parse(DismissFact, {"tenant_id": "t", "fact_id": "f", "actor": "a", "reason": "x" * 501})
    assert str(reason.value) == "reason: must be at most 500 characters (got 501)"


def test_a_dismissals_reason_refuses_nul_as_every_text_field_does() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        DismissFact(tenant_id="t", fact_id="f", actor="a", reason="spam\x00")
    assert DismissFact(tenant_id="t", fact_id="f", actor="a", reason="spam").reason == "spam"
