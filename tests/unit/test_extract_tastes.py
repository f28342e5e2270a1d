"""The classes of wrong readings issue 29's MSC dev split showed, on the personal catalogue: a
taste narrowed right after it, a side of something said before ("the challenge"), a greeting
that names no one, a pastime told as an occupation, a question's told clause, leisure itself
("having fun") and a person by a given name ("I prefer Mary Anne") read as tastes, a relative's
age read as the relative ("my brother is 1 year younger")."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.catalog import bundled_catalog
from pipeline.extract import extract
from pipeline.settings import Settings
from tests.unit.extract_helpers import episode

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
PERSONAL = bundled_catalog("personal")


def kept(text: str) -> list[tuple[str, Any]]:
    result = extract(episode(text), catalog=PERSONAL, settings=SETTINGS, extractor="rules")
    return sorted((c.attribute, c.value) for c in result.kept)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I like sports, mostly basketball.", [("likes", "basketball")]),
        ("I love meat, especially steak.", [("likes", "steak")]),
        ("I like seafood too, especially sushi.", [("likes", "sushi")]),
        ("I love bands like Styx.", [("likes", "Styx")]),
        # a taste named in full keeps its name; an example is not it
        ("I love heavy metal like Slayer.", [("likes", "heavy metal")]),
        # "especially" saying where, or "like" pointing back, narrows nothing
        ("I love traveling, especially to the mountains.", [("likes", "traveling")]),
        ("I love books like that.", []),
        # nor a clause after it
        ("I love to read, especially while snuggled under the covers.", [("hobbies", "read")]),
    ],
)
def test_a_taste_narrowed_after_it_is_the_narrower_one(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert kept(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I enjoy the challenge.",
        "I really like the game.",
        "I love the thrill of winning races.",
        "I love the food.",
    ],
)
def test_the_side_of_something_said_before_is_no_taste(text: str) -> None:
    assert kept(text) == []


def test_a_side_said_with_one_word_before_it_is_no_taste_either() -> None:
    assert kept("I like the controlled environment.") == []
    assert kept("I love the local food.") == []
    # a proper name is read whole; a lower-case word before another noun is no aspect
    assert kept("I love the Food Network.") == [("likes", "Food Network")]
    assert kept("I love the rock music.") == []
    assert kept("I love the rock band.") == [("likes", "rock band")]
    assert kept("I like the cooked options as well.") == []


def test_how_old_a_relative_is_does_not_name_them() -> None:
    assert kept("My brother is 1 year younger.") == [("family_members", "brother")]
    assert kept("My siblings are 12 and 14.") == [("family_members", "siblings")]
    assert kept("My husband is 5 years older than me.") == [("partner", "husband")]
    # the partner by name, when said
    assert kept("My husband is John.") == [("partner", "John")]


@pytest.mark.parametrize(
    "text",
    [
        "I love having leisure activity what about you?",
        "I like partaking in leisure activities as well.",
        "I love fun!",
        "I like doing activities.",
        "I like to have fun.",
        "I like to have as much leisure activity as I can.",
    ],
)
def test_leisure_itself_is_no_taste(text: str) -> None:
    assert kept(text) == []


def test_an_activity_cut_down_to_its_light_verb_names_nothing() -> None:
    # what the time is spent with was cut off ("all" ends a value), or was a pronoun
    assert kept("I like to spend time with all kind of animals, love them.") == []
    assert kept("My friends are amazing and I love spending time with them.") == []
    assert kept("I like to spend time with my family.") == [
        ("hobbies", "spend time with my family")
    ]
    assert kept("I like being with others.") == [("likes", "being with others")]


def test_an_article_left_at_the_end_by_a_cut_is_dropped() -> None:
    assert kept("I love playing with others the more the merrier!") == [
        ("likes", "playing with others")
    ]
    assert kept("I enjoy seeing the before and afters.") == []


def test_a_kind_of_leisure_is_a_taste() -> None:
    assert kept("I love outdoor activities.") == [("likes", "outdoor activities")]
    assert kept("I enjoy fun runs.") == [("likes", "fun runs")]


@pytest.mark.parametrize(
    "text",
    [
        "I prefer mary anne though!",  # what they call me
        "I like Jake.",
        "Less Than Jake are one of my favourites.",  # the name cut at "than" is no band
        "I love Rachel because of her quirkiness.",
    ],
)
def test_a_given_name_alone_is_a_person_not_a_taste(text: str) -> None:
    assert kept(text) == []


def test_a_name_with_more_than_given_names_is_still_a_taste() -> None:
    assert kept("I love Taylor Swift.") == [("likes", "Taylor Swift")]
    assert kept("I like John Mayer.") == [("likes", "John Mayer")]
    assert kept("I love Adele.") == [("likes", "Adele")]


def test_the_same_words_without_the_article_or_outside_a_taste_still_read() -> None:
    assert kept("I love food.") == [("likes", "food")]
    assert kept("I love the beach.") == [("likes", "beach")]
    assert kept("I work in the food business.") == [("work_field", "food business")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hi, I'm far too tired.", []),
        ("Hi, I'm factory worker.", []),
        ("Hi im rob one of my friends is here.", []),
        ("Hi, I'm Nancy.", [("preferred_name", "Nancy")]),
    ],
)
def test_a_greeting_names_a_name_not_a_word(text: str, expected: list[tuple[str, Any]]) -> None:
    assert kept(text) == expected


def test_a_pastime_is_no_occupation() -> None:
    assert kept("I'm an avid fisherman.") == []
    assert kept("I'm an amateur photographer.") == []
    assert kept("I am a singer by hobby.") == []
    assert kept("I'm a fisherman.") == [("job_title", "fisherman")]
    assert kept("I am a plumber on the side!") == [("job_title", "plumber")]  # a side job


def test_what_a_question_asks_if_it_told_is_asked_too() -> None:
    assert kept("Did I tell you I work at Dell") == []
    assert kept("Did I tell you I work at Dell?") == []
    assert kept("I work at Dell") == [("employer", "Dell")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Naw I like snakes.", [("likes", "snakes")]),
        ("oh my goodness I love Aerosmith!", [("likes", "Aerosmith")]),
        ("At home I have 2 snakes.", [("pets", "snake")]),
        ("In my spare time I enjoy gardening.", [("hobbies", "gardening"), ("likes", "gardening")]),
        ("Hi there I'm a single male.", [("marital_status", "single")]),
        # a run-on after a full clause whose subject is "that"
        ("That is awesome I love murder mystery novels.", [("likes", "murder mystery novels")]),
        # still inside another phrase, or led into
        ("The zoo I work at is big.", []),
        ("That is why I love fashion.", []),
    ],
)
def test_an_interjection_or_a_setting_may_open_a_first_person_clause(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert kept(text) == expected


def test_a_direction_alone_is_no_place_and_a_comparison_ends_a_value() -> None:
    assert kept("I live in south.") == []
    assert kept("I live in South Carolina.") == [("home_city", "South Carolina")]
    assert kept("I like to travel as long as there is nature.") == [("hobbies", "travel")]


def test_how_much_of_the_time_is_not_the_value() -> None:
    assert kept("I'm a full time student.") == [("job_title", "student")]
    assert kept("I'm a part-time plumber.") == [("job_title", "plumber")]


def test_an_in_law_is_not_the_relative_the_term_names() -> None:
    assert kept("Hanging out with my brother in law, my sister just got married.") == [
        ("family_members", "sister")
    ]
    assert kept("I have a sister and brother in law.") == [("family_members", "sister")]
    assert kept("I visit my brother a lot.") == [("family_members", "brother")]


def test_what_is_ones_own_was_named_before() -> None:
    assert kept("Yeah I like making my own so I know exactly what's in it.") == []
    assert kept("I love growing my own vegetables.") == [("likes", "growing my own vegetables")]
    assert kept("I even prefer making music of my own.") == [("likes", "making music of my own")]
    assert kept("I like being on my own.") == [("likes", "being on my own")]


def test_a_value_cut_inside_its_phrase_names_nothing() -> None:
    assert kept("I prefer places close to nature.") == []
