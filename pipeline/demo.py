"""The passport-deadline example: a correction, then a late fact, read now and in the past."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.db.store import Store
from pipeline.ledger.write import put
from pipeline.read.facts import get, history
from schemas.fields import format_utc

EPISODES = {
    "e1": "Mira prefers concise answers. Her passport deadline is 2026-07-15.",
    "e2": "Mira corrected the deadline. It is now 2026-06-30.",
    "e0": "(extracted late) Mira's passport deadline is 2026-08-01.",
}
# Fixed instants of the example: the corrected value holds "now" from 2026-06-04 on.


def run_demo(store: Store, say: Callable[[str], None], tenant: str = "acme") -> None:
    key = {"tenant_id": tenant, "subject": "mira", "attribute": "passport_deadline"}
    first = put(
        store,
        key
        | {
            "value": "2026-07-15",
            "valid_from": "2026-06-01T09:00:00Z",
            "source_episode_id": "e1",
            "evidence": EPISODES["e1"],
        },
    )
    put(
        store,
        key
        | {
            "value": "2026-06-30",
            "valid_from": "2026-06-03T12:00:00+02:00",
            "source_episode_id": "e2",
            "evidence": EPISODES["e2"],
        },
    )
    put(
        store,
        key
        | {
            "value": "2026-08-01",
            "valid_from": "2026-05-30T08:00:00Z",
            "source_episode_id": "e0",
            "evidence": EPISODES["e0"],
        },
    )

    def value_at(at: str | None = None, known_at: str | None = None) -> tuple[str, str]:
        query = {
            "tenant_id": tenant,
            "subject": "mira",
            "attribute": "passport_deadline",
            "at": at,
            "known_at": known_at,
        }
        (fact,) = get(store, query)
        return str(fact.value), fact.source_episode_id

    now_value, now_source = value_at()
    (current,) = get(
        store, {"tenant_id": tenant, "subject": "mira", "attribute": "passport_deadline"}
    )
    say("SGAM current state:")
    say(f"  mira.passport_deadline = {now_value}")
    say(f"  valid_from={format_utc(current.valid_from)}, source={now_source}")
    say("")
    say("SGAM point-in-time state:")
    say(f"  on 2026-06-02, mira.passport_deadline = {value_at('2026-06-02T00:00:00Z')[0]}")
    say(
        f"  on 2026-05-31, mira.passport_deadline = {value_at('2026-05-31T00:00:00Z')[0]}"
        " (the late fact e0)"
    )
    # The moment e1 was first recorded, before e2 corrected it (stable across re-runs).
    first_recorded = min(
        fact.recorded_at
        for fact in history(store, key, versions=True)
        if fact.fact_id == first.fact.fact_id
    )
    believed = value_at("2026-06-04T00:00:00Z", first_recorded.isoformat())
    say(
        f"  before the correction was recorded we believed {believed[0]} for 2026-06-04"
        f" (source {believed[1]})"
    )
