"""Waking workers. The episode row, committed first, is the truth; a message on the broker is
only a wake-up that may be lost, which the sweeper makes good (`states.sweep`).

The pipeline names the tasks but does not import `workers` (the dependency points the other
way): it sends by name through a producer-only Celery app.

When tracing is on, each wake-up carries the trace of the intake that sent it (a `send` span's
W3C traceparent in the message header TRACE_HEADER), and the worker continues that trace. The
episodes of one message always come from one intake — one request, one command, one sweep —
so a message belongs to exactly one trace; a retry of the task keeps the header.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from pipeline.errors import StoreUnavailable
from pipeline.observe import conventions as names
from pipeline.observe import tracing

if TYPE_CHECKING:
    from celery import Celery

EXTRACT_TASK = "sgam.extract_episodes"
SWEEP_TASK = "sgam.sweep"
CONSOLIDATE_TASK = "sgam.consolidate"
EXTRACT_QUEUE = "extract"
CONSOLIDATE_QUEUE = "consolidate"
TRACE_HEADER = "sgam_traceparent"

EpisodeKey = tuple[str, str]  # (tenant_id, episode_id)


@cache
def _producer(broker_url: str) -> Celery:
    from celery import Celery

    app = Celery("sgam-producer", broker=broker_url, set_as_current=False)
    # A producer must not hang on a broker that is down: a few quick tries, then the sweeper.
    app.conf.broker_connection_timeout = 2
    app.conf.task_publish_retry_policy = {
        "max_retries": 2,
        "interval_start": 0,
        "interval_step": 0.2,
        "interval_max": 0.5,
    }
    return app


def check_broker(broker_url: str) -> None:
    """StoreUnavailable, naming why, when the broker cannot be resolved or refuses: a worker
    started on it would only log reconnection attempts."""
    producer = _producer(broker_url)
    try:
        with producer.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
    except Exception as error:  # kombu raises OperationalError and socket errors alike
        reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        raise StoreUnavailable(f"the broker is unavailable ({reason})") from error


def send_extract(broker_url: str, keys: Sequence[EpisodeKey], batch_size: int) -> int:
    """Send one wake-up per batch of episodes; returns how many messages went out. A broker
    that cannot be reached raises StoreUnavailable — the episodes stay `pending` and the
    sweeper queues them again."""
    producer = _producer(broker_url)
    sent = 0
    try:
        for start in range(0, len(keys), batch_size):
            batch: list[Any] = [list(key) for key in keys[start : start + batch_size]]
            with tracing.span(
                f"send {EXTRACT_TASK}",
                kind="producer",
                attributes={
                    names.MESSAGING_SYSTEM: "celery",
                    names.MESSAGING_OPERATION_TYPE: "send",
                    names.MESSAGING_DESTINATION_NAME: EXTRACT_QUEUE,
                    names.SGAM_EPISODE_COUNT: len(batch),
                },
            ):
                traceparent = tracing.current_traceparent()
                headers = {TRACE_HEADER: traceparent} if traceparent is not None else None
                producer.send_task(
                    EXTRACT_TASK,
                    args=[batch],
                    queue=EXTRACT_QUEUE,
                    headers=headers,
                    # Celery's own repr of the arguments (for its logs) took a sixth of the
                    # intake's CPU, and would put every episode's id in the message headers.
                    argsrepr=f"[{len(batch)} episodes]",
                    kwargsrepr="{}",
                )
            sent += 1
    except Exception as error:  # kombu raises OperationalError and socket errors alike
        raise StoreUnavailable(f"the broker is unavailable ({type(error).__name__})") from error
    return sent
