"""Reading JSON Lines input (`sgam ingest`, `sgam import`): one JSON object per line, blank
lines skipped, every problem named with its line number."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from pipeline.errors import InvalidInput

MAX_LINE_BYTES = 1024 * 1024


def read_objects(path: Path) -> tuple[list[dict[str, Any]], list[int], list[tuple[int, str, str]]]:
    """(objects, their line numbers, lines that are not JSON objects)."""
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise InvalidInput("file", f"cannot be read: {exc.strerror}") from None
    objects: list[dict[str, Any]] = []
    numbers: list[int] = []
    bad: list[tuple[int, str, str]] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        problem = _problem(raw)
        if problem is not None:
            bad.append((number, "line", problem))
            continue
        objects.append(json.loads(raw))
        numbers.append(number)
    return objects, numbers, bad


def _problem(raw: bytes) -> str | None:
    if len(raw) > MAX_LINE_BYTES:
        return f"is longer than {MAX_LINE_BYTES} bytes"
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_refuse)
    except UnicodeDecodeError:
        return "is not valid UTF-8"
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        return f"is not JSON ({getattr(exc, 'msg', exc)})"
    if not isinstance(value, dict):
        return f"must be a JSON object, not {type(value).__name__}"
    return None


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def report_lines(bad: list[tuple[int, str, str]]) -> None:
    """One line on stderr per bad input line."""
    for number, field, problem in sorted(bad):
        where = "" if field == "line" else f"{field}: "
        click.echo(f"sgam: line {number}: {where}{problem}", err=True)
