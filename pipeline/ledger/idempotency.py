"""Idempotency keys: a repeated key returns the first result and writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from pipeline.db.models import IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, IdempotencyConflict
from pipeline.ledger.events import content_hash
from schemas.commands import Command

R = TypeVar("R", bound=BaseModel)  # a result, stored as its JSON form

# What a purge leaves of a command hash: it cannot be traced back to the erased content.
PURGED = "~purged"
_KEY_AND_CONTENT = {"idempotency_key", "value", "evidence"}


@dataclass(frozen=True)
class Fingerprint:
    """What a repeated key is compared by: the whole command, and (for a key whose command
    was purged since) its shape without content."""

    digest: str
    shape: str

    @classmethod
    def of(cls, command: Command) -> Fingerprint:
        return cls(
            digest=content_hash(command.model_dump(mode="json", exclude={"idempotency_key"})),
            shape=content_hash(command.model_dump(mode="json", exclude=_KEY_AND_CONTENT)),
        )


def check_repeat(seen: Mapping[str, Any], fingerprint: Fingerprint, key: str) -> None:
    """Raise IdempotencyConflict unless the stored key `seen` was used for the same command."""
    if seen["command_hash"] == PURGED:
        same = seen["shape_hash"] == fingerprint.shape
    else:
        same = seen["command_hash"] == fingerprint.digest
    if not same:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was already used for a different command", key=key
        )


def key_row(
    unit: Unit, command: Command, fingerprint: Fingerprint, result: dict[str, Any]
) -> dict[str, Any]:
    """The stored key of a command that was applied."""
    # The subject lets a purge find and scrub this result; a promote names it only there.
    subject = getattr(command, "subject", None) or result.get("fact", {}).get("subject")
    return {
        "tenant_id": command.tenant_id,
        "key": command.idempotency_key,
        "subject": subject,
        "command_hash": fingerprint.digest,
        "shape_hash": fingerprint.shape,
        "result": result,
        "created_at": unit.clock(),
    }


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
    fingerprint = Fingerprint.of(command)
    seen = unit.session.get(IdempotencyRow, (command.tenant_id, key))
    if seen is not None:
        check_repeat(vars(seen), fingerprint, key)
        return load(seen.result)
    outcome = apply()
    if not isinstance(outcome, ConflictError):
        unit.session.add(
            IdempotencyRow(**key_row(unit, command, fingerprint, outcome.model_dump(mode="json")))
        )
    return outcome
