"""Tenant, agent and purpose are hard boundaries: no read, promotion or forget crosses them.

The property test lets several scopes write the same subject and attribute names in random
interleavings and compares every read with a small in-memory model of the caller's scope only.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

import pipeline
from pipeline.db.models import ClaimRow, EventRow, FactRow, IdempotencyRow
from pipeline.db.store import Store
from pipeline.errors import FactConflict, NotFound, NotQuarantined, TrustRejected
from pipeline.ledger.forget import forget
from pipeline.ledger.log import decision_log
from pipeline.ledger.promote import promote
from pipeline.read.context import assemble
from schemas.facts import Fact
from tests.factories import fact_command

AGENTS = ["a0", "a1"]
PURPOSES = ["p0", "p1"]
SUBJECTS = ["s0", "s1"]
VALUES = {
    "home_city": ["Berlin", "Paris", "Rome"],
    "answer_style": ["concise", "detailed"],
    "languages": ["de", "en", "fr"],
}
MANY = {"languages"}
RANK = {"untrusted": 0, "inferred": 1, "verified": 2, "user_confirmed": 3}
STARTS = [datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=30 * step) for step in range(3)]

Scope = tuple[str, str, str]  # tenant, agent, purpose
Key = tuple[str, str, str, str]  # tenant, agent, purpose, subject


# -- the model -------------------------------------------------------------------------------


@dataclass
class Pending:
    """A quarantined fact as the model sees it."""

    fact_id: str
    key: Key
    attribute: str
    value: str
    start: datetime
    released: bool = False
    forgotten: bool = False


@dataclass
class Model:
    """What each (scope, subject) should hold: per attribute, the winning (value, trust rank)
    at each start for single-valued attributes, the starts of each value for multi-valued ones."""

    one: dict[tuple[Key, str], dict[datetime, tuple[str, int]]] = field(default_factory=dict)
    many: dict[tuple[Key, str], dict[str, set[datetime]]] = field(default_factory=dict)
    pending: list[Pending] = field(default_factory=list)

    def accept(self, key: Key, attribute: str, value: str, start: datetime, rank: int) -> str:
        """'ok', 'FactConflict' or 'TrustRejected', applying the claim when it is accepted."""
        if attribute in MANY:
            self.many.setdefault((key, attribute), {}).setdefault(value, set()).add(start)
            return "ok"
        winners = self.one.setdefault((key, attribute), {})
        held = winners.get(start)
        if held is None or rank > held[1]:
            winners[start] = (value, rank)
        elif held[0] != value:
            return "FactConflict" if rank == held[1] else "TrustRejected"
        return "ok"

    def current(self, key: Key) -> dict[str, list[str]]:
        """attribute -> the values holding now (every start lies in the past)."""
        found: dict[str, list[str]] = {}
        for (owner, attribute), winners in self.one.items():
            if owner == key and winners:
                found[attribute] = [winners[max(winners)][0]]
        for (owner, attribute), values in self.many.items():
            if owner == key and values:
                found[attribute] = sorted(values)
        return found

    def timeline(self, key: Key, attribute: str) -> list[str]:
        """The values of the attribute's current-belief intervals in valid-time order."""
        if attribute in MANY:
            return sorted(self.many.get((key, attribute), {}))
        winners = self.one.get((key, attribute), {})
        values: list[str] = []
        for start in sorted(winners):
            if not values or values[-1] != winners[start][0]:
                values.append(winners[start][0])
        return values

    def quarantined(self, key: Key) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for pending in self.pending:
            if pending.key == key and not (pending.released or pending.forgotten):
                found.setdefault(pending.attribute, []).append(pending.value)
        return found

    def forget(self, tenant: str, subject: str) -> None:
        def about(key: Key) -> bool:
            return key[0] == tenant and key[3] == subject

        self.one = {k: v for k, v in self.one.items() if not about(k[0])}
        self.many = {k: v for k, v in self.many.items() if not about(k[0])}
        for pending in self.pending:
            pending.forgotten = pending.forgotten or about(pending.key)


# -- operations ------------------------------------------------------------------------------

