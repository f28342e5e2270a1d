"""The catalogue's statement forms compiled to regular expressions, and their values read.

`schemas.forms` parses and validates a form; here each becomes one pattern searched in a
clause, whose value slot is then read in the attribute's type. A value that does not read as
that type — a pronoun, a vague noun, a span too long to be a value — yields nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.forms import Choice, Part, Slot, Word, parse_form, value_slot

_FLAGS = re.IGNORECASE


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _word_set_ordered(text: str) -> list[str]:
    return text.split()


_ONE_TO_TWENTY = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
NUMBER_WORDS = {word: index for index, word in enumerate(_word_set_ordered(_ONE_TO_TWENTY))} | {
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
}
_COUNT = (
    r"(?:\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|some|"
    r"several|a\s+few|a\s+couple\s+of|a\s+couple|many|lots\s+of|a\s+lot\s+of|multiple)"
)
_CHANGE = (
    r"(?:just\s+)?(?:changed|increased|raised|extended|adjusted|cut|moved|lowered|reduced|"
    r"updated|switched|bumped|upped|dropped|decreased|shifted|pushed|set)(?:\s+(?:it|this))?"
)
# A string value stops where a new phrase starts.
_STOP = re.compile(
    r"\s*[,;:!?()\"]|\s+[-–—]\s|\.(?:\s|$)|\s+(?:and|but|or|so|because|cause|since|with|who|"
    r"which|that|where|when|while|as|for|from|at|in|on|near|by|to|into|about|after|before|"
    r"during|until|if|though|although|now|currently|right|too|also|again|anymore|lol|haha|"
    r"lmao|hehe|though|these\s+days|nowadays|full\s+time|part\s+time|though|either|yet|"
    r"every|each|all|very|really|a\s+lot|lately|today|tonight|tomorrow|yesterday|"
    r"i|i'm|im|my|we|you|it's|it)\b",
    _FLAGS,
)
_LIST_STOP = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s*&\s*)", _FLAGS)
_DETERMINER = re.compile(r"^(?:a|an|the|some|any)\s+", _FLAGS)
# Values that name nothing: pronouns, vague nouns, function words.
_EMPTY_VALUE = _word_set(
    "it its it's this that these those them they him her his hers he she you your yours me my "
    "mine myself yourself we us our ours one ones thing things stuff idea ideas way kind sort "
    "lot lots bit part sound look fact time times one home here there now then what which who "
    "how why when where something anything everything nothing someone anyone everyone nobody "
    "all both each other others more most less much many few well so very too not no yes ok "
    "okay sure just only also even still really too to of a an the and or but for with at in "
    "on by from night nights day days work school job"
)
_GENERIC_PLACES = _word_set(
    "town city village country countryside area place house apartment flat home suburb "
    "suburbs state states world farm neighborhood neighbourhood region island coast mountains "
    "woods middle same big small nice new old little quiet"
)
_NAME_FIRST_BAD = re.compile(
    r"^(?:a|an|the|this|that|my|your|his|her|our|their|its|some|any|every|no|one|\d)", _FLAGS
)
MAX_VALUE_WORDS = 6
_NUMBER = re.compile(
    r"^(?:about\s+|around\s+|only\s+|almost\s+)?[$€£]?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.,]\d)"
)


@dataclass(frozen=True)
class CompiledForm:
    attribute: str
    form: str
    slot: str
    pattern: re.Pattern[str]
    leading: bool
    """The value comes first ("{value} is my favourite food")."""


def compile_forms(catalog: Catalog) -> list[CompiledForm]:
    compiled = []
    for name, spec in catalog.attributes.items():
        for form in spec.forms:
            parts = parse_form(form)
            leading = isinstance(parts[0], Slot) and parts[0].name == value_slot(parts)
            body = _sequence(parts, value_last=_value_last(parts))
            anchor = r"^\W*" if leading else r"(?<![\w'])"
            pattern = re.compile(anchor + body + r"(?![\w'])", _FLAGS)
            compiled.append(CompiledForm(name, form, value_slot(parts), pattern, leading))
    return compiled


def _value_last(parts: tuple[Part, ...]) -> bool:
    return isinstance(parts[-1], Slot) and parts[-1].name in {"value", "name", "term"}


def _sequence(parts: tuple[Part, ...], *, value_last: bool) -> str:
    """Parts joined by runs of spaces; an optional part brings its own space."""
    pieces: list[tuple[str, bool]] = [(_part(p, value_last), _optional(p)) for p in parts]
    required = [index for index, (_, optional) in enumerate(pieces) if not optional]
    last = required[-1] if required else len(pieces) - 1
    out = ""
    for index, (regex, optional) in enumerate(pieces):
        if index > last:
            out += rf"(?:\s+{regex})?"
        elif optional:
            out += rf"(?:{regex}\s+)?"
        else:
            out += regex + (r"\s+" if index < last else "")
    return out


def _optional(part: Part) -> bool:
    return isinstance(part, Choice) and part.optional


def _part(part: Part, value_last: bool) -> str:
    if isinstance(part, Word):
        return re.escape(part.text).replace("'", "['’]?")
    if isinstance(part, Slot):
        if part.name == "count":
            return _COUNT
        if part.name == "change":
            return _CHANGE
        return r"(?P<value>\S.*)" if value_last else r"(?P<value>\S.*?)"
    options = "|".join(_sequence(option, value_last=False) for option in part.options)
    return f"(?:{options})"


def string_values(span: str, spec: AttributeSpec, slot: str, *, leading: bool) -> list[str]:
    """The string value(s) a slot's span holds, or [] with none that reads as a value."""
    text = _cut(span, leading=leading)
    items = _LIST_STOP.split(text) if spec.cardinality == "many" and slot != "name" else [text]
    values = []
    for item in items[:4]:
        value = _clean(item)
        if slot == "term":
            value = _term(value, spec.terms)
        elif slot == "name" and not _is_name(value):
            value = ""
        if value and _names_something(value) and value not in values:
            values.append(value)
    return values


