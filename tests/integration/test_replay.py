"""Replay rebuilds the ledger from the decision log alone, and state survives a restart.

A seeded random workload drives every decision the log knows (write, supersede, restate,
reject, conflict, quarantine, promote, dismiss, expire, forget, purge); the rebuilt `claims`
and `facts` must then equal the live ones column for column, every row version included.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, make_url, select, text

import pipeline
from pipeline import cli
from pipeline.db.models import ClaimRow, EventRow, FactRow
from pipeline.db.store import Store, open_store
from pipeline.errors import ConflictError, InvalidInput, NotFound
from pipeline.ledger.dismiss import dismiss
from pipeline.ledger.expire import expire
from pipeline.ledger.forget import forget
from pipeline.ledger.promote import promote
from pipeline.read.context import Context, assemble
from pipeline.rebuild import replay, replayed
from pipeline.settings import Settings
from schemas.facts import Fact
from schemas.lifecycle import LEDGER_KINDS

TENANTS = ["acme", "globex"]
SCOPES = [("default", "default"), ("planner", "travel")]
SUBJECTS = ["mira", "jonas", "ada"]
VALUES: dict[str, list[Any]] = {
    "home_city": ["Berlin", "Paris", "Rome", "Oslo"],
    "passport_deadline": ["2026-07-15", "2026-06-30", "2026-08-01"],
    "monthly_budget": [1200, 1500.5, "900"],
    "answer_style": ["concise", "detailed"],
    "contact_channel": ["email", "phone", "chat"],
    "languages": ["de", "en", "fr", "nl"],
    "open_cases": ["C-1", "C-2", "C-3"],
    "scratch": ["call back", "check the docs"],
    "compliance_flag": [{"reason": "kyc", "reviewer": "r1"}, {"reason": "aml", "ok": True}],
}
# Weighted so that keys are hit often enough to supersede, restate and collide.
ATTRIBUTES = [
    *["home_city"] * 4,
    *["languages"] * 3,
    *["answer_style"] * 2,
    *["scratch"] * 2,
    "passport_deadline",
    "monthly_budget",
    "contact_channel",
    "open_cases",
    "compliance_flag",
]
TRUSTS = ["verified"] * 4 + ["inferred"] * 2 + ["user_confirmed", "untrusted", "untrusted"]
BASE = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
PLUS_TWO = timezone(timedelta(hours=2))
# Every decision the log knows; the workload must produce each of them at least once.
ALL_DECISIONS = {decision.value for decision in LEDGER_KINDS}


# -- database helpers ------------------------------------------------------------------------


def table_rows(
    store: Store, table: Any, order_by: list[str], exclude: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Every row of `table`, every column except `exclude`, in a stable order."""
    columns = [column for column in table.__table__.columns if column.key not in exclude]
    statement = select(*columns).order_by(*(table.__table__.c[name] for name in order_by))
    with store.engine.connect() as connection:
        return [dict(row._mapping) for row in connection.execute(statement)]


def facts_of(store: Store) -> list[dict[str, Any]]:
    return table_rows(store, FactRow, ["fact_id", "version"], exclude=("row_id",))


def claims_of(store: Store) -> list[dict[str, Any]]:
    return table_rows(store, ClaimRow, ["claim_id"])


def events_of(store: Store) -> list[dict[str, Any]]:
    return table_rows(store, EventRow, ["event_id"])


def count(store: Store, table: Any) -> int:
    with store.engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(table)) or 0)


def _admin(url: str) -> Any:
    parsed = make_url(url)
    return create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")