TRUSTS = ["untrusted", "inferred", "verified", "verified", "user_confirmed"]
READS = ["get", "reviewer", "history", "versions", "context"]
# Writes weigh most; "again" re-sends an earlier write's key and start with a drawn value and
# trust, so that restatements, conflicts and rejections happen within one scope too.
KINDS = ["put"] * 6 + ["again"] * 3 + READS + ["promote", "promote", "forget"]
scopes = st.tuples(st.integers(0, 1), st.sampled_from(AGENTS), st.sampled_from(PURPOSES))
operations = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        scopes,
        st.sampled_from(SUBJECTS),
        st.sampled_from(sorted(VALUES)),
        st.integers(0, 2),  # which value
        st.integers(0, len(STARTS) - 1),  # which start
        st.sampled_from(TRUSTS),
        st.integers(0, 1_000),  # which earlier write or quarantined fact
    ),
    min_size=20,
    max_size=50,
)
Operation = tuple[str, tuple[int, str, str], str, str, int, int, str, int]


class Run:
    """One example: its own tenants (a fresh prefix), the store, and the model."""

    def __init__(self, store: Store) -> None:
        prefix = uuid.uuid4().hex[:10]
        self.tenants = [f"{prefix}-t0", f"{prefix}-t1"]
        self.store = store
        self.model = Model()
        self.episode = 0
        self.writes: list[tuple[Scope, str, str, int]] = []
        self.owner: dict[str, Key] = {}  # fact id -> the scope and subject that wrote it
        self.forgotten: set[str] = set()

    def apply(self, operation: Operation) -> None:
        kind, drawn, subject, attribute, pick, step, trust, index = operation
        scope: Scope = (self.tenants[drawn[0]], drawn[1], drawn[2])
        if kind == "put":
            self.put(scope, subject, attribute, pick, step, trust)
        elif kind == "again" and self.writes:
            scope, subject, attribute, step = self.writes[index % len(self.writes)]
            self.put(scope, subject, attribute, pick, step, trust)
        elif kind == "forget":
            forget(self.store, {"tenant_id": scope[0], "subject": subject})
            self.model.forget(scope[0], subject)
            self.forgotten |= {
                fact_id
                for fact_id, (tenant, *_, about) in self.owner.items()
                if (tenant, about) == (scope[0], subject)
            }
        elif kind == "promote":
            self.promote(scope[0], index)
        elif kind in READS:
            self.read(kind, scope, subject)

    def put(
        self, scope: Scope, subject: str, attribute: str, pick: int, step: int, trust: str
    ) -> None:
        key: Key = (*scope, subject)
        value = VALUES[attribute][pick % len(VALUES[attribute])]
        self.episode += 1
        command = {
            "tenant_id": scope[0],
            "agent_id": scope[1],
            "purpose": scope[2],
            "subject": subject,
            "attribute": attribute,
            "value": value,
            "valid_from": STARTS[step],
            "source_episode_id": f"ep-{self.episode}",
            "trust": trust,
        }
        if trust == "untrusted":
            result = pipeline.put(self.store, command)
            assert result.fact.status.value == "quarantined"
            self.model.pending.append(
                Pending(result.fact.fact_id, key, attribute, value, STARTS[step])
            )
        else:
            expected = self.model.accept(key, attribute, value, STARTS[step], RANK[trust])
            if expected == "ok":
                result = pipeline.put(self.store, command)
            else:
                error = FactConflict if expected == "FactConflict" else TrustRejected
                with pytest.raises(error):
                    pipeline.put(self.store, command)
                return
        self.check_scope(scope, subject, [result.fact])
        self.owner[result.fact.fact_id] = key
        self.writes.append((scope, subject, attribute, step))

    def promote(self, tenant: str, pick: int) -> None:
        if not self.model.pending:
            return
        pending = self.model.pending[pick % len(self.model.pending)]
        command = {"tenant_id": tenant, "fact_id": pending.fact_id}
        if pending.key[0] != tenant or pending.forgotten:
            with pytest.raises(NotFound):
                promote(self.store, command)
            return
        if pending.released:
            with pytest.raises(NotQuarantined):
                promote(self.store, command)
            return
        expected = self.model.accept(
            pending.key, pending.attribute, pending.value, pending.start, RANK["verified"]
        )
        if expected != "ok":
            error = FactConflict if expected == "FactConflict" else TrustRejected
            with pytest.raises(error):
                promote(self.store, command)
            return
        result = promote(self.store, command)
        pending.released = True
        assert result.fact.fact_id == pending.fact_id
        self.check_scope(pending.key[:3], pending.key[3], [result.fact])

    def read(self, kind: str, scope: Scope, subject: str) -> None:
        key: Key = (*scope, subject)
        query = dict(zip(("tenant_id", "agent_id", "purpose", "subject"), key, strict=True))
        if kind in ("get", "reviewer"):
            reviewer = kind == "reviewer"
            found = pipeline.get(self.store, query | {"include_quarantined": reviewer})
            self.check_scope(scope, subject, found)
            expected = self.model.current(key)
            if reviewer:
                for attribute, values in self.model.quarantined(key).items():
                    expected[attribute] = sorted(expected.get(attribute, []) + values)
            assert by_attribute(found) == expected
        elif kind == "history":
            for attribute in VALUES:
                found = pipeline.history(self.store, query | {"attribute": attribute})
                self.check_scope(scope, subject, found)
                timeline = [found_fact.value for found_fact in found]
                if attribute in MANY:
                    timeline.sort()
                assert timeline == self.model.timeline(key, attribute), attribute
        elif kind == "versions":
            found = pipeline.history(
                self.store, query | {"include_quarantined": True}, versions=True
            )
            self.check_scope(scope, subject, found)
            # The audit trail holds every fact this scope wrote, until its subject is forgotten.
            ids = {version.fact_id for version in found}
            assert not ids & self.forgotten
            assert {
                fact_id
                for fact_id, owner in self.owner.items()
                if owner == key and fact_id not in self.forgotten
            } <= ids
        else:
            context = assemble(self.store, query | {"budget_tokens": 100_000})
            items = context.items + context.skipped
            assert not context.skipped
            assert all(self.owner.get(item.fact_id, key) == key for item in items)
            values: dict[str, list[str]] = {}
            for item in items:
                values.setdefault(item.attribute, []).append(item.value)
            assert {name: sorted(found) for name, found in values.items()} == (
                self.model.current(key)
            )

    def check_scope(self, scope: Scope, subject: str, facts: list[Fact]) -> None:
        """Every fact belongs to the caller's scope and subject, and no fact id that another
        scope's write returned shows up here."""
        key: Key = (*scope, subject)
        for found in facts:
            assert (found.tenant_id, found.agent_id, found.purpose, found.subject) == key
            assert self.owner.get(found.fact_id, key) == key


