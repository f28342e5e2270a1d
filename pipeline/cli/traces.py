"""A trace per command: `sgam ingest`, `sgam remember`, ... are each one trace's root, which
the episodes they store carry to the workers. Long-running commands (the servers, the worker,
beat) are not one span: their requests and tasks are traced on their own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.errors import SgamError
from pipeline.observe import conventions as names
from pipeline.observe import tracing

LONG_RUNNING = frozenset({"serve", "worker", "beat", "mcp"})
# Settings are read only when one of these could turn tracing on: a command pays nothing else.
HINTS = ("SGAM_OTEL", "SGAM_ENV_FILE", *tracing.ENDPOINT_VARIABLES)


def set_up() -> bool:
    if not any(os.environ.get(name) for name in HINTS):
        return False
    from pipeline.settings import load_settings

    try:
        settings = load_settings()
    except SgamError:  # the command itself says what is wrong with the settings
        return False
    return tracing.setup_tracing(settings, "sgam-cli")


@contextmanager
def command_span(command: str | None) -> Iterator[None]:
    """The command's root span, named by the command alone (never its arguments)."""
    if command is None or command in LONG_RUNNING or not set_up():
        yield
        return
    with tracing.span(f"sgam {command}", attributes={names.SGAM_COMMAND: command}):
        yield