def _drop_database(url: str) -> None:
    admin = _admin(url)
    with admin.connect() as connection:
        name = make_url(url).database
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def target_url(database_url: str, tmp_path: Path) -> Iterator[str]:
    """An empty database to replay into, on the same backend as the source. On Postgres a
    second database, created and migrated for this test and dropped after it."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'replayed.sqlite3'}"
        return
    url = make_url(database_url).set(database=f"{make_url(database_url).database}_replay")
    rendered = url.render_as_string(hide_password=False)
    _drop_database(rendered)
    admin = _admin(rendered)
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{url.database}"'))
    admin.dispose()
    migrated = Store(Settings(database_url=rendered))
    migrated.upgrade()
    migrated.dispose()
    yield rendered
    _drop_database(rendered)


def fixed_clock(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


# -- reads -----------------------------------------------------------------------------------


def every_read(store: Store, *, past: datetime, known_at: datetime) -> dict[str, Any]:
    """The answers of every read over every scope and subject, as JSON-ready data."""
    answers: dict[str, Any] = {}
    for tenant in TENANTS:
        for agent, purpose in SCOPES:
            for subject in SUBJECTS:
                query = {
                    "tenant_id": tenant,
                    "agent_id": agent,
                    "purpose": purpose,
                    "subject": subject,
                }
                key = f"{tenant}/{agent}/{purpose}/{subject}"
                answers[key] = {
                    "get": _dump(pipeline.get(store, query)),
                    "get_past": _dump(pipeline.get(store, query | {"at": past})),
                    "get_known": _dump(pipeline.get(store, query | {"known_at": known_at})),
                    "reviewer": _dump(pipeline.get(store, query | {"include_quarantined": True})),
                    "history": _dump(pipeline.history(store, query)),
                    "versions": _dump(pipeline.history(store, query, versions=True)),
                    "context": _context(assemble(store, query | {"budget_tokens": 10_000})),
                }
    return answers


# The read API orders by attribute and valid time only; facts that tie there (two values of a
# multi-valued attribute from the same instant) come back in whatever order the database's plan
# yields, which differs between two copies of one ledger. Answers are compared in a total order.
def _dump(facts: list[Fact]) -> list[dict[str, Any]]:
    ordered = sorted(
        facts, key=lambda fact: (fact.attribute, fact.valid_from, fact.fact_id, fact.version)
    )
    return [fact.model_dump(mode="json") for fact in ordered]


def _context(context: Context) -> dict[str, Any]:
    dumped = context.model_dump(mode="json")
    dumped.pop("text")  # the items joined in their order, which ties make differ (see above)
    for part in ("items", "skipped"):
        dumped[part].sort(key=lambda item: item["fact_id"])
    return dumped


# -- the workload ----------------------------------------------------------------------------


@dataclass
class Workload:
    """A seeded random mix of every write-side operation; remembers what it did."""

    store: Store
    clock: Any
    rng: random.Random
    puts: list[dict[str, Any]] = field(default_factory=list)
    keyed: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    serial: int = 0

    def run(self, operations: int) -> None:
        for _ in range(operations):
            self.clock.set(self.clock.now + timedelta(minutes=self.rng.randrange(1, 600)))
            roll = self.rng.random()
            if roll < 0.45:
                self.put(self.fresh_put())
            elif roll < 0.55 and self.puts:
                self.put(self.restatement())
            elif roll < 0.63 and self.puts:
                self.put(self.collision())
            elif roll < 0.73 and self.quarantined:
                self.promote()
            elif roll < 0.80 and self.keyed:
                self.repeat()
            elif roll < 0.83 and self.keyed:
                self.reuse_key()
            elif roll < 0.90:
                self.expire()
            elif roll < 0.94:
                self.forget()
            else:
                self.put(self.fresh_put() | {"expected_version": self.rng.choice([0, 1, 1, 2])})

    # -- command builders

    def fresh_put(self) -> dict[str, Any]:
        rng = self.rng
        agent, purpose = rng.choice(SCOPES)
        attribute = rng.choice(ATTRIBUTES)
        start = BASE + timedelta(days=7 * rng.randrange(16), hours=rng.choice([0, 0, 5]))
        self.serial += 1
        command: dict[str, Any] = {
            "tenant_id": rng.choice(TENANTS),
            "agent_id": agent,
            "purpose": purpose,
            "subject": rng.choice(SUBJECTS),
            "attribute": attribute,
            "value": rng.choice(VALUES[attribute]),
            # Offsets other than Z must be normalised, so send some of them that way.
            "valid_from": start if rng.random() < 0.7 else start.astimezone(PLUS_TWO).isoformat(),
            "source_episode_id": f"ep-{self.serial}",
            "evidence": f"said in episode {self.serial}",
            "trust": rng.choice(TRUSTS),
            "confidence": rng.choice([1.0, 0.9, 0.55]),
        }
        if rng.random() < 0.12:
            command["valid_to"] = start + timedelta(days=rng.choice([3, 10, 30]))
        if rng.random() < 0.06:
            command["expires_at"] = self.clock.now + timedelta(days=rng.choice([1, 2, 5]))
        if rng.random() < 0.15:
            command["idempotency_key"] = f"key-{self.serial}"
        return command

    def restatement(self) -> dict[str, Any]:
        """An earlier statement again: same key, start and value, from another source."""
        self.serial += 1
        earlier = self.rng.choice(self.puts)
        command = {
            name: earlier[name]
            for name in (
                "tenant_id",
                "agent_id",
                "purpose",
                "subject",
                "attribute",
                "value",
                "valid_from",
            )
        }
        return command | {
            "source_episode_id": f"ep-{self.serial}",
            "trust": self.rng.choice(TRUSTS),
        }

    def collision(self) -> dict[str, Any]:
        """Another value at an earlier statement's start: a conflict, a rejection or a win."""
        command = self.restatement()
        others = [value for value in VALUES[command["attribute"]] if value != command["value"]]
        return command | {"value": self.rng.choice(others)}

    # -- operations

    def put(self, command: dict[str, Any]) -> None:
        try:
            result = pipeline.put(self.store, command)
        except ConflictError as refused:
            self.outcomes[type(refused).__name__] += 1
            return
        self.outcomes["written" if result.written else "unchanged"] += 1
        self.puts.append(command)
        if result.fact.status.value == "quarantined":
            self.quarantined.append((command["tenant_id"], result.fact.fact_id))
        if "idempotency_key" in command:
            self.keyed.append(("put", command, result))

    def promote(self) -> None:
        tenant, fact_id = self.rng.choice(self.quarantined)
        command: dict[str, Any] = {"tenant_id": tenant, "fact_id": fact_id}
        if self.rng.random() < 0.1:
            command["tenant_id"] = next(other for other in TENANTS if other != tenant)
        if self.rng.random() < 0.1:
            command["expected_version"] = self.rng.choice([1, 2])
        if self.rng.random() < 0.2:
            self.serial += 1
            command["idempotency_key"] = f"promote-{self.serial}"
        # A reviewer promotes most quarantined facts and dismisses some.
        operation = "dismiss" if self.rng.random() < 0.25 else "promote"
        try:
            result = (dismiss if operation == "dismiss" else promote)(self.store, command)
        except (ConflictError, NotFound) as refused:
            self.outcomes[f"{operation}:{type(refused).__name__}"] += 1
            return
        self.outcomes["dismissed" if operation == "dismiss" else "promoted"] += 1
        if "idempotency_key" in command:
            self.keyed.append((operation, command, result))

    def expire(self) -> None:
        # Sometimes ahead of the clock, so that later writes are recorded before the stamp.
        ahead = timedelta(days=self.rng.choice([0, 0, 3, 10, 95]))
        command: dict[str, Any] = {"now": self.clock.now + ahead, "force": True}
        if self.rng.random() < 0.3:
            command["tenant_id"] = self.rng.choice(TENANTS)
        self.outcomes["expired"] += len(expire(self.store, command).expired_fact_ids)

    def forget(self) -> None:
        command: dict[str, Any] = {
            "tenant_id": self.rng.choice(TENANTS),
            "subject": self.rng.choice(SUBJECTS),
            "purge": self.rng.random() < 0.4,
        }
        if self.rng.random() < 0.4:
            self.serial += 1
            command["idempotency_key"] = f"forget-{self.serial}"
        result = forget(self.store, command)
        self.outcomes["forgotten"] += result.hidden
        if "idempotency_key" in command:
            self.keyed.append(("forget", command, result))

    def repeat(self) -> None:
        """A keyed command sent again: the first result comes back and nothing is logged."""
        operation, command, first = self.rng.choice(self.keyed)
        before = count(self.store, EventRow)
        try:
            if operation == "put":
                again = pipeline.put(self.store, command)
                assert (again.fact.fact_id, again.fact.version) == (
                    first.fact.fact_id,
                    first.fact.version,
                )
                assert again.written is False
            elif operation in ("promote", "dismiss"):
                again = (dismiss if operation == "dismiss" else promote)(self.store, command)
                assert (again.fact.fact_id, again.fact.version) == (
                    first.fact.fact_id,
                    first.fact.version,
                )
            else:
                assert (
                    forget(self.store, command).model_dump() == first.model_dump()
                )  # the answer again
        except NotFound:  # its fact was forgotten since: never answered again
            assert operation != "forget"
            assert self._forgotten(first.fact.fact_id), f"repeated {operation} refused"
        assert count(self.store, EventRow) == before, f"repeated {operation} was logged again"
        self.outcomes["repeated"] += 1

    def _forgotten(self, fact_id: str) -> bool:
        with self.store.begin() as unit:
            hidden = select(FactRow.forgotten_at).where(FactRow.fact_id == fact_id).limit(1)
            return unit.session.scalar(hidden) is not None

    def reuse_key(self) -> None:
        operation, command, _ = self.rng.choice(self.keyed)
        if operation != "put":
            return
        changed = command | {"source_episode_id": f"{command['source_episode_id']}-changed"}
        with pytest.raises(pipeline.IdempotencyConflict):
            pipeline.put(self.store, changed)
        self.outcomes["IdempotencyConflict"] += 1


