"""Quarantine, promotion and optimistic concurrency (seed tests 1-3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select

import pipeline
from pipeline.db.models import EventRow, FactRow
from pipeline.db.store import Store
from pipeline.errors import FactConflict, NotFound, NotQuarantined, VersionConflict
from pipeline.ledger.promote import promote
from tests.factories import put_fact

KEY = {"tenant_id": "acme", "subject": "mira", "attribute": "contact_channel"}
READ = {"tenant_id": "acme", "subject": "mira"}


def _put(store: Store, value: str, start: str, **extra: Any) -> pipeline.PutResult:
    fields = KEY | {"value": value, "valid_from": start, "source_episode_id": f"ep-{value}"}
    return put_fact(store, **fields | extra)


def _rows(store: Store) -> int:
    with store.begin() as unit:
        session = unit.session
        return session.scalar(select(func.count()).select_from(FactRow)) or 0


def _events(store: Store) -> list[str]:
    with store.begin() as unit:
        session = unit.session
        return list(session.scalars(select(EventRow.kind).order_by(EventRow.event_id)))


def test_untrusted_is_hidden_until_promoted(store: Store) -> None:
    _put(store, "phone", "2026-01-01T00:00:00Z")
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")

    assert quarantined.fact.status.value == "quarantined"
    assert [fact.value for fact in pipeline.get(store, READ)] == ["phone"]
    assert [f.value for f in pipeline.history(store, READ | {"attribute": "contact_channel"})] == [
        "phone"
    ]
    reviewer = pipeline.get(
        store, READ | {"at": "2026-03-01T00:00:00Z", "include_quarantined": True}
    )
    assert sorted(fact.value for fact in reviewer) == ["email", "phone"]

    promoted = promote(
        store, {"tenant_id": "acme", "fact_id": quarantined.fact.fact_id, "expected_version": 1}
    )

    assert (promoted.fact.trust.value, promoted.fact.status.value) == ("verified", "active")
    assert promoted.fact.version == 2
    (now,) = pipeline.get(store, READ)
    assert (now.value, now.fact_id) == ("email", quarantined.fact.fact_id)
    (before,) = pipeline.get(store, READ | {"at": "2026-01-15T00:00:00Z"})
    assert before.value == "phone"
    assert before.model_dump(mode="json")["valid_to"] == "2026-02-01T00:00:00Z"
    assert now.supersedes_fact_id == before.fact_id
    assert _events(store) == ["write", "quarantine", "promote", "supersede"]


def test_promotion_applies_supersession_rules_at_that_moment(store: Store) -> None:
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")
    _put(store, "chat", "2026-02-01T00:00:00Z")  # verified, same instant, different value

    with pytest.raises(FactConflict):
        promote(store, {"tenant_id": "acme", "fact_id": quarantined.fact.fact_id})

    reviewer = pipeline.get(
        store, READ | {"include_quarantined": True, "at": "2026-03-01T00:00:00Z"}
    )
    assert sorted((f.value, f.status.value) for f in reviewer) == [
        ("chat", "active"),
        ("email", "quarantined"),
    ]
    hidden = pipeline.get(store, READ)
    assert [fact.value for fact in hidden] == ["chat"]
    assert _events(store)[-1] == "conflict"


def test_promoting_a_restatement_keeps_one_interval(store: Store) -> None:
    _put(store, "phone", "2026-01-01T00:00:00Z")
    quarantined = _put(store, "phone", "2026-03-01T00:00:00Z", trust="untrusted")

    promoted = promote(store, {"tenant_id": "acme", "fact_id": quarantined.fact.fact_id})

    assert promoted.fact.status.value == "superseded"  # it only restates the current fact
    history = pipeline.history(store, READ | {"attribute": "contact_channel"})
    assert [(fact.value, fact.valid_to) for fact in history] == [("phone", None)]


def test_only_quarantined_facts_can_be_promoted(store: Store) -> None:
    active = _put(store, "phone", "2026-01-01T00:00:00Z")
    rows = _rows(store)

    with pytest.raises(NotQuarantined):
        promote(store, {"tenant_id": "acme", "fact_id": active.fact.fact_id})

    assert _rows(store) == rows


def test_promote_in_another_tenant_is_not_found(store: Store) -> None:
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")

    with pytest.raises(NotFound):
        promote(store, {"tenant_id": "globex", "fact_id": quarantined.fact.fact_id})
    with pytest.raises(NotFound):
        promote(store, {"tenant_id": "acme", "fact_id": "no-such-fact"})

    assert pipeline.get(store, READ) == []


def test_stale_expected_version_is_refused_and_changes_nothing(store: Store) -> None:
    first = _put(store, "phone", "2026-01-01T00:00:00Z", expected_version=0)
    _put(store, "email", "2026-02-01T00:00:00Z", expected_version=first.fact.version)
    rows = _rows(store)

    # A writer that still believes the phone fact is at version 1 (it is now closed: v2).
    with pytest.raises(VersionConflict) as refused:
        _put(store, "chat", "2026-01-15T00:00:00Z", expected_version=1)

    assert (refused.value.expected, refused.value.actual) == (1, 2)
    assert _rows(store) == rows
    assert [f.value for f in pipeline.history(store, READ | {"attribute": "contact_channel"})] == [
        "phone",
        "email",
    ]
    with pytest.raises(VersionConflict):
        _put(store, "chat", "2026-03-01T00:00:00Z", expected_version=0)


def test_stale_expected_version_on_promote(store: Store) -> None:
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")

    with pytest.raises(VersionConflict):
        promote(
            store, {"tenant_id": "acme", "fact_id": quarantined.fact.fact_id, "expected_version": 2}
        )

    assert pipeline.get(store, READ) == []


def test_correction_supersedes_the_earlier_entry(store: Store) -> None:
    phone = _put(store, "phone", "2026-01-01T00:00:00Z", trust="inferred")
    email = _put(store, "email", "2026-01-01T00:00:00Z", trust="user_confirmed")

    assert email.fact.supersedes_fact_id == phone.fact.fact_id
    assert [fact.value for fact in pipeline.get(store, READ)] == ["email"]
    versions = pipeline.history(store, READ | {"attribute": "contact_channel"}, versions=True)
    phone_versions = [
        (f.version, f.status.value) for f in versions if f.fact_id == phone.fact.fact_id
    ]
    assert phone_versions == [(1, "active"), (2, "superseded")]


def test_a_dismissed_fact_is_hidden_for_good_and_logged(store: Store) -> None:
    _put(store, "phone", "2026-01-01T00:00:00Z")
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")
    fact_id = quarantined.fact.fact_id
    command = {"tenant_id": "acme", "fact_id": fact_id, "actor": "k1", "reason": "spam"}

    dismissed = pipeline.dismiss(store, command | {"idempotency_key": "d1"})

    assert (dismissed.fact.fact_id, dismissed.fact.status) == (fact_id, "dismissed")
    assert pipeline.list_quarantined(store, {"tenant_id": "acme"}) == []
    reviewer = pipeline.get(
        store, READ | {"include_quarantined": True, "at": "2026-03-01T00:00:00Z"}
    )
    assert [fact.value for fact in reviewer] == ["phone"]
    with pytest.raises(NotFound):
        promote(store, {"tenant_id": "acme", "fact_id": fact_id})
    with pytest.raises(NotFound):  # once dismissed, it is gone: a second dismissal finds nothing
        pipeline.dismiss(store, command)
    again = pipeline.dismiss(store, command | {"idempotency_key": "d1"})  # a retry: same answer
    assert (again.fact.fact_id, again.fact.status) == (fact_id, "dismissed")
    assert _events(store) == ["write", "quarantine", "dismiss"]
    log = pipeline.decision_log(store, {"tenant_id": "acme", "subject": "mira"})
    assert (log[0].kind, log[0].actor, log[0].reason) == ("dismiss", "k1", "spam")


def test_only_quarantined_facts_can_be_dismissed_and_not_across_tenants(store: Store) -> None:
    active = _put(store, "phone", "2026-01-01T00:00:00Z")
    with pytest.raises(NotQuarantined):
        pipeline.dismiss(store, {"tenant_id": "acme", "fact_id": active.fact.fact_id})
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")
    with pytest.raises(NotFound):
        pipeline.dismiss(store, {"tenant_id": "other", "fact_id": quarantined.fact.fact_id})
    assert [f.fact_id for f in pipeline.list_quarantined(store, {"tenant_id": "acme"})] == [
        quarantined.fact.fact_id
    ]
    assert [fact.value for fact in pipeline.get(store, READ)] == ["phone"]
    assert _events(store) == ["write", "conflict", "quarantine"]


def test_history_versions_on_the_command_line_includes_quarantined_versions(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import run

    _put(store, "phone", "2026-01-01T00:00:00Z")
    quarantined = _put(store, "email", "2026-02-01T00:00:00Z", trust="untrusted")
    capsys.readouterr()
    args = ["--tenant", "acme", "--subject", "mira", "--attribute", "contact_channel", "--json"]

    assert run(["history", *args, "--versions"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert run(["history", *args]) == 0
    timeline = json.loads(capsys.readouterr().out)

    assert quarantined.fact.fact_id in [version["fact_id"] for version in audit]
    assert {version["status"] for version in audit} == {"active", "quarantined"}
    assert [fact["value"] for fact in timeline] == ["phone"]  # the timeline still hides it
