"""A late episode that restates a value extends its history: remembered now, then said in an
episode dated months earlier, the value holds from that earlier day (as the ledger does for a
late put); the guard compares with the value that held at the episode's time, not today's.
On both stores and both lanes (the rules; the model, a stub answering `no_change` as a model
shown the stored value does). A refusal names the extractor that judged it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from tests.factories import isolated_settings
from tests.integration.pipeline_helpers import TENANT, episode, holds
from tests.integration.stub_llm import StubServer

LATE = episode("I live in Utrecht.", "2026-03-01T10:00:00Z", "s-march")


@pytest.fixture
def personal(database_url: str) -> Iterator[Store]:
    """A store with the default (personal) catalogue, whose rules read "I live in ..."."""
    opened = open_store(isolated_settings(database_url=database_url, catalog="personal"))
    yield opened
    opened.dispose()


def _remember_now(store: Store) -> None:
    said = pipeline.remember(
        store, {"tenant_id": TENANT, "subject": "mira", "text": "My home city is Utrecht."}
    )
    assert [f.value for f in said.facts] == ["Utrecht"]


def _history(store: Store) -> list[tuple[str, str]]:
    query = {"tenant_id": TENANT, "subject": "mira", "attribute": "home_city"}
    return [(str(f.valid_from.date()), f.value) for f in pipeline.get(store, query)]


def test_a_late_restatement_by_the_rules_extends_the_history(personal: Store) -> None:
    _remember_now(personal)
    receipt = pipeline.ingest(personal, [LATE]).receipts[0]

    assert receipt.status == "done"
    assert holds(personal, "home_city", at="2026-03-15T00:00:00Z") == "Utrecht"
    assert holds(personal, "home_city", at="2026-02-15T00:00:00Z") is None
    assert _history(personal) == [("2026-03-01", "Utrecht")]


def test_a_restatement_from_the_time_it_held_is_refused_by_the_rules_by_name(
    personal: Store,
) -> None:
    _remember_now(personal)
    again = pipeline.remember(
        personal, {"tenant_id": TENANT, "subject": "mira", "text": "I live in Utrecht."}
    )
    (refused,) = again.rejected
    assert (refused.reason, refused.message) == (
        "restatement",
        "the rules say the stored value holds",
    )


def _model_store(database_url: str, base_url: str) -> Store:
    return open_store(
        isolated_settings(
            database_url=database_url, catalog="personal", llm_base_url=base_url, llm_model="stub"
        )
    )


def _no_change(_: dict[str, Any]) -> dict[str, Any]:
    """What a model shown `home_city: Utrecht` answers for "I live in Utrecht."."""
    update = {"evidence": "I live in Utrecht", "subject": "user", "attribute": "home_city"}
    update |= {"current_value": "Utrecht", "change": "no_change", "value": "Utrecht"}
    return {"updates": [update | {"valid_from": None}]}


def test_a_late_restatement_by_the_model_extends_the_history(database_url: str) -> None:
    with StubServer() as stub:
        stub.app.answer = _no_change
        store = _model_store(database_url, stub.base_url)
        try:
            _remember_now(store)  # the rules read this one: the model is not asked
            late = pipeline.ingest(store, [LATE | {"text": "I live in Utrecht, I said."}])
            now = pipeline.ingest(
                store, [episode("I live in Utrecht, still.", "2026-11-30T10:00:00Z", "s-now")]
            )
            history = _history(store)
            at_march = holds(store, "home_city", at="2026-03-15T00:00:00Z")
        finally:
            store.dispose()
    assert stub.stats.answered >= 2
    assert late.receipts[0].status == "done"
    assert at_march == "Utrecht"
    assert history == [("2026-03-01", "Utrecht")]
    assert now.receipts[0].status == "done"
