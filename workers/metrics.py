"""The worker's Prometheus endpoint (`sgam worker --metrics-port`): the main process serves
the sum of what every pool process counted (`pipeline.episodes.lane_metrics`), through
prometheus_client's multiprocess mode; a pool process that exits is marked dead so its live
gauges stop counting (its counters are kept)."""

from __future__ import annotations

import os
from typing import Any

from celery.signals import worker_init, worker_process_shutdown
from prometheus_client import CollectorRegistry, multiprocess, start_http_server


def serve_metrics(port: int) -> None:
    def start(**_: Any) -> None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        start_http_server(port, registry=registry)

    def mark_dead(**_: Any) -> None:
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    worker_init.connect(start, weak=False)
    worker_process_shutdown.connect(mark_dead, weak=False)
