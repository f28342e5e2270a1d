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

from sqlalchemy import String, bindparam, func, select, true, tuple_
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from pipeline.db.backends import LockName
from pipeline.db.models import ClaimRow, FactRow
from pipeline.db.unit import Unit
from schemas.commands import PutFact
from schemas.facts import ClaimRecord

AnyClaim = ClaimRow | ClaimRecord
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


_KEY_FIELDS = SLOT_FIELDS[:-1]  # a key: its slot without the slot


def _keys_as_rows() -> Any:
    """The keys as a table, from one array per field (PostgreSQL): a join with it uses the
    slot index once per key, where a long `IN` list of tuples makes the planner slow."""
    arrays = [bindparam(name, type_=ARRAY(String)) for name in _KEY_FIELDS]
    return func.unnest(*arrays).table_valued(*_KEY_FIELDS).render_derived(name="batch_keys")


def _slot_queries(table: type[ClaimRow] | type[FactRow], *where: Any) -> tuple[Any, Any]:
    """The rows of `table` in the slots of the bound keys: per key (PostgreSQL), or with `IN`
    (SQLite, which has no arrays)."""
    keys = _keys_as_rows()
    # OFFSET 0 keeps the per-key subquery whole, so it stays an index scan per key even while
    # the table's statistics are stale or absent (a new database, autovacuum behind).
    per_key = (
        select(table)
        .where(*(getattr(table, name) == keys.c[name] for name in _KEY_FIELDS))
        .where(table.forgotten_at.is_(None), *where)
        .offset(0)
        .lateral("slot_rows")
    )
    joined = select(aliased(table, per_key)).select_from(keys).join(per_key, true())
    columns = tuple_(*(getattr(table, name) for name in _KEY_FIELDS))
    listed = select(table).where(
        columns.in_(bindparam("keys", expanding=True)), table.forgotten_at.is_(None), *where
    )
    return joined, listed


# Rows read earlier in the session may have been closed since: populate_existing.
_CLAIMS_OF_KEYS = _slot_queries(ClaimRow, ClaimRow.quarantined.is_(False))
_CURRENT_OF_KEYS = tuple(
    query.execution_options(populate_existing=True)
    for query in _slot_queries(FactRow, FactRow.superseded_at.is_(None))
)


def load_slots(session: Session, keys: Collection[SlotKey]) -> dict[SlotKey, SlotState]:
    """The state of every slot of `keys` (their `slot` is ignored: a key's slots are read
    whole), in one statement per table. A slot with nothing stored is absent."""
    if session.get_bind().dialect.name == "postgresql":
        index, bound = 0, {name: [getattr(key, name) for key in keys] for name in _KEY_FIELDS}
    else:
        index, bound = 1, {"keys": [tuple(getattr(k, name) for name in _KEY_FIELDS) for k in keys]}
    states: dict[SlotKey, SlotState] = {}

    def state_of(row: ClaimRow | FactRow) -> SlotState:
        return states.setdefault(SlotKey.of(row), SlotState({}, {}))

    for claim in session.scalars(_CLAIMS_OF_KEYS[index], bound):
        state_of(claim).claims[claim.claim_id] = claim
    for fact in session.scalars(_CURRENT_OF_KEYS[index], bound):
        state_of(fact).current[fact.fact_id] = fact
    return states
