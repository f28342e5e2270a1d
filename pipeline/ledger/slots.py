"""Slots: the unit within which intervals must not overlap, its lock names, and its stored state.

A slot is one single-valued key (tenant, agent, purpose, subject, attribute), or one value of a
multi-valued key. A write locks the key, reads the slot's claims and current fact versions once,
and decides from that state.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, fields
from typing import Any

from sqlalchemy import bindparam, select, tuple_
from sqlalchemy.orm import Session

from pipeline.db.backends import LockName
from pipeline.db.models import ClaimRow, FactRow
from pipeline.db.unit import Unit
from schemas.commands import PutFact
from schemas.facts import ClaimRecord

AnyClaim = ClaimRow | ClaimRecord


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


# Built once: the write path runs these on every put, and building them costs more than running.
_CLAIMS_OF_SLOT = select(ClaimRow).where(*in_slot(ClaimRow), ClaimRow.quarantined.is_(False))
_CURRENT_OF_SLOT = (
    select(FactRow)
    .where(*in_slot(FactRow), FactRow.superseded_at.is_(None))
    .execution_options(populate_existing=True)  # rows read earlier may have been closed since
)


@dataclass
class SlotState:
    """What a write needs to know about one slot, read once after its lock is held."""

    claims: dict[str, AnyClaim]
    current: dict[str, FactRow]

    def add(self, claim: AnyClaim) -> None:
        self.claims[claim.claim_id] = claim


def load_slot(session: Session, key: SlotKey) -> SlotState:
    claims: dict[str, AnyClaim] = {
        row.claim_id: row for row in session.scalars(_CLAIMS_OF_SLOT, asdict(key))
    }
    current = {row.fact_id: row for row in session.scalars(_CURRENT_OF_SLOT, asdict(key))}
    return SlotState(claims, current)


_KEY_FIELDS = SLOT_FIELDS[:-1]  # a key: its slot without the slot


def _of_keys(table: type[ClaimRow] | type[FactRow]) -> list[Any]:
    columns = tuple_(*(getattr(table, name) for name in _KEY_FIELDS))
    return [columns.in_(bindparam("keys", expanding=True)), table.forgotten_at.is_(None)]


_CLAIMS_OF_KEYS = select(ClaimRow).where(*_of_keys(ClaimRow), ClaimRow.quarantined.is_(False))
_CURRENT_OF_KEYS = (
    select(FactRow)
    .where(*_of_keys(FactRow), FactRow.superseded_at.is_(None))
    .execution_options(populate_existing=True)
)


def load_slots(session: Session, keys: Collection[SlotKey]) -> dict[SlotKey, SlotState]:
    """The state of every slot of `keys` (their `slot` is ignored: a key's slots are read
    whole), in one statement per table. A slot with nothing stored is absent."""
    bound = {"keys": [tuple(getattr(key, name) for name in _KEY_FIELDS) for key in keys]}
    states: dict[SlotKey, SlotState] = {}

    def state_of(row: ClaimRow | FactRow) -> SlotState:
        return states.setdefault(SlotKey.of(row), SlotState({}, {}))

    for claim in session.scalars(_CLAIMS_OF_KEYS, bound):
        state_of(claim).claims[claim.claim_id] = claim
    for fact in session.scalars(_CURRENT_OF_KEYS, bound):
        state_of(fact).current[fact.fact_id] = fact
    return states

