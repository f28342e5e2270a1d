"""Structured logs from the real processes: `sgam serve`, `sgam worker` and the command line
write one JSON object a line with SGAM_LOG_FORMAT=json, with the ids, outcome and duration of
what they did and the trace they did it in, and never a stored value — a marker in the
episodes' text (and so in the facts' values), in a search query and in the subject's facts is
looked for in everything every process wrote."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import open_store
from pipeline.settings import Settings
from tests.databases import empty_database
from tests.integration.celery_helpers import (
    REDIS_URL,
    Celery,
    die_with_the_test_process,
    episode_counts,
    flush_redis,
    wait_for,
    worker_env,
)
from tests.integration.otlp_helpers import OtlpReceiver
from tests.integration.server_helpers import (
    SGAM,
    migrated_database,
    start_server,
    stop_server,
)


def _marker() -> str:
    return f"Zqx{uuid.uuid4().hex[:10]}"


def _records(output: str) -> list[dict[str, Any]]:
    """Every line parsed as JSON: a line that is not one fails the test, naming it."""
    records = []
    for line in output.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line[:300]!r}") from None
    return records


def _with(records: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    return [record for record in records if record["message"] == message]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SGAM, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_the_command_line_logs_json_lines_without_values(tmp_path: Path) -> None:
    marker = _marker()
    env = {
        **os.environ,
        "SGAM_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
        "SGAM_LOG_FORMAT": "json",
        "SGAM_LOG_LEVEL": "info",
    }
    env.pop("SGAM_BROKER_URL", None)  # inline: the command processes what it ingests
    lines = tmp_path / "episodes.jsonl"
    episodes = [
        {
            "tenant_id": "acme",
            "subject": f"mira{n}",
            "session_id": f"s{n}",
            "occurred_at": "2026-06-01T09:00:00Z",
            "text": f"My home city is {marker}{n}ville.",
        }
        for n in range(3)
    ]
    lines.write_text("".join(json.dumps(episode) + "\n" for episode in episodes))

    ingested = _cli(env, "ingest", str(lines))
    remembered = _cli(
        env, "remember", "--tenant", "acme", "--subject", "mira", "--text",
        f"Remember that my employer is {marker}corp.",
    )  # fmt: skip

    assert ingested.returncode == 0, ingested.stderr
    assert remembered.returncode == 0, remembered.stderr
    records = _records(ingested.stderr) + _records(remembered.stderr)
    processed = _with(records, "episode processed")
    receipts = json.loads(ingested.stdout)
    assert sorted(r["episode_id"] for r in processed) == sorted(r["episode_id"] for r in receipts)
    for record in processed:
        assert record["tenant"] == "acme"
        assert (record["outcome"], record["lane"], record["extractor"]) == (
            "done",
            "background",
            "rules",
        )
        assert record["duration_ms"] >= 0
        assert record["decisions"] == {"written": 1}
        assert len(record["trace_id"]) == 32 or record["trace_id"] == ""
    (accepted,) = _with(records, "episodes accepted")
    assert (accepted["tenant"], accepted["episodes"]) == ("acme", {"done": 3})
    (hot,) = _with(records, "episode remembered")
    assert (hot["lane"], hot["outcome"], hot["decisions"]) == ("hot", "done", {"written": 1})
    # The command's answer on stdout is the receipts (ids); the value is only in the ledger.
    assert marker not in ingested.stdout + ingested.stderr + remembered.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", [["ingest", "-"], ["serve"], ["worker"]])
def test_a_log_format_that_is_not_text_or_json_is_a_bad_setting(
    tmp_path: Path, command: list[str]
) -> None:
    env = {
        **os.environ,
        "SGAM_DATABASE_URL": f"sqlite:///{tmp_path / 'bad.sqlite3'}",
        "SGAM_BROKER_URL": REDIS_URL,
        "SGAM_LOG_FORMAT": "yaml",
    }
    answer = subprocess.run(
        [SGAM, *command], env=env, input="", capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 2
    assert answer.stderr.strip().count("\n") == 0
    assert answer.stderr.startswith("sgam: SGAM_LOG_FORMAT: ")
    assert "'text' or 'json'" in answer.stderr


@pytest.mark.postgres
@pytest.mark.celery
@pytest.mark.slow
def test_the_server_and_a_worker_log_json_lines_in_one_trace_without_values(
    postgres_url: str, tmp_path: Path
) -> None:
    database = migrated_database(postgres_url, "logs")
    empty_database(database)
    flush_redis()
    marker = _marker()
    store = open_store(Settings(database_url=database))
    try:
        secret = create_key(store, {"tenant_id": "acme", "role": "writer"})[1]
    finally:
        store.dispose()
    with OtlpReceiver() as receiver:
        env = {
            "SGAM_LOG_FORMAT": "json",
            "SGAM_BROKER_URL": REDIS_URL,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
        celery = Celery(worker_env(database, **env), tmp_path)
        command = [SGAM, "worker", "--queues", "extract", "--concurrency", "2"]
        with open(tmp_path / "celery-sgam.log", "wb") as log:
            celery.processes.append(
                subprocess.Popen(
                    command,
                    env=celery.env,
                    cwd=tmp_path,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_the_test_process,
                )
            )
        server = start_server(database, tmp_path, "--access-log", "--log-level", "info", **env)
        try:
            with server.client(secret) as api:
                ingested = api.post(
                    "/v1/episodes",
                    json=[
                        {
                            "subject": f"mira{n}",
                            "session_id": f"s{n}",
                            "occurred_at": "2026-06-01T10:00:00Z",
                            "text": f"My home city is {marker}{n}ville.",
                        }
                        for n in range(4)
                    ],
                )
                remembered = api.post(
                    "/v1/remember",
                    json={"subject": "mira", "text": f"Remember that my employer is {marker}."},
                )
                wait_for(
                    lambda: episode_counts(database).get("done", 0) == 5,
                    60,
                    "5 episodes done",
                    lambda: celery.logs() + server.logs(),
                )
                searched = api.get("/v1/subjects/mira0/context", params={"query": f"home {marker}"})
                read = api.get("/v1/subjects/mira0/facts")
            time.sleep(0.5)  # the last lines and spans flushed
        finally:
            stop_server(server)
            celery.stop()

    assert (ingested.status_code, remembered.status_code) == (202, 200)
    assert (searched.status_code, read.status_code) == (200, 200)
    assert marker in read.text  # the values are there to be leaked
    served = server.log.read_text()
    worked = celery.logs()
    assert marker not in served
    assert marker not in worked
    server_records, worker_records = _records(served), _records(worked)

    (accepted,) = _with(server_records, "episodes accepted")
    assert (accepted["tenant"], accepted["episodes"]) == ("acme", {"queued": 4})
    assert len(accepted["trace_id"]) == 32
    (hot,) = _with(server_records, "episode remembered")
    assert (hot["tenant"], hot["lane"], hot["outcome"]) == ("acme", "hot", "done")
    access = {r["path"]: r["status"] for r in server_records if r["logger"] == "uvicorn.access"}
    assert access["/v1/episodes"] == 202
    assert access["/v1/remember"] == access["/v1/subjects/mira0/context"] == 200

    processed = _with(worker_records, "episode processed")
    receipts = ingested.json()["receipts"]
    assert sorted(r["episode_id"] for r in processed) == sorted(r["episode_id"] for r in receipts)
    for record in processed:
        assert (record["tenant"], record["outcome"], record["lane"]) == (
            "acme",
            "done",
            "background",
        )
        assert record["task_id"]
        assert record["duration_ms"] >= 0
        # The request's trace goes on in the worker: the episode's line is in it.
        assert record["trace_id"] == accepted["trace_id"]
        assert len(record["span_id"]) == 16
    finished = [r for r in worker_records if r.get("outcome") == "succeeded"]
    assert {r["task_id"] for r in processed} <= {r["task_id"] for r in finished}
    assert all(r["task"] == "sgam.extract_episodes" for r in finished)
    assert all(r["duration_ms"] >= 0 for r in finished)
