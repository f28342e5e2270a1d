"""The catalogue's statement forms compiled to regular expressions, and the anchor words
that trigger them.

`schemas.forms` parses and validates a form; here each becomes one pattern searched in a
clause, and `pipeline.extract.values` reads its value slot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.extract.derived import derived_forms
from pipeline.extract.value_words import BREEDS, CHANGE, COUNT, word_set
from schemas.catalog import Catalog, ValueType
from schemas.forms import VALUE_SLOTS, Choice, Part, Slot, Word, parse_form, value_slot

_FLAGS = re.IGNORECASE
_SEP = r",?\s+"
# After I / we, up to two adverbs may stand in any form: "I also have two dogs", "I do
# sometimes like to drive".
_WORDS = r"[\w'’-]+(?:\s+[\w'’-]+){0,3}?"
_SUBJECTS = frozenset({"i", "we", "i'm", "we're", "i've", "we've", "im"})
_ADVERB = (
    r"(?:\s+(?:also|really|still|do|just|now|actually|currently|definitely|totally|absolutely|"
    r"already|only|mostly|usually|honestly|truly|too|both|recently|finally|always|even|"
    r"sometimes|often|generally|personally|genuinely|seriously)){0,2}"
)


@dataclass(frozen=True)
class CompiledForm:
    attribute: str
    form: str
    slot: str
    pattern: re.Pattern[str]
    leading: bool
    """The value comes first ("{value} is my favourite food")."""
    personal: bool
    """The form starts with I or we: the clause's subject is the speaker."""
    probe: str
    """A case-sensitive pattern that matches the casefolded text of any sentence in which the
    form could match: the form's own without its value's group and its leading `\\b`; for a
    leading value, what follows the value (a sentence holds clauses, so no anchor at its start)."""
    initials: frozenset[str]
    """The letters the probe's first word may start with; empty when it starts with a slot."""
    inner: bool = False
    """The value stands between the form's words ("my {term} is", "I have a {value} allergy")."""
    derived: bool = False
    """Derived from the attribute's name, synonyms and type (`pipeline.extract.derived`)."""


def compile_forms(catalog: Catalog) -> list[CompiledForm]:
    compiled = []
    for name, spec in catalog.attributes.items():
        declared = spec.forms is not None
        for form in spec.forms if spec.forms is not None else derived_forms(name, spec):
            parts = parse_form(form)
            leading = isinstance(parts[0], Slot) and parts[0].name == value_slot(parts)
            body = _sequence(parts, value_last=_value_last(parts))
            anchor = r"^\W*" if leading else r"\b"
            pattern = re.compile(anchor + body + r"(?![\w'])", _FLAGS)
            first = parts[0]
            personal = isinstance(first, Word) and first.text in _SUBJECTS and first.text != "my"
            if isinstance(first, Choice):
                starts = _first_words((first,))
                personal = bool(starts) and starts <= _SUBJECTS
            probed = parts[1:] if leading else parts
            probe = _sequence(probed, value_last=False).replace("(?P<value>", "(?:")
            starts = _first_words(probed)
            initials = frozenset() if "" in starts else frozenset(word[0] for word in starts)
            compiled.append(
                CompiledForm(
                    name,
                    form,
                    value_slot(parts),
                    pattern,
                    leading,
                    personal,
                    probe + r"(?![\w'])",
                    initials,
                    inner=not leading and not _value_last(parts),
                    derived=not declared,
                )
            )
    return compiled


def _value_last(parts: tuple[Part, ...]) -> bool:
    return isinstance(parts[-1], Slot) and parts[-1].name in VALUE_SLOTS


