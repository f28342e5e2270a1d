"""Idempotency keys: a repeated key returns the first result and writes nothing."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from pipeline.db.models import FactRow, IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import (
    ConflictError,
    IdempotencyConflict,
    IdempotencyInProgress,
    NotFound,
)
from pipeline.ledger.events import content_hash
from pipeline.ledger.forgets import subject_forgotten_since
from pipeline.ledger.refusals import refusal_of, stored_outcome
from pipeline.ledger.results import PutResult
from schemas.commands import Command
from schemas.fields import format_utc

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
    """`KeyedStep.run` for a ledger command: its outcome (a result or a refusal) is kept."""
    step = KeyedStep.of(command, lambda _, seen: replay(seen), stored_outcome)
    outcome = step.run(unit, apply)
    assert outcome is not None  # `apply` always answers
    return outcome


A = TypeVar("A")  # what a keyed operation answers


@dataclass(frozen=True)
class KeyedStep(Generic[A]):
    """One operation that may carry an idempotency key, in three moves: reserve or replay, run,
    keep. Every keyed operation passes through it, so none handles fingerprints, reservations,
    replays or the forget re-check itself.

    `replay` builds the first answer again from the stored key (under its lock: see
    `kept_answer` for one that lists facts); `kept_as` is what an answer keeps (None: nothing
    kept); `retry_s` bounds the Retry-After of a repeat that meets a live reservation. Without
    a key every move is a no-op and `run` just applies."""

    request: Keyed
    fingerprint: Fingerprint
    replay: Callable[[Unit, IdempotencyRow], A]
    kept_as: Callable[[A], dict[str, Any] | None]
    retry_s: float = 1.0

    @classmethod
    def of(
        cls,
        request: BaseModel,
        replay: Callable[[Unit, IdempotencyRow], A],
        kept_as: Callable[[A], dict[str, Any] | None],
        *,
        kind: str | None = None,
        retry_s: float = 1.0,
    ) -> KeyedStep[A]:
        """The step of `request` (a model with `tenant_id` and `idempotency_key`); `kind`
        names the operation, as `Fingerprint.of` says."""
        fingerprint = Fingerprint.of(request, kind=kind)
        return cls(cast(Keyed, request), fingerprint, replay, kept_as, retry_s)

    def replayed(self, unit: Unit) -> A | None:
        """The first answer of a repeated key, under the key's lock (held to the end of the
        transaction); None for a key not used before, or whose first request died (its
        reservation ran out). IdempotencyConflict for a key used for another request,
        IdempotencyInProgress while its first request still works."""
        seen = self._seen(unit)
        if seen is None:
            return None
        check_repeat(vars(seen), self.fingerprint, seen.key)
        if reserved(seen.result):
            refuse_while_reserved(seen.result, unit.clock(), seen.key, retry_s=self.retry_s)
            return None
        return self.replay(unit, seen)

    def run(self, unit: Unit, apply: Callable[[], A | None]) -> A | None:
        """The first answer again, or `apply`'s answer kept under the key (nothing kept when
        `apply` answers None)."""
        earlier = self.replayed(unit)
        if earlier is not None:
            return earlier
        answer = apply()
        if answer is not None:
            self.keep(unit, answer)
        return answer

    def keep(self, unit: Unit, answer: A) -> None:
        """Keep the answer under the key, in place of a reservation it held."""
        stored = self.kept_as(answer)
        if stored is not None and self.request.idempotency_key is not None:
            self._store(unit, stored)

    def reserve(self, unit: Unit, seconds: float) -> None:
        """Hold the key for `seconds` while the first request works (call after `replayed`
        in the same transaction: the key's lock is held)."""
        if self.request.idempotency_key is not None:
            self._store(unit, reservation(unit, seconds))

    def release(self, unit: Unit) -> None:
        """The first request failed before it answered: free its reservation, so that a
        retry is answered at once from what was stored."""
        seen = self._seen(unit)
        if seen is not None and reserved(seen.result):
            unit.session.delete(seen)

    def _seen(self, unit: Unit) -> IdempotencyRow | None:
        key = self.request.idempotency_key
        if key is None:
            return None
        unit.lock(("idempotency", self.request.tenant_id, key))
        return unit.session.get(IdempotencyRow, (self.request.tenant_id, key))

    def _store(self, unit: Unit, result: dict[str, Any]) -> None:
        row = key_row(unit, self.request, self.fingerprint, result)
        held = unit.session.get(IdempotencyRow, (row["tenant_id"], row["key"]))
        if held is None:
            unit.session.add(IdempotencyRow(**row))
            return
        for name, value in row.items():
            setattr(held, name, value)


def kept_answer(unit: Unit, seen: IdempotencyRow) -> tuple[dict[str, Any], list[ConflictError]]:
    """A kept answer that lists facts (`facts`, and the ledger's `refusals`: see
    `answer_kept`), to be answered again — less what was forgotten since: a forgotten or
    dismissed fact, and after a forget or purge of the subject every value it named."""
    first = dict(seen.result)
    refusals = [refusal_of(stored) for stored in first.pop("refusals", [])]
    tenant_id, subject = seen.tenant_id, seen.subject or ""
    if seen.command_hash == PURGED or subject_forgotten_since(
        unit.session, tenant_id, subject, seen.created_at
    ):
        return first | {"facts": [], "rejected": []}, []
    ids = [fact["fact_id"] for fact in first.get("facts", [])]
    gone = forgotten(unit.session, tenant_id, ids)
    first["facts"] = [fact for fact in first.get("facts", []) if fact["fact_id"] not in gone]
    return first, [refusal for refusal in refusals if refusal is not None]


def answer_kept(answer: BaseModel, refusals: Sequence[ConflictError]) -> dict[str, Any]:
    """What a key keeps of an answer that lists facts: its JSON form, with the ledger's
    refusals (a repeat is refused again without logging a second refusal)."""
    stored = answer.model_dump(mode="json")
    kept = [stored_outcome(refusal) for refusal in refusals]
    stored["refusals"] = [refusal for refusal in kept if refusal is not None]
    return stored


def keep(
    unit: Unit, command: Keyed, fingerprint: Fingerprint, outcome: BaseModel | ConflictError
) -> None:
    """Store the key with what its first request got (see `stored_outcome`)."""
    stored = stored_outcome(outcome)
    if stored is not None:
        unit.session.add(IdempotencyRow(**key_row(unit, command, fingerprint, stored)))
