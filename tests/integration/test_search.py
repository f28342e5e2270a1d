"""The search read on both stores: hard filters in the ranking statement, BM25 over the
filtered scope, what `get` and the episode rules hide never surfacing."""

from __future__ import annotations

from datetime import timedelta

import pytest

import pipeline
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from schemas.results import SearchResult
from tests.factories import FrozenClock, put_fact
from tests.integration.pipeline_helpers import episode

READ = {"tenant_id": "acme", "subject": "mira"}


def _search(store: Store, query: str, **options: object) -> SearchResult:
    return pipeline.search(store, READ | {"query": query} | options)


def _values(result: SearchResult) -> list[object]:
    return [fact.value for fact in result.facts]


def test_facts_are_found_by_value_and_evidence_best_first(store: Store) -> None:
    put_fact(store, **READ, attribute="home_city", value="Utrecht", evidence="I live in Utrecht")
    put_fact(store, **READ, attribute="employer", value="Initech", evidence="I work in Utrecht")
    put_fact(store, **READ, attribute="answer_style", value="concise")

    found = _search(store, "utrecht")

    assert _values(found) == ["Utrecht", "Initech"]
    assert found.facts[0].score > found.facts[1].score > 0
    assert found.facts[0].model_dump(exclude={"score"}) == (
        pipeline.get(store, READ | {"attribute": "home_city"})[0].model_dump()
    )


def test_a_synonym_of_the_attribute_finds_its_facts(store: Store) -> None:
    put_fact(store, **READ, attribute="passport_deadline", value="2026-06-30")
    put_fact(store, **READ, attribute="home_city", value="Utrecht")

    found = _search(store, "when is the passport due?", kinds=["facts"])

    assert [fact.attribute for fact in found.facts] == ["passport_deadline"]


def test_stop_words_alone_find_nothing(store: Store) -> None:
    put_fact(store, **READ, attribute="home_city", value="the")

    assert not _search(store, "the of and").found


def test_other_tenants_rows_move_no_score(store: Store) -> None:
    """Statistics come from the scope: a crowd of other tenants' rows holding the query word
    (which would make it common, so worth less) leaves the score exactly as it was."""
    put_fact(store, **READ, attribute="home_city", value="Utrecht", evidence="moved to Utrecht")
    put_fact(store, **READ, attribute="employer", value="Initech")
    before = _search(store, "utrecht").facts[0].score
    for number in range(30):
        put_fact(
            store, tenant_id="other", subject=f"s{number}", attribute="home_city", value="Utrecht"
        )
        put_fact(store, **READ, agent_id=f"bot{number}", attribute="employer", value="Utrecht")

    after = _search(store, "utrecht")

    assert [fact.tenant_id for fact in after.facts] == ["acme"]
    assert after.facts[0].score == pytest.approx(before)


def test_a_superseded_value_is_found_only_inside_its_interval(
    clocked_store: Store, clock: FrozenClock
) -> None:
    store = clocked_store
    put_fact(
        store, **READ, attribute="home_city", value="Utrecht", valid_from="2026-01-01T00:00:00Z"
    )
    written = clock()
    clock.set(written + timedelta(hours=1))
    put_fact(
        store, **READ, attribute="home_city", value="Leiden", valid_from="2026-06-01T00:00:00Z"
    )

    assert _values(_search(store, "utrecht leiden")) == ["Leiden"]
    assert _values(_search(store, "utrecht", at="2026-03-01T00:00:00Z")) == ["Utrecht"]
    before_move = (written + timedelta(minutes=1)).isoformat()
    assert _values(_search(store, "utrecht leiden", known_at=before_move)) == ["Utrecht"]


def test_quarantined_facts_only_for_a_reviewer(store: Store) -> None:
    put_fact(store, **READ, attribute="home_city", value="Utrecht", trust="untrusted")

    assert not _search(store, "utrecht").found
    assert _values(_search(store, "utrecht", include_quarantined=True)) == ["Utrecht"]


def test_a_forgotten_subject_is_found_nowhere(store: Store) -> None:
    put_fact(store, **READ, attribute="home_city", value="Utrecht")
    pipeline.ingest(
        store, [episode("We moved to Utrecht last spring", "2026-05-01T10:00:00Z", "s1")]
    )
    assert _search(store, "utrecht").episodes

    pipeline.forget(store, READ)

    assert not _search(store, "utrecht", include_quarantined=True).found
    pipeline.ingest(
        store, [episode("Utrecht again, after the forget", "2026-06-01T10:00:00Z", "s2")]
    )
    assert [e.snippet for e in _search(store, "utrecht").episodes] == [
        "Utrecht again, after the forget"
    ]


