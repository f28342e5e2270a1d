"""Forget hides a subject from every read in one idempotent step; purge also erases its content.

The purge check does not trust a list of columns: it asks the database catalogue for every
text-like column of every table and searches all of them for the purged strings.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

import pipeline
from pipeline import cli
from pipeline.db.models import ClaimRow, EventRow, FactRow
from pipeline.db.store import Store
from pipeline.errors import FactConflict, InvalidInput, NotFound, TrustRejected, VersionConflict
from pipeline.ledger.expire import expire
from pipeline.ledger.forget import ForgetResult, forget
from pipeline.ledger.log import decision_log
from pipeline.ledger.promote import promote
from pipeline.ledger.results import PutResult
from pipeline.read.context import assemble
from schemas.facts import Fact
from tests.factories import put_fact
from tests.integration.ledger_helpers import occurrences, text_columns

TENANT = "acme"
SCOPES = [("default", "default"), ("planner", "travel")]
JAN, FEB, MAR, APR = (datetime(2026, month, 1, tzinfo=UTC) for month in (1, 2, 3, 4))


def put(
    store: Store, subject: str, attribute: str, value: Any, valid_from: datetime, **extra: Any
) -> PutResult:
    fields = {"subject": subject, "attribute": attribute, "value": value}
    fields |= {"valid_from": valid_from, "source_episode_id": f"ep-{uuid.uuid4().hex[:8]}"}
    return put_fact(store, **fields | extra)


def dump(facts: list[Fact]) -> list[dict[str, Any]]:
    return [fact.model_dump(mode="json") for fact in facts]


def every_read(
    store: Store, subject: str, *, tenant: str = TENANT, known_at: datetime
) -> dict[str, Any]:
    """Every kind of read of the subject, in every scope, as comparable data."""
    answers: dict[str, Any] = {}
    for agent, purpose in SCOPES:
        query = {"tenant_id": tenant, "agent_id": agent, "purpose": purpose, "subject": subject}
        context = assemble(store, query | {"budget_tokens": 10_000})
        answers[f"{agent}/{purpose}"] = {
            "get": dump(pipeline.get(store, query)),
            "get_at_past": dump(pipeline.get(store, query | {"at": FEB})),
            "get_known_before": dump(pipeline.get(store, query | {"known_at": known_at})),
            "get_past_known_before": dump(
                pipeline.get(store, query | {"at": FEB, "known_at": known_at})
            ),
            "get_reviewer": dump(pipeline.get(store, query | {"include_quarantined": True})),
            "get_attribute": dump(pipeline.get(store, query | {"attribute": "home_city"})),
            "history": dump(pipeline.history(store, query)),
            "history_known_before": dump(pipeline.history(store, query | {"known_at": known_at})),
            "history_reviewer": dump(
                pipeline.history(store, query | {"include_quarantined": True})
            ),
            "versions": dump(pipeline.history(store, query, versions=True)),
            "versions_reviewer": dump(
                pipeline.history(store, query | {"include_quarantined": True}, versions=True)
            ),
            "context": [item.fact_id for item in context.items + context.skipped],
        }
    return answers


def is_empty(answers: dict[str, Any]) -> bool:
    return all(not found for scope in answers.values() for found in scope.values())


def rows(store: Store, table: Any, order_by: list[str]) -> list[dict[str, Any]]:
    columns = [column for column in table.__table__.columns if column.key != "row_id"]
    statement = select(*columns).order_by(*(table.__table__.c[name] for name in order_by))
    with store.engine.connect() as connection:
        return [dict(row._mapping) for row in connection.execute(statement)]


def ledger(store: Store) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return rows(store, FactRow, ["fact_id", "version"]), rows(store, ClaimRow, ["claim_id"])


# -- forget ----------------------------------------------------------------------------------


def test_forget_hides_every_fact_about_the_subject_from_every_read(
    clocked_store: Store, clock: Any
) -> None:
    store = clocked_store
    planner = {"agent_id": "planner", "purpose": "travel"}
    written = [
        put(store, "mira", "home_city", "Berlin", JAN),
        put(store, "mira", "home_city", "Paris", MAR),  # supersedes Berlin from March on
        put(store, "mira", "languages", "de", JAN),
        put(store, "mira", "languages", "en", FEB),
        put(store, "mira", "passport_deadline", "2026-07-15", JAN, valid_to=APR),
        put(store, "mira", "answer_style", "concise", JAN, trust="untrusted"),  # quarantined
        put(store, "mira", "scratch", "call her back", JAN),
        put(store, "mira", "home_city", "Rome", JAN, **planner),
    ]
    restated = put(store, "mira", "home_city", "Paris", MAR, source_episode_id="again")
    assert restated.written is False
    assert all(result.written for result in written)
    quarantined = written[5].fact
    assert quarantined.status.value == "quarantined"
    # Neighbours that must not be touched: another subject, the same subject in another tenant.
    put(store, "jonas", "home_city", "Oslo", JAN)
    put(store, "jonas", "scratch", "ask about Oslo", JAN)
    pipeline.put(
        store,
        {
            "tenant_id": "globex",
            "subject": "mira",
            "attribute": "home_city",
            "value": "Madrid",
            "valid_from": JAN,
            "source_episode_id": "g1",
        },
    )

    known_before = clock.now
    before = every_read(store, "mira", known_at=known_before)
    assert [fact["value"] for fact in before["default/default"]["get_at_past"]] == [
        "Berlin",
        "de",
        "en",
        "2026-07-15",
        "call her back",
    ]
    assert before["planner/travel"]["get"][0]["value"] == "Rome"
    assert before["default/default"]["get_reviewer"] != before["default/default"]["get"]
    neighbours = {
        "jonas": every_read(store, "jonas", known_at=known_before),
        "globex": every_read(store, "mira", tenant="globex", known_at=known_before),
    }
    assert not is_empty(neighbours["jonas"])
    assert not is_empty(neighbours["globex"])

    clock.set(clock.now + timedelta(hours=1))
    result = forget(store, {"tenant_id": TENANT, "subject": "mira"})

    # Every fact that was ever written about mira in this tenant, quarantined ones included.
    assert result == ForgetResult(hidden=len({r.fact.fact_id for r in written}), purged=False)
    after = every_read(store, "mira", known_at=known_before)
    assert is_empty(after), after
    assert every_read(store, "jonas", known_at=known_before) == neighbours["jonas"]
    globex_after = every_read(store, "mira", tenant="globex", known_at=known_before)
    assert globex_after == neighbours["globex"]
    forgets = [
        event
        for event in decision_log(
            store, {"tenant_id": TENANT, "subject": "mira", "oldest_first": True}
        )
        if event.kind == "forget"
    ]
    assert len(forgets) == 1
    assert forgets[0].reason == f"{result.hidden} facts hidden"

    # A forgotten quarantined fact cannot be promoted back into view.
    with pytest.raises(NotFound):
        promote(store, {"tenant_id": TENANT, "fact_id": quarantined.fact_id})
    # Nor does the nightly expiry resurrect forgotten facts as new versions.
    expired = expire(store, {"now": clock.now + timedelta(days=30), "force": True}).expired_fact_ids
    mira_ids = {r.fact.fact_id for r in written}
    assert expired
    assert not mira_ids & set(expired)
    assert is_empty(every_read(store, "mira", known_at=known_before))

    # Idempotent: a second forget hides nothing more and changes no row.
    state = ledger(store)
    assert forget(store, {"tenant_id": TENANT, "subject": "mira"}) == ForgetResult(
        hidden=0, purged=False
    )
    assert ledger(store) == state
    assert is_empty(every_read(store, "mira", known_at=known_before))

    # New information after the forget is visible, and owes nothing to the forgotten facts:
    # a different value at Berlin's start is no conflict, and Paris no longer cuts it short.
    clock.set(clock.now + timedelta(hours=1))
    fresh = put(store, "mira", "home_city", "Lisbon", JAN)
    assert fresh.written
    assert fresh.fact.supersedes_fact_id is None
    (now,) = pipeline.get(store, {"tenant_id": TENANT, "subject": "mira"})
    assert (now.fact_id, now.value, now.valid_to) == (fresh.fact.fact_id, "Lisbon", None)
    (timeline,) = pipeline.history(store, {"tenant_id": TENANT, "subject": "mira"})
    assert timeline.fact_id == fresh.fact.fact_id
    assert forget(store, {"tenant_id": TENANT, "subject": "mira"}) == ForgetResult(
        hidden=1, purged=False
    )


def test_forget_with_an_idempotency_key_returns_the_first_result(clocked_store: Store) -> None:
    put(clocked_store, "mira", "home_city", "Berlin", JAN)
    put(clocked_store, "mira", "languages", "de", JAN)
    command = {"tenant_id": TENANT, "subject": "mira", "idempotency_key": "forget-mira-1"}
    assert forget(clocked_store, command) == ForgetResult(hidden=2, purged=False)
    events = decision_log(clocked_store, {"tenant_id": TENANT, "oldest_first": True})
    assert forget(clocked_store, command) == ForgetResult(hidden=2, purged=False, replayed=True)
    assert decision_log(clocked_store, {"tenant_id": TENANT, "oldest_first": True}) == events
    with pytest.raises(pipeline.IdempotencyConflict):
        forget(clocked_store, command | {"purge": True})


# -- purge -----------------------------------------------------------------------------------


def test_the_scan_covers_every_content_column(store: Store) -> None:
    columns = set(text_columns(store))
    for expected in [
        ("facts", "value"),
        ("facts", "evidence"),
        ("claims", "value"),
        ("claims", "evidence"),
        ("events", "command"),
        ("events", "reason"),
        ("idempotency_keys", "result"),
    ]:
        assert expected in columns


def test_purge_erases_all_content_about_the_subject_and_keeps_audit_metadata(
    clocked_store: Store, clock: Any
) -> None:
    store = clocked_store
    mark = f"PURGE-ME-{uuid.uuid4().hex[:12]}"
    keep = f"KEEP-{uuid.uuid4().hex[:12]}"
    subject = f"subject-{uuid.uuid4().hex[:8]}"

    def about(attribute: str, value: Any, valid_from: datetime, **extra: Any) -> Any:
        return put(store, subject, attribute, value, valid_from, evidence=f"{mark}-ev", **extra)

    written = [
        about("home_city", f"{mark}-city-1", JAN, idempotency_key="k-city-1"),
        about("home_city", f"{mark}-city-2", MAR),
        about(
            "compliance_flag",
            {"note": f"{mark}-json", "nested": {"list": [f"{mark}-deep"]}, f"{mark}-key": 1},
            JAN,
            idempotency_key="k-flag",
        ),
        about("languages", f"{mark}-lang", JAN, agent_id="planner", purpose="travel"),
        about("shipping_address", f"{mark}-addr", JAN, trust="untrusted", idempotency_key="k-q"),
        about("employer", f"{mark}-employer", JAN, trust="untrusted"),
        about("scratch", f"{mark}-scratch", JAN),
    ]
    assert about("home_city", f"{mark}-city-2", MAR).written is False  # restated: provenance
    promoted = promote(
        store,
        {"tenant_id": TENANT, "fact_id": written[5].fact.fact_id, "idempotency_key": "k-promote"},
    )
    assert promoted.fact.value == f"{mark}-employer"
    # Refused writes are logged with their command, content included.
    with pytest.raises(FactConflict):
        about("home_city", f"{mark}-conflict", JAN)
    with pytest.raises(TrustRejected):
        about("home_city", f"{mark}-rejected", JAN, trust="inferred")
    with pytest.raises(VersionConflict):
        about("home_city", f"{mark}-version", APR, expected_version=7)
    with pytest.raises(pipeline.IdempotencyConflict):
        about("home_city", f"{mark}-reused-key", JAN, idempotency_key="k-city-1")
    clock.set(clock.now + timedelta(days=1))
    assert (
        written[6].fact.fact_id
        in expire(store, {"now": clock.now + timedelta(days=8), "force": True}).expired_fact_ids
    )

    # Neighbours with content of their own: another subject, the same subject elsewhere.
    put(store, "keeper", "home_city", f"{keep}-city", JAN, evidence=f"{keep}-ev")
    pipeline.put(
        store,
        {
            "tenant_id": "globex",
            "subject": subject,
            "attribute": "home_city",
            "value": f"{keep}-other-tenant",
            "valid_from": JAN,
            "source_episode_id": "g1",
            "idempotency_key": "k-city-1",
        },
    )

    before = occurrences(store, mark)
    for table in ("facts", "claims", "events", "idempotency_keys"):
        assert any(hit.startswith(f"{table}.") for hit in before), (table, before)
    facts_before, claims_before = ledger(store)
    mine = [row for row in facts_before if row["tenant_id"] == TENANT and row["subject"] == subject]
    events_before = decision_log(
        store, {"tenant_id": TENANT, "subject": subject, "limit": 1000, "oldest_first": True}
    )
    assert {event.kind for event in events_before} >= {
        "write",
        "supersede",
        "restate",
        "quarantine",
        "promote",
        "conflict",
        "reject",
        "expire",
    }

    clock.set(clock.now + timedelta(hours=1))
    result = forget(store, {"tenant_id": TENANT, "subject": subject, "purge": True})

    assert (result.hidden, result.purged) == (len({r.fact.fact_id for r in written}), True)
    assert occurrences(store, mark) == {}
    survivors = occurrences(store, keep)
    for column in ("facts.value", "facts.evidence", "claims.value", "events.command"):
        assert column in survivors, survivors
    assert pipeline.get(store, {"tenant_id": "globex", "subject": subject})[0].value == (
        f"{keep}-other-tenant"
    )

    # Non-content audit metadata stays: every row, id and timestamp; hashes of content are
    # replaced by tokens that keep which rows were equal but cannot be traced back.
    facts_after, claims_after = ledger(store)
    erased = [
        row for row in facts_after if row["tenant_id"] == TENANT and row["subject"] == subject
    ]
    assert len(erased) == len(mine)
    for old, new in zip(mine, erased, strict=True):
        assert new["value"] is None
        assert new["evidence"] is None
        assert new["forgotten_at"] is not None
        content = {"value", "evidence", "forgotten_at", "value_hash", "slot"}
        assert {k: v for k, v in new.items() if k not in content} == {
            k: v for k, v in old.items() if k not in content
        }
        assert len(new["value_hash"]) == 64
        assert new["value_hash"].startswith("~")
        assert new["value_hash"] != old["value_hash"]
        assert (new["slot"] == "") == (old["slot"] == "")
    old_hashes = [row["value_hash"] for row in mine]
    new_hashes = [row["value_hash"] for row in erased]
    for i, j in [(i, j) for i in range(len(mine)) for j in range(len(mine))]:
        assert (old_hashes[i] == old_hashes[j]) == (new_hashes[i] == new_hashes[j])
    assert [row["claim_id"] for row in claims_after] == [row["claim_id"] for row in claims_before]
    assert all(
        row["value"] is None and row["value_hash"]
        for row in claims_after
        if row["tenant_id"] == TENANT and row["subject"] == subject
    )
    events_after = decision_log(
        store, {"tenant_id": TENANT, "subject": subject, "limit": 1000, "oldest_first": True}
    )
    assert [e.event_id for e in events_after[:-1]] == [e.event_id for e in events_before]
    assert events_after[-1].kind == "purge"
    # The log lists a forgotten subject's events without their payloads; the rows themselves
    # hold what the purge left of them.
    kept = {row["event_id"]: row["command"] for row in rows(store, EventRow, ["event_id"])}
    for old, new in zip(events_before, events_after, strict=False):
        assert new.command is None
        assert (new.kind, new.fact_ids, new.occurred_at) == (
            old.kind,
            old.fact_ids,
            old.occurred_at,
        )
        # The hash of an event is recomputed over what is left of its payload.
        assert (new.content_hash == old.content_hash) == (kept[new.event_id] == old.command)
        if old.command and old.command.get("op") == "put":
            claim = kept[new.event_id]["claim"]
            assert claim["value"] is None
            assert claim["evidence"] is None
            assert claim["claim_id"] == old.command["claim"]["claim_id"]
            assert claim["value_hash"].startswith("~")

    # Nothing is readable and a repeated purge is a no-op.
    assert is_empty(every_read(store, subject, known_at=clock.now))
    again = forget(store, {"tenant_id": TENANT, "subject": subject, "purge": True})
    assert (again.hidden, again.purged) == (0, True)


def test_purge_after_a_plain_forget_still_erases(clocked_store: Store) -> None:
    mark = f"PURGE-ME-{uuid.uuid4().hex[:12]}"
    put(clocked_store, "mira", "home_city", f"{mark}-city", JAN, evidence=f"{mark}-ev")
    assert forget(clocked_store, {"tenant_id": TENANT, "subject": "mira"}) == ForgetResult(
        hidden=1, purged=False
    )
    # A tombstone hides, it does not erase.
    assert occurrences(clocked_store, mark)
    purged = forget(clocked_store, {"tenant_id": TENANT, "subject": "mira", "purge": True})
    assert (purged.hidden, purged.purged) == (0, True)
    assert occurrences(clocked_store, mark) == {}


# -- the command line ------------------------------------------------------------------------


def test_cli_forget_prints_json(
    store: Store, cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    mark = f"PURGE-ME-{uuid.uuid4().hex[:12]}"
    put(store, "mira", "home_city", mark, JAN)
    put(store, "mira", "languages", "de", JAN)
    put(store, "jonas", "home_city", "Oslo", JAN)
    capsys.readouterr()

    assert cli.run(["forget", "--tenant", TENANT, "--subject", "mira", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"hidden": 2, "purged": False, "files_scrubbed": None}
    assert err == ""
    assert pipeline.get(store, {"tenant_id": TENANT, "subject": "mira"}) == []
    assert len(pipeline.get(store, {"tenant_id": TENANT, "subject": "jonas"})) == 1
    assert occurrences(store, mark)

    assert cli.run(["forget", "--tenant", TENANT, "--subject", "mira", "--purge", "--json"]) == 0
    out, err = capsys.readouterr()
    # SQLite drops erased content from its files at once; PostgreSQL needs purge-vacuum.
    scrubbed = not store.is_postgres
    assert json.loads(out) == {"hidden": 0, "purged": True, "files_scrubbed": scrubbed}
    assert ("sgam purge-vacuum" in err) is not scrubbed
    assert occurrences(store, mark) == {}


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--tenant", TENANT, "--subject", ""], "--subject"),
        (["--tenant", TENANT, "--subject", "  "], "--subject"),
        (["--tenant", "", "--subject", "mira"], "--tenant"),
    ],
)
def test_cli_forget_rejects_bad_input(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    option: str,
) -> None:
    put(store, "mira", "home_city", "Berlin", JAN)
    before = ledger(store)
    capsys.readouterr()

    assert cli.run(["forget", *args, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"sgam: {option}: ")
    assert err.endswith("\n")
    assert err.count("\n") == 1
    assert ledger(store) == before
    with pytest.raises(InvalidInput):
        forget(store, {"tenant_id": TENANT, "subject": ""})
