"""The memory-schema catalogue: which attributes may be remembered, how, and for how long."""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from schemas.facts import Cardinality
from schemas.fields import MAX_JSON_DEPTH, check_json, to_utc
from schemas.forms import MAX_FORMS, literal_words, parse_form, value_slot

_NAME = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$"
# The widths of the columns these names are stored in.
MAX_ATTRIBUTE_NAME = 200
MAX_KIND_NAME = 64
MAX_ATTRIBUTES = 2000
# Write time plus retention must stay a representable instant (year 9999) for centuries.
MAX_RETENTION = timedelta(days=36500)


def _iso_duration(value: object) -> object:
    # pydantic parses ISO 8601 durations (a year is 365 days, a month 30); refuse its other forms.
    if isinstance(value, str) and not value.startswith("P"):
        raise ValueError(f"{value!r} is not an ISO 8601 duration such as P30D or PT12H")
    return value


def _retention(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be longer than zero (P0D would end everything at once)")
    if value > MAX_RETENTION:
        raise ValueError(f"must be at most P{MAX_RETENTION.days}D (100 years)")
    return value


BoundedDuration = Annotated[timedelta, BeforeValidator(_iso_duration), AfterValidator(_retention)]


class ValueType(StrEnum):
    STRING = "string"
    DATE = "date"
    DATETIME = "datetime"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ENUM = "enum"
    JSON = "json"

    @property
    def phrase(self) -> str:
        """The type in a sentence: "an enum", "a JSON value"."""
        if self is ValueType.JSON:
            return "a JSON value"
        return ("an " if self.value[0] in "aeiou" else "a ") + self.value


class Sensitivity(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    PERSONAL = "personal"
    SENSITIVE = "sensitive"


class Recurrence(BaseModel):
    """Promote a weak signal once it was seen `times` times within `window`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    times: int = Field(ge=2)
    window: BoundedDuration


Promotion = Literal["immediate", "confirm"] | Recurrence


class KindSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    retention: BoundedDuration
    description: str = ""


class AttributeSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: ValueType
    cardinality: Cardinality = Cardinality.ONE
    kind: str = "fact"
    retention: BoundedDuration | None = None
    promotion: Promotion = "immediate"
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    synonyms: list[str] = Field(default_factory=list)
    description: str = ""
    values: list[str] | None = Field(default=None, description="the allowed values of an enum")
    other_subjects: bool = Field(
        default=False,
        description="extraction may attribute it to an entity the tenant already knows, not "
        "only to the episode's subject",
    )
    forms: list[str] | None = Field(
        default=None,
        max_length=MAX_FORMS,
        description="statement forms the rules extractor reads (schemas/forms.py); left out, "
        "they are derived from the name, synonyms and type; [] reads the attribute by no form",
    )
    terms: list[str] = Field(
        default_factory=list,
        description="the values a {term} slot of the forms accepts (e.g. occupations)",
    )

    @model_validator(mode="after")
    def _enum_has_values(self) -> AttributeSpec:
        if self.type is ValueType.ENUM and not self.values:
            raise ValueError("an enum attribute needs a non-empty 'values' list")
        if self.type is not ValueType.ENUM and self.values is not None:
            raise ValueError("'values' is only allowed on enum attributes")
        for index, form in enumerate(self.forms or []):
            problem = self._form_problem(form)
            if problem:
                raise ValueError(f"forms[{index}]: {problem}")
        return self

    def _form_problem(self, form: str) -> str:
        try:
            parts = parse_form(form)
        except ValueError as exc:
            return str(exc)
        slot = value_slot(parts)
        if self.type is ValueType.JSON:
            return "a json attribute has no forms: its values need a model"
        if slot == "term" and not self.terms:
            return f"{form!r} has a {{term}} slot but the attribute lists no 'terms'"
        if slot == "term" and self.type is not ValueType.STRING:
            return f"{form!r}: {{term}} is for string attributes; an enum's {{value}} is its values"
        if slot in {"name", "phrase"} and self.type is not ValueType.STRING:
            return f"{form!r}: {{{slot}}} is for string attributes"
        if slot != "term" and self.type is ValueType.STRING and literal_words(parts) < 2:
            return (
                f"{form!r}: a string {{{slot}}} needs at least two words of the form beside it "
                "(else it reads every clause), or use {term} with a list of terms"
            )
        return ""

    def normalise(self, value: Any) -> Any:
        """The stored form of `value`, or ValueError saying why it does not fit the type."""
        return _NORMALISERS[self.type](self, value)


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = Field(min_length=1, max_length=64)
    kinds: dict[str, KindSpec]
    attributes: dict[str, AttributeSpec]

    @model_validator(mode="after")
    def _consistent(self) -> Catalog:
        # Messages start with the path of the offending entry so the loader can name its line.
        if len(self.attributes) > MAX_ATTRIBUTES:
            raise ValueError(
                f"attributes: {len(self.attributes)} attributes; the limit is {MAX_ATTRIBUTES}"
            )
        for kind in self.kinds:
            if not 0 < len(kind) <= MAX_KIND_NAME:
                raise ValueError(f"kinds.{kind}: a kind name has 1 to {MAX_KIND_NAME} characters")
        for name, spec in self.attributes.items():
            if not re.match(_NAME, name):
                raise ValueError(f"attributes.{name}: the name must match {_NAME}")
            if len(name) > MAX_ATTRIBUTE_NAME:
                raise ValueError(
                    f"attributes.{name}: a name has at most {MAX_ATTRIBUTE_NAME} characters"
                )
            if spec.kind not in self.kinds:
                known = ", ".join(sorted(self.kinds))
                raise ValueError(f"attributes.{name}.kind: unknown kind {spec.kind!r} ({known})")
        return self

    def retention(self, attribute: str) -> timedelta:
        spec = self.attributes[attribute]
        return spec.retention if spec.retention is not None else self.kinds[spec.kind].retention

    def synonyms(self, attribute: str) -> list[str]:
        spec = self.attributes.get(attribute)
        return [attribute.replace("_", " "), *(spec.synonyms if spec else [])]


def _string(_spec: AttributeSpec, value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _date(_spec: AttributeSpec, value: Any) -> Any:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a date (YYYY-MM-DD)")


def _datetime(_spec: AttributeSpec, value: Any) -> Any:
    moment = to_utc(value)
    return moment.isoformat().replace("+00:00", "Z")


def _number(_spec: AttributeSpec, value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            try:
                value = float(value.strip())
            except ValueError:
                raise ValueError(f"{value!r} is not a number") from None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    raise ValueError(f"{value!r} is not a finite number")


_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def _boolean(_spec: AttributeSpec, value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{value!r} is not a boolean (true/false)")


def _enum(spec: AttributeSpec, value: Any) -> Any:
    allowed = spec.values or []
    if isinstance(value, str):
        for option in allowed:
            if option.casefold() == value.strip().casefold():
                return option
    raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")


def _json(_spec: AttributeSpec, value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not JSON text ({exc.msg} at position {exc.pos})") from None
        except RecursionError:
            raise ValueError(f"is nested more than {MAX_JSON_DEPTH} levels deep") from None
    if value is None:
        raise ValueError("null is not a value; end a fact with valid_to instead")
    return check_json(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which JSON does not allow")


_NORMALISERS = {
    ValueType.STRING: _string,
    ValueType.DATE: _date,
    ValueType.DATETIME: _datetime,
    ValueType.NUMBER: _number,
    ValueType.BOOLEAN: _boolean,
    ValueType.ENUM: _enum,
    ValueType.JSON: _json,
}
