"""Model extractions in flight together, each committed when its answer is in, and the next
batch claimed while the calls of the last one are out.

A model call is I/O: the worker process waits for the endpoint, not for its CPU. So each
process keeps up to `SGAM_LLM_CONCURRENCY` calls in flight on a thread pool of its own (the
HTTP client and its connections are shared, `extract.llm.shared_client`), and commits what has
come back while the rest are still out: one slow answer never holds a finished one hostage
(answers that arrive within `GATHER_S` of each other share one commit). Batches overlap: the
next one is claimed and its calls queued while the pool still runs the last one's, so the
pool is never idle between batches (`run_in_flight`).
Threads rather than asyncio because the store, the policy and the ledger are synchronous
SQLAlchemy, and measured, a call on a thread costs less CPU than one through an async client
(2.4 against 3.1-3.4 ms: bench/llm_threads_vs_asyncio.py). Each batch's context (the subjects'
values, the conversation) is read on the calling thread, at once, when it is claimed
(`process.batch_contexts`); a pool thread renders the prompt, asks the model and runs the
guards; the commits stay on the calling thread.

While the calls are out, a `LeaseKeeper` thread renews the claim's lease on every episode not
yet finished, so a slow model never lets the sweeper hand a claimed episode to another worker
(whose fencing would then throw this answer away).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import tuple_, update

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.episodes.dispatch import EpisodeKey
from schemas.lifecycle import EpisodeStatus

if TYPE_CHECKING:
    from pipeline.episodes.claimed import Claimed, Extracted, Outcome

# How long a finished answer may wait for others to share its commit: a transaction per
# answer costs more CPU than the rest of an episode when answers come back fast. The next
# batch is claimed only after the commit, so a longer wait starves the pool: 0.1 s cut the
# worker's CPU per episode by a fifth at 0.4 s (bench/README.md) but left the endpoint idle
# between batches (test_llm_in_flight.py); claiming while the answers gather would allow it.
GATHER_S = 0.02

_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def model_pool(size: int) -> ThreadPoolExecutor:
    """This process's pool for model calls (a forked child builds its own)."""
    pid = os.getpid()
    pool = _pools.get(pid)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(pid)
            if pool is None:
                pool = _pools[pid] = ThreadPoolExecutor(size, thread_name_prefix="sgam-llm")
    return pool


def run_in_flight(
    store: Store,
    feed: Callable[[int], Sequence[Claimed]],
    prepare: Callable[[Sequence[Claimed]], dict[EpisodeKey, Callable[[], Extracted]]],
    commit: Callable[[list[Claimed], dict[EpisodeKey, Extracted]], dict[EpisodeKey, Outcome]],
) -> dict[EpisodeKey, Outcome]:
    """Keep the pool busy with claimed episodes until `feed` has no more: `feed(room)` claims
    up to `room` episodes (at most a batch), `prepare(batch)` reads what the batch's calls need
    and returns each episode's work, both on this thread (they read the database); the work
    runs on the pool, and `commit` finishes each group of episodes whose answers are in, on
    this thread, while the lease of the others is kept.

    A batch is claimed ahead as soon as there is room for it beside the calls the pool runs
    (`SGAM_LLM_CONCURRENCY`) and one batch more: its calls wait in the pool's queue and start
    the moment a call ends, so the pool never waits for a commit, a claim or a context read.
    A crash strands at most that many episodes, whose leases the sweeper takes back."""
    settings = store.settings
    pool = model_pool(settings.llm_concurrency)
    batch = settings.batch_for(model=True)
    room_for = settings.llm_concurrency + batch
    keeper = LeaseKeeper(store, {})
    futures: dict[Future[Extracted], Claimed] = {}
    waiting: set[Future[Extracted]] = set()
    outcomes: dict[EpisodeKey, Outcome] = {}
    feeding = True

    def top_up() -> None:
        nonlocal feeding
        while feeding and room_for - len(waiting) >= min(batch, settings.llm_concurrency):
            claimed = list(feed(min(batch, room_for - len(waiting))))
            if not claimed:
                feeding = False
                return
            keeper.hold({item.key: item.attempt for item in claimed})
            works = prepare(claimed)
            for item in claimed:
                future = pool.submit(_returning_errors(works[item.key]))
                futures[future] = item
                waiting.add(future)

    with keeper:
        try:
            top_up()
            while waiting:
                done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                if waiting:  # the answers that follow within moments share the commit
                    more, waiting = wait(waiting, timeout=GATHER_S)
                    done |= more
                pairs = [(futures.pop(future), future) for future in done]
                finished = [item for item, _ in pairs]
                results = {item.key: future.result() for item, future in pairs}
                keeper.release(results)
                outcomes |= commit(finished, results)
                top_up()
        finally:
            for future in futures:
                future.cancel()  # a commit failed: the unsent calls are the sweeper's again
    return outcomes


def _returning_errors(work: Callable[[], Extracted]) -> Callable[[], Extracted]:
    """`work`, which returns its error instead of raising it: the commit records it on the
    episode, which stays retryable."""

    def run() -> Extracted:
        try:
            return work()
        except Exception as error:
            return error

    return run


class LeaseKeeper:
    """Renews the lease of the episodes a claim still waits on, every third of a lease."""

    def __init__(self, store: Store, held: dict[EpisodeKey, int]) -> None:
        self._store = store
        self._held = dict(held)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._interval = store.settings.episode_lease_s / 3
        self._thread = threading.Thread(target=self._run, name="sgam-lease", daemon=True)
        self.renewals = 0

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def hold(self, held: dict[EpisodeKey, int]) -> None:
        """Keep the lease of these episodes (key: the claim's attempt) too."""
        with self._lock:
            self._held |= held

    def release(self, keys: Sequence[EpisodeKey] | dict[EpisodeKey, Any]) -> None:
        with self._lock:
            for key in keys:
                self._held.pop(key, None)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                held = [(*key, attempt) for key, attempt in self._held.items()]
            if not held:
                continue
            try:
                self._store.run(partial(renew, held=held))
                self.renewals += 1
            except Exception:  # the store is down: try again next time; the lease may lapse
                continue


def renew(unit: Unit, *, held: list[tuple[str, str, int]]) -> int:
    """Extend the lease of the episodes this claim (tenant, id, attempt) still holds."""
    lease_until = unit.clock() + timedelta(seconds=unit.settings.episode_lease_s)
    result = unit.session.execute(
        update(EpisodeRow)
        .where(
            tuple_(EpisodeRow.tenant_id, EpisodeRow.episode_id, EpisodeRow.attempts).in_(held),
            EpisodeRow.status == EpisodeStatus.PROCESSING,
        )
        .values(lease_until=lease_until)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0))
