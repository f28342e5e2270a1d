"""Answers that only the HTTP service gives: problems (RFC 9457) and the probes. Every other
answer is the pipeline's own result model (schemas/results.py and beside each concept), the
same the Python API returns and the command line prints."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Problem(BaseModel):
    """RFC 9457 problem details. `type` is stable per error class (`urn:sgam:problem:...`)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["urn:sgam:problem:invalid-input"])
    title: str
    status: int
    detail: str | None = Field(default=None, description="what was wrong; never a stored value")
    instance: str = Field(description="the request's path")
    field: str | None = Field(default=None, description="the input at fault (422, 403)")
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="invalid episodes of a batch: index, field, problem"
    )


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)
