"""What the ledger's operations return, and the one-transaction form of each operation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError
from schemas.facts import Fact

R = TypeVar("R")


class PutResult(BaseModel):
    """The fact that now holds the written value at its valid_from. `written` is False when the
    ledger already said so (a restatement or a repeated idempotency key)."""

    model_config = ConfigDict(frozen=True)

    fact: Fact
    written: bool = Field(description="false: the ledger already held this (or a retry)")
    # The key's state tag right after the write (HTTP's ETag, not part of the JSON answer);
    # None for a repeated idempotency key, whose first answer was stored without it.
    state: SkipJsonSchema[str | None] = Field(default=None, exclude=True)

    @classmethod
    def repeated(cls, stored: Mapping[str, Any]) -> PutResult:
        """What a repeated idempotency key answers: the first result, nothing written now."""
        return cls(fact=Fact.model_validate(stored["fact"]), written=False)


def settled(store: Store, work: Callable[[Unit], R | ConflictError]) -> R:
    """Run `work` in a unit of its own; a refusal is committed (its decision is logged) and
    then raised."""
    outcome = store.run(work)
    if isinstance(outcome, ConflictError):
        raise outcome
    return outcome
