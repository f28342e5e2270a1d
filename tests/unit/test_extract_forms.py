"""Statement forms declared in the catalogue, read clause by clause: the personal default
catalogue on the phrasings people use, clauses inside questions, what is not stated, value
boundaries, change verbs and numbers inside phrases, and forms refused at load."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.catalog import bundled_catalog, parse_catalog
from pipeline.errors import CatalogError, InvalidInput
from pipeline.extract import extract
from pipeline.extract.clauses import clauses
from pipeline.settings import Settings, load_settings
from schemas.catalog import Catalog
from tests.unit.extract_helpers import episode

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
PERSONAL = bundled_catalog("personal")

BUDGET = parse_catalog(
    """
version: "t1"
kinds: {fact: {retention: P30D}}
attributes:
  monthly_budget:
    type: number
    forms:
      - "my [monthly] budget [limit] is {value}"
      - "(a|my) [monthly] budget of {value}"
      - "my {value} monthly budget"
      - "{change} my [monthly] budget to {value}"
""",
    "<test>",
    toml=False,
)


def kept(text: str, catalog: Catalog = PERSONAL) -> list[tuple[str, Any]]:
    result = extract(episode(text), catalog=catalog, settings=SETTINGS, extractor="rules")
    return sorted((c.attribute, c.value) for c in result.kept)


STATED = [
    ("I live in california", [("home_city", "california")]),
    ("I work at mcdonald's", [("employer", "mcdonald's")]),
    ("I have 4 kids", [("number_of_children", 4)]),
    ("I'm allergic to dogs", [("allergies", "dogs")]),
    ("I am vegan", [("diet", "vegan")]),
    ("I play the piano", [("hobbies", "piano")]),
    ("Hi, my name is charles", [("preferred_name", "charles")]),
    ("My favorite dish is pasta", [("favorite_food", "pasta")]),
    ("My favourite band is Radiohead.", [("favorite_music", "Radiohead")]),
    ("I'm 34 years old.", [("age", 34)]),
    ("I'm a high school teacher.", [("job_title", "high school teacher")]),
    ("I also have two dogs and a cat.", [("pets", "cat"), ("pets", "dog")]),
    ("I speak Spanish and Portuguese.", [("languages", "Portuguese"), ("languages", "Spanish")]),
    ("I moved to Lisbon last year.", [("home_city", "Lisbon")]),
    ("I live in France.", [("home_country", "France")]),
    ("Pizza is my favorite food!", [("favorite_food", "Pizza")]),
    # A value-first form is read in any sentence of a turn, not only the first.
    ("Long day. Knitting is my passion.", [("hobbies", "Knitting")]),
    ("My city is Paris. No, it's Lyon.", [("home_city", "Lyon")]),
    # a home shared with someone is not the speaker's alone; the partner is theirs
    ("My wife and I live in Ohio.", [("partner", "wife")]),
    ("Jody Foster is one of my favorites!", [("likes", "Jody Foster")]),
    # names that start like an article, or with New
    ("I live in amsterdam so there are a lot of canals.", [("home_city", "amsterdam")]),
    ("My name is Anna.", [("preferred_name", "Anna")]),
    ("I live in new york.", [("home_city", "new york")]),
    ("I live in a small town.", []),
    ("I have been living in alaska for 3 yrs.", [("home_city", "alaska")]),
    ("I'm a marine vet", [("job_title", "marine vet")]),
    ("I watch movies a lot with my sister though.", [("family_members", "sister")]),
    ("Sorry, just put my 2 kids to bed.", [("number_of_children", 2)]),
    ("I have eight grand kids.", []),
    ("I've been a dentist for 14 years here in town.", [("job_title", "dentist")]),
    ("I've been married for 15 years.", [("marital_status", "married")]),
    ("I'm more of a football guy", [("likes", "football")]),
    ("My favorite is German chocolate cake.", [("likes", "German chocolate cake")]),
    ("You can call me Alistar.", [("preferred_name", "Alistar")]),
    ("Im a 40 year old single mom.", [("age", 40)]),
    ("I'm a native Spanish speaker.", [("languages", "Spanish")]),
    ("I'm diabetic.", [("health_conditions", "diabetic")]),
    ("I really enjoy personal activities where I can focus.", []),
    ("I love going to Disney World!", [("likes", "going to Disney World")]),
    ("I love cooking and would do it more often.", [("likes", "cooking")]),
    ("I love coffee and try new ways to brew.", [("likes", "coffee")]),
    ("I love to try to cook.", []),
    ("My wife and I just divorced.", []),
    ("Lost my job as a banker yesterday", []),
    ("This trilogy is one of my faves.", []),
    ("Bali last year was one of my favs.", []),
    ("I love the smell and taste it adds to dishes.", []),
    ("I love the energy, diversity, and awesome food of this city.", []),
    ("I love the color green cause it is nice.", [("likes", "color green")]),
    ("I love to help, so just shoot me a question.", []),
    ("I'm a total movie fan!", [("likes", "movie")]),
    ("It is so hard to be away from my fur babies.", []),
    (
        "Sometimes my job as a software developer gets too stressful.",
        [("job_title", "software developer")],
    ),
    ("I do sometimes like to drive my truck.", [("hobbies", "drive my truck")]),
    # a statement before a question after a comma; a hedge after ", but" is its own phrase
    ("I like to hike in the mountains, where do you go?", [("hobbies", "hike in the mountains")]),
    ("I like to travel too, but only where my jeep will take me.", [("hobbies", "travel")]),
    ("It is one of my favorite hobbies.", []),
    ("Ill have to go check it out with my husband.", [("partner", "husband")]),
]


@pytest.mark.parametrize(("text", "expected"), STATED, ids=[t for t, _ in STATED])
def test_the_personal_catalogue_reads_the_forms_people_use(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert kept(text) == expected


def test_a_value_stops_where_its_clause_ends() -> None:
    assert kept("My city is Boston and I work at Google.") == [
        ("employer", "Google"),
        ("home_city", "Boston"),
    ]
    assert kept("I live in Ohio with my husband, do you?") == [
        ("home_city", "Ohio"),
        ("partner", "husband"),
    ]


SPANS = [
    # an adverb, a verb of its own, an ellipsis or a dash ends the value
    ("I do listen to sufjan stevens quite a bit.", [("likes", "sufjan stevens")]),
    ("I like cycling as well.", [("likes", "cycling")]),
    ("I like horror movies are unpredictable.", [("likes", "horror movies")]),
    ("I'm a big fan of London...love the history.", [("likes", "London")]),
    ("I like to read fiction--it is a break.", [("hobbies", "read fiction")]),
    # a time of day or of the week is when, not what
    ("I enjoy watching movies in my spare time.", [("likes", "watching movies")]),
    ("I love to grill pizza on the weekends.", [("hobbies", "grill pizza")]),
    # an activity keeps its possessive object
    ("I like walking my dog.", [("likes", "walking my dog")]),
    ("I like to visit my family in Sweden.", [("hobbies", "visit my family in Sweden")]),
    # "the ones", "anything", "a house that ...": what is liked was said elsewhere
    ("I love learning new ones.", []),
    ("I like to sing anything.", []),
    ("I love a house that's filled with animals.", []),
    ("I was born in San Paulo a very big city.", [("hometown", "San Paulo")]),
    # "books like that", a verb whose object is a pronoun, "the X it ...": said elsewhere
    ("I like motivational books like that.", []),
    ("I enjoy learning them.", []),
    ("I do like the energy it brings to the school!", []),
    ("I love cooking for them.", [("likes", "cooking")]),
    ("I love mediterranean food it's delicious.", [("likes", "mediterranean food")]),
    # a listed term is read whole, with its own small words, and not after a judgement
    (
        "I'm currently a stay at home mom, so I hope it works for you.",
        [("job_title", "stay at home mom")],
    ),
    ("I am in nursing school to be one like my mom.", [("education", "nursing school")]),
    ("I'm a pretty good cook, too.", []),
    # a short gerund keeps its prepositions; a bare activity is one
    ("I enjoy going on camping trips.", [("likes", "going on camping trips")]),
    ("I love reading.", [("likes", "reading")]),
    # an inner value reaches the form's next words (an adverb or "and I" aside)
    ("My older sister always complaining that her kids have no time.", []),
    ("My sister and I are twins.", [("family_members", "sister")]),
]


@pytest.mark.parametrize(("text", "expected"), SPANS, ids=[t for t, _ in SPANS])
def test_a_value_ends_before_what_is_not_part_of_it(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert kept(text) == expected


NOT_STATED = [
    "Do you live in Ohio?",
    "You live in Ohio?",
    "I don't live in Ohio.",
    "I never worked at Google.",
    "I think I live in Ohio now.",
    "If I were vegan I would feel better.",
    "My sister says I work at Google.",
    "I want to move to Berlin.",
    "I'd love to live in Paris.",
    "The zoo I work at is open today.",
    "I love it.",
    "I like your style.",
    "Hey, I'm good, thanks!",
    "I can't say cooking is my passion.",
    # a taste said to hold for now is a passing one
    "I love murder mysteries right now",
    "I've been enjoying playing some older classics lately.",
    # what has ended no longer holds; someone else's partner is not the speaker's
    "Hello, not good I just divorced my wife.",
    "It sure is, my ex wife and I went three times.",
    "My sister's husband is super excited about it.",
    "I bet my wife didn't like snakes either.",
]


@pytest.mark.parametrize("text", NOT_STATED)
def test_questioned_negated_hedged_reported_or_empty_statements_yield_nothing(
    text: str,
) -> None:
    assert kept(text) == []


def test_a_statement_inside_a_question_counts_and_the_asking_clause_does_not() -> None:
    text = "Given that I've already spent $575, and my budget limit is $650, should I buy it?"
    assert [c.questioned for c in clauses(text)] == [False, False, True]
    assert kept(text, BUDGET) == [("monthly_budget", 650)]
    assert kept("Since I live in Ohio, what should I see?") == [("home_city", "Ohio")]
    assert kept("How can I use the fact that I work at Acme?") == [("employer", "Acme")]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I increased my budget to $700 yesterday.", 700),
        ("We raised my monthly budget to 1,200 dollars.", 1200),
        ("That fits within a budget of $650.", 650),
        ("It won't fit my $35 monthly budget.", None),
        ("It has to fit my $35 monthly budget.", 35),
        ("I never said a budget of $650.", None),
    ],
)
def test_change_verbs_and_numbers_inside_phrases(text: str, value: int | None) -> None:
    assert kept(text, BUDGET) == ([("monthly_budget", value)] if value is not None else [])


@pytest.mark.parametrize(
    ("form", "problem"),
    [
        ("I live in {place}", "unknown slot {place}"),
        ("I live in", "exactly one {value}"),
        ("I (live|stay in {value}", "not closed"),
        ("I'm {value}", "at least two words"),
        ("I am a {term}", "lists no 'terms'"),
        ("(a|) {value} b", "empty alternative"),
    ],
)
def test_a_bad_form_is_refused_at_load_naming_its_attribute(form: str, problem: str) -> None:
    source = (
        'version: "t"\nkinds: {fact: {retention: P30D}}\nattributes:\n  home:\n'
        f"    type: string\n    forms: [{form!r}]\n"
    )
    with pytest.raises(CatalogError) as error:
        parse_catalog(source, "cat.yaml", toml=False)
    assert "attributes.home" in str(error.value)
    assert "forms[0]" in str(error.value)
    assert problem in str(error.value)


def test_a_bundled_catalogue_is_selected_by_name() -> None:
    assert "pets" in bundled_catalog("personal").attributes
    assert "passport_deadline" in bundled_catalog("support").attributes
    assert load_settings(catalog="personal").catalog == "personal"
    with pytest.raises(InvalidInput) as error:
        load_settings(catalog="crm")
    assert "SGAM_CATALOG" in str(error.value)


def test_the_guide_example_of_forms_loads_and_reads_what_its_comments_say() -> None:
    from pathlib import Path

    guide = Path(__file__).parents[2] / "docs" / "guides" / "catalogue.md"
    section = guide.read_text(encoding="utf-8").split("## Teaching SGAM your attributes", 1)[1]
    block = section.split("```yaml", 1)[1].split("```", 1)[0]
    source = 'version: "readme"\nkinds: {fact: {retention: P30D}}\n' + block
    example = parse_catalog(source, "catalogue.md", toml=False)
    assert kept("I'm a high school teacher", example) == [("job_title", "high school teacher")]
    assert kept("I'm a mess", example) == []
    assert kept("I also have two dogs and a cat", example) == [("pets", "cat"), ("pets", "dog")]
    assert kept("It must fit within a budget of $650.", example) == [("monthly_budget", 650)]
    assert kept("I increased my budget to $700", example) == [("monthly_budget", 700)]
    assert kept("Pizza is my favourite dish", example) == [("favorite_food", "Pizza")]
