"""Options several commands share, and the store a command opens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from pipeline.db.store import Store

F = TypeVar("F", bound=Callable[..., Any])

# What a command answering a repeated idempotency key says on stderr: nothing was done now.
REPEAT = "unchanged: a repeat of the request first sent with this key"

json_output = click.option(
    "--json", "as_json", is_flag=True, help="JSON output (default: on a pipe)."
)


def scoped(command: F) -> F:
    """The scope and subject options every tenant-bound command takes."""
    for option in reversed(
        [
            click.option("--tenant", required=True, help="Tenant that owns the memory."),
            click.option("--subject", required=True, help="Entity the facts are about."),
            click.option("--agent", default="default", show_default=True, help="Agent scope."),
            click.option("--purpose", default="default", show_default=True, help="Purpose scope."),
            json_output,
        ]
    ):
        command = option(command)
    return command


def reviewer(command: F) -> F:
    return click.option(
        "--include-quarantined", is_flag=True, help="Reviewer view: show quarantined facts."
    )(command)


@contextmanager
def opened_store() -> Iterator[Store]:
    """The store named by the SGAM_* settings, closed when the command ends."""
    from pipeline import open_store
    from pipeline.logs import configure

    store = open_store()
    configure(store.settings.log_format, store.settings.log_level)
    try:
        yield store
    finally:
        store.dispose()


def scope_fields(tenant: str, agent: str, purpose: str, **given: Any) -> dict[str, Any]:
    """API fields from CLI options; options not given are left to the API's defaults."""
    return {"tenant_id": tenant, "agent_id": agent, "purpose": purpose} | given_fields(given)


def given_fields(options: dict[str, Any], **renamed: str) -> dict[str, Any]:
    return {renamed.get(name, name): value for name, value in options.items() if value is not None}
