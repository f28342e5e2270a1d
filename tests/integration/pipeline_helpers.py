"""Helpers shared by the pipeline's integration tests (imported, not collected)."""

from __future__ import annotations

from typing import Any

import pipeline
from pipeline.db.store import Store
from schemas.results import StoredCandidate

TENANT = "acme"


def episode(text: str, at: str, session: str, **extra: Any) -> dict[str, Any]:
    return {
        "tenant_id": TENANT,
        "subject": "mira",
        "session_id": session,
        "occurred_at": at,
        "text": text,
    } | extra


def holds(store: Store, attribute: str, **when: str) -> Any:
    """The value of mira's attribute (None when nothing holds)."""
    query = {"tenant_id": TENANT, "subject": "mira", "attribute": attribute, **when}
    found = pipeline.get(store, query)
    return found[0].value if found else None


def candidates(store: Store, status: str | None = "buffered") -> list[StoredCandidate]:
    return pipeline.list_candidates(store, {"tenant_id": TENANT, "status": status})


def kinds(store: Store, episode_id: str) -> list[str]:
    shown = pipeline.show_episode(store, TENANT, episode_id)
    return [decision.kind for decision in shown.decisions]
