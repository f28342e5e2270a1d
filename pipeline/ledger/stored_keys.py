"""A stored idempotency key: what a repeated key is compared by (its fingerprint), the
reservation a first request still at work holds, and the row a key is kept as.

These are the parts of the keyed-operation step (`idempotency.py`); no operation uses them
but through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from pipeline.db.keyed import KeyedQuery
from pipeline.db.models import FactRow, IdempotencyRow
from pipeline.db.unit import Unit
from pipeline.errors import IdempotencyConflict, IdempotencyInProgress
from pipeline.ledger.events import content_hash
from schemas.fields import format_utc

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
        fields = named | command.model_dump(mode="json", exclude=left_out)
        # The shape is the same dump less the content fields (top-level names): one dump.
        shape = {name: value for name, value in fields.items() if name not in content}
        return cls(digest=content_hash(fields), shape=content_hash(shape))


class StoredKey(Protocol):
    """A stored key as read: an ORM row, or a batch's plain namespace of its columns."""

    @property
    def tenant_id(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def subject(self) -> str | None: ...
    @property
    def command_hash(self) -> str: ...
    @property
    def shape_hash(self) -> str | None: ...
    @property
    def result(self) -> Any: ...
    @property
    def created_at(self) -> datetime: ...


def check_repeat(seen: StoredKey, fingerprint: Fingerprint) -> None:
    """Raise IdempotencyConflict unless the stored key `seen` was used for the same command."""
    if seen.command_hash == PURGED:
        same = seen.shape_hash == fingerprint.shape
    else:
        same = seen.command_hash == fingerprint.digest
    if not same:
        raise IdempotencyConflict(
            f"idempotency key {seen.key!r} was already used for another request (another "
            "payload, endpoint or scope); send a new key",
            key=seen.key,
        )


# A key whose first request is still at work (a remember waiting for its model, an intake
# processing its episodes) holds a reservation until this instant: a repeat meanwhile is told
# to come back (IdempotencyInProgress) rather than answered from a state half written. Past
# it, the request is taken to have died.
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
    # The subject lets a purge find and scrub this result; a promote or a confirm names it
    # only there (a rejection names no fact: its answer holds no content).
    subject = getattr(command, "subject", None) or (result.get("fact") or {}).get("subject")
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


def forgotten(session: Session, tenant_id: str, fact_ids: Collection[str]) -> set[str]:
    """Those of `fact_ids` that were forgotten (or dismissed) since: a repeated key never
    answers their values again."""
    pairs = forgotten_among(session, [(tenant_id, fact_id) for fact_id in fact_ids])
    return {fact_id for _, fact_id in pairs}


def forgotten_among(session: Session, facts: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of the (tenant, fact id) pairs whose fact was forgotten (or dismissed) since, in
    one statement. Looked up by fact id, each on its own index entry, and the tenant compared
    here: a plan that also took the tenant's index read every row of the tenant per fact."""
    if not facts:
        return set()
    rows = _FORGOTTEN_FACTS.tuples(session, sorted({(fact_id,) for _, fact_id in facts}))
    return {(str(tenant), str(fact_id)) for tenant, fact_id in rows} & set(facts)


_FORGOTTEN_FACTS = KeyedQuery.of(
    FactRow, ("fact_id",), FactRow.forgotten_at.is_not(None), columns=("tenant_id", "fact_id")
)


# `forgotten` as a replay asks it, of one tenant's fact ids: read there and then by a single
# request, or from what a batch read of its stored keys' facts at once (`ForgottenFacts`).
Forgotten = Callable[[str, Collection[str]], set[str]]


def named_facts(result: Any) -> list[str]:
    """The fact ids a kept answer names: a put's fact, or the facts of an answer that lists
    them (none for a refusal, a reservation or an intake's receipt)."""
    if not isinstance(result, Mapping):
        return []
    fact = result.get("fact")
    listed = [fact] if isinstance(fact, Mapping) else []
    listed += [named for named in result.get("facts") or () if isinstance(named, Mapping)]
    return [str(named["fact_id"]) for named in listed if "fact_id" in named]


class ForgottenFacts:
    """`Forgotten` for a batch: which of the facts named by its stored keys' answers were
    forgotten since, read in one statement once the batch holds its locks (a forget waits for
    them, so nothing is forgotten between this read and the batch's commit); a fact the read
    did not cover (an answer kept by an earlier request of the batch) is read when asked."""

    def __init__(self, session: Session, stored: Iterable[StoredKey]) -> None:
        self.session = session
        self._read = {
            (seen.tenant_id, fact_id) for seen in stored for fact_id in named_facts(seen.result)
        }
        self._gone = forgotten_among(session, self._read)

    def __call__(self, tenant_id: str, fact_ids: Collection[str]) -> set[str]:
        unread = [fact_id for fact_id in fact_ids if (tenant_id, fact_id) not in self._read]
        gone = {fact_id for fact_id in fact_ids if (tenant_id, fact_id) in self._gone}
        return gone | forgotten(self.session, tenant_id, unread)
