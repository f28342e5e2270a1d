"""What each pytest-xdist worker keeps of its own: a PostgreSQL database and two Redis dbs.

Run alone (no xdist), the suite uses exactly the URLs SGAM_TEST_POSTGRES_URL,
SGAM_TEST_REDIS_URL and SGAM_TEST_API_REDIS_URL name. Under `pytest -n N`, worker `gw0`
keeps them; worker `gwK` takes `<database>_gwK` on the same server, and the next two Redis
db numbers of 1..15 that neither given URL names (db 0, every Redis client's default, is
never flushed by the suite). Each database number thus has one owner,
and every test that empties "its" Redis db empties only its worker's.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

POSTGRES_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_test"
REDIS_DEFAULT = "redis://127.0.0.1:6379/7"
API_REDIS_DEFAULT = "redis://127.0.0.1:6379/11"
REDIS_DBS = range(1, 16)  # db 0 is left to whatever else uses the server


def worker_index() -> int | None:
    """The xdist worker's number (`gw3` → 3), or None outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name.removeprefix("gw")) if name.startswith("gw") else None


def _redis_db(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path else 0


def _with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def redis_urls() -> tuple[str, str]:
    """(the Celery broker's URL, the HTTP server's rate-limit URL) of this worker."""
    broker = os.environ.get("SGAM_TEST_REDIS_URL", REDIS_DEFAULT)
    api = os.environ.get("SGAM_TEST_API_REDIS_URL", API_REDIS_DEFAULT)
    index = worker_index()
    if not index:
        return broker, api
    given = {_redis_db(broker), _redis_db(api)}
    free = [db for db in REDIS_DBS if db not in given]
    first = 2 * (index - 1)
    if first + 1 >= len(free):
        raise RuntimeError(
            f"xdist worker gw{index} has no Redis db of its own: {len(free)} free dbs of 1..15 "
            f"beside {sorted(given)} give at most {1 + len(free) // 2} workers"
        )
    return _with_db(broker, free[first]), _with_db(api, free[first + 1])


def postgres_url() -> str:
    """The test database of this worker: `<database>_gwK` for xdist's worker K > 0."""
    url = os.environ.get("SGAM_TEST_POSTGRES_URL", POSTGRES_DEFAULT)
    index = worker_index()
    if not index:
        return url
    from sqlalchemy import make_url

    parsed = make_url(url)
    return parsed.set(database=f"{parsed.database}_gw{index}").render_as_string(hide_password=False)
