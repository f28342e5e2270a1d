"""Statement forms derived from an attribute's name, synonyms and type, for a catalogue that
declares no `forms` (`forms: []` opts out).

Each of the attribute's phrases (its name with `_` as a space, a unit such as `ms` or
`percent` left off its end, and each synonym) goes into the shapes people state a slot in:
"the {phrase} is {value}" (but for a string, which the built-in "my X is Y" reads),
"{change} my {phrase} to {value}", "{phrase} moved to {value}",
"{phrase} of {value}" for an amount or a date, "{value} {phrase}" for a count ("150
commits"), "{phrase} has improved to {value}"; the slot's type does the rest (a date reads a
date, a number an amount or a percentage). The shapes kept are those whose precision held on
BEAM and MSC (bench/README.md, "Derived forms"); the ones that misread were dropped.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.forms import MAX_FORM_CHARS

# A unit at the end of a name says how the value is stored, not how people name it:
# "api_response_time_ms" is said "response time".
_UNITS = frozenset({"ms", "percent", "pct", "count", "total", "num", "amount", "value", "id"})
_PHRASE = re.compile(r"^[\w'’-]+(?: [\w'’-]+){0,5}$")
_OWNER = "[the|my|our|new|current]"
_RISE = "(improved|increased|risen|grown|dropped|fallen|decreased|reached|hit|gone up|gone down)"
_RISE_PAST = "(improved|increased|rose|grew|dropped|fell|decreased|went up|went down|climbed)"
_MOVED = "(moved|rescheduled|postponed|pushed back|pushed|brought forward|changed|shifted)"


def forms_in_effect(catalog: Catalog) -> dict[str, dict[str, Any]]:
    """Per attribute, the forms the rules read it with and whether they were derived: what
    `sgam catalog show --forms` prints."""
    return {
        name: {
            "derived": spec.forms is None,
            "forms": list(spec.forms) if spec.forms is not None else derived_forms(name, spec),
        }
        for name, spec in catalog.attributes.items()
    }


def derived_forms(name: str, spec: AttributeSpec) -> list[str]:
    """The forms the rules read `name` with when its spec declares none; [] for an attribute
    that declares its own (or opts out with `forms: []`) and for a json one."""
    if spec.forms is not None or spec.type is ValueType.JSON:
        return []
    forms: list[str] = []
    for phrase in phrases(name, spec):
        for form in _shapes(phrase, spec.type):
            if form not in forms and len(form) <= MAX_FORM_CHARS:  # a long phrase's long shape
                forms.append(form)
    return forms


def phrases(name: str, spec: AttributeSpec) -> list[str]:
    """How a sentence names the attribute: its name in words and its synonyms, longest
    first, each only once, none that a form could not spell (punctuation, a long phrase)."""
    words = name.replace(".", " ").replace("_", " ").split()
    while len(words) > 1 and words[-1] in _UNITS:
        words.pop()
    candidates = [" ".join(words), *(synonym.casefold().strip() for synonym in spec.synonyms)]
    out = [phrase for phrase in dict.fromkeys(candidates) if _PHRASE.match(phrase)]
    return sorted(out, key=lambda phrase: -len(phrase))


def _shapes(phrase: str, kind: ValueType) -> list[str]:
    slot = "{value}"
    # The past ("my city was Paris") states what no longer holds, and a string's "my X is Y"
    # is the built-in reading's, which asks a capital of its value ("my job is stressful").
    stated = [] if kind is ValueType.STRING else [f"{_OWNER} {phrase} (is|will be|is now) {slot}"]
    moved = [f"{phrase} [was|has been|is|got|had been] {_MOVED} to {slot}"]
    if kind in {ValueType.BOOLEAN, ValueType.DATETIME}:
        return stated + moved
    shapes = [
        *stated,
        f"{{change}} (the|my|our) {phrase} to {slot}",
        f"{_OWNER} {phrase} (was|has been|is|got|had been|have been) {{change}} to {slot}",
        *moved,
    ]
    if kind in {ValueType.NUMBER, ValueType.DATE}:
        shapes.append(f"{phrase} of {slot}")
    if kind is ValueType.DATE:
        shapes.append(f"{_OWNER} {phrase} (is|will be|is now) (on|for) {slot}")
    if kind is ValueType.NUMBER:
        shapes += [
            f"{slot} {phrase}",
            f"{phrase} {{words}} [which|that] (has|have|is|was) [now|recently|just] "
            f"{_RISE} [to] {slot}",
            f"{phrase} {{words}} {_RISE_PAST} from {{count}} to {slot}",
            f"{phrase} {_RISE_PAST} to {slot}",
        ]
    if kind in {ValueType.STRING, ValueType.ENUM}:
        shapes.append(f"{slot} is (my|our) {phrase}")
    return shapes
