"""The catalogue's rules for one fact command, as a pure function: no database, no unit of work.

`check_put` is what the write path applies before it judges a claim, and what `sgam import`
applies to every line before it writes any; so the two can never disagree about what is valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.catalog.names import unknown_attribute
from pipeline.errors import InvalidInput
from pipeline.settings import Settings
from schemas.catalog import AttributeSpec, Catalog
from schemas.commands import PutFact
from schemas.fields import canonical_json, format_utc


@dataclass(frozen=True)
class CheckedPut:
    """What the catalogue settles for a valid command: its attribute's declaration, the
    normalised value (and its canonical JSON text), and when the fact will expire."""

    spec: AttributeSpec
    value: Any
    value_text: str
    expires_at: datetime


def check_put(command: PutFact, catalog: Catalog, settings: Settings, now: datetime) -> CheckedPut:
    """The command checked against the catalogue and the size limit at `now`; InvalidInput
    naming the field otherwise."""
    spec = catalog.attributes.get(command.attribute)
    if spec is None:
        raise unknown_attribute(catalog, command.attribute)
    if command.cardinality is not None and command.cardinality is not spec.cardinality:
        raise InvalidInput(
            "cardinality",
            f"{command.attribute!r} is declared {spec.cardinality.value} in the catalogue",
        )
    try:
        value = spec.normalise(command.value)
    except ValueError as exc:
        raise InvalidInput("value", f"{exc} ({command.attribute} is {spec.type.phrase})") from None
    text = canonical_json(value)
    size = len(text.encode("utf-8"))
    limit = settings.max_value_bytes
    if size > limit:
        raise InvalidInput("value", f"is {size} bytes; the limit is {limit} (SGAM_MAX_VALUE_BYTES)")
    return CheckedPut(spec, value, text, _expiry(command, spec, catalog, now))


def _expiry(command: PutFact, spec: AttributeSpec, catalog: Catalog, now: datetime) -> datetime:
    """The catalogue's retention from `now`, or the command's own expiry if it only shortens
    it."""
    latest = now + catalog.retention(command.attribute)
    if command.expires_at is None:
        return latest
    if command.expires_at > latest:
        raise InvalidInput(
            "expires_at",
            f"may only shorten the retention of kind {spec.kind} "
            f"(latest allowed: {format_utc(latest)})",
        )
    if command.expires_at <= now:
        raise InvalidInput("expires_at", "must be in the future")
    return command.expires_at
