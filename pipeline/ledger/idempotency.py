"""Idempotency keys: a repeated key returns the first result and writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from pipeline.db.models import IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, IdempotencyConflict
from pipeline.ledger.events import content_hash
from schemas.commands import Command


class Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Result)

# What a purge leaves of a command hash: it cannot be traced back to the erased content.
PURGED = "~purged"
_KEY_AND_CONTENT = {"idempotency_key", "value", "evidence"}


def once(
    unit: Unit,
    command: Command,
    apply: Callable[[], R | ConflictError],
    load: Callable[[Mapping[str, Any]], R],
) -> R | ConflictError:
    """Run `apply` unless the command's key was used before. The key is locked for the whole
    transaction, so two processes sending the same key at once cannot both apply it."""
    key = command.idempotency_key
    if key is None:
        return apply()
    unit.lock(("idempotency", command.tenant_id, key))
    digest = content_hash(command.model_dump(mode="json", exclude={"idempotency_key"}))
    shape = content_hash(command.model_dump(mode="json", exclude=_KEY_AND_CONTENT))
    seen = unit.session.get(IdempotencyRow, (command.tenant_id, key))
    if seen is not None:
        # A purge replaced the content hash: the command can only be compared without it.
        purged = seen.command_hash == PURGED
        if (seen.shape_hash != shape) if purged else (seen.command_hash != digest):
            raise IdempotencyConflict(
                f"idempotency key {key!r} was already used for a different command", key=key
            )
        return load(seen.result)
    outcome = apply()
    if not isinstance(outcome, ConflictError):
        result = outcome.to_json()
        # The subject lets a purge find and scrub this result; a promote names it only there.
        subject = getattr(command, "subject", None) or result.get("fact", {}).get("subject")
        unit.session.add(
            IdempotencyRow(
                tenant_id=command.tenant_id,
                key=key,
                subject=subject,
                command_hash=digest,
                shape_hash=shape,
                result=result,
                created_at=unit.clock(),
            )
        )
    return outcome
