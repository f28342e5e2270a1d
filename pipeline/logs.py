"""How every SGAM process logs: lines for people (SGAM_LOG_FORMAT=text, the default) or one
JSON object per line (json), both on stderr through the standard `logging` module.

A JSON line carries the time, level, logger and message, the current OpenTelemetry trace and
span ids (empty outside a trace), and those of the fields below that the record has. Nothing
else a record carries is written: third-party loggers attach their own data (Celery puts a
task's arguments and result on every task record), and only the names listed here are safe.

Never a stored value: SGAM's messages name ids, counts and outcomes, never episode text, a
fact's value or evidence. What other code may put in a line is cut here, in both formats: an
exception is written as its class, the message only of SGAM's own errors (which never hold a
value), and its stack; a warning as its category and where it was raised.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import traceback
from types import TracebackType
from typing import Any, Literal, TextIO

from pythonjsonlogger.json import JsonFormatter

from pipeline.errors import SgamError

LogFormat = Literal["text", "json"]

# The fields a record may add to a JSON line (`extra=` or a filter); anything else is dropped.
FIELDS = frozenset(
    {
        "tenant",
        "episode_id",
        "task_id",
        "task",
        "outcome",
        "duration_ms",
        "lane",
        "extractor",
        "decisions",
        "episodes",
        "error",
        "method",
        "path",
        "status",
    }
)
# Libraries whose records quote what they sent or were answered: instructor's error on each
# failed attempt quotes the validation error, and with it the model's values (SGAM reports
# those failures as typed errors instead); the HTTP clients' debug lines carry request bodies.
QUOTING_LIBRARIES = {
    "instructor": logging.CRITICAL + 1,  # never
    "openai": logging.WARNING,
    "httpx": logging.WARNING,
    "httpx2": logging.WARNING,
    "httpcore": logging.WARNING,
}
ORDER = sorted(FIELDS)  # the text format's key=value order
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TraceIds(logging.Filter):
    """Puts the current trace and span ids on every record (empty strings outside a trace).
    With tracing off OpenTelemetry is never imported (`pipeline.observe.tracing`), and then
    no span can be current: nothing to import here either."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace = sys.modules.get("opentelemetry.trace")
        context = trace.get_current_span().get_span_context() if trace else None
        if trace and context is not None and context.is_valid:
            record.trace_id = trace.format_trace_id(context.trace_id)
            record.span_id = trace.format_span_id(context.span_id)
        else:
            record.trace_id = record.span_id = ""
        return True


def describe_error(error: BaseException) -> str:
    """An error as a log may show it: SGAM's own with their message (they never hold a stored
    value), any other by its class only — a driver's or a validator's message may quote the
    data it choked on."""
    if isinstance(error, SgamError):
        return f"{type(error).__name__}: {error}".splitlines()[0][:500]
    return type(error).__name__


ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]


def format_exception(exc_info: ExcInfo) -> str:
    """The stack and the described error, never the message of an error that is not SGAM's."""
    _, error, tb = exc_info
    if error is None:
        return ""
    stack = "".join(traceback.format_tb(tb))
    return f"Traceback (most recent call last):\n{stack}{describe_error(error)}"


class TextFormatter(logging.Formatter):
    """A line for people: the message, then the record's listed fields as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [(key, getattr(record, key, None)) for key in ORDER]
        fields = [(key, value) for key, value in fields if value is not None]
        if not fields:
            return line
        head, newline, tail = line.partition("\n")
        pairs = " ".join(f"{key}={value}" for key, value in fields)
        return f"{head} {pairs}{newline}{tail}"

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return utc_time(record)

    def formatException(self, ei: Any) -> str:  # noqa: N802 (logging's name)
        return format_exception(ei)


class JsonLines(JsonFormatter):
    """One JSON object per record with the listed fields only."""

    def __init__(self) -> None:
        super().__init__(
            ["asctime", "levelname", "name", "message", "trace_id", "span_id"],
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return utc_time(record)

    def formatException(self, ei: Any) -> str:  # noqa: N802
        return format_exception(ei)

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        for key in [key for key in log_data if key not in KEPT or log_data[key] is None]:
            del log_data[key]


KEPT = FIELDS | {"time", "level", "logger", "message", "trace_id", "span_id", "exc_info"}


def utc_time(record: logging.LogRecord) -> str:
    """RFC 3339 in UTC to the millisecond, whatever the machine's zone."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + (
        f".{int(record.msecs):03d}Z"
    )


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonLines() if log_format == "json" else TextFormatter(TEXT_FORMAT)


class Stderr(logging.StreamHandler[TextIO]):
    """Writes to whatever sys.stderr is when a record comes (a test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


def handler(log_format: LogFormat) -> logging.Handler:
    """A stderr handler in the format, with the trace ids on every record; warnings are
    routed to it too, cut to their category and place (`WarningLine`), and the libraries
    that quote data are held back (`QUOTING_LIBRARIES`)."""
    out = Stderr()
    out.setFormatter(formatter(log_format))
    out.addFilter(TraceIds())
    out.addFilter(WarningLine())
    logging.captureWarnings(True)
    for name, level in QUOTING_LIBRARIES.items():
        logging.getLogger(name).setLevel(level)
    return out


class WarningLine(logging.Filter):
    """A warning as its category and where it was raised: its text may quote a value
    (pydantic's serializer warnings do)."""

    SHAPE = re.compile(r"^(?P<place>.*?:\d+): (?P<category>\w+): ", re.DOTALL)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "py.warnings":
            found = self.SHAPE.match(record.getMessage())
            where = f"{found['category']} at {found['place']}" if found else "a warning"
            record.msg, record.args = where, None
        return True


def configure(log_format: LogFormat, level: str | int = "INFO") -> logging.Handler:
    """Route every logger through one stderr handler in the format, replacing the one an
    earlier call installed (and no other)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, Stderr)]:
        root.removeHandler(old)
    installed = handler(log_format)
    root.addHandler(installed)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return installed


def uvicorn_config(log_format: LogFormat, level: str) -> dict[str, Any]:
    """uvicorn's `log_config`: its loggers through SGAM's handler, in every server process;
    the access log without query strings (`AccessLine`)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"access": {"()": AccessLine}},
        "handlers": {"sgam": {"()": handler, "log_format": log_format}},
        "root": {"handlers": ["sgam"], "level": level.upper()},
        "loggers": {
            "uvicorn": {"level": level.upper()},
            "uvicorn.access": {"filters": ["access"]},
        },
    }


class AccessLine(logging.Filter):
    """uvicorn's access log as method, path and status, the query string cut: it may carry
    what a client searched for."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            client, method, path, version, status = args
            path = str(path).partition("?")[0]
            record.args = (client, method, path, version, status)
            record.method, record.path, record.status = method, path, status
        return True
