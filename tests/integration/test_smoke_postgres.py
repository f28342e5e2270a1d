from __future__ import annotations

import pytest

import pipeline
from pipeline.store import Store

KEY = {"tenant_id": "acme", "subject": "mira", "attribute": "passport_deadline"}


def test_seed_trace(store: Store) -> None:
    e1 = pipeline.put(
        store,
        KEY
        | {"value": "2026-07-15", "valid_from": "2026-06-01T09:00:00Z", "source_episode_id": "e1"},
    )
    e2 = pipeline.put(
        store,
        KEY
        | {
            "value": "2026-06-30",
            "valid_from": "2026-06-03T12:00:00+02:00",
            "source_episode_id": "e2",
        },
    )
    assert e2.fact.supersedes_fact_id == e1.fact.fact_id
    pipeline.put(
        store,
        KEY
        | {"value": "2026-08-01", "valid_from": "2026-05-30T08:00:00Z", "source_episode_id": "e0"},
    )
    (now,) = pipeline.get(store, KEY)
    assert (now.value, now.source_episode_id) == ("2026-06-30", "e2")
    with pytest.raises(pipeline.FactConflict):
        pipeline.put(
            store,
            KEY
            | {
                "value": "2026-01-01",
                "valid_from": "2026-06-03T10:00:00Z",
                "source_episode_id": "e9",
            },
        )
