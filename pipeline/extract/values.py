"""A form's value slot read in its attribute's type: a string cut where its phrase ends, an
enum value named, a number in digits or words. A value that does not read as that type — a
pronoun, a vague noun, a span too long to be a value — yields nothing.
"""

from __future__ import annotations

import re

from pipeline.extract.clause_values import MAX_VALUE_WORDS, clause_problem
from pipeline.extract.value_words import (
    ANAPHORIC_END,
    ASPECTS,
    BREEDS,
    COMPANION_TAIL,
    COUNT,
    CUT_NEARNESS,
    DANGLING,
    DEMONSTRATIVE_END,
    DETERMINER,
    EMPTY_VALUE,
    EXAMPLE,
    FIGURATIVE,
    GENERIC_PLACES,
    GIVEN_NAMES,
    IN_LAW,
    ITS_OWN,
    JUDGING,
    KINDS,
    LEISURE,
    LEISURE_FILLERS,
    LIGHT_VERBS,
    LIKE_THAT,
    LIST_JOINT,
    NAME_FIRST_BAD,
    NARROWED,
    NOT_NAMES,
    NOT_THE_COUNT,
    NUMBER,
    NUMBER_WORDS,
    OWN_END,
    PARTICLES,
    PASTIME,
    PASTIME_AFTER,
    PHRASE_STOP,
    PLACE_ADJECTIVES,
    PREPOSITION_WORDS,
    PRONOUN_OBJECT,
    RELATIVE,
    SHORT_PHRASE_STOP,
    STOP,
    TASTE_KIND,
    TASTE_VERB,
    THEIR_OWN,
    THERE,
    VAGUE_OBJECTS,
    VAGUE_TASTES,
)
from schemas.catalog import AttributeSpec

_FLAGS = re.IGNORECASE


def string_values(
    span: str, spec: AttributeSpec, slot: str, *, leading: bool, inner: bool = False
) -> list[str]:
    """The string value(s) a slot's span holds, or [] with none that reads as a value. An
    inner value must reach the form's next words, but for one adverb ("my sister always
    has") or the speaker ("my sister and I are"): "my older sister always complaining that
    her kids have ..." is no "my sister has"."""
    if re.search(r"^(?:\S+\s+){0,5}?(?:you|your|yours)\b", span, _FLAGS):
        return []  # "I love the hair that you have": the listener's, not the speaker's
    listed = spec.cardinality == "many" and slot == "term"
    if listed:  # "Spanish and Portuguese": the list's joints must survive the cut
        span = LIST_JOINT.sub("\x1f", span)
    if slot == "term" and not listed and not leading:
        # "a stay at home mom", "nursing school to be a nurse": a listed term is read whole,
        # before any cut at its own words.
        term = _leading_term(span, spec.terms)
        rest = span[span.casefold().find(term.casefold()) + len(term) :] if term else ""
        if PASTIME_AFTER.match(rest):
            return []  # "I am a singer by hobby", "a photographer for fun": no occupation
        if IN_LAW.match(rest):
            return []  # "my brother in law": not a brother
        return [term] if term else []
    # "I love working with computers", "going on camping trips": a gerund keeps its
    # prepositions, like a {phrase}.
    gerund = not leading and bool(re.match(r"^\w{2,}ing\s+(?!(?:and|but|or)\b)", span))
    activity = slot == "phrase" or gerund
    text = _cut(span, leading=leading, phrase=activity)
    taste = spec.kind == TASTE_KIND
    if taste and not leading and not activity:
        narrowed = NARROWED.match(span[len(text) :])
        if narrowed is None and DETERMINER.sub("", text).casefold() in VAGUE_TASTES:
            narrowed = EXAMPLE.match(span[len(text) :])
        if narrowed:  # "I like sports, mostly basketball": the taste is the narrower one
            span = narrowed["rest"]
            text = _cut(span, leading=False)
    if inner and len(COMPANION_TAIL.sub("", span[len(text) :]).split()) > 1:
        return []
    if activity and len(text.split()) > MAX_VALUE_WORDS:  # "go hiking with my dogs for walks"
        text = _cut(span, leading=leading, phrase=activity, short=True)
    after = span[len(text) :]
    if slot == "term" and IN_LAW.match(after):  # "with my brother in law": not a brother
        if "\x1f" not in text:
            return []
        text = text.rsplit("\x1f", 1)[0]  # "a sister and brother in law": the sister
    if not leading and not listed and _context_bound(text, after, activity=activity, taste=taste):
        return []
    if leading and DEMONSTRATIVE_END.search(span[: len(span) - len(text)]):
        return []  # "this trilogy is one of my faves", "that event was": shown, not named
    items = text.split("\x1f") if listed else [text]
    values = []
    for item in items[:4]:
        value = _clean(item)
        if slot == "term":
            value = _term(value, spec.terms)
        elif slot == "name":  # "San Paulo, a very big city": a name ends before an article
            value = re.split(r"\s+(?:a|an|the)(?:\s+|$)", value, maxsplit=1, flags=_FLAGS)[0]
            if not _is_name(item.strip(" .!,'\"")):
                value = ""
        elif activity:  # "in my spare time I enjoy gardening": the activity is the gardening
            value = DANGLING.sub("", TASTE_VERB.sub("", value) if slot == "phrase" else value)
        if (
            value
            and _names_something(value, activity=activity, name=slot == "name")
            and not (taste and _names_no_taste(value))
            and not clause_problem(value)
            and value not in values
        ):
            values.append(value)
    return values


