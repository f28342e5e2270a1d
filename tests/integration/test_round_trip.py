"""Every documented field of every intake and put path comes back as it was sent: Python,
command line (the HTTP paths are in tests/integration/api/test_round_trip.py). A row builder
that names a column wrongly loses the value without a word; these tests read each one back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

import pipeline
from pipeline.cli import run
from pipeline.db.models import EpisodeRow, EventRow
from pipeline.db.store import Store
from tests.factories import FULL_EPISODE, FULL_PUT


def check_episode_stored(store: Store, sent: dict[str, Any]) -> None:
    with store.begin() as unit:
        row = unit.session.get(EpisodeRow, (sent["tenant_id"], sent["episode_id"]))
        assert row is not None
        stored = {
            "tenant_id": row.tenant_id,
            "subject": row.subject,
            "session_id": row.session_id,
            "source": row.source,
            "occurred_at": row.occurred_at,
            "text": row.text,
            "episode_id": row.episode_id,
            "agent_id": row.agent_id,
            "purpose": row.purpose,
            "subject_names": row.subject_names,
            "trust": row.trust,
            "idempotency_key": row.idempotency_key,
            "metadata": row.meta,
            "actor": row.actor,
        }
        offset = row.utc_offset_s
    expected = sent | {"occurred_at": datetime.fromisoformat(sent["occurred_at"])}
    assert stored == expected
    assert offset == 7200, "the sender's offset is kept for its relative dates"
    shown = pipeline.show_episode(store, sent["tenant_id"], sent["episode_id"])
    assert {name: getattr(shown, name) for name in sent if name != "occurred_at"} == {
        name: value for name, value in sent.items() if name != "occurred_at"
    }
    listed = pipeline.list_episodes(store, {"tenant_id": sent["tenant_id"]})
    assert [episode.metadata for episode in listed] == [sent["metadata"]]


def check_put_stored(store: Store, sent: dict[str, Any]) -> None:
    (fact,) = pipeline.get(
        store,
        {
            "tenant_id": "acme",
            "subject": "mira",
            "agent_id": "support-bot",
            "purpose": "orders",
            "at": "2026-06-04T00:00:00Z",
        },
    )
    shown = fact.model_dump(mode="json")
    carried = set(sent) - {"tenant_id", "expected_version", "idempotency_key", "actor"}
    assert {name: shown[name] for name in carried} == {name: sent[name] for name in carried}
    with store.begin() as unit:
        events = unit.session.execute(
            select(EventRow.actor, EventRow.idempotency_key).where(EventRow.tenant_id == "acme")
        ).all()
    assert [tuple(event) for event in events] == [(sent["actor"], sent["idempotency_key"])]
    again = pipeline.put(store, sent)  # the key was stored: a repeat writes nothing
    assert not again.written


def test_python_ingest_keeps_every_field(store: Store) -> None:
    report = pipeline.ingest(store, FULL_EPISODE)

    assert [receipt.status for receipt in report.receipts] == ["done"]
    check_episode_stored(store, FULL_EPISODE)


def test_cli_ingest_keeps_every_field(
    cli_env: object, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(FULL_EPISODE) + "\n")

    assert run(["ingest", str(path), "--json"]) == 0
    (receipt,) = json.loads(capsys.readouterr().out)  # a list of one
    assert receipt["status"] == "done"
    check_episode_stored(store, FULL_EPISODE)


def test_python_remember_keeps_every_field(store: Store) -> None:
    sent = {
        "tenant_id": "acme",
        "subject": "mira",
        "text": "My home city is Lisbon.",
        "session_id": "chat-9",
        "occurred_at": "2026-06-03T10:00:00+02:00",
        "agent_id": "support-bot",
        "purpose": "orders",
        "episode_id": "ep-hot",
        "idempotency_key": "hot-1",
        "trust": "user_confirmed",
        "source": "message",
        "actor": "bot-7",
    }
    remembered = pipeline.remember(store, sent)

    (fact,) = remembered.facts
    assert (fact.agent_id, fact.purpose, fact.source_episode_id) == (
        "support-bot",
        "orders",
        "ep-hot",
    )
    assert fact.valid_from == datetime(2026, 6, 3, 8, tzinfo=UTC)
    with store.begin() as unit:
        row = unit.session.get(EpisodeRow, ("acme", "ep-hot"))
        assert row is not None
        assert (row.session_id, row.idempotency_key, row.trust, row.source, row.actor) == (
            "chat-9",
            "hot-1",
            "user_confirmed",
            "message",
            "bot-7",
        )
        assert row.utc_offset_s == 7200
        actors = set(unit.session.scalars(select(EventRow.actor)))
    assert actors == {"bot-7"}


def test_python_put_keeps_every_field(store: Store) -> None:
    result = pipeline.put(store, FULL_PUT)

    assert result.written
    check_put_stored(store, FULL_PUT)


def test_put_many_keeps_every_field(store: Store) -> None:
    (outcome,) = pipeline.put_many(store, [FULL_PUT])

    assert isinstance(outcome, pipeline.PutResult)
    assert outcome.written
    check_put_stored(store, FULL_PUT)


def test_cli_import_keeps_every_field(
    cli_env: object, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "facts.jsonl"
    path.write_text(json.dumps(FULL_PUT) + "\n")

    assert run(["import", str(path), "--json"]) == 0
    (receipt,) = json.loads(capsys.readouterr().out)  # a list of one
    assert receipt["outcome"] == "written"
    check_put_stored(store, FULL_PUT)


def test_cli_put_keeps_every_field(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    options = {
        "--tenant": "acme",
        "--subject": "mira",
        "--attribute": "home_city",
        "--value": "Lisbon",
        "--valid-from": FULL_PUT["valid_from"],
        "--valid-to": FULL_PUT["valid_to"],
        "--source": "ep-full",
        "--agent": "support-bot",
        "--purpose": "orders",
        "--evidence": FULL_PUT["evidence"],
        "--trust": "inferred",
        "--confidence": "0.75",
        "--cardinality": "one",
        "--expires-at": FULL_PUT["expires_at"],
        "--expected-version": "0",
        "--idempotency-key": "put-full",
    }
    args = [part for pair in options.items() for part in pair]

    assert run(["put", *args, "--json"]) == 0
    capsys.readouterr()
    # The command line's actor is its own ("cli"): the rest is the put's.
    check_put_stored(store, FULL_PUT | {"actor": _cli_actor(store)})


def _cli_actor(store: Store) -> str:
    with store.begin() as unit:
        return str(unit.session.scalars(select(EventRow.actor)).first())