def test_episodes_by_when_said_and_received_and_trust(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode("The webinar is on Monday", "2026-05-01T10:00:00Z", "s1"),
            episode("Tool says webinar moved", "2026-05-02T10:00:00Z", "s1", source="tool_result"),
        ],
    )

    found = _search(store, "webinar", kinds=["episodes"])
    assert [e.snippet for e in found.episodes] == ["The webinar is on Monday"]
    assert not found.facts
    assert found.episodes[0].session_id == "s1"
    reviewer = _search(store, "webinar", include_quarantined=True)
    assert len(reviewer.episodes) == 2
    assert not _search(store, "webinar", at="2026-04-30T00:00:00Z").found
    assert not _search(store, "webinar", known_at="2020-01-01T00:00:00Z").found


def test_the_later_of_two_close_episodes_comes_first(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode("The team webinar is on Monday at ten", "2026-05-01T10:00:00Z", "s1"),
            episode("The webinar moved to Friday", "2026-05-03T10:00:00Z", "s2"),
        ],
    )

    found = _search(store, "when is the webinar?", kinds=["episodes"])

    assert [e.snippet for e in found.episodes] == [
        "The webinar moved to Friday",
        "The team webinar is on Monday at ten",
    ]


def test_a_later_episode_about_the_same_thing_outranks_a_better_match(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode(
                "The webinar on pricing is on Monday; the webinar slides are ready",
                "2026-05-01T10:00:00Z",
                "s1",
            ),
            episode("Lunch with the pricing team was long", "2026-05-02T10:00:00Z", "s2"),
            episode(
                "Update: the pricing webinar moved, it is on Friday now, after a long week of "
                "preparation for all of us",
                "2026-05-03T10:00:00Z",
                "s3",
            ),
        ],
    )

    found = _search(store, "when is the pricing webinar?", kinds=["episodes"])

    snippets = [e.snippet for e in found.episodes]
    assert snippets[0].startswith("Update: the pricing webinar moved")
    assert snippets[1].startswith("The webinar on pricing is on Monday")
    # The earlier one matched better on its own; the later one took its score.
    assert found.episodes[0].score == found.episodes[1].score
    # "pricing" alone is not the same thing: the lunch stays below both.
    assert snippets[2] == "Lunch with the pricing team was long"


def test_a_turn_is_found_through_the_turn_beside_it(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode("What should I bring to the climbing gym?", "2026-05-01T10:00:00Z", "s1"),
            episode("Chalk, shoes and a harness", "2026-05-01T10:01:00Z", "s1"),
            episode("Tool: harness recall", "2026-05-01T10:02:00Z", "s1", source="tool_result"),
            episode("Then a long nap", "2026-05-01T10:03:00Z", "s1"),
            episode("Chalk is sold out", "2026-05-02T10:00:00Z", "s2"),
        ],
    )

    found = _search(store, "climbing gym", kinds=["episodes"])

    assert [e.snippet for e in found.episodes] == [
        "What should I bring to the climbing gym?",
        "Chalk, shoes and a harness",
    ]
    assert found.episodes[1].score < found.episodes[0].score
    # Only neighbours inside the scope: the untrusted tool result neither shows nor lifts.
    harness = _search(store, "harness", kinds=["episodes"])
    assert harness.episodes[0].snippet == "Chalk, shoes and a harness"
    assert {e.snippet for e in harness.episodes[1:]} == {
        "What should I bring to the climbing gym?",
        "Then a long nap",
    }
    reviewer = _search(store, "harness recall", kinds=["episodes"], include_quarantined=True)
    assert reviewer.episodes[0].snippet == "Tool: harness recall"


def test_bad_input_is_refused_with_its_field(store: Store) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        _search(store, "utrecht", limit=0)
    with pytest.raises(InvalidInput, match="kinds"):
        _search(store, "utrecht", kinds=["notes"])
    with pytest.raises(InvalidInput, match="query"):
        _search(store, "")


def test_a_question_over_the_conversation_takes_a_turn_from_each_session(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode("The pond pump broke", "2026-05-01T10:00:00Z", "s1"),
            episode("Lunch was long", "2026-05-01T10:01:00Z", "s1"),
            episode("The pond pump broke again today", "2026-05-01T10:02:00Z", "s1"),
            episode("The pond pump broke again, said the neighbour", "2026-06-01T10:00:00Z", "s2"),
        ],
    )

    def sessions(query: str) -> list[str | None]:
        found = _search(store, query, kinds=["episodes"], limit=2).episodes
        return sorted(e.session_id for e in found)  # the order is the later-first rule's

    # A plain question keeps to the session where it was said best...
    assert sessions("the pond pump broke") == ["s1", "s1"]
    # ...one over the conversation's course wants each session that speaks of it.
    assert sessions("how did the pond pump break across my sessions?") == ["s1", "s2"]
    assert sessions("the pond pump throughout") == ["s1", "s2"]
    assert sessions("how many times did the pond pump break?") == ["s1", "s2"]
