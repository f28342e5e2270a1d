"""A token bucket per API key, kept in Redis so that every server process shares it.

Each key may send `SGAM_API_RATE_BURST` requests at once and `SGAM_API_RATE_PER_S` a second
after that; each client address has a bucket of the same size for keys that were refused
(unknown, wrong, revoked, expired), checked before a key is looked up. Past that budget only a
key the service accepted within KNOWN_KEY_SECONDS is still looked up (its fingerprint is kept
in Redis): clients guessing keys from behind the same NAT or proxy as real users do not lock
those users out, and an unknown key costs one Redis read, no database lookup. One Lua script
refills and takes a token atomically, on Redis's own clock, so processes on hosts with skewed
clocks agree. A Redis that cannot be reached refuses the request (503): the limit is not silently
lifted. Without SGAM_REDIS_URL the buckets are kept in each server process
(`local_buckets.py`): with `--workers N` a key may send N times its budget.
"""

from __future__ import annotations

import math

from redis.asyncio import Redis
from redis.exceptions import RedisError

from pipeline.access.revocations import recheck_marker
from pipeline.api.local_buckets import LocalBuckets
from pipeline.api.problems import RateLimited
from pipeline.errors import StoreUnavailable
from pipeline.settings import Settings

# KEYS[1]: the bucket, KEYS[2] (optional): a key's revocation marker; ARGV: rate per second,
# burst, tokens to take (0: only look). Returns {allowed, seconds to wait, marker set}.
_TAKE = """
local recheck = 0
if #KEYS > 1 and redis.call('EXISTS', KEYS[2]) == 1 then
  recheck = 1
end
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed, wait = 0, (1 - tokens) / rate
if tokens >= 1 then
  tokens, allowed, wait = tokens - cost, 1, 0
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait), recheck}
"""


# How long a key the service accepted still passes an address whose refused-key budget is spent.
KNOWN_KEY_SECONDS = 7 * 24 * 3600


class RateLimiter:
    def __init__(self, settings: Settings) -> None:
        self.rate = settings.api_rate_per_s
        self.burst = settings.api_rate_burst
        self.redis: Redis | None = None
        self.local: LocalBuckets | None = None
        if self.enabled and settings.redis_url is None:
            self.local = LocalBuckets(self.rate, self.burst)
        elif self.enabled and settings.redis_url is not None:
            self.redis = Redis.from_url(
                settings.redis_url, socket_timeout=2, socket_connect_timeout=2
            )
            self._take = self.redis.register_script(_TAKE)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    @property
    def shared(self) -> bool:
        """Whether the buckets are in Redis (shared by every process) rather than here."""
        return self.redis is not None

    async def take(self, key_id: str) -> bool:
        """Spend one of the key's tokens, or raise RateLimited with the wait in seconds.
        True when the key was revoked lately (`pipeline.access.revocations`), in the same
        round trip: a copy of it kept in memory must be looked up again."""
        return await self._spend(f"sgam:rate:{key_id}", 1, "this key", recheck_marker(key_id))

    async def check_address(self, address: str) -> None:
        """RateLimited when `address` has used up its budget of refused keys: an unknown or
        wrong key costs a database lookup, so a client guessing keys is slowed down before
        it gets one."""
        await self._spend(f"sgam:rate:refused:{address}", 0, "this address's refused keys")

    async def refused(self, address: str) -> None:
        """Charge `address` for a key that was refused."""
        await self._spend(f"sgam:rate:refused:{address}", 1, "this address's refused keys")

    async def vouch(self, fingerprint: str) -> None:
        """Remember that the key with this fingerprint was accepted."""
        if self.local is not None:
            self.local.mark(fingerprint, KNOWN_KEY_SECONDS)
        await self._call("set", f"sgam:known:{fingerprint}", 1, ex=KNOWN_KEY_SECONDS)

    async def known(self, fingerprint: str) -> bool:
        """Whether the key with this fingerprint was accepted lately."""
        if self.local is not None:
            return self.local.marked(fingerprint)
        return bool(await self._call("exists", f"sgam:known:{fingerprint}"))

    async def disown(self, fingerprint: str) -> None:
        """The key was refused (revoked, expired): it no longer passes a spent budget."""
        if self.local is not None:
            self.local.unmark(fingerprint)
        await self._call("delete", f"sgam:known:{fingerprint}")

    async def _call(self, command: str, *args: object, **options: object) -> object:
        if self.redis is None:
            return None
        try:
            return await getattr(self.redis, command)(*args, **options)
        except RedisError as error:
            raise StoreUnavailable(
                f"the rate limiter's Redis is unavailable ({type(error).__name__})"
            ) from error

    async def _spend(self, bucket: str, cost: int, whose: str, marker: str | None = None) -> bool:
        recheck = 0
        if self.local is not None:
            allowed, wait = self.local.spend(bucket, cost)
        elif self.redis is None:
            return False
        else:
            keys = [bucket] if marker is None else [bucket, marker]
            try:
                allowed, wait, recheck = await self._take(
                    keys=keys, args=[self.rate, self.burst, cost]
                )
            except RedisError as error:
                raise StoreUnavailable(
                    f"the rate limiter's Redis is unavailable ({type(error).__name__})"
                ) from error
        if not int(allowed):
            seconds = max(1, math.ceil(float(wait)))
            raise RateLimited(
                f"{whose} may send {self.rate:g} requests a second (bursts of {self.burst}); "
                f"retry in {seconds} s",
                retry_after=seconds,
            )
        return bool(int(recheck))

    async def ping(self) -> bool:
        if self.redis is None:
            return True
        try:
            return bool(await self.redis.ping())
        except RedisError:
            return False

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