def run_workload(store: Store, clock: Any, operations: int, seed: int) -> Workload:
    workload = Workload(store, clock, random.Random(seed))
    workload.run(operations)
    return workload


def operations_for(url: str) -> int:
    return 600 if url.startswith("sqlite") else 250


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_replay_rebuilds_the_ledger_from_the_log_alone(
    clocked_store: Store, clock: Any, database_url: str, target_url: str
) -> None:
    workload = run_workload(clocked_store, clock, operations_for(database_url), seed=20261129)

    live_events = events_of(clocked_store)
    kinds = {event["kind"] for event in live_events}
    assert kinds == ALL_DECISIONS, f"workload missed {ALL_DECISIONS - kinds}"
    for outcome in (
        "written",
        "unchanged",
        "FactConflict",
        "TrustRejected",
        "promoted",
        "dismissed",
    ):
        assert workload.outcomes[outcome] > 0, workload.outcomes
    live_facts, live_claims = facts_of(clocked_store), claims_of(clocked_store)

    target = Store(Settings(database_url=target_url), catalog=clocked_store.catalog)
    try:
        report = replay(clocked_store, target)
        assert report.events == len(live_events)
        assert report.applied == sum(
            1 for event in live_events if event["command"] is not None and replayed(event["kind"])
        )
        rebuilt_facts = facts_of(target)
        assert len(rebuilt_facts) == len(live_facts)
        for live, rebuilt in zip(live_facts, rebuilt_facts, strict=True):
            assert rebuilt == live
        assert claims_of(target) == live_claims
        assert events_of(target) == live_events

        # The answers agree too, at one instant on both sides.
        moment = clock.now + timedelta(seconds=1)
        source_view = Store(
            Settings(database_url=database_url), clock=fixed_clock(moment), catalog=target.catalog
        )
        target_view = Store(
            Settings(database_url=target_url), clock=fixed_clock(moment), catalog=target.catalog
        )
        try:
            known_at = clock.now - timedelta(days=20)
            past = BASE + timedelta(days=40)
            assert every_read(target_view, past=past, known_at=known_at) == every_read(
                source_view, past=past, known_at=known_at
            )
        finally:
            source_view.dispose()
            target_view.dispose()
    finally:
        target.dispose()


