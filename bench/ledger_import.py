"""The import benchmark: `sgam import` of a JSONL file end to end, a process started on a fresh
file, then again with every idempotency key repeated."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from environment import machine_load

from schemas.fields import canonical_json


def report_import(url: str, lines: int) -> None:
    """`sgam import` of a JSONL file end to end: a process started on a fresh file."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "import.jsonl"
        with path.open("w") as file:
            for n in range(lines):
                command = {
                    "tenant_id": "bench-import",
                    "subject": f"customer-{n // 4}",
                    "attribute": IMPORT_ATTRIBUTES[n % 4],
                    "value": _import_value(n),
                    "valid_from": "2026-01-01T00:00:00Z",
                    "source_episode_id": "crm-export",
                    "idempotency_key": f"crm-{n}",
                }
                file.write(canonical_json(command) + "\n")
        sgam = str(Path(sys.executable).parent / "sgam")
        env = {**os.environ, "SGAM_DATABASE_URL": url}
        print(f"\nsgam import of a {lines:,}-line JSONL file, end to end ({machine_load()} before)")
        for run in ("first run", "re-run (every key repeated)"):
            started = time.perf_counter()
            done = subprocess.run([sgam, "import", str(path)], env=env, capture_output=True)
            elapsed = time.perf_counter() - started
            if done.returncode != 0:
                sys.exit(f"sgam import failed ({done.returncode}): {done.stderr.decode()[:500]}")
            print(f"{run:<28} {elapsed:6.1f} s  {lines / elapsed:8,.0f} lines/s")
        print(f"({machine_load()} after)")


IMPORT_ATTRIBUTES = ("home_city", "employer", "account_plan", "newsletter_opt_in")


def _import_value(n: int) -> Any:
    attribute = IMPORT_ATTRIBUTES[n % 4]
    if attribute == "account_plan":
        return ("free", "pro", "enterprise")[n % 3]
    if attribute == "newsletter_opt_in":
        return n % 2 == 0
    return f"{attribute}-{n}"
