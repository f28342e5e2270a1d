"""Transactions that keep purged row versions alive. VACUUM FULL copies every row version that
a transaction open anywhere in the cluster may still see — one in another database included —
so a vacuum run while such a transaction is open reports success and leaves the purged values
in the new table files. `sgam purge-vacuum` first waits, bounded, for every transaction that
was open when it started; a transaction that began later began after the purge and cannot see
what it erased.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, text

# Client sessions holding a snapshot or a transaction id (anywhere in the cluster), idle
# transactions in this database (they hold no snapshot, but their table locks would make the
# vacuum time out), and prepared transactions. Other vacuums are left out: PostgreSQL ignores
# their snapshots when it decides what is dead. Without superuser or pg_read_all_stats, other
# roles' sessions show no xact_start here.
_OLDER_THAN = text(
    "SELECT pid, datname, EXTRACT(EPOCH FROM now() - xact_start) FROM pg_stat_activity "
    "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
    "AND xact_start < :since AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL "
    "OR (state LIKE 'idle in transaction%' AND datname = current_database())) "
    "UNION ALL "
    "SELECT NULL, database, EXTRACT(EPOCH FROM now() - prepared) FROM pg_prepared_xacts "
    "WHERE prepared < :since ORDER BY 3 DESC"
)


@dataclass(frozen=True)
class OldTransaction:
    pid: int | None  # None: a prepared transaction, which has no session
    database: str | None
    age_s: float

    def describe(self) -> str:
        who = f"pid {self.pid}" if self.pid is not None else "a prepared transaction"
        return f"{who} (database {self.database}, open {self.age_s:.0f} s)"


def wait_for_old_transactions(
    connection: Connection, wait_s: float, poll_s: float = 0.25
) -> list[OldTransaction]:
    """Wait up to `wait_s` until no transaction older than this call is open in the cluster;
    the ones still open then (none: the vacuum may run). `connection` is in autocommit, so
    it holds no snapshot of its own between statements."""
    since: datetime = connection.execute(text("SELECT now()")).scalar_one()
    deadline = time.monotonic() + wait_s
    while True:
        found = [
            OldTransaction(pid, database, float(age))
            for pid, database, age in connection.execute(_OLDER_THAN, {"since": since})
        ]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(poll_s)
