"""What the shared model client builds once and reuses: Instructor's check for async
validators is remembered for a response model that passed it, and still refuses one that
does not, every time."""

from __future__ import annotations

import pytest
from instructor.v2.core import patch as instructor_patch
from instructor.v2.validation import async_validators
from pydantic import BaseModel

import pipeline.extract.llm  # noqa: F401  (installs the remembering check)
from schemas.extraction import response_model
from tests.unit.extract_helpers import catalog


class WithAsyncCheck(BaseModel):
    name: str

    @async_validators.async_field_validator("name")
    async def name_exists(self, value: str) -> None:  # pragma: no cover - never run
        return None


def test_the_check_remembers_a_model_that_passed_and_refuses_one_that_fails() -> None:
    check = async_validators.reject_async_validators
    assert getattr(check, "remembers", False)
    assert getattr(instructor_patch, "reject_async_validators", check) is check
    model = response_model(catalog())
    check(model)
    check(model)  # remembered: no walk, no error
    for _ in range(2):
        with pytest.raises(ValueError, match="async validators are not supported"):
            check(WithAsyncCheck)
