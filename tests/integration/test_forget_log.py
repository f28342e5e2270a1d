"""After a forget, the decision log shows no value of the subject: an event logged before the
forget is listed without its payload, on both stores and through every reader of the log
(Python, `sgam log`, `GET /v1/log` share `decision_log`). The rows keep their payloads, so
replay still rebuilds the ledger, until a purge erases them; an event logged after the forget
shows its payload again."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import select

import pipeline
from pipeline.db.models import EventRow
from pipeline.db.store import Store
from schemas.lifecycle import EventKind
from tests.factories import put_fact

TENANT = "acme"
JAN = datetime(2026, 1, 1, tzinfo=UTC)


def _log(store: Store, subject: str = "mira") -> list[pipeline.LoggedDecision]:
    return pipeline.decision_log(
        store, {"tenant_id": TENANT, "subject": subject, "oldest_first": True}
    )


def _stored_payloads(store: Store) -> str:
    with store.begin() as unit:
        rows = unit.session.scalars(
            select(EventRow.command).where(EventRow.tenant_id == TENANT)
        ).all()
    return json.dumps(rows)


def test_the_log_hides_a_forgotten_subjects_values_and_keeps_them_for_replay(
    store: Store,
) -> None:
    put_fact(store, subject="mira", attribute="home_city", value="Utrecht", valid_from=JAN)
    put_fact(store, subject="noor", attribute="home_city", value="Delft", valid_from=JAN)
    before = _log(store)
    assert "Utrecht" in json.dumps([e.command for e in before])  # the reviewer's view so far

    pipeline.forget(store, {"tenant_id": TENANT, "subject": "mira"})
    put_fact(store, subject="mira", attribute="home_city", value="Leiden", valid_from=JAN)
    after = _log(store)

    kinds = [event.kind for event in after]
    assert kinds[: len(before)] == [event.kind for event in before]  # still listed
    assert EventKind.FORGET in kinds
    assert all(event.command is None for event in after[: len(before)])
    assert "Utrecht" not in json.dumps([event.model_dump(mode="json") for event in after])
    assert "Leiden" in json.dumps(after[-1].command)  # written after the forget: shown
    assert "Delft" in json.dumps([e.command for e in _log(store, "noor")])  # another subject
    assert "Utrecht" in _stored_payloads(store)  # kept for replay

    pipeline.forget(store, {"tenant_id": TENANT, "subject": "mira", "purge": True})
    assert "Utrecht" not in _stored_payloads(store)  # purge erases what forget hid
