"""Commands import what they need when they need it: help needs neither the database layer
nor pydantic; a read on the embedded store needs neither Alembic nor the Postgres driver.
(The start-up time itself is measured by bench/cold_start.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pipeline
from pipeline.db.store import open_store
from pipeline.settings import Settings

PROBE = """
import json, sys
from pipeline.cli import run
code = run(sys.argv[1:])
heavy = ["sqlalchemy", "pydantic", "pydantic_settings", "alembic", "psycopg", "yaml"]
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}))
"""


def _loaded_by(args: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], report["loaded"]


def test_help_loads_no_database_layer_and_no_models() -> None:
    assert _loaded_by(["--help"], {}) == (0, [])
    assert _loaded_by(["get", "--help"], {}) == (0, [])


def test_a_read_on_sqlite_loads_neither_alembic_nor_the_postgres_driver(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cold.sqlite3'}"
    store = open_store(Settings(database_url=url))  # migrated beforehand, as after first use
    pipeline.put(
        store,
        {
            "tenant_id": "acme",
            "subject": "mira",
            "attribute": "home_city",
            "value": "Utrecht",
            "valid_from": "2026-01-01T00:00:00Z",
            "source_episode_id": "e1",
        },
    )
    store.dispose()

    code, loaded = _loaded_by(
        ["get", "--tenant", "acme", "--subject", "mira", "--json"], {"SGAM_DATABASE_URL": url}
    )

    assert code == 0
    assert "alembic" not in loaded
    assert "psycopg" not in loaded
