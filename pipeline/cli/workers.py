"""`sgam worker`, `beat` and `sweep`: thin wrappers over Celery's own worker and beat, which
run `workers.app` (SGAM_BROKER_URL must be set)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from pipeline.cli import output
from pipeline.cli.options import json_output, opened_store
from pipeline.errors import SettingError


def _celery(*args: str) -> None:
    from pipeline.settings import load_settings

    settings = load_settings()
    if settings.broker_url is None:
        raise SettingError("SGAM_BROKER_URL", "is not set: workers need a broker (redis://...)")
    # Refuse here, as `sgam serve` does, rather than report ready and fail every task: a
    # wrong URL is exit 2, a store that cannot be reached 5, an outdated schema 2.
    with opened_store():
        pass
    from pipeline.episodes.dispatch import check_broker

    check_broker(settings.broker_url)  # resolvable and answering, or exit 5 saying why
    # Celery's start-up banner is for people; in JSON every line on the streams is a record.
    quiet = ["--quiet"] if settings.log_format == "json" else []
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.app", *quiet, *args])


@click.command()
@click.option(
    "--queues",
    default="extract,consolidate",
    show_default=True,
    help="Queues to take tasks from, comma-separated.",
)
@click.option("--concurrency", type=click.IntRange(1, 64), help="Processes (default: cores).")
@click.option("--loglevel", default="info", show_default=True, help="Celery's log level.")
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve the worker's Prometheus metrics (all its processes summed) on this port.",
)
def worker(queues: str, concurrency: int | None, loglevel: str, metrics_port: int | None) -> None:
    """Start a Celery worker (celery -A workers.app worker ...)."""
    # Gossip and mingle (worker-to-worker events) are not used here, and their channels are
    # what Celery fails to close when Redis restarts (kombu: 'NoneType' ... 'hostname'), which
    # ended the worker instead of reconnecting.
    args = ["worker", "--queues", queues, "--loglevel", loglevel, "--without-gossip"]
    args += ["--without-mingle"]
    if concurrency is not None:
        args += ["--concurrency", str(concurrency)]
    if metrics_port is not None:
        # Each pool process writes its metrics to files in a directory of this worker's own
        # (emptied at every start, as prometheus_client's multiprocess mode requires); the
        # main process serves their sum.
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(
            prefix="sgam-worker-metrics-"
        )
        for stale in Path(directory).glob("*.db"):
            stale.unlink()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        os.environ["SGAM_WORKER_METRICS_PORT"] = str(metrics_port)
    _celery(*args)


@click.command()
@click.option("--schedule", default="celerybeat-schedule", show_default=True, help="State file.")
@click.option("--loglevel", default="info", show_default=True, help="Celery's log level.")
def beat(schedule: str, loglevel: str) -> None:
    """Start Celery beat: the sweeper every SGAM_SWEEP_INTERVAL_S, consolidation on
    SGAM_CONSOLIDATE_CRON (celery -A workers.app beat ...)."""
    _celery("beat", "--schedule", schedule, "--loglevel", loglevel)


@click.command()
@json_output
def sweep(as_json: bool) -> None:
    """Queue again the episodes a broker lost or a worker dropped (what beat runs each minute)."""
    from pipeline.episodes.drive import sweep as sweep_now
    from pipeline.episodes.drive import waiting
    from schemas.fields import format_utc

    with opened_store() as store:
        pending, stuck, driven = sweep_now(store)
        later = waiting(store)
        grace = store.settings.sweep_grace_s
    report = {
        "pending": pending,
        "stuck": stuck,
        "sent": driven.sent,
        "waiting": later.count,
        "next_sweep_at": format_utc(later.due),
    }
    if output.wants_json(as_json):
        output.emit_json(report)
        return
    click.echo(f"re-queued {pending} pending and {stuck} stuck episodes")
    if later.count:
        click.echo(
            f"{later.count} pending {output.plural(later.count, 'episode')} wait within the "
            f"grace period (SGAM_SWEEP_GRACE_S={grace}); the first is sent again at "
            f"{format_utc(later.due)} or after"
        )
