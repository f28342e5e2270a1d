"""A unit of work: one open transaction and the dependencies every stage needs inside it.

The edge (the CLI, a worker task, an HTTP handler, a test) opens a unit with `Store.begin()` or
`Store.run()`, calls any number of stage functions with it, and commits or rolls back once; the
stages never commit. So an episode, its candidates, the facts and the decisions they cause can
be written together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from pipeline.db.backends import Backend, LockName
from pipeline.settings import Settings
from schemas.catalog import Catalog

Clock = Callable[[], datetime]


# Where a unit's session keeps its `Written` (`session.info`), for the one door fact versions
# are inserted through (`inserts.insert_rows`).
WRITTEN = "sgam_written"


@dataclass
class Written:
    """The fact versions a unit of work inserted and the episodes it finished (done), by
    tenant: what `Store.run` (or `begin`) hands its after-commit hooks once the unit committed
    (the embedding arm's vectors, `pipeline.embedding.after_commit`), never on a rollback.

    Fact versions are noted where every one of them is inserted (`inserts.insert_rows`: a put,
    a promotion's or an expiry's re-projection, a replayed claim), so no writer notes its own;
    an episode where it is finished done (`episodes/finishing.py`) or copied by a replay."""

    facts: dict[str, set[str]] = field(default_factory=dict)  # tenant: fact ids
    episodes: dict[str, set[str]] = field(default_factory=dict)  # tenant: episode ids

    def fact(self, tenant_id: str, fact_id: str) -> None:
        self.facts.setdefault(tenant_id, set()).add(fact_id)

    def episode(self, tenant_id: str, episode_id: str) -> None:
        self.episodes.setdefault(tenant_id, set()).add(episode_id)

    def add(self, other: Written) -> None:
        for tenant_id, fact_ids in other.facts.items():
            self.facts.setdefault(tenant_id, set()).update(fact_ids)
        for tenant_id, episode_ids in other.episodes.items():
            self.episodes.setdefault(tenant_id, set()).update(episode_ids)

    def inserted(self, rows: Sequence[dict[str, Any]]) -> None:
        """Note fact version rows about to be inserted."""
        for row in rows:
            self.fact(row["tenant_id"], row["fact_id"])

    def __len__(self) -> int:
        return sum(map(len, self.facts.values())) + sum(map(len, self.episodes.values()))


@dataclass(frozen=True)
class Unit:
    session: Session
    catalog: Catalog
    clock: Clock
    settings: Settings
    backend: Backend
    # The episode (and prompt version) the decisions being logged are taken for, if any.
    provenance: dict[str, str | None] = field(default_factory=dict)
    # What it inserted, for the work after its commit (`Written`).
    written: Written = field(default_factory=Written)

    @contextmanager
    def deciding_for(self, episode_id: str, prompt_version: str | None) -> Iterator[None]:
        """Every decision logged inside the block names this episode and prompt version."""
        saved = dict(self.provenance)
        self.provenance.update(episode_id=episode_id, prompt_version=prompt_version)
        try:
            yield
        finally:
            self.provenance.clear()
            self.provenance.update(saved)

    def lock(self, *names: LockName, shared: Sequence[LockName] = ()) -> None:
        """Hold locks on logical names until the transaction ends, in one round trip: first
        the `shared` ones, then `names` exclusively. Callers take locks in the order
        idempotency key, subject, attribute, so no two transactions wait on each other in a
        cycle."""
        self.backend.lock(self.session.connection(), names, shared)
