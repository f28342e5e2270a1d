"""The writes of a batch of puts, held until its decisions are made.

A batch decides every command from slot state read once, so what one command writes must be
visible to the next in memory: each new fact version replaces its predecessor in the slot state
at once, and a version replaced again within the same batch is inserted already closed. The
closes of versions stored before the batch go out before the queued inserts, so the database
never sees two open versions of a fact: on PostgreSQL as one UPDATE of all of them (one array
per column) in the inserts' own round trip (`inserts.first`), on SQLite one per version. Every
version goes in through `inserts.insert_rows`, which notes it for the store's after-commit hooks.
"""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Dialect
from sqlalchemy.orm import Session

from pipeline.db import inserts
from pipeline.db.base import UtcDateTime
from pipeline.db.models import ClaimRow, FactRow
from pipeline.ledger.slots import SlotState
from pipeline.ledger.versions import CLOSE_VERSION, Change

# Closes the current version of each fact named, one array per column (PostgreSQL).
_CLOSE_ALL = (
    "UPDATE facts SET superseded_at = closes.closed_at"
    " FROM unnest($1::text[], $2::timestamptz[]) AS closes(fact_id, closed_at)"
    " WHERE facts.fact_id = closes.fact_id AND facts.superseded_at IS NULL"
)
_UTC = UtcDateTime()


def _utc(moment: datetime, dialect: Dialect) -> Any:
    return _UTC.process_bind_param(moment, dialect)


class PendingWrites:
    """Use inside `inserts.batch(session)`, and call `close_replaced` before it ends."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._closes: list[dict[str, Any]] = []
        self._queued: dict[str, dict[str, Any]] = {}  # fact_id: its newest queued version

    def claim(self, columns: dict[str, Any]) -> None:
        inserts.insert_rows(self.session, ClaimRow, [columns])

    def version(self, state: SlotState, row: dict[str, Any]) -> None:
        """Queue a fact's first version (nothing to close), visible in `state` at once."""
        self._queue(state, row)

    def versions(self, state: SlotState, changes: list[Change]) -> None:
        """Queue the new versions of `changes`, closing the versions they replace."""
        for change in changes:
            if change.before is not None:
                self._close(change.fact_id, change.after["recorded_at"])
            self._queue(state, dict(change.after))

    def close_replaced(self) -> None:
        if not self._closes:
            return
        connection = self.session.connection()
        if connection.dialect.name == "postgresql":
            ids = [close["closed_id"] for close in self._closes]
            moments = [_utc(close["closed_at"], connection.dialect) for close in self._closes]
            inserts.first(self.session, _CLOSE_ALL, [ids, moments])
        else:
            connection.execute(CLOSE_VERSION, self._closes)
        self._closes = []

    def sent(self) -> None:
        """The queued versions went to the database (`inserts.sending_early`): one replaced
        from now on is closed there, like a version stored before the batch."""
        self._queued.clear()

    def _close(self, fact_id: str, now: datetime) -> None:
        queued = self._queued.get(fact_id)
        if queued is not None:
            queued["superseded_at"] = now  # the insert is still queued: it goes out closed
        else:
            self._closes.append({"closed_id": fact_id, "closed_at": now})

    def _queue(self, state: SlotState, row: dict[str, Any]) -> None:
        self._queued[row["fact_id"]] = row
        inserts.insert_rows(self.session, FactRow, [row])
        state.current[row["fact_id"]] = SimpleNamespace(**row)
