"""Property test of the search read on both stores: random histories of put, correct,
quarantine, expire, forget and purge, every value and episode a decoy equal to the query,
and the search finds exactly what `get` shows (now, at a valid time, as believed at a known
time, with and without the reviewer's view) and exactly the episodes the rules leave visible:
never a superseded, corrected, expired, quarantined, forgotten or purged memory. The same
holds with the embedding arm on (the stub's toy embeddings, every row given its vector after
each step), asked with a paraphrase no word of which is in any row: what it finds comes from
the cosine ranking alone."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.embedding import settle
from pipeline.embedding.client import close_clients
from pipeline.embedding.vectors import fill_missing
from pipeline.errors import ConflictError
from schemas.results import VectorArm
from tests.factories import FrozenClock, isolated_settings
from tests.integration.stub_llm import StubServer

pytestmark = pytest.mark.slow

QUERY = "zebra"
PARAPHRASE = "equids"  # the stub's toy embedding folds it into "zebra"; BM25 knows no such word
VALUES = ["zebra", "zebras", "a zebra", "Zebra!"]
ATTRIBUTES = ["home_city", "employer"]
TRUSTS = ["inferred", "verified", "user_confirmed", "untrusted"]

Operation = tuple[str, dict[str, Any]]
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.fixed_dictionaries(
                {
                    "attribute": st.sampled_from(ATTRIBUTES),
                    "value": st.sampled_from(VALUES),
                    "start": st.integers(0, 5),
                    "trust": st.sampled_from(TRUSTS),
                    "expires": st.booleans(),
                }
            ),
        ),
        st.tuples(
            st.just("episode"),
            st.fixed_dictionaries(
                {"text": st.sampled_from(VALUES), "tool": st.booleans(), "day": st.integers(0, 5)}
            ),
        ),
        st.tuples(st.just("forget"), st.fixed_dictionaries({"purge": st.booleans()})),
    ),
    min_size=1,
    max_size=10,
)


@dataclass
class Said:
    """The episodes the test sent, and which of them the rules must still show."""

    visible: set[str] = field(default_factory=set)
    untrusted: set[str] = field(default_factory=set)


def _apply(
    store: Store,
    clock: FrozenClock,
    scope: dict[str, str],
    history: list[Operation],
    said: Said,
    after: Callable[[], object] = lambda: None,
) -> list[datetime]:
    moments = []
    for kind, step in history:
        after()
        clock.set(clock() + timedelta(hours=1))
        moments.append(clock())
        if kind == "put":
            base = datetime(2026, 1, 1, tzinfo=clock().tzinfo)
            command = scope | {
                "attribute": step["attribute"],
                "value": step["value"],
                "valid_from": (base + timedelta(days=30 * step["start"])).isoformat(),
                "source_episode_id": "e",
                "trust": step["trust"],
            }
            if step["expires"]:
                command["expires_at"] = (clock() + timedelta(minutes=90)).isoformat()
            # Equal trust, another value: refused, as the ledger decides.
            with contextlib.suppress(ConflictError):
                pipeline.put(store, command)
        elif kind == "episode":
            episode_id = f"ep-{uuid.uuid4().hex[:8]}"
            day = datetime(2026, 1, 1, tzinfo=clock().tzinfo) + timedelta(days=step["day"])
            pipeline.ingest(
                store,
                [
                    scope
                    | {
                        "episode_id": episode_id,
                        "session_id": "s",
                        "occurred_at": day.isoformat(),
                        "text": step["text"],
                        "source": "tool_result" if step["tool"] else "message",
                    }
                ],
            )
            (said.untrusted if step["tool"] else said.visible).add(episode_id)
        else:
            pipeline.forget(store, scope | {"purge": step["purge"]})
            said.visible.clear()
            said.untrusted.clear()
    after()
    return moments


def _facts(found: list[Any]) -> set[tuple[str, int]]:
    return {(fact.fact_id, fact.version) for fact in found}


def test_search_shows_exactly_what_get_and_the_episode_rules_show(
    clocked_store: Store, clock: FrozenClock
) -> None:
    _check(clocked_store, clock, QUERY)


@pytest.fixture
def embedding_store(database_url: str, clock: FrozenClock) -> Iterator[Store]:
    with StubServer() as stub:
        settings = isolated_settings(
            database_url=database_url, embedding_model="toy", embedding_base_url=stub.base_url
        )
        opened = open_store(settings, clock=clock)
        yield opened
        assert settle()  # the writes' background vectors, while the stub still answers
        opened.dispose()
        close_clients()


def test_the_vector_arm_shows_no_more_than_get_and_the_episode_rules(
    embedding_store: Store, clock: FrozenClock
) -> None:
    _check(embedding_store, clock, PARAPHRASE, after=lambda: fill_missing(embedding_store))


def _check(
    store: Store, clock: FrozenClock, query: str, after: Callable[[], object] = lambda: None
) -> None:
    embedded = store.settings.embedding_configured

    @settings(max_examples=15 if store.is_postgres else 30, deadline=None)
    @given(history=operations, data=st.data())
    def check(history: list[Operation], data: st.DataObject) -> None:
        scope = {"tenant_id": "acme", "subject": f"s-{uuid.uuid4().hex[:10]}"}
        said = Said()
        moments = _apply(store, clock, scope, history, said, after)
        clock.set(clock() + timedelta(hours=1))
        ask = scope | {"query": query, "limit": 100}
        branches = set()
        for reviewer in (False, True):
            options = {"include_quarantined": reviewer}
            found = pipeline.search(store, ask | options)
            assert found.vectors is (VectorArm.FUSED if embedded else None)
            assert _facts(found.facts) == _facts(pipeline.get(store, scope | options))
            expected = said.visible | (said.untrusted if reviewer else set())
            assert {episode.episode_id for episode in found.episodes} == expected
            branches.add(bool(found.facts))
        known = data.draw(st.sampled_from(moments))
        at = data.draw(st.sampled_from([m.isoformat() for m in moments] + ["2026-03-15"]))
        for asked in ({"known_at": known.isoformat()}, {"at": at}):
            found = pipeline.search(store, ask | asked | {"kinds": ["facts"]})
            assert _facts(found.facts) == _facts(pipeline.get(store, scope | asked))
        # Which branches the examples took, so an empty ledger everywhere cannot pass.
        taken.update(branches)

    taken: set[bool] = set()
    check()
    assert taken == {True, False}
