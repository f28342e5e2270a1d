"""The vectors of what a write just committed, made beside it: the writer never waits for the
embeddings endpoint.

`submit` queues the rows a committed unit of work wrote (the store's after-commit hook,
`pipeline.embedding.after_commit`: a put, a put_many or import chunk, the hot path's episode and
facts, a promotion, an expiry, a replay) and returns at once. One daemon thread per process
takes everything queued, merges it per store (so a burst of single puts shares requests), and
fills it (`vectors.fill_written`: read once, cut once into requests of SGAM_EMBEDDING_BATCH
texts, the spend of each call recorded). Why a thread and not the caller: an HTTP put would
otherwise pay a model round trip on every request, and up to SGAM_EMBEDDING_MAX_ATTEMPTS
timeouts when the endpoint hangs; and not the Celery lane: a put needs no broker or worker, and
the rows are read again by id anyway, so a durable message would add nothing the backfill does
not.

What fails here is logged and left to the next pass (`vectors.fill_missing`: a processed
batch, `sgam embed`, the nightly consolidation): the endpoint failing after its retries (the
rest of that round for the store is dropped, not retried against a failing endpoint), the
database, a process that dies with rows queued, and rows submitted while more than
`MAX_WAITING` wait. A process that exits (the CLI after `sgam import`, through
`embedding.settle`; a worker's task; any other at exit) first waits for its queue (`flush`), as
long as a request of it ends at least once per SGAM_EMBEDDING_TIMEOUT_S.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import partial

from pipeline.db.store import Store
from pipeline.db.unit import Written
from pipeline.embedding.vectors import fill_written

log = logging.getLogger("sgam.embedding")

# Rows waiting at most; past this a write's rows are left to the next pass (a bulk import
# outrunning the endpoint: `sgam embed` afterwards).
MAX_WAITING = 100_000


@dataclass
class _Round:
    """One store's share of what was queued."""

    store: Store
    written: Written = field(default_factory=Written)


class Embedder:
    """The process's queue of committed rows waiting for vectors, and the thread filling it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._queue: deque[tuple[Store, Written]] = deque()
        self._waiting = 0  # rows in the queue
        self._busy = False  # the thread holds a round
        self._requests = 0  # requests answered or failed: what `flush` sees progress by
        self._stall_s = 0.0  # the longest SGAM_EMBEDDING_TIMEOUT_S submitted
        self._thread: threading.Thread | None = None

    def submit(self, store: Store, written: Written) -> None:
        rows = len(written)
        if not rows:
            return
        with self._changed:
            if self._waiting + rows > MAX_WAITING:
                log.warning(
                    "embedding queue full; vectors left for the next pass",
                    extra={"rows": rows, "waiting": self._waiting},
                )
                return
            self._queue.append((store, written))
            self._waiting += rows
            self._stall_s = max(self._stall_s, store.settings.embedding_timeout_s)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sgam-embedding", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def flush(self, stall_s: float | None = None) -> bool:
        """Wait until every row submitted so far was filled or given up; False when no request
        ended for `stall_s` seconds (default: the longest SGAM_EMBEDDING_TIMEOUT_S seen)."""
        with self._changed:
            stall = stall_s if stall_s is not None else self._stall_s
            while self._queue or self._busy:
                if not self._changed.wait_for(partial(self._moved, self._requests), stall):
                    return False
            return True

    def _moved(self, requests: int) -> bool:
        """A request ended since `requests` had, or nothing is left (called holding the
        lock)."""
        return self._requests != requests or not (self._queue or self._busy)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue))
                rounds = _merged(self._queue)
                self._queue.clear()
                self._waiting = 0
                self._busy = True
            try:
                for one in rounds:
                    self._fill(one)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _fill(self, one: _Round) -> None:
        """The round's vectors; a failed request ends it (the rest waits for the next pass)."""
        try:
            fill_written(one.store, one.written, each=self._answered)
        except Exception:  # the rows are committed; the next pass fills them
            log.warning("embedding of written rows failed", exc_info=True)

    def _answered(self) -> None:
        with self._changed:
            self._requests += 1
            self._changed.notify_all()


def _merged(queue: deque[tuple[Store, Written]]) -> list[_Round]:
    rounds: dict[int, _Round] = {}
    for store, written in queue:
        rounds.setdefault(id(store), _Round(store)).written.add(written)
    return list(rounds.values())


_embedder = Embedder()


def submit(store: Store, written: Written) -> None:
    """Queue the rows a committed unit of work inserted for their vectors; returns at once."""
    _embedder.submit(store, written)


def flush(stall_s: float | None = None) -> bool:
    """Wait for the vectors of every row submitted so far (`Embedder.flush`)."""
    return _embedder.flush(stall_s)


def _forked() -> None:
    """A forked child (a prefork worker) has no thread and its own queue, empty."""
    global _embedder
    _embedder = Embedder()


os.register_at_fork(after_in_child=_forked)
atexit.register(flush)
