"""A catalogue written as most users write one — names, types, synonyms, no `forms` — read by
the forms derived from them; `forms: []` opts out; `catalog show --forms` and `extract
--explain` say which forms are derived."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.catalog import parse_catalog
from pipeline.cli import run
from pipeline.cli.explain import explain_table
from pipeline.extract import extract
from pipeline.extract.derived import derived_forms, phrases
from pipeline.extract.rules import RulesExtractor
from pipeline.settings import Settings
from schemas.catalog import Catalog
from tests.unit.extract_helpers import episode

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
FORMS_FREE = """
version: "t1"
kinds: {fact: {retention: P30D}}
attributes:
  webinar_date: {type: date, synonyms: [webinar]}
  monthly_book_budget: {type: number, synonyms: [book budget]}
  overtime_hours: {type: number, synonyms: [overtime]}
  gallery_cards: {type: number, synonyms: [cards]CARDS_FORMS}
  api_response_time_ms: {type: number, synonyms: [response time]}
  account_plan: {type: enum, values: [free, pro], synonyms: [plan]}
"""
CATALOG = parse_catalog(FORMS_FREE.replace("CARDS_FORMS", ""), "<test>", toml=False)
OPTED_OUT = parse_catalog(FORMS_FREE.replace("CARDS_FORMS", ", forms: []"), "<test>", toml=False)


def kept(text: str, catalog: Catalog = CATALOG) -> list[tuple[str, Any]]:
    result = extract(episode(text), catalog=catalog, settings=SETTINGS, extractor="rules")
    return sorted((c.attribute, c.value) for c in result.kept)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The webinar was moved to May 3, 2026.", [("webinar_date", "2026-05-03")]),
        ("I raised my book budget to $60.", [("monthly_book_budget", 60)]),
        ("My overtime is now 12 hours.", [("overtime_hours", 12)]),
        ("I have a total of 10 cards in the gallery.", [("gallery_cards", 10)]),
        (
            "The response time of the dashboard has recently improved to 250ms.",
            [("api_response_time_ms", 250)],
        ),
        ("My plan is pro.", [("account_plan", "pro")]),
    ],
)
def test_a_forms_free_catalogue_reads_the_statement_shapes(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert kept(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The webinar was May 3, 2026.",  # the past: no longer so
        "I drew two cards from the deck.",  # a change of the count, not the count
        "I want at least 80 cards.",  # a wish, and a bound
        "My sister's book budget is $60.",  # someone else's
        "Is the webinar on May 3?",  # asked
    ],
)
def test_derived_forms_state_nothing_where_a_declared_form_would_not(text: str) -> None:
    assert kept(text) == []


def test_forms_an_empty_list_opts_out_of_derived_forms() -> None:
    assert kept("I have a total of 10 cards in the gallery.", OPTED_OUT) == []
    assert derived_forms("gallery_cards", OPTED_OUT.attributes["gallery_cards"]) == []
    assert kept("My overtime is now 12 hours.", OPTED_OUT) == [("overtime_hours", 12)]


def test_phrases_drop_a_unit_and_keep_synonyms_longest_first() -> None:
    spec = CATALOG.attributes["api_response_time_ms"]
    assert phrases("api_response_time_ms", spec) == ["api response time", "response time"]


def test_explain_says_a_derived_form_matched() -> None:
    text = "I have a total of 10 cards in the gallery."
    readings = RulesExtractor(CATALOG).explain(episode(text))
    hits = [hit for reading in readings for hit in reading.hits if not hit.refused]
    assert [(hit.attribute, hit.values, hit.derived) for hit in hits] == [
        ("gallery_cards", ("10",), True)
    ]
    result = extract(episode(text), catalog=CATALOG, settings=SETTINGS, extractor="rules")
    table = explain_table(readings, result)
    assert "matched  gallery_cards  '{value} cards' (derived from its name and synonyms)" in table


def test_catalog_show_forms_prints_derived_and_declared_forms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["catalog", "show", "--bundled", "support", "--forms"]) == 0
    support = json.loads(capsys.readouterr().out)
    assert support["monthly_budget"]["derived"] is True
    assert "budget of {value}" in support["monthly_budget"]["forms"]
    assert support["compliance_flag"] == {"derived": True, "forms": []}  # json needs a model
    assert run(["catalog", "show", "--bundled", "personal", "--forms"]) == 0
    personal = json.loads(capsys.readouterr().out)
    assert personal["age"]["derived"] is False
    assert "I just turned {value}" in personal["age"]["forms"]
