"""A revocation announced to every server process before it commits, so that a key a process
trusts from memory (`pipeline.api.access.KeyCache`) is refused on its very next request.

Revoking sets `sgam:recheck:<key id>` in the service's Redis (SGAM_REDIS_URL) inside the
revoking transaction: the token bucket's script that every request runs anyway sees it and
sends the key back to the database, at no extra round trip. The marker outlives any cached
copy (a process trusts a key at most SGAM_API_KEY_CACHE_S ≤ 60 s); a marker left by a revocation
that then failed only costs lookups until it expires. A Redis that cannot be reached fails the
revocation, before anything is written, rather than leave a revoked key trusted. Without
SGAM_REDIS_URL there is no marker, and the server trusts no key from memory.
"""

from __future__ import annotations

from pipeline.errors import StoreUnavailable
from pipeline.settings import Settings

MARKER_SECONDS = 65  # longer than the longest SGAM_API_KEY_CACHE_S (60 s)


def recheck_marker(key_id: str) -> str:
    return f"sgam:recheck:{key_id}"


def announce(settings: Settings, key_id: str) -> None:
    if settings.redis_url is None:
        return
    import redis  # here: every importer of the key functions would pay for it at start
    from redis.exceptions import RedisError

    client = redis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.set(recheck_marker(key_id), 1, ex=MARKER_SECONDS)
    except RedisError as error:
        raise StoreUnavailable(
            f"the revocation cannot reach the service's Redis ({type(error).__name__}); "
            "nothing was revoked"
        ) from error
    finally:
        client.close()
