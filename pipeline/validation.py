"""Turn raw input into validated commands, with errors that name the field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.errors import InvalidInput

M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: M | Mapping[str, Any]) -> M:
    """`data` as a `model`, or InvalidInput naming the first bad field."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from None


def invalid(exc: ValidationError) -> InvalidInput:
    return invalid_field(exc.errors()[0], default_field=exc.title)


def invalid_field(error: Mapping[str, Any], *, default_field: str = "input") -> InvalidInput:
    """One of pydantic's error records as InvalidInput naming its field."""
    field = ".".join(str(part) for part in error["loc"]) or default_field
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "missing":
        message = "is required"
    elif error["type"] == "extra_forbidden":
        message = "is not a known field"
    elif error["type"] in ("too_long", "string_too_long") and isinstance(error.get("input"), str):
        # Pydantic says "items" of a text whose length a constraint after its validator checks.
        limit, given = error["ctx"]["max_length"], len(error["input"])
        message = f"must be at most {limit:,} characters (got {given:,})"
    return InvalidInput(field, message)


class DuplicateKey(ValueError):
    """A JSON object names one key twice: parsers keep the last silently, so which value the
    caller meant is a guess."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {json.dumps(key, ensure_ascii=False)} appears twice")
        self.key = key


def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s object_pairs_hook: the object, or DuplicateKey."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found
