"""The Celery app: queues, acknowledgement, time limits and the beat schedule.

Every setting that differs from Celery's default says why. Configuration comes from the same
SGAM_* settings as everything else; SGAM_BROKER_URL must be set (unset means inline mode, in
which no worker runs).
"""

from __future__ import annotations

from celery import Celery
from celery.schedules import crontab
from celery.signals import worker_init, worker_process_shutdown, worker_shutdown

from pipeline.episodes.dispatch import (
    CONSOLIDATE_QUEUE,
    CONSOLIDATE_TASK,
    EXTRACT_QUEUE,
    EXTRACT_TASK,
    SWEEP_TASK,
)
from pipeline.errors import InvalidInput
from pipeline.observe import tracing
from pipeline.observe.tracing import setup_tracing
from pipeline.settings import load_settings
from workers.logs import install as install_logging

settings = load_settings()
if settings.broker_url is None:
    raise InvalidInput("SGAM_BROKER_URL", "is not set: workers need a broker (redis://...)")
install_logging(settings.log_format)
# Before the pool forks: each child starts its own span exporter thread (the SDK re-creates
# it after a fork), and sends what it has batched when it stops.
if setup_tracing(settings, "sgam-worker"):
    worker_process_shutdown.connect(lambda **_: tracing.shutdown(), weak=False)
    worker_shutdown.connect(lambda **_: tracing.shutdown(), weak=False)


def _compile_rules(**_: object) -> None:
    """The catalogue's rules compiled before the pool forks, once: each child would otherwise
    compile them (about a quarter of a second of CPU) on its first episodes."""
    from pipeline.catalog.loader import load_catalog
    from pipeline.extract.backends import rules_for

    rules_for(load_catalog(settings.catalog_path, settings.catalog), settings.dates_day_first)


worker_init.connect(_compile_rules, weak=False)


app = Celery("sgam", broker=settings.broker_url, include=["workers.tasks"])
minute, hour, day_of_month, month_of_year, day_of_week = settings.consolidate_cron.split()
app.conf.update(
    # Tasks are idempotent per episode, so a message is acknowledged only after its work is
    # committed: a worker that dies mid-task leaves it to be delivered again.
    task_acks_late=True,
    # ...and a child process killed by the OS (SIGKILL, OOM) hands its message back at once.
    task_reject_on_worker_lost=True,
    # One unacknowledged message per process: a crash strands at most one batch.
    worker_prefetch_multiplier=1,
    # Results are written to the database; nothing reads Celery's result backend.
    task_ignore_result=True,
    task_time_limit=settings.task_time_limit_s,
    task_soft_time_limit=max(1, settings.task_time_limit_s - 10),
    task_default_queue=EXTRACT_QUEUE,
    task_routes={
        EXTRACT_TASK: {"queue": EXTRACT_QUEUE},
        SWEEP_TASK: {"queue": CONSOLIDATE_QUEUE},
        CONSOLIDATE_TASK: {"queue": CONSOLIDATE_QUEUE},
    },
    # Redis redelivers an unacknowledged message after this; the sweeper is faster.
    broker_transport_options={"visibility_timeout": settings.episode_lease_s * 2},
    broker_connection_retry_on_startup=True,
    # Ride out a broker outage of any length (Celery gives up after 100 attempts by default):
    # the episodes wait in the database, and the sweeper re-queues what the broker lost.
    broker_connection_max_retries=None,
    enable_utc=True,
    timezone="UTC",
    beat_schedule={
        # The broker may lose messages (Redis here keeps nothing on disk): re-queue strays.
        "sweep": {"task": SWEEP_TASK, "schedule": float(settings.sweep_interval_s)},
        "consolidate": {
            "task": CONSOLIDATE_TASK,
            "schedule": crontab(
                minute=minute,
                hour=hour,
                day_of_month=day_of_month,
                month_of_year=month_of_year,
                day_of_week=day_of_week,
            ),
        },
    },
)

if settings.worker_metrics_port is not None:
    from workers.metrics import serve_metrics

    serve_metrics(settings, settings.worker_metrics_port)