def _context_bound(value: str, after: str, *, activity: bool = False, taste: bool = False) -> bool:
    """A value whose sense the conversation holds, not the value: "a house that's filled with
    animals" cut before its relative clause, "the weather there", "books like that", a verb
    whose object is a pronoun ("learning them"); for a `taste`, a side of something named
    before ("I enjoy the challenge", "the thrill of scoring goals")."""
    if re.match(r"^(?:a|an)\s+\S+$", value, _FLAGS) and RELATIVE.match(after):
        return True
    if LIKE_THAT.match(after):
        return True
    # An aspect noun after "the" and at most one lower-case word ("the controlled environment")
    aspect = re.match(r"^(?i:the)\s+(?:[a-z-]+\s+)?([\w-]+)(?i:\s+of\b.*)?$", value)
    if taste and aspect and aspect[1].casefold() in ASPECTS:
        return True  # "the challenge", "the thrill of scoring goals": a side of what was said
    if not activity and RELATIVE.match(after) and value.casefold().split()[-1] in KINDS:
        return True  # "personal activities where I can focus", "people who ...": which ones?
    if re.match(r"^the\s", value, _FLAGS) and (THEIR_OWN.match(after) or ITS_OWN.search(after)):
        return True  # "the energy it brings", "the smell and taste it adds", "... of this city"
    words = value.casefold().split()
    if len(words) == 1 and words[0] not in PREPOSITION_WORDS and PRONOUN_OBJECT.match(after):
        return True
    return bool(re.match(r"^the\s", value, _FLAGS)) and bool(THERE.match(after))


def enum_values(span: str, spec: AttributeSpec) -> list[str]:
    """The enum value(s) the span names: one, or for a many-valued attribute each item of a
    list ("two dogs and a cat")."""
    if spec.cardinality != "many":
        value = enum_value(span, spec)
        return [value] if value else []
    values: list[str] = []
    for item in re.split(r",\s*(?:and\s+)?|\s+and\s+|\s+or\s+", span)[:4]:
        value = enum_value(re.sub(r"^\s*" + COUNT + r"\s+", "", item, flags=_FLAGS), spec)
        if not value:
            break
        if value not in values:
            values.append(value)
    return values


def enum_value(span: str, spec: AttributeSpec) -> str:
    """The one enum value named among the span's first words, or ''."""
    words = re.findall(r"[\w'-]+", _cut(span, leading=False).casefold())[:3]
    if any(word.endswith("'s") for word in words):
        return ""  # "my sister's dog": someone else's
    text = " ".join(words)
    named = {
        value
        for value in spec.values or []
        if re.search(rf"(?<![\w-]){_plural(value.casefold())}(?![\w-])", text)
    }
    if not named:  # "a Labrador Retriever": a breed names its animal
        named = {
            kind
            for kind, breeds in BREEDS.items()
            if kind in (spec.values or []) and {_singular(word) for word in words} & breeds
        }
    return named.pop() if len(named) == 1 else ""


def number_value(span: str, *, leading: bool = False) -> str:
    """A number at the start of the span (its end, for a leading value), in digits ($1,500,
    26, 95%) or words (two)."""
    words = span.split()
    text = (words[-1] if words else "") if leading else span.strip()
    if leading and NOT_THE_COUNT.search(" ".join(words[-4:-1])):
        return ""  # "at least 80% accuracy", "I cut 1,200 words": a bound or a change, not it
    match = NUMBER.match(text)
    if match:
        return match.group(1).replace(",", "") + (match.group(2) or "")
    word = text.split(" ", 1)[0].casefold().strip(".,!?")
    return str(NUMBER_WORDS[word]) if word in NUMBER_WORDS else ""


