"""Slots: the unit within which intervals must not overlap, its lock names, and its stored state.

A slot is one single-valued key (tenant, agent, purpose, subject, attribute), or one value of a
multi-valued key. A write locks the key, reads the slot's claims and current fact versions once,
and decides from that state.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.orm import Session

from pipeline.db.backends import LockName
from pipeline.db.keyed import KeyedQuery
from pipeline.db.models import ClaimRow, FactRow
from pipeline.db.unit import Unit
from schemas.commands import PutFact
from schemas.facts import ClaimRecord

AnyClaim = ClaimRow | ClaimRecord | SimpleNamespace  # as read, as written, or as read in a batch
# A current fact version: as read, or as queued by the batch that wrote it (its columns as
# attributes; building an ORM object per queued version would cost more than deciding it).
AnyVersion = FactRow | SimpleNamespace


@dataclass(frozen=True)
class SlotKey:
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    slot: str

    @classmethod
    def of(cls, row: AnyClaim | FactRow | PutFact) -> SlotKey:
        slot = "" if isinstance(row, PutFact) else row.slot  # a command only locks its key
        return cls(row.tenant_id, row.agent_id, row.purpose, row.subject, row.attribute, slot)

    def lock_name(self) -> LockName:
        # Lock the whole attribute, not the slot: a multi-valued key is small and rarely hot.
        return ("key", self.tenant_id, self.agent_id, self.purpose, self.subject, self.attribute)

    def subject_lock_name(self) -> LockName:
        return subject_lock_name(self.tenant_id, self.subject)


SLOT_FIELDS = [field.name for field in fields(SlotKey)]


def subject_lock_name(tenant_id: str, subject: str) -> LockName:
    """Writers hold it shared, forget holds it exclusively: forgetting never interleaves."""
    return ("subject", tenant_id, subject)


def lock_key(unit: Unit, key: SlotKey) -> None:
    unit.lock(key.lock_name(), shared=(key.subject_lock_name(),))


def in_slot(table: type[ClaimRow] | type[FactRow]) -> list[Any]:
    """Rows of one slot, not forgotten; bind the slot with `asdict(key)`."""
    return [getattr(table, name) == bindparam(name) for name in SLOT_FIELDS] + [
        table.forgotten_at.is_(None)
    ]


@dataclass
class SlotState:
    """What a write needs to know about one slot, read once after its lock is held."""

    claims: dict[str, AnyClaim]
    current: dict[str, AnyVersion]

    def add(self, claim: AnyClaim) -> None:
        self.claims[claim.claim_id] = claim


def load_slot(session: Session, key: SlotKey) -> SlotState:
    """The state of one slot, read under its key's lock."""
    return load_slots(session, [key]).get(key) or SlotState({}, {})


KEY_FIELDS = SLOT_FIELDS[:-1]  # a key: its slot without the slot


# The claims and current fact versions of a key's slots. Rows read earlier in the session may
# have been closed since: populate_existing.
CLAIMS_OF_KEYS = KeyedQuery.of(
    ClaimRow, KEY_FIELDS, ClaimRow.forgotten_at.is_(None), ClaimRow.quarantined.is_(False)
)
CURRENT_OF_KEYS = KeyedQuery.of(
    FactRow, KEY_FIELDS, FactRow.forgotten_at.is_(None), FactRow.superseded_at.is_(None)
).options(populate_existing=True)


def load_slots(session: Session, keys: Collection[SlotKey]) -> dict[SlotKey, SlotState]:
    """The state of every slot of `keys` (their `slot` is ignored: a key's slots are read
    whole), in one statement per table. A slot with nothing stored is absent."""
    bound = [tuple(getattr(key, name) for name in KEY_FIELDS) for key in keys]
    states: dict[SlotKey, SlotState] = {}

    def state_of(row: ClaimRow | FactRow) -> SlotState:
        return states.setdefault(SlotKey.of(row), SlotState({}, {}))

    for claim in CLAIMS_OF_KEYS.rows(session, bound):
        state_of(claim).claims[claim.claim_id] = claim
    for fact in CURRENT_OF_KEYS.rows(session, bound):
        state_of(fact).current[fact.fact_id] = fact
    return states
