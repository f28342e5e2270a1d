"""The worker's and beat's logging: SGAM's handler (`pipeline.logs`, in SGAM_LOG_FORMAT) in
place of Celery's own, the running task's id on every record, and Celery's task lines cut to
what may be logged.

Celery's task lines quote the task's exception (`%(exc)s`, its repr: a driver's error quotes
the statement's data) and carry the task's arguments and result in `data`; the lines keep the
task's name, id and runtime, and the exception as `pipeline.logs.describe_error` shows it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import warnings
from typing import Any, TextIO

from celery._state import get_current_task
from celery.apps import worker as celery_worker
from celery.exceptions import SecurityWarning
from celery.signals import setup_logging, worker_init

from pipeline.logs import LogFormat, configure, describe_error, formatter

# "ValueError('...')" → "ValueError"; "Retry in 2s: StoreBusy(...)" → "Retry in 2s".
_CLASS = re.compile(r"^(Retry in \w+|[\w.]+)")


class TaskIds(logging.Filter):
    """The running task's id and name on every record a task's code logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        task = get_current_task()
        if task is not None and not getattr(record, "task_id", None):
            record.task_id, record.task = task.request.id, task.name
        return True


class TaskLines(logging.Filter):
    """Celery's 'Task ... received / succeeded / raised / retry' lines, without arguments,
    result or an exception's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        data = getattr(record, "data", None)
        if not isinstance(data, dict) or not isinstance(record.args, dict):
            return True
        shown = dict(record.args)
        if "exc" in shown:
            error = record.exc_info[1] if record.exc_info else None
            found = _CLASS.match(str(shown["exc"]))
            shown["exc"] = describe_error(error) if error else (found[1] if found else "error")
        if "return_value" in shown:
            shown["return_value"] = "-"
        record.args = shown
        record.task_id, record.task = data.get("id"), data.get("name")
        if isinstance(data.get("runtime"), float):
            record.duration_ms = round(data["runtime"] * 1000, 3)
        if "description" in data:
            record.outcome = data["description"]
        elif record.msg.endswith("succeeded in %(runtime)ss: %(return_value)s"):
            record.outcome = "succeeded"
        return True


def install(log_format: LogFormat) -> None:
    """SGAM's handler from now on (Celery warns before it sets logging up), and in place of
    Celery's logging setup (`setup_logging`: Celery then configures nothing), at the level
    the worker was given."""

    def take_over(loglevel: Any = logging.WARNING, **_: Any) -> None:
        handler = configure(log_format, loglevel or logging.INFO)
        handler.addFilter(TaskIds())
        handler.addFilter(TaskLines())

    take_over()
    setup_logging.connect(take_over, weak=False)
    # Celery's own warning names a --uid option and pickle, neither of which applies here.
    warnings.filterwarnings("ignore", "You're running the worker with superuser", SecurityWarning)
    worker_init.connect(_explain_root, weak=False)
    if log_format == "json":
        celery_worker.safe_say = _say_as_record


def _explain_root(**_: Any) -> None:
    """One line of our own in place of Celery's running-as-root warning, saying what it means."""
    if os.geteuid() == 0:
        logging.getLogger("sgam.worker").warning(
            "the worker runs as root: its tasks accept JSON only, so no message can run code, "
            "but a compromised dependency would have the machine; run it as a user of its "
            "own (the Docker image runs as `sgam`)"
        )


def _say_as_record(message: str, stream: TextIO | None = sys.__stderr__) -> None:
    """What Celery's worker says from its signal handlers ('worker: Warm shutdown', ...), as a
    JSON line: written straight to the descriptor, as Celery does there (a signal handler
    must not take the logging module's locks)."""
    record = logging.LogRecord("celery.worker", logging.WARNING, "", 0, message.strip(), None, None)
    record.trace_id = record.span_id = ""
    line = formatter("json").format(record) + "\n"
    # As Celery's own: losing the line must not stop the shutdown.
    with contextlib.suppress(AttributeError, OSError, ValueError):
        os.write(stream.fileno(), line.encode())  # type: ignore[union-attr]