def _cut(span: str, *, leading: bool, phrase: bool = False, short: bool = False) -> str:
    stops = (SHORT_PHRASE_STOP if short else PHRASE_STOP) if phrase else STOP
    if leading:  # the value is what precedes the form, after the last phrase break
        pieces = stops.split(" " + span)
        return pieces[-1].strip() if pieces else ""
    stop = stops.search(span)
    return (span[: stop.start()] if stop else span).strip()


def _clean(item: str) -> str:
    value = DETERMINER.sub("", item.strip(" .!,'\"/*~")).strip()
    return value if 0 < len(value.split()) <= MAX_VALUE_WORDS and len(value) <= 120 else ""


def _names_something(value: str, *, activity: bool = False, name: bool = False) -> bool:
    words = value.casefold().split()
    if len(words) == 1 and words[0] in LIGHT_VERBS:
        return False  # "I love doing (it)": the object was a pronoun
    if len(words) <= 2 and words[-1] in PARTICLES:
        return False  # "I like setting up (my easel)": the object was cut off
    if words[-1] in ANAPHORIC_END or OWN_END.search(value):
        return False  # "I love learning new ones", "making my own": said before
    if words[-1] in CUT_NEARNESS:
        return False  # "places close (to nature)": cut inside its phrase
    if activity and len(words) > 1 and all(word in VAGUE_OBJECTS for word in words[1:]):
        return False  # "I like to sing anything", "watch things": no object named
    if activity and all(
        (word in LIGHT_VERBS or word in EMPTY_VALUE) and word not in PREPOSITION_WORDS
        for word in words
    ):
        return False  # "spend time (with all kinds of animals)": what with was cut off
    if name and len(words) > 1 and words[0] in PLACE_ADJECTIVES:
        words = words[1:]  # "new york", "little rock"
    return words[0] not in EMPTY_VALUE and not all(word in EMPTY_VALUE for word in words)


def _names_no_taste(value: str) -> bool:
    """Leisure itself ("having fun", "leisure activities"), or a person by a given name alone
    ("Mary Anne", "Jake"): someone known or a name one goes by, not a taste."""
    words = value.casefold().split()
    if words[-1] in LEISURE and all(
        word in LEISURE or word in LEISURE_FILLERS or word in LIGHT_VERBS for word in words
    ):
        return True
    return len(words) <= 2 and all(word in GIVEN_NAMES for word in words)


def _is_name(value: str) -> bool:
    if not value or NAME_FIRST_BAD.match(value) or len(value.split()) > 4:
        return False
    words = value.casefold().split()
    if all(word in PLACE_ADJECTIVES for word in words):
        return False
    not_names = NOT_NAMES - PLACE_ADJECTIVES if len(words) > 1 else NOT_NAMES
    return not any(word in not_names or _singular(word) in GENERIC_PLACES for word in words)


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _term(value: str, terms: list[str]) -> str:
    """`value` when its last words are a term, with at most two words before the term."""
    folded = value.casefold()
    for term in sorted(terms, key=len, reverse=True):
        match = re.search(rf"(?:^|\s){_plural(term.casefold())}$", folded)
        before = folded[: match.start()].split() if match else []
        if match and len(before) <= 2 and not FIGURATIVE & set(before):
            return value
    return ""


def _leading_term(span: str, terms: list[str]) -> str:
    """The listed term at the start of `span`, after at most two words ("a retired school
    teacher"), as the span spells it; '' when none. The reading that ends furthest wins
    ("a marine vet" is a vet, not a marine)."""
    text = DETERMINER.sub("", span.strip(" .!,'\"/*~"))
    folded = text.casefold()
    best = 0
    for term in terms:
        match = re.match(
            rf"^(?P<before>(?:[\w'-]+\s+){{0,2}}?){_plural(term.casefold())}(?![\w'-])", folded
        )
        if match is None or match.end() <= best:
            continue
        before = match["before"].split()
        if (
            not STOP.search(" " + match["before"])
            and not (JUDGING | FIGURATIVE | PASTIME) & set(before)
            and not any(word.endswith(("'s", "’s")) for word in before)  # "my sister's husband"
        ):
            best = match.end()
    return text[:best]


def _plural(word: str) -> str:
    escaped = re.escape(word)
    if word.endswith("y") and not word.endswith(("ay", "ey", "oy", "uy")):
        return rf"(?:{escaped}|{re.escape(word[:-1])}ies)"
    if word.endswith("f"):
        return rf"(?:{escaped}|{re.escape(word[:-1])}ves|{escaped}s)"
    return rf"{escaped}(?:s|es)?"
