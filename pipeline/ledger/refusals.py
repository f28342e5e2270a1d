"""What an idempotency key keeps of a first outcome, and the refusal it answers again: a repeat
is refused as the first request was, without logging a second refusal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from pipeline.errors import (
    ConflictError,
    FactConflict,
    NotQuarantined,
    TrustRejected,
    VersionConflict,
)


def stored_outcome(outcome: BaseModel | ConflictError) -> dict[str, Any] | None:
    """What a key keeps of its first outcome: the result, or the ledger's refusal (so a
    repeat is refused again without logging a second refusal); None for what is not kept."""
    if isinstance(outcome, BaseModel):
        return outcome.model_dump(mode="json")
    kind = type(outcome).__name__
    if kind not in _REFUSALS:
        return None
    details = {name: getattr(outcome, name) for name in _REFUSALS[kind][1]}
    return {"refused": {"kind": kind, "message": str(outcome)} | details}


def refusal_of(result: Mapping[str, Any]) -> ConflictError | None:
    """The refusal a key's first request got, to answer again; None when it was applied."""
    refused = result.get("refused")
    if refused is None:
        return None
    kind, fields = _REFUSALS[refused["kind"]]
    return kind(refused["message"], **{name: refused[name] for name in fields})


_REFUSALS: dict[str, tuple[Callable[..., ConflictError], tuple[str, ...]]] = {
    "FactConflict": (FactConflict, ("existing_fact_id",)),
    "TrustRejected": (TrustRejected, ("existing_fact_id",)),
    "VersionConflict": (VersionConflict, ("expected", "actual")),
    "NotQuarantined": (NotQuarantined, ("fact_id",)),
}
