"""A unit of work: one open transaction and the dependencies every stage needs inside it.

The edge (the CLI, a worker task, an HTTP handler, a test) opens a unit with `Store.begin()` or
`Store.run()`, calls any number of stage functions with it, and commits or rolls back once; the
stages never commit. So an episode, its candidates, the facts and the decisions they cause can
be written together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from pipeline.db.backends import Backend, LockName
from pipeline.settings import Settings
from schemas.catalog import Catalog

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Unit:
    session: Session
    catalog: Catalog
    clock: Clock
    settings: Settings
    backend: Backend

    def lock(self, *names: LockName, shared: Sequence[LockName] = ()) -> None:
        """Hold locks on logical names until the transaction ends, in one round trip: first
        the `shared` ones, then `names` exclusively. Callers take locks in the order
        idempotency key, subject, attribute, so no two transactions wait on each other in a
        cycle."""
        self.backend.lock(self.session.connection(), names, shared)