def by_attribute(facts: list[Fact]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for fact in facts:
        found.setdefault(fact.attribute, []).append(fact.value)
    return {attribute: sorted(values) for attribute, values in found.items()}


@pytest.mark.slow
def test_reads_never_cross_tenant_agent_or_purpose(store: Store, database_url: str) -> None:
    examples = 25 if database_url.startswith("sqlite") else 15

    @settings(
        max_examples=examples,
        deadline=None,
        # Shrinking replays whole examples against the database for up to five minutes; the
        # unshrunk interleaving is printed instead, each step a readable tuple.
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(operations)
    def interleaving(steps: list[Operation]) -> None:
        run = Run(store)
        for step in steps:
            run.apply(step)
        # Finally every scope is read once, whatever the interleaving did.
        for tenant in (0, 1):
            for agent in AGENTS:
                for purpose in PURPOSES:
                    for subject in SUBJECTS:
                        run.read("get", (run.tenants[tenant], agent, purpose), subject)
                        run.read("history", (run.tenants[tenant], agent, purpose), subject)

    interleaving()


# -- plain tests -----------------------------------------------------------------------------


def fact(tenant: str, subject: str, attribute: str, value: str, **extra: Any) -> dict[str, Any]:
    episode = f"ep-{uuid.uuid4().hex[:8]}"
    key = {"tenant_id": tenant, "subject": subject, "attribute": attribute, "value": value}
    return fact_command(**key, valid_from=STARTS[0], source_episode_id=episode) | extra


def table_state(store: Store) -> dict[str, Any]:
    state: dict[str, Any] = {}
    with store.engine.connect() as connection:
        for table in (FactRow, ClaimRow, EventRow, IdempotencyRow):
            columns = list(table.__table__.columns)
            rows = connection.execute(select(*columns)).all()
            state[table.__tablename__] = sorted(tuple(map(repr, row)) for row in rows)
    return state


def test_promote_with_another_tenants_fact_id_is_not_found_and_changes_nothing(
    store: Store,
) -> None:
    quarantined = pipeline.put(
        store, fact("acme", "mira", "home_city", "Berlin", trust="untrusted")
    ).fact
    pipeline.put(store, fact("globex", "mira", "home_city", "Paris"))
    before = table_state(store)

    with pytest.raises(NotFound) as missing:
        promote(store, {"tenant_id": "globex", "fact_id": quarantined.fact_id})
    # Reported like an id that does not exist at all: nothing about the owner leaks.
    assert "acme" not in str(missing.value)
    assert "Berlin" not in str(missing.value)
    with pytest.raises(NotFound):
        promote(
            store,
            {"tenant_id": "globex", "fact_id": quarantined.fact_id, "idempotency_key": "k1"},
        )
    assert table_state(store) == before
    (globex,) = pipeline.get(store, {"tenant_id": "globex", "subject": "mira"})
    assert globex.value == "Paris"
    assert pipeline.get(store, {"tenant_id": "acme", "subject": "mira"}) == []

    # The owner can still promote it, and only the owner's reads see it.
    promoted = promote(store, {"tenant_id": "acme", "fact_id": quarantined.fact_id})
    assert (promoted.fact.status.value, promoted.fact.trust.value) == ("active", "verified")
    (acme,) = pipeline.get(store, {"tenant_id": "acme", "subject": "mira"})
    assert acme.fact_id == quarantined.fact_id
    (globex_again,) = pipeline.get(store, {"tenant_id": "globex", "subject": "mira"})
    assert globex_again == globex


def test_forget_in_one_tenant_leaves_other_tenants_alone(store: Store) -> None:
    planner = {"agent_id": "planner", "purpose": "travel"}
    pipeline.put(store, fact("acme", "mira", "home_city", "Berlin"))
    pipeline.put(store, fact("acme", "mira", "home_city", "Rome", **planner))
    pipeline.put(store, fact("globex", "mira", "home_city", "Paris"))
    pipeline.put(store, fact("globex", "mira", "languages", "de", **planner))
    pipeline.put(store, fact("globex", "mira", "answer_style", "concise", trust="untrusted"))
    globex_reads = [
        (
            pipeline.get(store, {"tenant_id": "globex", "subject": "mira"} | scope),
            pipeline.history(
                store,
                {"tenant_id": "globex", "subject": "mira", "include_quarantined": True} | scope,
                versions=True,
            ),
        )
        for scope in ({}, planner)
    ]

    result = forget(store, {"tenant_id": "acme", "subject": "mira"})

    assert result.hidden == 2  # both of acme's scopes, nothing of globex
    for scope, before in zip(({}, planner), globex_reads, strict=True):
        assert pipeline.get(store, {"tenant_id": "acme", "subject": "mira"} | scope) == []
        assert (
            pipeline.get(store, {"tenant_id": "globex", "subject": "mira"} | scope),
            pipeline.history(
                store,
                {"tenant_id": "globex", "subject": "mira", "include_quarantined": True} | scope,
                versions=True,
            ),
        ) == before
    reviewer = pipeline.get(
        store, {"tenant_id": "globex", "subject": "mira", "include_quarantined": True}
    )
    assert sorted(found.value for found in reviewer) == ["Paris", "concise"]
    assert [
        event.kind for event in decision_log(store, {"tenant_id": "globex", "oldest_first": True})
    ] == [
        "write",
        "write",
        "quarantine",
    ]
    assert forget(store, {"tenant_id": "globex", "subject": "mira"}).hidden == 3


def test_idempotency_keys_and_the_log_are_per_tenant(store: Store) -> None:
    key = {"idempotency_key": "same-key"}
    first = pipeline.put(store, fact("acme", "mira", "home_city", "Berlin", **key))
    second = pipeline.put(store, fact("globex", "mira", "home_city", "Paris", **key))
    assert second.written
    assert second.fact.fact_id != first.fact.fact_id
    assert (second.fact.tenant_id, second.fact.value) == ("globex", "Paris")
    assert [
        event.tenant_id
        for event in decision_log(store, {"tenant_id": "acme", "oldest_first": True})
    ] == ["acme"]
    assert [
        event.tenant_id
        for event in decision_log(store, {"tenant_id": "globex", "oldest_first": True})
    ] == ["globex"]
