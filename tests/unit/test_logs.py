"""What a log line may show (`pipeline.logs`, `workers.logs`): the listed fields only, an
exception as its class (the message only of SGAM's own), a warning as its category and place,
and Celery's task lines without the task's arguments, result or an exception's message."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Iterator

import pytest
from celery.app import trace as celery_trace

from pipeline.errors import InvalidInput
from pipeline.logs import LogFormat, handler
from workers.logs import TaskIds, TaskLines

MARKER = "Zqx-secret-value"


@pytest.fixture(params=["json", "text"])
def captured(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[logging.Logger, LogFormat, pytest.CaptureFixture[str]]]:
    log_format: LogFormat = request.param
    logger = logging.getLogger(f"sgam.test.{log_format}")
    logger.propagate, logger.level = False, logging.DEBUG
    out = handler(log_format)
    out.addFilter(TaskIds())
    out.addFilter(TaskLines())
    logger.addHandler(out)
    yield logger, log_format, capsys
    logger.removeHandler(out)
    logging.captureWarnings(False)


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_a_json_line_carries_the_listed_fields_and_drops_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logger = logging.getLogger("sgam.test.fields")
    logger.propagate, logger.level = False, logging.INFO
    out = handler("json")
    logger.addHandler(out)
    try:
        extra = {"tenant": "acme", "episode_id": "e1", "outcome": "done", "duration_ms": 2.5}
        logger.info("episode processed", extra=extra | {"data": MARKER, "error": None})
    finally:
        logger.removeHandler(out)
    (line,) = _lines(capsys)
    record = json.loads(line)
    assert record.pop("time").endswith("Z")
    assert record == {
        "level": "INFO",
        "logger": "sgam.test.fields",
        "message": "episode processed",
        "trace_id": "",
        "span_id": "",
        "tenant": "acme",
        "episode_id": "e1",
        "outcome": "done",
        "duration_ms": 2.5,
    }


def test_an_exception_is_logged_by_its_class_and_sgams_own_with_their_message(
    captured: tuple[logging.Logger, LogFormat, pytest.CaptureFixture[str]],
) -> None:
    logger, log_format, capsys = captured
    for error in (ValueError(f"invalid literal {MARKER!r}"), InvalidInput("text", "is empty")):
        try:
            raise error
        except Exception:
            logger.exception("failed")
    output = "\n".join(_lines(capsys))
    assert MARKER not in output
    assert "ValueError" in output
    assert "InvalidInput: text: is empty" in output or "InvalidInput: text is empty" in output
    assert "test_logs.py" in output  # the stack is kept
    if log_format == "json":
        assert all(json.loads(line) for line in output.splitlines() if line.startswith("{"))


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_warning_is_logged_by_its_category_and_place(
    log_format: LogFormat, capsys: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger("py.warnings")
    out = handler(log_format)
    logger.addHandler(out)
    # Only this handler: a root handler an in-process CLI run of an earlier test left would
    # print the record a second time.
    propagated, logger.propagate = logger.propagate, False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            logging.captureWarnings(True)  # as `handler` leaves it; catch_warnings reset it
            warnings.warn(f"Expected `str` but got `int` with value {MARKER}", UserWarning, 1)
    finally:
        logger.removeHandler(out)
        logger.propagate = propagated
        logging.captureWarnings(False)
    (line,) = _lines(capsys)
    assert MARKER not in line
    assert f"UserWarning at {__file__}:" in line


def test_celerys_task_lines_keep_the_task_and_drop_its_arguments_and_errors(
    captured: tuple[logging.Logger, LogFormat, pytest.CaptureFixture[str]],
) -> None:
    logger, log_format, capsys = captured
    base = {"id": "task-1", "name": "sgam.extract_episodes"}
    args = {"args": f"[['acme', '{MARKER}']]", "kwargs": "{}"}
    success = base | args | {"return_value": MARKER, "runtime": 0.25}
    logger.info(celery_trace.LOG_SUCCESS, success, extra={"data": success})
    try:
        raise ValueError(MARKER)
    except ValueError:
        failure = base | args | {"exc": f"ValueError({MARKER!r})", "description": "raised"}
        logger.error(
            celery_trace.LOG_FAILURE, failure, exc_info=sys.exc_info(), extra={"data": failure}
        )
    retry = base | {"exc": f"Retry in 2s: StoreBusy({MARKER!r})"}
    logger.info(celery_trace.LOG_RETRY, retry, extra={"data": retry})
    lines = _lines(capsys)
    assert MARKER not in "\n".join(lines)
    text = "\n".join(lines)
    assert "Task sgam.extract_episodes[task-1] succeeded in 0.25s" in text
    assert "Task sgam.extract_episodes[task-1] raised: ValueError" in text
    assert "Task sgam.extract_episodes[task-1] retry: Retry in 2s" in text
    if log_format == "json":
        first = json.loads(lines[0])
        assert (first["task_id"], first["task"], first["duration_ms"]) == (
            "task-1",
            "sgam.extract_episodes",
            250.0,
        )
        assert first["outcome"] == "succeeded"


def test_the_model_clients_libraries_are_held_back(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    out, level = handler("json"), root.level
    root.addHandler(out)
    root.setLevel(logging.DEBUG)  # a worker started with --loglevel debug
    try:
        logging.getLogger("instructor.v2.core.retry").error(
            "Max retries exceeded. Last error: 1 validation error input_value=%r", MARKER
        )
        logging.getLogger("openai._base_client").debug("Request options: %s", MARKER)
        logging.getLogger("httpx2").info("HTTP Request: POST %s", MARKER)
    finally:
        root.removeHandler(out)
        root.setLevel(level)
    assert MARKER not in capsys.readouterr().err
