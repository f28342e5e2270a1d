"""GenAI memory operation spans (`search_memory`, `upsert_memory`, `update_memory`,
`delete_memory`) on one scope of the ledger: the conventions' "Memory" span, kind INTERNAL
(the store is this process's own), named by the operation alone. The caller sets
`gen_ai.memory.record.count` once it knows it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pipeline.observe import conventions as names
from pipeline.observe import tracing


@contextmanager
def memory_span(
    operation: str,
    *,
    tenant_id: str,
    agent_id: str = "default",
    purpose: str = "default",
    record_id: str | None = None,
    more: tracing.Attributes | None = None,
) -> Iterator[Any]:
    """`more`: SGAM's own attributes besides the tenant (`sgam.episode.id`, ...)."""
    if not tracing.enabled():
        yield tracing.QUIET
        return
    attributes: dict[str, Any] = {
        names.GEN_AI_OPERATION_NAME: operation,
        names.GEN_AI_MEMORY_STORE_ID: names.store_id(tenant_id, agent_id, purpose),
        names.SGAM_TENANT: tenant_id,
    }
    if record_id is not None:
        attributes[names.GEN_AI_MEMORY_RECORD_ID] = record_id
    attributes |= more or {}
    with tracing.span(operation, attributes=attributes) as opened:
        yield opened


def count(opened: Any, records: int) -> None:
    """How many records the operation returned (a search) or was asked to change (a write)."""
    opened.set_attribute(names.GEN_AI_MEMORY_RECORD_COUNT, records)
