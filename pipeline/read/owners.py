"""Whose a stored thing is: the scope (tenant, agent, purpose) of an episode, a fact or a
candidate, so that a caller bound to one agent or purpose is answered about nothing else."""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select

from pipeline.db.models import CandidateRow, EpisodeRow, FactRow
from pipeline.db.store import Store
from schemas.facts import Scope

Kind = Literal["episode", "fact", "candidate"]
_TABLES: dict[Kind, type[EpisodeRow | FactRow | CandidateRow]] = {
    "episode": EpisodeRow,
    "fact": FactRow,
    "candidate": CandidateRow,
}
_IDS = {
    "episode": EpisodeRow.episode_id,
    "fact": FactRow.fact_id,
    "candidate": CandidateRow.candidate_id,
}


def scope_of(store: Store, kind: Kind, tenant_id: str, item_id: str) -> Scope | None:
    """The scope of the `kind` named `item_id` in the tenant, or None when the tenant has none
    (another tenant's is reported exactly like a missing one)."""
    table = _TABLES[kind]
    statement = (
        select(table.agent_id, table.purpose)
        .where(table.tenant_id == tenant_id, _IDS[kind] == item_id)
        .limit(1)
    )
    with store.reading() as connection:
        found = connection.execute(statement).first()
    if found is None:
        return None
    return Scope(tenant_id=tenant_id, agent_id=found.agent_id, purpose=found.purpose)
