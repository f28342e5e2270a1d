"""Answers written straight to JSON bytes, once: a handler that returns one of these skips
FastAPI's second pass over its result (the response model's validation, which for a plain
handler is another trip to the thread pool, then the dump). The result is the pipeline's own
model, already validated when it was built; `response_model` still documents it."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi.responses import Response
from pydantic import BaseModel, TypeAdapter

from schemas.facts import Fact

JSON = "application/json"
_FACTS = TypeAdapter(list[Fact])  # built once: building a serializer costs more than using it


def facts_answer(found: list[Fact], headers: Mapping[str, str] | None = None) -> Response:
    """`found` as FastAPI would have answered it (by alias, unset fields included)."""
    return Response(_FACTS.dump_json(found, by_alias=True), media_type=JSON, headers=headers)


def model_answer(answer: BaseModel) -> Response:
    """`answer`, the route's own response model, as FastAPI would have answered it."""
    return Response(answer.model_dump_json(by_alias=True), media_type=JSON)
