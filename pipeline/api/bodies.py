"""Request bodies of the HTTP service, derived from the pipeline's own commands so the two
never drift: the same fields, types and limits, except that the tenant may be left out (the
key fixes it), the actor is never the caller's to say (it is the key), and a subject must fit
in one URL path segment so that whatever is written can be read back at /v1/subjects/{subject}.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    model_validator,
)

from pipeline.access.keys import NewKey
from pipeline.hot_path import RememberIn, one_time_name
from schemas.commands import PutFact
from schemas.fields import Identifier, IdentifierSchema, TimestampSchema, as_sent_timestamp
from schemas.intake import EpisodeIn


def one_segment(subject: str) -> str:
    if "/" in subject or subject in (".", ".."):
        raise ValueError("must fit in one URL path segment: no '/', and not '.' or '..'")
    return subject


Subject = Annotated[Identifier, AfterValidator(one_segment), IdentifierSchema(segment=True)]


def _timestamp(annotation: Any, metadata: list[Any]) -> TimestampSchema | None:
    """The TimestampSchema a field's type carries (also inside `X | None`), if any."""
    for item in metadata:
        if isinstance(item, TimestampSchema):
            return item
    for argument in typing.get_args(annotation):
        if typing.get_origin(argument) is Annotated:
            found = _timestamp(None, list(argument.__metadata__))
            if found is not None:
                return found
    return None


def body_of(
    command: type[BaseModel],
    name: str,
    *,
    without: tuple[str, ...] = ("actor",),
    checks: tuple[Callable[[Any], Any], ...] = (),
) -> type[BaseModel]:
    """`command`'s fields as a request body: tenant_id optional, `without` left out, subject
    restricted to one path segment, a timestamp only in the form the document states (RFC
    3339; the CLI and Python API read more), `checks` of the body as a whole. The pipeline
    validates the command again in full."""
    fields: dict[str, Any] = {}
    for field, info in command.model_fields.items():
        if field in without:
            continue
        annotation: Any = info.annotation
        if info.metadata:
            annotation = Annotated[annotation, *info.metadata]
        timestamp = _timestamp(info.annotation, info.metadata)
        if timestamp is not None:  # read as the document states it, before the command's check
            check = functools.partial(as_sent_timestamp, date_alone=timestamp.date_alone)
            annotation = Annotated[annotation, BeforeValidator(check)]
        if field == "subject":
            annotation = Subject
        default: Any = ... if info.is_required() else info.default
        if field == "tenant_id":
            annotation, default = annotation | None, None
        described = info.description
        if field == "tenant_id":
            described = "the key's tenant; any other is refused (403)"
        options: dict[str, Any] = {"description": described}
        if info.validation_alias is not None:
            options["validation_alias"] = info.validation_alias
        fields[field] = (
            annotation,
            Field(default_factory=info.default_factory, **options)
            if info.default_factory is not None
            else Field(default=default, **options),
        )
    # The command's checks of the body as a whole (a field given under both its names).
    whole: dict[str, Any] = {f"_{c.__name__}": model_validator(mode="before")(c) for c in checks}
    return create_model(
        name,
        __config__=ConfigDict(frozen=True, extra="forbid"),
        __doc__=command.__doc__,
        __validators__=whole,
        **fields,
    )


if TYPE_CHECKING:  # generated classes: to the type checker, models like any other
    EpisodeBody = BaseModel
    RememberBody = BaseModel
    PutBody = BaseModel
    KeyBody = BaseModel
else:
    EpisodeBody = body_of(EpisodeIn, "EpisodeBody")
    RememberBody = body_of(RememberIn, "RememberBody", checks=(one_time_name,))
    # The expected version travels in If-Match, as HTTP says.
    PutBody = body_of(PutFact, "PutBody", without=("actor", "expected_version", "expected_state"))
    KeyBody = body_of(NewKey, "KeyBody")
