"""Context assembly: hard filters, ranking, citations and the token budget."""

from __future__ import annotations

import pytest

import pipeline
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from pipeline.read.context import ContextItem, assemble, estimate_tokens
from tests.factories import put_fact

READ = {"tenant_id": "acme", "subject": "mira"}


def _put(
    store: Store,
    attribute: str,
    value: object,
    confidence: float = 1.0,
    start: str = "2026-06-01T00:00:00Z",
    **scope: str,
) -> None:
    fields = READ | scope | {"attribute": attribute, "value": value, "valid_from": start}
    put_fact(store, **fields, confidence=confidence, source_episode_id=f"ep-{attribute}")


def _attributes(items: list[ContextItem]) -> list[str]:
    return [item.attribute for item in items]


def test_exact_synonym_match_ranks_first_then_confidence_then_recency(store: Store) -> None:
    _put(store, "home_city", "Utrecht", confidence=0.9)
    _put(store, "answer_style", "concise", confidence=0.9, start="2026-07-01T00:00:00Z")
    _put(store, "passport_deadline", "2026-06-30", confidence=0.4)

    plain = assemble(store, READ)
    asked = assemble(store, READ | {"query": "When is Mira's passport due?"})

    assert _attributes(plain.items) == ["answer_style", "home_city", "passport_deadline"]
    assert _attributes(asked.items)[0] == "passport_deadline"


def test_every_item_cites_its_source_and_fact(store: Store) -> None:
    _put(store, "home_city", "Utrecht")

    (item,) = assemble(store, READ).items

    assert item.source_episode_id == "ep-home_city"
    assert item.text == "  - Utrecht (2026-06-01, ep-home_city)"
    assert item.valid_from == "2026-06-01T00:00:00Z"
    assert item.fact_id == pipeline.get(store, READ)[0].fact_id


def test_each_attribute_is_named_once_with_its_facts_under_it_in_rank_order(
    store: Store,
) -> None:
    for language, confidence in [("Dutch", 0.9), ("English", 0.5)]:
        put_fact(
            store,
            **READ,
            attribute="languages",
            value=language,
            confidence=confidence,
            valid_from="2026-06-02T09:30:00+02:00",
            source_episode_id=f"ep-{language}",
        )
    _put(store, "home_city", "Utrecht", confidence=0.7)

    context = assemble(store, READ)

    assert [item.value for item in context.items] == ["Dutch", "Utrecht", "English"]
    assert context.text == (
        "- languages (since, source):\n"
        "  - Dutch (2026-06-02, ep-Dutch)\n"
        "  - English (2026-06-02, ep-English)\n"
        "- home_city (since, source):\n"
        "  - Utrecht (2026-06-01, ep-home_city)"
    )
    assert context.items[0].valid_from == "2026-06-02T07:30:00Z"


def test_a_long_low_ranked_fact_is_skipped_not_split(store: Store) -> None:
    _put(store, "home_city", "Utrecht", confidence=0.9)
    _put(store, "employer", "Initech " * 60, confidence=0.5)
    _put(store, "answer_style", "concise", confidence=0.3)

    context = assemble(store, READ | {"budget_tokens": 50})

    assert _attributes(context.items) == ["home_city", "answer_style"]
    assert _attributes(context.skipped) == ["employer"]
    assert context.used_tokens == estimate_tokens(context.text) <= 50
    assert all(item.text in context.text for item in context.items)


def test_pluggable_token_counter(store: Store) -> None:
    _put(store, "home_city", "Utrecht")
    _put(store, "answer_style", "concise")

    def one_token_per_word(text: str) -> int:
        return len(text.split())

    # "- home_city (since, source):" and "  - Utrecht (2026-06-01, ep-home_city)": 4 + 4.
    counted = assemble(store, READ | {"budget_tokens": 9}, count_tokens=one_token_per_word)

    assert [item.tokens for item in counted.items] == [4]
    assert counted.used_tokens == 8
    assert estimate_tokens("12345678") == 2


