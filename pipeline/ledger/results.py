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
    ledger already said so (a restatement or a repeated idempotency key, `replayed`)."""

    model_config = ConfigDict(frozen=True)

    fact: Fact
    written: bool = Field(description="false: the ledger already held this (or a retry)")
    # The key's state tag right after the write (HTTP's ETag, not part of the JSON answer);
    # None for a repeated idempotency key, whose first answer was stored without it.
    state: SkipJsonSchema[str | None] = Field(default=None, exclude=True)
    # A repeated idempotency key's answer: the first request's fact, nothing written now, and
    # whether the first request wrote it (HTTP answers its status and body again, with
    # Idempotent-Replayed). Neither is part of the JSON answer.
    replayed: SkipJsonSchema[bool] = Field(default=False, exclude=True)
    first_written: SkipJsonSchema[bool] = Field(default=False, exclude=True)

    @classmethod
    def repeated(cls, stored: Mapping[str, Any]) -> PutResult:
        """What a repeated idempotency key answers: the first result, nothing written now."""
        fact = Fact.model_validate(stored["fact"])
        first = bool(stored.get("written"))
        return cls(fact=fact, written=False, replayed=True, first_written=first)

    def as_first_answered(self) -> PutResult:
        """The answer as the first request got it (`written` then), for a replay."""
        return self.model_copy(update={"written": self.first_written}) if self.replayed else self


def settled(store: Store, work: Callable[[Unit], R | ConflictError]) -> R:
    """Run `work` in a unit of its own; a refusal is committed (its decision is logged) and
    then raised."""
    outcome = store.run(work)
    if isinstance(outcome, ConflictError):
        raise outcome
    return outcome
