"""Statement forms: how a catalogue says in which words an attribute is stated.

A form is a short pattern such as `I (work|am working) (at|for) {value}`:

- words match whole words in any case; one space matches any run of spaces, and `'` matches a
  straight or a curly apostrophe;
- `(a|b c)` is a choice of one of its alternatives, `[a]` or `[a|b]` an optional part;
- `{value}` is the value, read in the attribute's type: for a string it runs to the end of the
  clause (or to the next word of the form) and stops at a conjunction, a preposition or a
  possessive that starts a new phrase, a pronoun, an adverb, a verb of its own, a time ("in
  my spare time") or punctuation; `{name}` is a string value that must read as a name
  (no article, pronoun or digit first, not a common noun such as "town"), in any case;
  `{phrase}` is a string value that keeps its prepositions and possessive object ("volunteer
  at the hospital", "walk my dog"), for activities; `{term}` is a value that must end in one
  of the attribute's `terms` (singular or plural, any case, up to two words before it: "high
  school teacher"), read whole where the value starts ("a stay at home mom");
- `{count}` is a number in digits or words, or `a`/`an`/`some`, that is read but not kept;
  `{change}` is a change verb (`changed`, `increased`, `raised`, `extended`, `adjusted`, `cut`,
  `moved`, `lowered`, `reduced`, `updated`, `switched`, `bumped`) with its auxiliaries;
  `{words}` is up to four words of the clause that may stand there or not, read but not kept
  ("response time {words} has improved to {value}" reads "response time of my API has
  improved to 250ms").

Every form holds exactly one `{value}`, `{phrase}`, `{name}` or `{term}` and at least one
word; a `{value}`, `{phrase}` or `{name}` of a string attribute needs two words beside it, so
"I'm {value}" cannot read "I'm tired".
This module only parses and validates (the catalogue calls it at load); the extractor compiles
the parsed forms to regular expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_FORM_CHARS = 200
MAX_FORMS = 64
SLOTS = ("value", "phrase", "name", "term", "count", "change", "words")
VALUE_SLOTS = ("value", "phrase", "name", "term")
_TOKEN = re.compile(r"\s+|\{[^{}]*\}|[()\[\]|]|[\w'’-]+|.")
_WORD = re.compile(r"^[\w'’-]+$")


@dataclass(frozen=True)
class Word:
    text: str


@dataclass(frozen=True)
class Slot:
    name: str


@dataclass(frozen=True)
class Choice:
    """One of `options` (each a sequence of parts); `optional` also allows none."""

    options: tuple[tuple[Part, ...], ...]
    optional: bool


Part = Word | Slot | Choice


def parse_form(form: str) -> tuple[Part, ...]:
    """The parts of `form`, or ValueError saying what is wrong with it."""
    if not form.strip():
        raise ValueError("a form may not be empty")
    if len(form) > MAX_FORM_CHARS:
        raise ValueError(f"a form has at most {MAX_FORM_CHARS} characters")
    tokens = [token for token in _TOKEN.findall(form) if not token.isspace()]
    parts, end = _sequence(tokens, 0, form, closing=None)
    if end != len(tokens):
        raise ValueError(f"{form!r}: unexpected {tokens[end]!r}")
    slots = _slots(parts)
    values = [name for name in slots if name in VALUE_SLOTS]
    if len(values) != 1:
        raise ValueError(
            f"{form!r}: a form needs exactly one {{value}}, {{phrase}}, {{name}} or {{term}}"
        )
    if not _has_word(parts):
        raise ValueError(f"{form!r}: a form needs at least one word besides its slots")
    return parts


def literal_words(parts: tuple[Part, ...]) -> int:
    """The fewest words any reading of the form spells out (its required words)."""
    count = 0
    for part in parts:
        if isinstance(part, Word):
            count += 1
        elif isinstance(part, Choice) and not part.optional:
            count += min(literal_words(option) for option in part.options)
    return count


def value_slot(parts: tuple[Part, ...]) -> str:
    return next(name for name in _slots(parts) if name in VALUE_SLOTS)


def _sequence(
    tokens: list[str], start: int, form: str, closing: str | None
) -> tuple[tuple[Part, ...], int]:
    parts: list[Part] = []
    index = start
    while index < len(tokens):
        token = tokens[index]
        if token in {")", "]", "|"}:
            if closing is None:
                raise ValueError(f"{form!r}: {token!r} without its opening bracket")
            return tuple(parts), index
        if token in {"(", "["}:
            choice, index = _choice(tokens, index + 1, form, ")" if token == "(" else "]")
            parts.append(choice)
            continue
        if token.startswith("{"):
            name = token[1:-1].strip()
            if name not in SLOTS:
                known = ", ".join("{" + slot + "}" for slot in SLOTS)
                raise ValueError(f"{form!r}: unknown slot {token} (known: {known})")
            parts.append(Slot(name))
        elif _WORD.match(token):
            parts.append(Word(token.casefold().replace("’", "'")))
        else:
            raise ValueError(f"{form!r}: {token!r} is neither a word, a bracket nor a slot")
        index += 1
    if closing is not None:
        raise ValueError(f"{form!r}: an opening bracket is not closed")
    return tuple(parts), index


def _choice(tokens: list[str], start: int, form: str, closing: str) -> tuple[Choice, int]:
    options: list[tuple[Part, ...]] = []
    index = start
    while True:
        option, index = _sequence(tokens, index, form, closing)
        if index >= len(tokens):
            raise ValueError(f"{form!r}: an opening bracket is not closed")
        options.append(option)
        token = tokens[index]
        index += 1
        if token == "|":
            continue
        if token != closing:
            raise ValueError(f"{form!r}: {token!r} closes a {closing!r} bracket")
        break
    if any(not option for option in options):
        raise ValueError(f"{form!r}: an empty alternative; use [...] for an optional part")
    if any(_slots(option) for option in options):
        raise ValueError(f"{form!r}: slots may not stand inside brackets")
    return Choice(tuple(options), optional=closing == "]"), index


def _slots(parts: tuple[Part, ...]) -> list[str]:
    names: list[str] = []
    for part in parts:
        if isinstance(part, Slot):
            names.append(part.name)
        elif isinstance(part, Choice):
            for option in part.options:
                names.extend(_slots(option))
    return names


def _has_word(parts: tuple[Part, ...]) -> bool:
    return any(isinstance(part, Word | Choice) for part in parts)
