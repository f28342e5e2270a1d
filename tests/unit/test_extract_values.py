"""A value is a value, not a clause; questions are sentences, not turns; the new-user misses
of issue 29 on the personal default catalogue."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.catalog import bundled_catalog
from pipeline.extract import extract
from pipeline.extract.clause_values import clause_problem
from pipeline.extract.clauses import clauses
from pipeline.settings import Settings
from tests.unit.extract_helpers import episode

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
PERSONAL = bundled_catalog("personal")


def kept(text: str) -> list[tuple[str, Any]]:
    result = extract(episode(text), catalog=PERSONAL, settings=SETTINGS, extractor="rules")
    return sorted((c.attribute, c.value) for c in result.kept)


@pytest.mark.parametrize(
    "text",
    [
        "My job is I am a department manager at a well known grocery store.",
        "My job is I hate it here.",
        "My job is Boring stuff all day long with no end in sight.",
    ],
)
def test_a_clause_is_stored_as_no_value(text: str) -> None:
    assert [attribute for attribute, _ in kept(text)] == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("I hate it here", "starts with a subject ('I')"),
        ("Boring stuff all day long with no end", "longer than 6 words"),
        ("tomatoes they go great", "holds a clause of its own (they go)"),
        ("kids they", "ends with a new subject ('they')"),
        ("stuff that is fun", "holds a verb of its own ('is')"),
        ("dog groomer", ""),
        ("have a glass of beer", ""),  # an activity starts with its verb
        ("I Am Legend", ""),  # a title in title case is a name
    ],
)
def test_clause_problem_names_what_makes_a_clause(value: str, problem: str) -> None:
    assert clause_problem(value) == problem


def test_the_six_word_rule_holds_for_the_built_in_reading() -> None:
    assert kept("My job is Senior Vice President Of Global Sales Operations Europe.") == []
    assert kept("My job is Senior Vice President.") == [("job_title", "Senior Vice President")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Well I love animals I have 3 cats and 2 dogs how about you?",
            [("likes", "animals"), ("pets", "cat"), ("pets", "dog")],
        ),
        ("Im a dog groomer", [("job_title", "dog groomer")]),
        ("I have a Labrador Retriever and a Pitbull", [("pets", "dog")]),
        ("I love to ride my bike and you?", [("hobbies", "ride my bike")]),
        ("I really love coffee what about you", [("likes", "coffee")]),
    ],
)
def test_the_new_user_turns_read_right(text: str, expected: list[tuple[str, Any]]) -> None:
    assert kept(text) == expected


def test_a_question_tail_ends_a_statement_without_punctuation() -> None:
    read = [(c.text, c.questioned) for c in clauses("I live in Ohio how about you?")]
    assert read == [("I live in Ohio", False), ("how about you?", True)]
    read = [(c.text, c.questioned) for c in clauses("Do you live in Ohio?")]
    assert read == [("Do you live in Ohio?", True)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Well I love animals I have 3 cats", ["Well I love animals", "I have 3 cats"]),
        ("the zoo I work at is big", ["the zoo I work at is big"]),  # no full clause before
        ("I can't say I am a huge fan", ["I can't say I am a huge fan"]),  # said, not stated
        (
            "I enjoy singing when I work in the garden",
            ["I enjoy singing when I work in the garden"],
        ),
        (
            "the number of mentees I've worked with has grown to 7",
            ["the number of mentees I've worked with has grown to 7"],
        ),
    ],
)
def test_a_run_on_turn_splits_where_i_starts_a_new_clause(text: str, expected: list[str]) -> None:
    assert [c.text for c in clauses(text)] == expected


def test_a_run_on_split_keeps_the_hedge_and_the_negation_of_its_clause() -> None:
    assert kept("I can't say I am a huge Clint Eastwood fan") == []
    assert kept("No I'm not a dancer either, maybe that's why I'm still single") == []
