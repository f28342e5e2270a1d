"""An episode and the support catalogue, shared by the extraction tests."""

from __future__ import annotations

from functools import cache
from typing import Any

from pipeline.catalog.loader import bundled_catalog
from schemas.catalog import Catalog
from schemas.episodes import Episode

WEDNESDAY = "2026-06-03T10:00:00Z"


@cache
def catalog() -> Catalog:
    return bundled_catalog("support")


def episode(text: str, **fields: Any) -> Episode:
    values: dict[str, Any] = {
        "episode_id": "e1",
        "tenant_id": "acme",
        "subject": "mira",
        "occurred_at": WEDNESDAY,
        "text": text,
    }
    return Episode.model_validate(values | fields)


# A proposed update as a model would send it for "my passport deadline is June 30, 2026".
PASSPORT_UPDATE: dict[str, Any] = {
    "evidence": "my passport deadline is June 30, 2026",
    "subject": "I",
    "attribute": "passport_deadline",
    "current_value": None,
    "change": "new",
    "value": "2026-06-30",
    "valid_from": None,
}
