"""Prometheus gauges read when scraped, served by the HTTP API's /metrics and by a worker's
(`sgam worker --metrics-port`): the recurrence buffer's size and the broker's queue depth.

Both are cheap whatever the store holds: the buffer's count reads only the partial index of
open candidates, and the queues are one LLEN each.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError
from sqlalchemy import func, select

from pipeline.db.models import CandidateRow
from pipeline.db.store import Store
from pipeline.episodes.dispatch import CONSOLIDATE_QUEUE, EXTRACT_QUEUE
from schemas.lifecycle import CandidateStatus

QUEUES = (EXTRACT_QUEUE, CONSOLIDATE_QUEUE)


class StageGauges(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        buffered = GaugeMetricFamily(
            "sgam_buffer_candidates", "Candidates waiting in the recurrence buffer"
        )
        # The predicate of the open-candidate index (`uq_candidates_open_value`): an
        # index-only count, not a scan of every candidate ever buffered.
        statement = select(func.count()).where(
            CandidateRow.status == CandidateStatus.BUFFERED.value,
            CandidateRow.forgotten_at.is_(None),
        )
        with self.store.reading() as connection:
            buffered.add_metric([], connection.execute(statement).scalar_one())
        yield buffered
        broker = self.store.settings.broker_url
        if broker is not None and broker.startswith(("redis://", "rediss://")):
            depth = GaugeMetricFamily(
                "sgam_queue_depth", "Wake-ups waiting on the broker", labels=["queue"]
            )
            client = _broker(broker)
            try:
                for queue in QUEUES:
                    depth.add_metric([queue], int(client.llen(queue)))
            except RedisError:
                return  # a broker that is down has no depth to report; /readyz says so
            yield depth


@cache
def _broker(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
