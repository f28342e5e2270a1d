"""Idempotency keys: a repeated key returns the first result and writes nothing."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from pipeline.db.models import EventRow, FactRow, IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import (
    ConflictError,
    FactConflict,
    IdempotencyConflict,
    IdempotencyInProgress,
    NotFound,
    NotQuarantined,
    TrustRejected,
    VersionConflict,
)
from pipeline.ledger.events import content_hash
from pipeline.ledger.results import PutResult
from schemas.commands import Command
from schemas.fields import format_utc
from schemas.lifecycle import EventKind

R = TypeVar("R", bound=BaseModel)  # a result, stored as its JSON form
Outcome = TypeVar("Outcome", bound=BaseModel | ConflictError)  # a result or a refusal

# What a purge leaves of a command hash: it cannot be traced back to the erased content.
PURGED = "~purged"
_KEY_AND_CONTENT = {"idempotency_key", "value", "evidence"}
_EPISODE_CONTENT = {"text", "metadata", "subject_names"}


@dataclass(frozen=True)
class Fingerprint:
    """What a repeated key is compared by: the whole command, and (for a key whose command
    was purged since) its shape without content."""

    digest: str
    shape: str

    @classmethod
    def of(
        cls, command: BaseModel, *, kind: str | None = None, ignored: Collection[str] = ()
    ) -> Fingerprint:
        """`kind` names the operation of a command whose fields alone could be mistaken for
        another's (an episode sent to intake or to the hot path); a key is one operation's.
        `ignored`: fields that do not make a request another one."""
        named = {"operation": kind} if kind is not None else {}
        content = _KEY_AND_CONTENT | _EPISODE_CONTENT if kind is not None else _KEY_AND_CONTENT
        left_out = {"idempotency_key", *ignored}
        return cls(
            digest=content_hash(named | command.model_dump(mode="json", exclude=left_out)),
            shape=content_hash(named | command.model_dump(mode="json", exclude=content | left_out)),
        )


def check_repeat(seen: Mapping[str, Any], fingerprint: Fingerprint, key: str) -> None:
    """Raise IdempotencyConflict unless the stored key `seen` was used for the same command."""
    if seen["command_hash"] == PURGED:
        same = seen["shape_hash"] == fingerprint.shape
    else:
        same = seen["command_hash"] == fingerprint.digest
    if not same:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was already used for another request (another payload, "
            "endpoint or scope); send a new key",
            key=key,
        )


# A key whose first request is still at work (a remember waiting for its model, an intake
# processing its episodes) holds a reservation until this instant: a repeat meanwhile is told
# to come back (IdempotencyInProgress) rather than answered from a state half written. Past
# it, the request is taken to have died and the key answers as if it had kept nothing.
RESERVED = "reserved_until"


def reservation(unit: Unit, seconds: float) -> dict[str, str]:
    """The result a key holds while its first request works, for at most `seconds`."""
    until = format_utc(unit.clock() + timedelta(seconds=seconds))
    assert until is not None
    return {RESERVED: until}


def reserved(result: Mapping[str, Any] | None) -> bool:
    """Whether a stored key holds a reservation (live or expired) rather than an answer."""
    return result is not None and RESERVED in result


def refuse_while_reserved(
    result: Mapping[str, Any], now: datetime, key: str, *, retry_s: float
) -> None:
    """IdempotencyInProgress while the key's reservation holds; nothing once it expired.
    `retry_s`: how soon the first request should have answered (Retry-After's bound)."""
    until = datetime.fromisoformat(result[RESERVED])
    remaining = (until - now).total_seconds()
    if remaining <= 0:
        return
    wait = max(1, math.ceil(min(remaining, retry_s)))
    raise IdempotencyInProgress(
        f"idempotency key {key!r}: the first request with it is still in progress; retry in "
        f"{wait} s for its answer",
        key=key,
        retry_after=wait,
    )


class Keyed(Protocol):
    """A request that may carry an idempotency key: a ledger command, an episode, a remember."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def idempotency_key(self) -> str | None: ...


def key_row(
    unit: Unit, command: Keyed, fingerprint: Fingerprint, result: dict[str, Any]
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


TenantKey = tuple[str, str]


def stored_keys(session: Session, keys: Collection[TenantKey]) -> dict[TenantKey, IdempotencyRow]:
    """The stored ones among (tenant, key) pairs."""
    found: dict[TenantKey, IdempotencyRow] = {}
    tenants = sorted({tenant for tenant, _ in keys})
    for tenant in tenants:
        names = sorted({key for owner, key in keys if owner == tenant})
        rows = session.scalars(
            select(IdempotencyRow).where(
                IdempotencyRow.tenant_id == tenant, IdempotencyRow.key.in_(names)
            )
        )
        found |= {(row.tenant_id, row.key): row for row in rows}
    return found


def used_keys(unit: Unit, keys: Collection[TenantKey]) -> dict[TenantKey, IdempotencyRow]:
    """`stored_keys`, each key locked for the rest of the transaction first (in one order, so
    two requests with overlapping keys never wait on each other in a cycle)."""
    if not keys:
        return {}
    unit.lock(*[("idempotency", tenant, key) for tenant, key in sorted(set(keys))])
    return stored_keys(unit.session, keys)


def subject_forgotten_since(session: Session, tenant_id: str, subject: str, since: Any) -> bool:
    """Whether `subject` was forgotten (or purged) at or after `since`."""
    found = session.scalar(
        select(EventRow.event_id)
        .where(
            EventRow.tenant_id == tenant_id,
            EventRow.subject == subject,
            EventRow.kind.in_([EventKind.FORGET.value, EventKind.PURGE.value]),
            EventRow.occurred_at >= since,
        )
        .limit(1)
    )
    return found is not None


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


def forgotten(session: Session, tenant_id: str, fact_ids: Collection[str]) -> set[str]:
    """Those of `fact_ids` that were forgotten (or dismissed) since: a repeated key never
    answers their values again."""
    if not fact_ids:
        return set()
    return set(
        session.scalars(
            select(FactRow.fact_id).where(
                FactRow.tenant_id == tenant_id,
                FactRow.fact_id.in_(sorted(set(fact_ids))),
                FactRow.forgotten_at.is_not(None),
            )
        )
    )


def replayed_put(
    session: Session, tenant_id: str, result: Mapping[str, Any], *, dismissed_at: Any = None
) -> PutResult | ConflictError | NotFound:
    """A repeated key of a put, promote or dismiss: the first answer again — unless its fact
    was forgotten since, which is then NotFound like any forgotten fact. A dismissal hid its
    fact itself (at `dismissed_at`): only a forget of the subject since hides its answer."""
    refused = refusal_of(result)
    if refused is not None:
        return refused
    answer = PutResult.repeated(result)
    if dismissed_at is not None:
        gone = subject_forgotten_since(session, tenant_id, answer.fact.subject, dismissed_at)
    else:
        gone = bool(forgotten(session, tenant_id, [answer.fact.fact_id]))
    if gone:
        return NotFound(
            f"the fact written under this idempotency key was forgotten since "
            f"(fact {answer.fact.fact_id})"
        )
    return answer


def once(
    unit: Unit,
    command: Command,
    apply: Callable[[], PutResult | ConflictError],
    *,
    dismissal: bool = False,
) -> PutResult | ConflictError:
    """Run `apply` unless the command's key was used before. The key is locked for the whole
    transaction, so two processes sending the same key at once cannot both apply it."""

    def replay(seen: IdempotencyRow) -> PutResult | ConflictError:
        dismissed_at = seen.created_at if dismissal else None
        answer = replayed_put(
            unit.session, command.tenant_id, seen.result, dismissed_at=dismissed_at
        )
        if isinstance(answer, NotFound):
            raise answer
        return answer

    return _applied_once(unit, command, apply, replay)


def once_forget(
    unit: Unit, command: Command, apply: Callable[[], R], load: Callable[[Mapping[str, Any]], R]
) -> R:
    """`once` for a command that is never refused and names no fact (forget)."""
    return _applied_once(unit, command, apply, lambda seen: load(seen.result))


def _applied_once(
    unit: Unit,
    command: Command,
    apply: Callable[[], Outcome],
    replay: Callable[[IdempotencyRow], Outcome],
) -> Outcome:
    """`apply` and its outcome kept under the command's key, or, for a key used before by the
    same request, `replay` of what it kept (under the key's lock, held to the end of the
    transaction)."""
    key = command.idempotency_key
    if key is None:
        return apply()
    unit.lock(("idempotency", command.tenant_id, key))
    fingerprint = Fingerprint.of(command)
    seen = unit.session.get(IdempotencyRow, (command.tenant_id, key))
    if seen is not None:
        check_repeat(vars(seen), fingerprint, key)
        return replay(seen)
    outcome = apply()
    keep(unit, command, fingerprint, outcome)
    return outcome


def keep(
    unit: Unit, command: Keyed, fingerprint: Fingerprint, outcome: BaseModel | ConflictError
) -> None:
    """Store the key with what its first request got (see `stored_outcome`)."""
    stored = stored_outcome(outcome)
    if stored is not None:
        unit.session.add(IdempotencyRow(**key_row(unit, command, fingerprint, stored)))
