"""The worker's Prometheus endpoint (`sgam worker --metrics-port`): the main process serves
the sum of what every pool process counted (`pipeline.episodes.lane_metrics`), through
prometheus_client's multiprocess mode, and the gauges read when scraped (the buffer's size,
the broker's queue depth: `pipeline.episodes.gauges`); a pool process that exits is marked
dead so its live gauges stop counting (its counters are kept)."""

from __future__ import annotations

import os
from typing import Any

from celery.signals import worker_init, worker_process_shutdown
from prometheus_client import CollectorRegistry, multiprocess, start_http_server

from pipeline.db.store import open_store
from pipeline.episodes.gauges import StageGauges
from pipeline.settings import Settings


def serve_metrics(settings: Settings, port: int) -> None:
    def start(**_: Any) -> None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        store = open_store(settings)
        # The pool forks from this process: a child must not share the scrape's connections.
        os.register_at_fork(after_in_child=lambda: store.engine.dispose(close=False))
        registry.register(StageGauges(store))
        start_http_server(port, registry=registry)

    def mark_dead(**_: Any) -> None:
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    worker_init.connect(start, weak=False)
    worker_process_shutdown.connect(mark_dead, weak=False)
