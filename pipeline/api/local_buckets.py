"""The rate limiter's buckets kept in this process, for a service without Redis.

The same token bucket as the Lua script in `ratelimit.py`, on this process's monotonic clock:
with `sgam serve --workers N` each process keeps its own, so a key may send N times the budget.
Idle buckets are dropped once they would be full again, so a stream of new addresses cannot
grow the table without bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Drop the idle, refilled buckets after this many writes.
PRUNE_EVERY = 1024


class LocalBuckets:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}  # bucket -> (tokens, at)
        self.marks: dict[str, float] = {}  # name -> when it expires
        self.writes = 0

    def spend(self, bucket: str, cost: int) -> tuple[bool, float]:
        """Refill `bucket`, then take `cost` tokens if one is there: (allowed, seconds to wait)."""
        now = self.clock()
        tokens, at = self.buckets.get(bucket, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
        allowed, wait = tokens >= 1, 0.0
        if allowed:
            tokens -= cost
        else:
            wait = (1 - tokens) / self.rate
        self.buckets[bucket] = (tokens, now)
        self._prune(now)
        return allowed, wait

    def mark(self, name: str, seconds: float) -> None:
        self.marks[name] = self.clock() + seconds

    def marked(self, name: str) -> bool:
        expires = self.marks.get(name)
        return expires is not None and expires > self.clock()

    def unmark(self, name: str) -> None:
        self.marks.pop(name, None)

    def _prune(self, now: float) -> None:
        self.writes += 1
        if self.writes % PRUNE_EVERY:
            return
        full = self.burst / self.rate
        self.buckets = {b: (t, at) for b, (t, at) in self.buckets.items() if now - at < full}
        self.marks = {name: expires for name, expires in self.marks.items() if expires > now}
