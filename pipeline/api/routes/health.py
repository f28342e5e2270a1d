"""Probes and metrics, without a key: /healthz (the process answers), /readyz (the database is
reachable and migrated; the broker and the rate limiter's Redis answer when configured) and
/metrics (Prometheus text)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from pipeline.api import answers
from pipeline.api.conventions import store_of
from pipeline.db.store import Store
from pipeline.errors import SgamError

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up", response_model=answers.Health)
async def healthz() -> dict[str, Any]:
    return {"status": "ok", "checks": {}}


@router.get(
    "/readyz",
    summary="The database (and, when configured, the broker and Redis) can be used",
    response_model=answers.Health,
    responses={503: {"model": answers.Health}},
)
async def readyz(request: Request, store: Annotated[Store, Depends(store_of)]) -> JSONResponse:
    checks = {"database": await run_in_threadpool(_database, store)}
    broker = store.settings.broker_url
    if broker is not None:
        checks["broker"] = await run_in_threadpool(_redis, broker)
    limiter = request.app.state.limiter
    if limiter.shared:
        checks["rate_limit_redis"] = "ok" if await limiter.ping() else "unreachable"
    ready = all(state == "ok" for state in checks.values())
    body = {"status": "ok" if ready else "unavailable", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


def _database(store: Store) -> str:
    try:
        return "ok" if store.is_current() else "schema not current: run `sgam db upgrade`"
    except SgamError as error:
        return type(error).__name__


def _redis(url: str) -> str:
    if not url.startswith(("redis://", "rediss://")):
        return "ok"  # only Redis brokers are probed
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        return "ok" if client.ping() else "unreachable"
    except redis.RedisError:
        return "unreachable"
    finally:
        client.close()


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    body = await run_in_threadpool(request.app.state.metrics.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
