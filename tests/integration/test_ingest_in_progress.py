"""A repeat of an episode's idempotency key while its first intake is still at work (waiting
for the model) is refused in Python and on the command line as HTTP refuses it (409
idempotency-in-progress): IdempotencyInProgress with the wait, exit 5 in one line — never a
`duplicate` receipt for an episode that has no answer yet."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import pipeline
from pipeline.db.store import open_store
from pipeline.errors import IdempotencyInProgress
from tests.factories import isolated_settings
from tests.integration.server_helpers import SGAM
from tests.integration.stub_llm import StubServer


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
    with StubServer(latency_s=20.0) as stub:  # outlasts the CLI's start on a busy machine
        slow = open_store(
            isolated_settings(
                database_url=postgres_url, llm_base_url=stub.base_url, llm_model="stub"
            )
        )
        answered: list[Any] = []
        try:
            first = threading.Thread(target=lambda: answered.append(pipeline.ingest(slow, sent)))
            first.start()
            deadline = time.monotonic() + 30
            while stub.app.stats.requests == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            with pytest.raises(IdempotencyInProgress) as refused:
                pipeline.ingest(slow, sent)
            env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_LLM")}
            env |= {"SGAM_DATABASE_URL": postgres_url, "SGAM_LLM_BASE_URL": stub.base_url}
            env |= {"SGAM_LLM_MODEL": "stub"}
            done = subprocess.run(
                [SGAM, "ingest", str(path)], env=env, capture_output=True, text=True, timeout=60
            )
            first.join(timeout=60)
            again = pipeline.ingest(slow, sent)
        finally:
            slow.dispose()

    assert refused.value.key == "turn-1"
    assert refused.value.retry_after >= 1
    assert done.returncode == 5, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("sgam: IdempotencyInProgress: idempotency key 'turn-1'")
    (original,) = answered
    assert [receipt.status for receipt in original.receipts] == ["done"]
    assert [receipt.status for receipt in again.receipts] == ["duplicate"]  # answered since