def enum_value(span: str, spec: AttributeSpec) -> str:
    """The one enum value named among the span's first words, or ''."""
    words = re.findall(r"[\w'-]+", _cut(span, leading=False).casefold())[:4]
    text = " ".join(words)
    named = {
        value
        for value in spec.values or []
        if re.search(rf"(?<![\w-]){_plural(value.casefold())}(?![\w-])", text)
    }
    return named.pop() if len(named) == 1 else ""


def number_value(span: str) -> str:
    """A number at the start of the span, in digits ($1,500, 26) or words (two)."""
    text = _cut(span, leading=False)
    match = re.match(
        r"^(?:about\s+|around\s+|only\s+|almost\s+)?[$€£]?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.,]\d)",
        text,
    )
    if match:
        return match.group(1).replace(",", "") + (match.group(2) or "")
    word = text.split(" ", 1)[0].casefold()
    return str(NUMBER_WORDS[word]) if word in NUMBER_WORDS else ""


def _cut(span: str, *, leading: bool) -> str:
    if leading:  # the value is what precedes the form, after the last phrase break
        pieces = _STOP.split(" " + span)
        return pieces[-1].strip() if pieces else ""
    stop = _STOP.search(span)
    return (span[: stop.start()] if stop else span).strip()


def _clean(item: str) -> str:
    value = _DETERMINER.sub("", item.strip(" .!,'\"")).strip()
    return value if 0 < len(value.split()) <= MAX_VALUE_WORDS and len(value) <= 120 else ""


def _names_something(value: str) -> bool:
    words = value.casefold().split()
    return words[0] not in _EMPTY_VALUE and not all(word in _EMPTY_VALUE for word in words)


def _is_name(value: str) -> bool:
    if not value or _NAME_FIRST_BAD.match(value) or len(value.split()) > 4:
        return False
    return not any(word in _GENERIC_PLACES for word in value.casefold().split())


def _term(value: str, terms: list[str]) -> str:
    """`value` when its last words are a term, with at most two words before the term."""
    folded = value.casefold()
    for term in sorted(terms, key=len, reverse=True):
        match = re.search(rf"(?:^|\s){_plural(term.casefold())}$", folded)
        if match and len(folded[: match.start()].split()) <= 2:
            return value
    return ""


def _plural(word: str) -> str:
    escaped = re.escape(word)
    if word.endswith("y") and not word.endswith(("ay", "ey", "oy", "uy")):
        return rf"(?:{escaped}|{re.escape(word[:-1])}ies)"
    if word.endswith("f"):
        return rf"(?:{escaped}|{re.escape(word[:-1])}ves|{escaped}s)"
    return rf"{escaped}(?:s|es)?"


def is_number_type(spec: AttributeSpec) -> bool:
    return spec.type is ValueType.NUMBER


_COMMON = _word_set(
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
        return _variants(value.casefold().split()[0] for value in spec.values or [])
    groups: list[frozenset[str]] = [
        _first_words((part,))
        for part in parts
        if isinstance(part, Word) or (isinstance(part, Choice) and not part.optional)
    ]
    groups = [group for group in groups if "" not in group] or [frozenset({""})]
    rare = [group for group in groups if not group & _COMMON]
    chosen: frozenset[str] = min(rare or groups, key=len)
    return _variants(chosen)


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
            out |= {variant, variant + "s", variant + "es"}
            if variant.endswith("y"):
                out.add(variant[:-1] + "ies")
            if variant.endswith("f"):
                out.add(variant[:-1] + "ves")
    return frozenset(out)
