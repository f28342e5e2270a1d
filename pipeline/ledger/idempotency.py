"""The keyed-operation step: every operation that takes an idempotency key goes through it.

A repeated key returns the first answer and writes nothing: *reserve or replay* (`replayed`,
`reserve`), *run* (`run`, `answer`), *keep* (`keep`, `release`). `KeyedStep` is one request in
a transaction; `KeyedBatch` many in one transaction (a `put_many` chunk, an intake chunk), their
keys locked in one statement and read in one. The parts of a stored key (fingerprint,
reservation, row) are `stored_keys`; no operation handles them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel
from sqlalchemy import bindparam, update
from sqlalchemy.orm import Session

from pipeline.db import inserts
from pipeline.db.backends import LockName
from pipeline.db.models import IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, NotFound
from pipeline.ledger.forgets import subject_forgotten_since
from pipeline.ledger.refusals import refusal_of, stored_outcome
from pipeline.ledger.results import PutResult
from pipeline.ledger.stored_keys import (
    PURGED,
    Fingerprint,
    Forgotten,
    ForgottenFacts,
    Keyed,
    StoredKey,
    TenantKey,
    check_repeat,
    forgotten,
    key_row,
    refuse_while_reserved,
    reservation,
    reserved,
    stored_keys,
)
from schemas.commands import Command

__all__ = [
    "PURGED",
    "FactOutcome",
    "Forgotten",
    "KeyedBatch",
    "KeyedStep",
    "StoredKey",
    "answer_kept",
    "kept_answer",
    "put_step",
]

A = TypeVar("A")  # what a keyed operation answers
_NO_KEY = Fingerprint("", "")  # a request without a key is never compared: not worth hashing


@dataclass(frozen=True)
class KeyedStep(Generic[A]):
    """One operation that may carry an idempotency key, in three moves: reserve or replay, run,
    keep. Every keyed operation passes through it, so none handles fingerprints, reservations,
    replays or the forget re-check itself.

    `replay` builds the first answer again from the stored key (under its lock: see
    `kept_answer` for one that lists facts), asking `Forgotten` which of the facts it names
    were forgotten since; `kept_as` is what an answer keeps (None: nothing
    kept); `retry_s` bounds the Retry-After of a repeat that meets a live reservation; with
    `replay_expired`, a reservation that ran out is replayed too (an intake's names the episode
    it stored) instead of taken for a key never used. Without a key every move is a no-op and
    `run` just applies."""

    request: Keyed
    fingerprint: Fingerprint
    replay: Callable[[Unit, StoredKey, Forgotten], A]
    kept_as: Callable[[A], dict[str, Any] | None]
    retry_s: float = 1.0
    replay_expired: bool = False

    @classmethod
    def of(
        cls,
        request: BaseModel,
        replay: Callable[[Unit, StoredKey, Forgotten], A],
        kept_as: Callable[[A], dict[str, Any] | None],
        *,
        kind: str | None = None,
        ignored: Collection[str] = (),
        retry_s: float = 1.0,
        replay_expired: bool = False,
    ) -> KeyedStep[A]:
        """The step of `request` (a model with `tenant_id` and `idempotency_key`); `kind`
        and `ignored` as `Fingerprint.of` says."""
        keyed = cast(Keyed, request)
        fingerprint = (
            Fingerprint.of(request, kind=kind, ignored=ignored)
            if keyed.idempotency_key is not None
            else _NO_KEY
        )
        return cls(keyed, fingerprint, replay, kept_as, retry_s, replay_expired)

    @property
    def key(self) -> TenantKey | None:
        key = self.request.idempotency_key
        return (self.request.tenant_id, key) if key is not None else None

    def replayed(self, unit: Unit) -> A | None:
        """The first answer of a repeated key, under the key's lock (held to the end of the
        transaction); None for a key not used before, or whose first request died (its
        reservation ran out). IdempotencyConflict for a key used for another request,
        IdempotencyInProgress while its first request still works."""
        return self.answer_of(unit, self._seen(unit))

    def answer_of(
        self, unit: Unit, seen: StoredKey | None, forgotten_facts: Forgotten | None = None
    ) -> A | None:
        """`replayed` for the key as read (`seen`, None: not stored), its lock held;
        `forgotten_facts` answers what was forgotten since (default: read now)."""
        if seen is None:
            return None
        check_repeat(seen, self.fingerprint)
        if reserved(seen.result):
            refuse_while_reserved(seen.result, unit.clock(), seen.key, retry_s=self.retry_s)
            if not self.replay_expired:
                return None
        return self.replay(unit, seen, forgotten_facts or partial(forgotten, unit.session))

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

    def answer(self, unit: Unit, apply: Callable[[], A]) -> A:
        """`run` for an operation that always answers."""
        answer = self.run(unit, apply)
        assert answer is not None  # `apply` always answers
        return answer

    def keep(self, unit: Unit, answer: A) -> None:
        """Keep the answer under the key, in place of a reservation it held."""
        stored = self.kept_as(answer)
        if stored is not None and self.key is not None:
            self._store(unit, stored)

    def reserve(self, unit: Unit, seconds: float) -> None:
        """Hold the key for `seconds` while the first request works (call after `replayed`
        in the same transaction: the key's lock is held)."""
        if self.key is not None:
            self._store(unit, reservation(unit, seconds))

    def release(self, unit: Unit) -> None:
        """The first request failed before it answered: free its reservation, so that a
        retry is answered at once from what was stored."""
        seen = self._seen(unit)
        if seen is not None and reserved(seen.result):
            unit.session.delete(seen)

    def _seen(self, unit: Unit) -> IdempotencyRow | None:
        if self.key is None:
            return None
        unit.lock(("idempotency", *self.key))
        return unit.session.get(IdempotencyRow, self.key)

    def _store(self, unit: Unit, result: dict[str, Any]) -> None:
        row = key_row(unit, self.request, self.fingerprint, result)
        held = unit.session.get(IdempotencyRow, (row["tenant_id"], row["key"]))
        if held is None:
            unit.session.add(IdempotencyRow(**row))
            return
        for name, value in row.items():
            setattr(held, name, value)


class KeyedBatch:
    """`KeyedStep` for many requests in one transaction (a `put_many` chunk, an intake chunk):
    their keys locked in one statement in one order (`lock_names`, taken by the caller with its
    other locks and read with its other reads, or `locked`), the stored ones read at once. Each
    request is then replayed or run in order as `KeyedStep` would; a key used by an earlier
    request of the batch answers as that request's key. Which of the facts the stored answers
    name were forgotten since is read once for them all, not once per replay."""

    def __init__(self, unit: Unit, stored: Mapping[TenantKey, StoredKey]) -> None:
        self.unit = unit
        self._seen: dict[TenantKey, StoredKey] = dict(stored)
        self._forgotten = ForgottenFacts(unit.session, stored.values())

    @staticmethod
    def keys(requests: Iterable[Keyed]) -> list[TenantKey]:
        """The (tenant, key) pairs of the requests that carry a key, sorted."""
        return sorted({(r.tenant_id, r.idempotency_key) for r in requests if r.idempotency_key})

    @staticmethod
    def lock_names(keys: Iterable[TenantKey]) -> list[LockName]:
        """The locks of `keys` (sorted: two batches never wait on each other in a cycle)."""
        return [("idempotency", tenant, key) for tenant, key in sorted(set(keys))]

    @classmethod
    def locked(cls, unit: Unit, requests: Iterable[Keyed]) -> KeyedBatch:
        """The batch of `requests`, their keys locked and read here."""
        keys = cls.keys(requests)
        if not keys:
            return cls(unit, {})
        unit.lock(*cls.lock_names(keys))
        return cls(unit, stored_keys(unit.session, keys))

    @staticmethod
    def check(session: Session, steps: Sequence[KeyedStep[Any]]) -> set[TenantKey]:
        """IdempotencyConflict for a key used before for another request, read without its
        lock (a check before the work, repeated under the locks as it goes); the keys stored."""
        by_key = {step.key: step for step in steps if step.key is not None}
        found = stored_keys(session, by_key)
        for key, seen in found.items():
            check_repeat(seen, by_key[key].fingerprint)
        return set(found)

    def replayed(self, step: KeyedStep[A]) -> A | None:
        """`KeyedStep.replayed`, from what the batch read and kept so far."""
        seen = self._seen.get(step.key) if step.key else None
        return step.answer_of(self.unit, seen, self._forgotten)

    def run(self, step: KeyedStep[A], apply: Callable[[], A]) -> A:
        """`KeyedStep.answer` within the batch: the key's row is queued (`inserts.batch`)."""
        earlier = self.replayed(step)
        if earlier is not None:
            return earlier
        answer = apply()
        if step.key is not None and (stored := step.kept_as(answer)) is not None:
            self.store(self.hold(step, stored))
        return answer

    def hold(self, step: KeyedStep[Any], result: dict[str, Any]) -> dict[str, Any]:
        """The key's row holding `result`, seen by the batch's later requests but not stored
        (`store` it, or not: an intake stores only the episodes the database took)."""
        assert step.key is not None
        row = key_row(self.unit, step.request, step.fingerprint, result)
        self._seen[step.key] = cast(StoredKey, SimpleNamespace(**row))
        return row

    def reserve(self, step: KeyedStep[Any], seconds: float, **named: Any) -> dict[str, Any]:
        """`hold` a reservation for `seconds`, naming what the first request stored."""
        return self.hold(step, named | reservation(self.unit, seconds))

    def store(self, row: dict[str, Any]) -> None:
        inserts.insert_rows(self.unit.session, IdempotencyRow, [row])

    @staticmethod
    def keep_all(unit: Unit, answers: Sequence[tuple[Keyed, dict[str, Any]]]) -> None:
        """Keep each answer in place of its key's reservation, stored by an earlier
        transaction: one statement for all of them."""
        kept = [
            {"tenant": request.tenant_id, "idempotency": request.idempotency_key, "first": first}
            for request, first in answers
            if request.idempotency_key is not None
        ]
        if kept:
            unit.session.connection().execute(_KEEP, kept)

    @staticmethod
    def kept(
        unit: Unit, tenant_id: str, keys: Sequence[str], *, retry_s: float
    ) -> list[dict[str, Any] | None]:
        """What each key keeps, in their order (None: not stored); IdempotencyInProgress
        while a reservation holds."""
        found = stored_keys(unit.session, [(tenant_id, key) for key in keys])
        rows = [found.get((tenant_id, key)) for key in keys]
        for key, row in zip(keys, rows, strict=True):
            if row is not None and reserved(row.result):
                refuse_while_reserved(row.result, unit.clock(), key, retry_s=retry_s)
        return [dict(row.result) if row is not None else None for row in rows]


_KEEP = (
    update(IdempotencyRow)
    .where(
        IdempotencyRow.tenant_id == bindparam("tenant"),
        IdempotencyRow.key == bindparam("idempotency"),
    )
    .values(result=bindparam("first", type_=IdempotencyRow.__table__.c.result.type))
)

FactOutcome = PutResult | ConflictError  # what a command that answers a fact answers


def put_step(command: Command, *, dismissal: bool = False) -> KeyedStep[FactOutcome]:
    """The step of a ledger command that answers a fact (put, promote, dismiss): a repeat
    answers the first fact again, or the first refusal — NotFound when the fact was forgotten
    since. A dismissal hid its fact itself: only a forget of the subject since hides it."""

    def replay(unit: Unit, seen: StoredKey, forgotten_facts: Forgotten) -> FactOutcome:
        refused = refusal_of(seen.result)
        if refused is not None:
            return refused
        answer = PutResult.repeated(seen.result)
        tenant_id, fact = command.tenant_id, answer.fact
        if dismissal:
            gone = subject_forgotten_since(unit.session, tenant_id, fact.subject, seen.created_at)
        else:
            gone = bool(forgotten_facts(tenant_id, [fact.fact_id]))
        if gone:
            raise NotFound(
                f"the fact written under this idempotency key was forgotten since "
                f"(fact {fact.fact_id})"
            )
        return answer

    return KeyedStep.of(command, replay, stored_outcome)


def kept_answer(
    unit: Unit, seen: StoredKey, forgotten_facts: Forgotten
) -> tuple[dict[str, Any], list[ConflictError]]:
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
    gone = forgotten_facts(tenant_id, ids)
    first["facts"] = [fact for fact in first.get("facts", []) if fact["fact_id"] not in gone]
    return first, [refusal for refusal in refusals if refusal is not None]


def answer_kept(answer: BaseModel, refusals: Sequence[ConflictError]) -> dict[str, Any]:
    """What a key keeps of an answer that lists facts: its JSON form, with the ledger's
    refusals (a repeat is refused again without logging a second refusal)."""
    stored = answer.model_dump(mode="json")
    kept = [stored_outcome(refusal) for refusal in refusals]
    stored["refusals"] = [refusal for refusal in kept if refusal is not None]
    return stored
