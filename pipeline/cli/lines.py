"""Reading JSON Lines input (`sgam ingest`, `sgam import`): one JSON object per line, blank
lines skipped, every problem named with its line number. The file is read a line at a time, so
a large one is never held whole."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import click

from pipeline.errors import InvalidInput

MAX_LINE_BYTES = 1024 * 1024

# (line number, the object, None) or (line number, None, why the line is not one)
ReadLine = tuple[int, dict[str, Any] | None, str | None]


def read_objects(path: Path) -> tuple[list[dict[str, Any]], list[int], list[tuple[int, str, str]]]:
    """(objects, their line numbers, lines that are not JSON objects)."""
    objects: list[dict[str, Any]] = []
    numbers: list[int] = []
    bad: list[tuple[int, str, str]] = []
    for number, value, problem in each_object(path):
        if value is None:
            bad.append((number, "line", str(problem)))
        else:
            objects.append(value)
            numbers.append(number)
    return objects, numbers, bad


def each_object(path: Path) -> Iterator[ReadLine]:
    """Every non-blank line of `path` ('-': stdin) in order, parsed or with its problem. Lines
    end at \\n, \\r\\n or \\r, as for `bytes.splitlines`."""
    with ExitStack() as stack:
        handle = _opened(path, stack)
        number = 0
        try:
            for chunk in handle:
                for raw in chunk.splitlines():
                    number += 1
                    if raw.strip():
                        yield (number, *_parsed(raw))
        except OSError as exc:
            raise InvalidInput("FILE", f"{path} cannot be read: {exc.strerror}") from None


def _opened(path: Path, stack: ExitStack) -> IO[bytes]:
    if str(path) == "-":
        return sys.stdin.buffer
    try:
        return stack.enter_context(path.open("rb"))
    except OSError as exc:
        raise InvalidInput("FILE", f"{path} cannot be read: {exc.strerror}") from None


def _parsed(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    # Imported here: `pipeline.validation` brings pydantic, which `sgam --help` need not load.
    from pipeline.validation import DuplicateKey, refuse_duplicates

    if len(raw) > MAX_LINE_BYTES:
        return None, f"is longer than {MAX_LINE_BYTES} bytes"
    try:
        value = json.loads(
            raw.decode("utf-8"), parse_constant=_refuse, object_pairs_hook=refuse_duplicates
        )
    except UnicodeDecodeError:
        return None, "is not valid UTF-8"
    except DuplicateKey as duplicate:
        return None, f"is refused: {duplicate}"
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        return None, f"is not JSON ({getattr(exc, 'msg', exc)})"
    if not isinstance(value, dict):
        return None, f"must be a JSON object, not {type(value).__name__}"
    return value, None


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def report_lines(bad: list[tuple[int, str, str]]) -> None:
    """One line on stderr per bad input line."""
    for number, field, problem in sorted(bad):
        where = "" if field == "line" else f"{field}: "
        click.echo(f"sgam: line {number}: {where}{problem}", err=True)