def test_replayed_ledger_accepts_new_writes_and_replays_again(
    clocked_store: Store, clock: Any, database_url: str, target_url: str, tmp_path: Path
) -> None:
    """The rebuilt database is a working ledger: the event sequence continues past the copied
    ids and the copied log can itself be replayed."""
    run_workload(clocked_store, clock, 60, seed=7)
    target = Store(Settings(database_url=target_url), clock=clock, catalog=clocked_store.catalog)
    try:
        replay(clocked_store, target)
        last = max(event["event_id"] for event in events_of(target))
        pipeline.put(
            target,
            {
                "tenant_id": "acme",
                "subject": "new-subject",
                "attribute": "home_city",
                "value": "Lisbon",
                "valid_from": BASE,
                "source_episode_id": "after-replay",
            },
        )
        newest = events_of(target)[-1]
        assert newest["event_id"] > last
        assert newest["kind"] == "write"
        if database_url.startswith("sqlite"):
            again = Store(Settings(database_url=f"sqlite:///{tmp_path / 'second.sqlite3'}"))
            try:
                replay(target, again)
                assert facts_of(again) == facts_of(target)
                assert claims_of(again) == claims_of(target)
            finally:
                again.dispose()
    finally:
        target.dispose()


def test_replay_refuses_a_non_empty_target(
    clocked_store: Store, clock: Any, target_url: str
) -> None:
    run_workload(clocked_store, clock, 30, seed=3)
    target = Store(Settings(database_url=target_url), catalog=clocked_store.catalog)
    try:
        replay(clocked_store, target)
        before = (facts_of(target), claims_of(target), events_of(target))
        with pytest.raises(InvalidInput) as refused:
            replay(clocked_store, target)
        assert refused.value.field == "to"
        assert (facts_of(target), claims_of(target), events_of(target)) == before
    finally:
        target.dispose()