def test_other_scopes_never_enter_the_context(store: Store) -> None:
    _put(store, "home_city", "Utrecht")
    _put(store, "home_city", "Rotterdam", agent_id="sales")
    _put(store, "home_city", "Delft", tenant_id="globex")

    values = [item.value for item in assemble(store, READ | {"query": "city"}).items]
    sales = assemble(store, READ | {"agent_id": "sales"}).items

    assert values == ["Utrecht"]
    assert [item.value for item in sales] == ["Rotterdam"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("budget_tokens", 0), ("subject", ""), ("tenant_id", " acme"), ("query", "a\x00b")],
)
def test_bad_context_queries_are_refused(store: Store, field: str, value: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        assemble(store, READ | {field: value})
    assert refused.value.field == field


@pytest.mark.parametrize("budget", range(20, 60))
def test_the_budget_bounds_the_text_as_returned_separators_included(
    store: Store, budget: int
) -> None:
    for attribute, value in [("home_city", "Utrecht"), ("answer_style", "concise")]:
        _put(store, attribute, value)
    _put(store, "employer", "Initech")

    context = assemble(store, READ | {"budget_tokens": budget})

    assert estimate_tokens(context.text) <= budget
    assert context.used_tokens == (estimate_tokens(context.text) if context.items else 0)


@pytest.mark.parametrize(
    "query", ["passport_deadline", "what is the answer_style?", "answer_style"]
)
def test_the_attribute_identifier_is_an_exact_match(store: Store, query: str) -> None:
    _put(store, "passport_deadline", "2026-06-30", confidence=0.2)
    _put(store, "answer_style", "concise", confidence=0.2)
    _put(store, "home_city", "Utrecht", confidence=1.0)

    first = assemble(store, READ | {"query": query}).items[0]

    assert first.attribute in query


def test_relevance_ranks_after_an_exact_match_and_episodes_come_last_when_asked(
    store: Store,
) -> None:
    put_fact(
        store,
        **READ,
        attribute="employer",
        value="Initech",
        evidence="I code at Initech",
        confidence=0.5,
    )
    put_fact(store, **READ, attribute="answer_style", value="concise", confidence=1.0)
    pipeline.ingest(
        store,
        [
            {
                **READ,
                "session_id": "s1",
                "occurred_at": "2026-05-01T10:00:00Z",
                "text": "Initech moved my team to Leiden",
            }
        ],
    )

    plain = assemble(store, READ | {"query": "where does Initech send me?"})
    asked = assemble(store, READ | {"query": "where does Initech send me?", "episodes": True})

    assert _attributes(plain.items) == ["employer", "answer_style"]  # relevance over confidence
    assert plain.episodes == []
    assert [e.text for e in asked.episodes] == [
        "- said 2026-05-01T10:00:00Z: Initech moved my team to Leiden (episode "
        f"{asked.episodes[0].episode_id})"
    ]
    assert asked.text.endswith(asked.episodes[0].text)
    assert asked.used_tokens == estimate_tokens(asked.text)


def _said(store: Store, turns: list[tuple[str, str, str]]) -> None:
    pipeline.ingest(
        store,
        [
            {**READ, "session_id": "s1", "episode_id": episode, "occurred_at": at, "text": text}
            for episode, at, text in turns
        ],
    )


def test_a_fact_is_found_through_the_turn_beside_its_source_below_an_own_match(
    store: Store,
) -> None:
    _said(
        store,
        [
            ("ep-ask", "2026-05-01T10:00:00Z", "Which dessert did you bake for the party?"),
            ("ep-answer", "2026-05-01T10:01:00Z", "A chocolate cake with berries."),
            ("ep-later", "2026-05-01T10:30:00Z", "Lovely weather on the coast today."),
        ],
    )
    cake = {"value": "chocolate cake", "evidence": "A chocolate cake with berries."}
    put_fact(
        store, **READ, attribute="scratch", **cake, source_episode_id="ep-answer", confidence=0.5
    )
    put_fact(
        store,
        **READ,
        attribute="answer_style",
        value="concise",
        confidence=1.0,
        source_episode_id="ep-later",
    )
    put_fact(
        store,
        **READ,
        attribute="employer",
        value="Party Dessert Bakery",
        confidence=0.5,
        source_episode_id="ep-later",
    )

    ranked = assemble(store, READ | {"query": "what dessert for the party?"}).items

    # the bakery matches by its own words, the cake only through the question before it,
    # the style not at all: confidence alone would put it first
    assert [item.attribute for item in ranked] == ["employer", "scratch", "answer_style"]


def test_a_turn_of_another_subject_beside_the_source_lifts_nothing(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            {
                **READ,
                "subject": "noor",
                "session_id": "s1",
                "episode_id": "ep-ask",
                "occurred_at": "2026-05-01T10:00:00Z",
                "text": "Which dessert did you bake for the party?",
            }
        ],
    )
    _said(store, [("ep-answer", "2026-05-01T10:01:00Z", "A chocolate cake with berries.")])
    put_fact(
        store,
        **READ,
        attribute="scratch",
        value="chocolate cake",
        source_episode_id="ep-answer",
        confidence=0.5,
    )
    put_fact(store, **READ, attribute="answer_style", value="concise", confidence=1.0)

    ranked = assemble(store, READ | {"query": "what dessert for the party?"}).items

    assert [item.attribute for item in ranked] == ["answer_style", "scratch"]
