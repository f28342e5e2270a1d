"""Prometheus metrics at /metrics: requests and their latency per route, method and status;
the extraction lane's counters of what this service processed itself (the hot path, and every
episode in inline mode: `pipeline.episodes.lane_metrics`); episodes by state, the buffer's size
and the broker's queue depth, read when scraped (`pipeline.episodes.gauges`).

With several server processes (`sgam serve --workers N`) the counters are shared through
PROMETHEUS_MULTIPROC_DIR, which `sgam serve` sets up; the gauges come from the database and
the broker, so any process reports them alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.api.traces import template
from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.episodes import lane_metrics
from pipeline.episodes.gauges import StageGauges
from schemas.lifecycle import EpisodeStatus

# Seconds; the service's targets (10, 15 and 40 ms) fall on bucket edges.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.04, 0.1, 0.25, 0.5, 1, 2.5, 10)


class Metrics:
    def __init__(self, store: Store) -> None:
        shared = "PROMETHEUS_MULTIPROC_DIR" in os.environ
        self.registry = CollectorRegistry()
        own = None if shared else self.registry
        labels = ("method", "route", "status")
        self.requests = Counter(
            "sgam_http_requests", "HTTP requests answered", labels, registry=own
        )
        self.latency = Histogram(
            "sgam_http_request_duration_seconds",
            "Time to answer an HTTP request",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        if shared:
            MultiProcessCollector(self.registry)  # type: ignore[no-untyped-call]
        else:
            for counter in lane_metrics.COUNTERS:
                self.registry.register(counter)
        self.registry.register(EpisodeStates(store))
        self.registry.register(StageGauges(store))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class EpisodeStates(Collector):
    """Episodes by state, from the database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        episodes = GaugeMetricFamily("sgam_episodes", "Episodes by state", labels=["state"])
        statement = select(EpisodeRow.status, func.count()).group_by(EpisodeRow.status)
        with self.store.reading() as connection:
            counts = dict(connection.execute(statement).tuples().all())
        for state in EpisodeStatus:
            episodes.add_metric([state.value], counts.get(state.value, 0))
        yield episodes


class Measure:
    """ASGI middleware: count and time every request by its route's template (never the raw
    path, which would make a label per subject)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, root = time.perf_counter(), scope.get("root_path", "")
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            elapsed = time.perf_counter() - started
            route = template(scope, self.routes, root) or "unmatched"
            self.metrics.observe(scope["method"], route, status, elapsed)
