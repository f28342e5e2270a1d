"""One request and token budget per LLM endpoint, shared by every process that calls it.

`SGAM_LLM_RPM` and `SGAM_LLM_TPM` (unset: unlimited) are token buckets holding one second's
worth (at least one request, at least one answer's tokens), refilled continuously. A 429 pauses
the endpoint for its `Retry-After`: every caller waits out the pause instead of retrying into
it. With a broker the buckets and the pause live in Redis, so all workers share them (one Lua
script on Redis's clock, atomic); in inline mode they live in the process.

A request is charged its estimated prompt tokens before it is sent; once the answer's usage is
known the difference is charged (`settle`), so a bucket may go below zero and later requests
wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

import redis
from redis.exceptions import RedisError

from pipeline.settings import Settings

# KEYS: the buckets' hash, the pause key. ARGV: requests/min, tokens/min, this request's
# tokens (0 rpm/tpm: that bucket is off). Returns the seconds to wait, "0" when granted.
_TAKE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local paused = tonumber(redis.call('GET', KEYS[2]) or '0')
if paused > now then return tostring(paused - now) end
local rpm, tpm, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if rpm == 0 and tpm == 0 then return '0' end
local state = redis.call('HMGET', KEYS[1], 'requests', 'tokens', 'at')
local at = tonumber(state[3]) or now
local elapsed = math.max(0, now - at)
local req_burst, tok_burst = math.max(1, rpm / 60), math.max(cost, tpm / 60)
local requests = math.min(req_burst, (tonumber(state[1]) or req_burst) + elapsed * rpm / 60)
local tokens = math.min(tok_burst, (tonumber(state[2]) or tok_burst) + elapsed * tpm / 60)
local wait = 0
if rpm > 0 and requests < 1 then wait = (1 - requests) * 60 / rpm end
if tpm > 0 and tokens < cost then wait = math.max(wait, (cost - tokens) * 60 / tpm) end
if wait == 0 then requests, tokens = requests - 1, tokens - cost end
redis.call('HSET', KEYS[1], 'requests', tostring(requests), 'tokens', tostring(tokens),
  'at', tostring(now))
redis.call('EXPIRE', KEYS[1], 120)
return tostring(wait)
"""
# KEYS: the buckets' hash. ARGV: tokens to charge (negative: a refund).
_SETTLE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBYFLOAT', KEYS[1], 'tokens', -tonumber(ARGV[1]))
end
return 1
"""
# KEYS: the pause key. ARGV: seconds. A pause only ever gets longer.
_PAUSE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local until_ = now + tonumber(ARGV[1])
if until_ > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], tostring(until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return 1
"""


class BudgetUnavailable(Exception):
    """The shared budget cannot be read (Redis is down): the request is not sent."""


class Budget(Protocol):
    def take(self, tokens: int) -> float:
        """Charge one request of `tokens` and return 0, or return the seconds to wait."""

    def settle(self, tokens: int) -> None:
        """Charge `tokens` more (negative: refund) once the answer's usage is known."""

    def pause(self, seconds: float) -> None:
        """Nobody sends to this endpoint for `seconds` (the server said 429)."""


class LocalBudget:
    """The buckets in this process (inline mode), guarded by a lock for its threads."""

    def __init__(
        self, rpm: float | None, tpm: float | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rpm, self._tpm = rpm or 0.0, tpm or 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._requests, self._tokens = max(1.0, self._rpm / 60), self._tpm / 60
        self._at = clock()
        self._paused_until = 0.0

    def take(self, tokens: int) -> float:
        with self._lock:
            now = self._clock()
            if self._paused_until > now:
                return self._paused_until - now
            if not (self._rpm or self._tpm):
                return 0.0
            elapsed, self._at = max(0.0, now - self._at), now
            refilled = self._requests + elapsed * self._rpm / 60
            self._requests = min(max(1.0, self._rpm / 60), refilled)
            burst = max(float(tokens), self._tpm / 60)
            self._tokens = min(burst, self._tokens + elapsed * self._tpm / 60)
            wait = 0.0
            if self._rpm and self._requests < 1:
                wait = (1 - self._requests) * 60 / self._rpm
            if self._tpm and self._tokens < tokens:
                wait = max(wait, (tokens - self._tokens) * 60 / self._tpm)
            if wait == 0.0:
                self._requests -= 1
                self._tokens -= tokens
            return wait

    def settle(self, tokens: int) -> None:
        with self._lock:
            self._tokens -= tokens

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + seconds)


class RedisBudget:
    """The buckets and the pause in Redis, shared by every worker calling `endpoint`."""

    def __init__(self, redis_url: str, endpoint: str, rpm: float | None, tpm: float | None) -> None:
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        self._keys = [f"sgam:llm:budget:{endpoint}", f"sgam:llm:pause:{endpoint}"]
        self._limits = [rpm or 0, tpm or 0]
        self._take = self._redis.register_script(_TAKE)
        self._settle = self._redis.register_script(_SETTLE)
        self._pause = self._redis.register_script(_PAUSE)

    def take(self, tokens: int) -> float:
        return float(self._call(self._take, self._keys, [*self._limits, tokens]))

    def settle(self, tokens: int) -> None:
        if tokens and self._limits[1]:
            self._call(self._settle, self._keys[:1], [tokens])

    def pause(self, seconds: float) -> None:
        self._call(self._pause, self._keys[1:], [seconds])

    @staticmethod
    def _call(script: redis.commands.core.Script, keys: list[str], args: list[float]) -> bytes:
        try:
            result: bytes = script(keys=keys, args=args)
        except RedisError as error:
            raise BudgetUnavailable(
                f"the LLM budget's Redis is unavailable ({type(error).__name__})"
            ) from error
        return result

    def close(self) -> None:
        self._redis.close()


def budget_for(settings: Settings) -> LocalBudget | RedisBudget:
    """Redis when workers share the endpoint (a broker is configured), else this process.
    The Redis is SGAM_REDIS_URL's, else a Redis broker's own; a broker of another kind without
    SGAM_REDIS_URL leaves each worker process its own budget."""
    rpm, tpm = settings.llm_rpm, settings.llm_tpm
    broker = settings.broker_url
    shared = settings.redis_url or (broker if broker and broker.startswith("redis") else None)
    if broker is None or shared is None:
        return LocalBudget(rpm, tpm)
    assert settings.llm_base_url is not None
    return RedisBudget(shared, settings.llm_base_url, rpm, tpm)