def test_replay_refuses_a_target_holding_only_events(
    clocked_store: Store, clock: Any, target_url: str
) -> None:
    """An empty ledger with a log is not empty: replaying on top would duplicate event ids."""
    run_workload(clocked_store, clock, 10, seed=5)
    target = Store(Settings(database_url=target_url), catalog=clocked_store.catalog)
    try:
        target.ensure_schema()
        forget(target, {"tenant_id": "acme", "subject": "nobody"})
        assert count(target, EventRow) == 1
        with pytest.raises(InvalidInput):
            replay(clocked_store, target)
        assert count(target, FactRow) == count(target, ClaimRow) == 0
        assert count(target, EventRow) == 1
    finally:
        target.dispose()


def test_cli_replay(
    clocked_store: Store,
    clock: Any,
    cli_env: Callable[[], None],
    target_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_workload(clocked_store, clock, 80, seed=11)
    live = (facts_of(clocked_store), claims_of(clocked_store), events_of(clocked_store))
    capsys.readouterr()

    assert cli.run(["replay", "--to", target_url]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"replayed {len(live[2])} events (")
    assert err.count("\n") == 1

    target = Store(Settings(database_url=target_url), catalog=clocked_store.catalog)
    try:
        assert (facts_of(target), claims_of(target), events_of(target)) == live
    finally:
        target.dispose()

    # A second run refuses: the target is no longer empty. One line, exit 2.
    assert cli.run(["replay", "--to", target_url]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("sgam: --to: ")
    assert err.count("\n") == 1


def test_state_is_restored_after_restart(database_url: str, clock: Any) -> None:
    store = open_store(Settings(database_url=database_url), clock=clock)
    try:
        workload = run_workload(store, clock, 120, seed=42)
        keyed_puts = [entry for entry in workload.keyed if entry[0] == "put"]
        assert keyed_puts, "the workload must leave a keyed put to repeat after the restart"
        moment = clock.now + timedelta(seconds=1)
        known_at = clock.now - timedelta(days=3)
        past = BASE + timedelta(days=30)
        view = Store(Settings(database_url=database_url), clock=fixed_clock(moment))
        before = every_read(view, past=past, known_at=known_at)
        view.dispose()
        tables = (facts_of(store), claims_of(store), events_of(store))
    finally:
        store.dispose()
    assert any(answer["get"] for answer in before.values()), "nothing to compare after restart"

    reopened = open_store(Settings(database_url=database_url), clock=fixed_clock(moment))
    try:
        assert every_read(reopened, past=past, known_at=known_at) == before
        assert (facts_of(reopened), claims_of(reopened), events_of(reopened)) == tables
        # Idempotency keys survive the restart too: a repeated put changes nothing.
        _, command, first = keyed_puts[-1]
        again = pipeline.put(reopened, command)
        assert again.written is False
        assert again.fact.fact_id == first.fact.fact_id
        assert events_of(reopened) == tables[2]
    finally:
        reopened.dispose()
