"""A claimed batch is decided in the order its episodes came (its keys' order), whatever order
the database returns the rows in: on PostgreSQL that follows where a table had free space, and
can put a correction before the statement it corrects."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import insert

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.episodes.records import new_row
from pipeline.episodes.stage import claim
from pipeline.policy.decide import Lane
from schemas.intake import EpisodeIn
from tests.integration.pipeline_helpers import TENANT, episode

NOW = datetime.now(UTC)


def test_a_batch_is_claimed_in_the_order_of_its_keys(store: Store) -> None:
    ids = [f"e-{number}" for number in range(6)]
    rows = [
        new_row(
            EpisodeIn.model_validate(
                episode(f"turn {episode_id}", "2026-06-01T09:00:00Z", "s1")
                | {"episode_id": episode_id}
            ),
            lane=Lane.BACKGROUND,
            received_at=NOW,
        )
        for episode_id in ids
    ]
    store.run(lambda unit: unit.session.execute(insert(EpisodeRow), rows))
    # Neither the order they were stored in nor the primary key's.
    keys = [(TENANT, episode_id) for episode_id in [*ids[3:], *reversed(ids[:3])]]

    claimed = store.run(lambda unit: claim(unit, keys))

    assert [item.key for item in claimed] == keys