def _sequence(parts: tuple[Part, ...], *, value_last: bool) -> str:
    """Parts joined by runs of spaces (a comma may stand between them: "hi, I'm Jo"); an
    optional part brings its own space."""
    pieces: list[tuple[str, bool]] = [(_part(p, value_last), _optional(p)) for p in parts]
    required = [index for index, (_, optional) in enumerate(pieces) if not optional]
    last = required[-1] if required else len(pieces) - 1
    out = ""
    for index, (regex, optional) in enumerate(pieces):
        if index > last:
            out += rf"(?:{_SEP}{regex})?"
        elif optional:
            out += rf"(?:{regex}{_SEP})?"
        else:
            out += regex + (_SEP if index < last else "")
    return out


def _optional(part: Part) -> bool:
    return (isinstance(part, Choice) and part.optional) or part == Slot("words")


def _part(part: Part, value_last: bool) -> str:
    if isinstance(part, Word):
        word = re.escape(part.text).replace("'", "['’]?")
        return word + _ADVERB if part.text in _SUBJECTS else word
    if isinstance(part, Slot):
        if part.name == "count":
            return COUNT
        if part.name == "change":
            return CHANGE
        if part.name == "words":  # a few words, no punctuation: it never crosses a phrase
            return _WORDS
        return r"(?P<value>\S.*)" if value_last else r"(?P<value>\S.*?)"
    options = "|".join(_sequence(option, value_last=False) for option in part.options)
    return f"(?:{options})"


_COMMON = word_set(
    "i i'm im my me a an the am is are to at for in of on and have i've ive been was it that "
    "this with be do so not just really very got get"
)


def anchors(catalog: Catalog, form: CompiledForm) -> frozenset[str]:
    """Words one of which every clause the form reads contains: the clause's words are
    looked up in an index of these, so a clause is only searched with forms it could match."""
    spec = catalog.attributes[form.attribute]
    parts = parse_form(form.form)
    if form.slot == "term":
        return _variants(word for term in spec.terms for word in [term.casefold().split()[-1]])
    if spec.type is ValueType.ENUM and form.slot == "value":
        values = spec.values or []
        breeds = [breed for kind in values for breed in BREEDS.get(kind, ())]
        return _variants([value.casefold().split()[0] for value in values] + breeds)
    groups: list[frozenset[str]] = [
        _anchor_words(part)
        for part in parts
        if isinstance(part, Word) or (isinstance(part, Choice) and not part.optional)
    ]
    groups = [group for group in groups if "" not in group] or [frozenset({""})]
    rare = [group for group in groups if not group & _COMMON]
    chosen: frozenset[str] = min(rare or groups, key=len)
    return _variants(chosen)


def _anchor_words(part: Word | Choice) -> frozenset[str]:
    """A word every reading of `part` spells: the word itself, or for a choice the rarest
    required word of each alternative ("I work|I'm working" -> work, working)."""
    if isinstance(part, Word):
        return frozenset({part.text})
    words: set[str] = set()
    for option in part.options:
        required = [p.text for p in option if isinstance(p, Word)]
        rare = [word for word in required if word not in _COMMON]
        if rare:
            words.add(rare[0])
        elif required:
            words.add(required[0])
        else:
            words |= _first_words(option)
    return frozenset(words)


def _first_words(parts: tuple[Part, ...]) -> frozenset[str]:
    """The words a reading of `parts` can start with ('' when it can start with a slot)."""
    words: set[str] = set()
    for part in parts:
        if isinstance(part, Word):
            return frozenset(words | {part.text})
        if isinstance(part, Slot):
            return frozenset(words | {""})
        for option in part.options:
            words |= _first_words(option)
        if not part.optional:
            return frozenset(words)
    return frozenset(words | {""})


def _variants(words: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for word in words:
        base = word.replace("’", "'")
        for variant in (base, base.replace("'", "")):
            out.add(variant)
            if len(variant) < 3:
                continue  # "i" is no "is"
            out |= {variant + "s", variant + "es"}
            if variant.endswith("y"):
                out.add(variant[:-1] + "ies")
            if variant.endswith("f"):
                out.add(variant[:-1] + "ves")
    return frozenset(out)
