"""What migration 0009 (the search index) costs per existing row, on each store.

    .venv/bin/python bench/search_migration.py [--rows 3000] [--postgres URL]

Fills a scratch store with `rows` facts and `rows` episodes, steps it back to revision 0008
(dropping the index) and times the upgrade that indexes every row again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from search_runs import DEFAULT_POSTGRES, scratch_store

import pipeline
from pipeline.db.store import _alembic_config

CATALOG = Path(__file__).with_name("search_catalog.yaml")


def run(backend: str, rows: int, postgres: str) -> dict[str, object]:
    from alembic import command

    with scratch_store(backend, postgres, CATALOG) as store:
        scope = {"tenant_id": "t", "subject": "s", "attribute": "observation"}
        facts = [
            scope
            | {
                "value": f"observation number {i} about the garden and the webinar",
                "evidence": f"I said {i} things",
                "source_episode_id": f"e{i}",
                "valid_from": "2026-01-01T00:00:00Z",
            }
            for i in range(rows)
        ]
        pipeline.put_many(store, facts, chunk=500)
        episodes = [
            {
                "tenant_id": "t",
                "subject": "s",
                "session_id": "s1",
                "episode_id": f"e{i}",
                "occurred_at": "2026-01-01T00:00:00Z",
                "text": f"turn {i}: we talked about the garden, the webinar and the weather",
            }
            for i in range(rows)
        ]
        for start in range(0, rows, 1000):
            pipeline.ingest(store, episodes[start : start + 1000])
        config = _alembic_config()
        with store.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0008")
        started = time.perf_counter()
        store.upgrade()
        seconds = time.perf_counter() - started
    return {
        "backend": backend,
        "rows": 2 * rows,
        "seconds": round(seconds, 2),
        "us_per_row": round(seconds / (2 * rows) * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES.replace("bench", "migration_bench"))
    parser.add_argument("--backends", default="sqlite,postgresql")
    options = parser.parse_args()
    for backend in options.backends.split(","):
        print(json.dumps(run(backend, options.rows, options.postgres)))


if __name__ == "__main__":
    main()
