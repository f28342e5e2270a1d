"""What the ledger's operations return, and the one-transaction form of each operation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError
from schemas.facts import Fact

R = TypeVar("R")


@dataclass(frozen=True)
class PutResult:
    """The fact that now holds the written value at its valid_from. `written` is False when the
    ledger already said so (a restatement or a repeated idempotency key)."""

    fact: Fact
    written: bool
    # The key's state tag right after the write (HTTP's ETag); None for a repeated
    # idempotency key, whose first answer was stored without it.
    state: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fact": self.fact.model_dump(mode="json"), "written": self.written}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PutResult:
        return cls(Fact.model_validate(data["fact"]), written=False)


def settled(store: Store, work: Callable[[Unit], R | ConflictError]) -> R:
    """Run `work` in a unit of its own; a refusal is committed (its decision is logged) and
    then raised."""
    outcome = store.run(work)
    if isinstance(outcome, ConflictError):
        raise outcome
    return outcome
