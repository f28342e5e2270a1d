"""A repeat of an episode's idempotency key while its first intake is still at work (waiting
for the model) is refused in Python and on the command line as HTTP refuses it (409
idempotency-in-progress): IdempotencyInProgress with the wait, exit 5 in one line — never a
`duplicate` receipt for an episode that has no answer yet."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

import pipeline
from pipeline.errors import IdempotencyInProgress
from tests.integration.in_flight import first_call_in_flight
from tests.integration.server_helpers import SGAM


@pytest.mark.postgres
def test_a_repeat_while_the_first_intake_works_is_in_progress_in_python_and_on_the_cli(
    postgres_url: str, tmp_path: Path
) -> None:
    sent = {
        "tenant_id": f"slow-{uuid.uuid4()}",
        "subject": "mira",
        "session_id": "s1",
        "occurred_at": "2026-06-01T10:00:00Z",
        "text": "Zwolle has been my home.",  # no rule reads it: the model is asked
        "idempotency_key": "turn-1",
    }
    path = tmp_path / "episode.jsonl"
    path.write_text(json.dumps(sent) + "\n")
    with first_call_in_flight(postgres_url, lambda store: pipeline.ingest(store, sent)) as first:
        with pytest.raises(IdempotencyInProgress) as refused:
            pipeline.ingest(first.store, sent)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_LLM")}
        env |= {"SGAM_DATABASE_URL": postgres_url, "SGAM_LLM_BASE_URL": first.base_url}
        env |= {"SGAM_LLM_MODEL": "stub"}
        done = subprocess.run(
            [SGAM, "ingest", str(path)], env=env, capture_output=True, text=True, timeout=300
        )
        original = first.join()
        again = pipeline.ingest(first.store, sent)

    assert refused.value.key == "turn-1"
    assert refused.value.retry_after >= 1
    assert done.returncode == 5, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("sgam: IdempotencyInProgress: idempotency key 'turn-1'")
    assert [receipt.status for receipt in original.receipts] == ["done"]
    assert [receipt.status for receipt in again.receipts] == ["duplicate"]  # answered since
