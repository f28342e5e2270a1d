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
from schemas.forms import VALUE_SLOTS, Choice, Part, Slot, Word, parse_form, value_slot

_FLAGS = re.IGNORECASE


def word_set(text: str) -> frozenset[str]:
    """The words of a list written as one string."""
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
    r"(?:\d[\d,.]*%?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|some|"
    r"several|a\s+few|a\s+couple\s+of|a\s+couple|many|lots\s+of|a\s+lot\s+of|multiple)"
)
_CHANGE = (
    r"(?:just\s+)?(?:changed|increased|raised|extended|adjusted|cut|moved|lowered|reduced|"
    r"updated|switched|bumped|upped|dropped|decreased|shifted|pushed|set)(?:\s+(?:it|this))?"
)
# A string value stops where a new phrase starts: punctuation, a conjunction, a new subject, an
# adverb ("quite a bit", "as well"), or a verb of its own ("black sabbath doesn't mean ...").
_CLAUSE_STOP = (
    r"\s*(?:[;!?()\"…—–]|,(?!\d{3})|:(?!\d\d)|\.{2,}|-{2,})|\s+-\s|\.(?:\s|$)|\s+(?:"
    r"(?:is|are|was|were|does|do|did|has|have|had|ca|wo|would|could|should)n['’]?t|"
    r"(?:in|on|at|during|for)\s+(?:my|the|our)\s+(?:(?:spare|free|own|down)\s+time|weekends?|"
    r"mornings?|evenings?|nights?|afternoons?|summers?|winters?|fall|spring|autumn|days?\s+off)|"
    r"on\s+weekends|at\s+night|and|but|or|so|because|cause|since|who|which|"
    r"that|where|when|while|if|though|although|now|currently|right\s+now|too|also|again|"
    r"anymore|lol|haha|lmao|hehe|these\s+days|nowadays|either|yet|sometimes|usually|often|"
    r"occasionally|mostly|always|every|each|all|very|really|a\s+lot|lately|today|tonight|"
    r"tomorrow|yesterday|i|i'm|im|we|you|it's|it|its|those|these|them|this|him|her|"
    r"your|like|better|more|than|then|unlike|alot|such|last|next|ago|here|there|"
    r"myself|mainly|honestly|personally|especially|instead|anyway|though|once|twice|quite|"
    r"rather|as\s+well|(?:a\s+few|several|many)\s+times|the\s+best|the\s+most|so\s+much|a\s+bit|"
    r"is|are|was|were|am|does|has|had|will|would|could|should|must|can|cannot)\b"
)
# A possessive starts a new phrase after a noun ("I love cars my dad ...") but is the object of
# an activity ("I like walking my dog", "visit my family").
_POSSESSIVES = r"|\s+(?:my|his|their|our)\b"
_PREPOSITIONS = (
    r"|\s+(?:with|as|for|from|at|in|on|near|by|to|into|about|after|before|during|until)\b"
)
_STOP = re.compile(_CLAUSE_STOP + _POSSESSIVES + _PREPOSITIONS, _FLAGS)
_PHRASE_STOP = re.compile(_CLAUSE_STOP, _FLAGS)
_SHORT_PHRASE_STOP = re.compile(_CLAUSE_STOP + _POSSESSIVES, _FLAGS)
# After a cut, these show that the value's sense lay elsewhere in the conversation.
_RELATIVE = re.compile(r"^\s*(?:that|who|which|where)\b", _FLAGS)
_THERE = re.compile(r"^\s*there\b", _FLAGS)
# "books like that", "things like these": the kind was shown earlier in the conversation.
_THEIR_OWN = re.compile(r"^\s+(?:it|they|he|she|we|you)\b", _FLAGS)
_COMPANION_TAIL = re.compile(r"^\s*(?:and|&)\s+(?:i|me)\s*$", _FLAGS)
# Nouns that name a kind, not a thing: with a relative clause after them, the clause says which.
_KINDS = word_set("activities activity things stuff places people kinds types sorts ones folks")
_DEMONSTRATIVE_END = re.compile(r"\b(?:this|that|these|those)\s*$", _FLAGS)
# "the smell and taste it adds", "the energy, diversity and food of this city": the value's
# owner is a thing the conversation showed.
_ITS_OWN = re.compile(
    r"^(?:(?:,\s*(?:and\s+)?|\s+(?:and|&)\s+)[\w-]+(?:\s+[\w-]+)?){0,3}\s+(?:it(?!['’])|"
    r"of\s+(?:this|these|those|that))\b",
    _FLAGS,
)
_LIKE_THAT = re.compile(r"^\s+like\s+(?:that|this|those|these)\b", _FLAGS)
# An object pronoun right after a one-word value: the value was a verb and its object was
# said before ("I enjoy learning them", "I like to visit them").
_PRONOUN_OBJECT = re.compile(r"^\s+(?:it|them|him|her|this|these|those)\b(?!['’])", _FLAGS)
_PREPOSITION_WORDS = word_set(
    "with as for from at in on near by to into about after before during until of over"
)
_ANAPHORIC_END = word_set("one ones it them")
# An activity whose object is one of these names no activity: "sing anything", "do whatever".
_VAGUE_OBJECTS = word_set(
    "it this that these those them him her anything everything something nothing whatever"
)
_LIST_JOINT = re.compile(
    r"\s*,\s*(?:and\s+|or\s+)?(?!(?:and|but|so|i|i'm|my|we|you|it|which|who)\b)"
    r"|\s+(?:and|or|&)\s+(?!(?:i|i'm|my|we|you|it|then|also)\b)",
    re.IGNORECASE,
)
_DANGLING = re.compile(
    r"(?:\s+(?:with|as|for|from|at|in|on|to|into|about|of|by|after|before|until|around|"
    r"alongside|beside|behind|near|without|through|across|during|over|under))+$",
    _FLAGS,
)
_DETERMINER = re.compile(r"^(?:a|an|the|some|any)\s+", _FLAGS)
# Values that name nothing: pronouns, vague nouns, function words.
_EMPTY_VALUE = word_set(
    "it its it's this that these those them they him her his hers he she you your yours me my "
    "mine myself yourself we us our ours one ones thing things stuff idea ideas way kind sort "
    "lot lots bit part sound look fact time times one home here there now then what which who "
    "how why when where something anything everything nothing someone anyone everyone nobody "
    "all both each other others more most less much many few well so very too not no yes ok "
    "okay sure just only also even still really too to of a an the and or but for with at in "
    "on by from night nights day days week weeks month months year years work job is are was "
    "were has had little morning "
    "evening afternoon mornings evenings weekends weekend shifts shift their theirs big huge "
    "great good new some any whatever"
)
_PARTICLES = word_set("up out on off over around back down away")
_LIGHT_VERBS = word_set(
    "doing being having getting going spending playing making taking seeing trying using do "
    "be have get go make take see try use watching living knowing play listening watch "
    "helping learning meeting finding keeping giving buying help come"
)
_GENERIC_PLACES = word_set(
    "town city village country countryside area place house apartment flat home suburb "
    "suburbs state states world farm neighborhood neighbourhood region island coast mountains "
    "woods middle same"
)
# These make a place generic only with a generic place or alone ("a small town", "big"), not
# in a name ("New York", "Little Rock", "Old Saybrook").
_PLACE_ADJECTIVES = word_set("big small nice new old little quiet")
# Words that follow "I'm" or "my name is" without being a name.
_NOT_NAMES = word_set(
    "good fine great well ok okay doing tired happy sad new back here sorry glad excited so "
    "just not pretty very really busy bored from in at on going trying looking thinking "
    "feeling sure also still actually too about kind sort getting having being all alright "
    "awesome cool wonderful amazing lucky blessed sick hungry ready done interested curious "
    "afraid scared nervous worried late early alone single married retired hoping planning "
    "working living currently originally"
)
# A whole first word: "Amsterdam", "Anna" and "Thessaloniki" are names.
_NAME_FIRST_BAD = re.compile(
    r"^(?:(?:a|an|the|this|that|my|your|his|her|our|their|its|some|any|every|no|one|several|"
    r"many|few|most|all|both|each|other)(?![\w'’-])|\d)",
    _FLAGS,
)
MAX_VALUE_WORDS = 6
_SEP = r",?\s+"
# After I / we, up to two adverbs may stand in any form: "I also have two dogs", "I do
# sometimes like to drive".
_SUBJECTS = frozenset({"i", "we", "i'm", "we're", "i've", "we've", "im"})
_ADVERB = (
    r"(?:\s+(?:also|really|still|do|just|now|actually|currently|definitely|totally|absolutely|"
    r"already|only|mostly|usually|honestly|truly|too|both|recently|finally|always|even|"
    r"sometimes|often|generally|personally|genuinely|seriously)){0,2}"
)
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


def compile_forms(catalog: Catalog) -> list[CompiledForm]:
    compiled = []
    for name, spec in catalog.attributes.items():
        for form in spec.forms:
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
    return isinstance(part, Choice) and part.optional


def _part(part: Part, value_last: bool) -> str:
    if isinstance(part, Word):
        word = re.escape(part.text).replace("'", "['’]?")
        return word + _ADVERB if part.text in _SUBJECTS else word
    if isinstance(part, Slot):
        if part.name == "count":
            return _COUNT
        if part.name == "change":
            return _CHANGE
        return r"(?P<value>\S.*)" if value_last else r"(?P<value>\S.*?)"
    options = "|".join(_sequence(option, value_last=False) for option in part.options)
    return f"(?:{options})"


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
        span = _LIST_JOINT.sub("\x1f", span)
    if slot == "term" and not listed and not leading:
        # "a stay at home mom", "nursing school to be a nurse": a listed term is read whole,
        # before any cut at its own words.
        term = _leading_term(span, spec.terms)
        return [term] if term else []
    # "I love working with computers", "going on camping trips": a gerund keeps its
    # prepositions, like a {phrase}.
    gerund = not leading and bool(re.match(r"^\w{2,}ing\s+(?!(?:and|but|or)\b)", span))
    activity = slot == "phrase" or gerund
    text = _cut(span, leading=leading, phrase=activity)
    if inner and len(_COMPANION_TAIL.sub("", span[len(text) :]).split()) > 1:
        return []
    if activity and len(text.split()) > MAX_VALUE_WORDS:  # "go hiking with my dogs for walks"
        text = _cut(span, leading=leading, phrase=activity, short=True)
    if not leading and not listed and _context_bound(text, span[len(text) :], activity=activity):
        return []
    if leading and _DEMONSTRATIVE_END.search(span[: len(span) - len(text)]):
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
        elif activity:
            value = _DANGLING.sub("", value)
        if (
            value
            and _names_something(value, activity=activity, name=slot == "name")
            and value not in values
        ):
            values.append(value)
    return values


def _context_bound(value: str, after: str, *, activity: bool = False) -> bool:
    """A value whose sense the conversation holds, not the value: "a house that's filled with
    animals" cut before its relative clause, "the weather there", "books like that", a verb
    whose object is a pronoun ("learning them")."""
    if re.match(r"^(?:a|an)\s+\S+$", value, _FLAGS) and _RELATIVE.match(after):
        return True
    if _LIKE_THAT.match(after):
        return True
    if not activity and _RELATIVE.match(after) and value.casefold().split()[-1] in _KINDS:
        return True  # "personal activities where I can focus", "people who ...": which ones?
    if re.match(r"^the\s", value, _FLAGS) and (_THEIR_OWN.match(after) or _ITS_OWN.search(after)):
        return True  # "the energy it brings", "the smell and taste it adds", "... of this city"
    words = value.casefold().split()
    if len(words) == 1 and words[0] not in _PREPOSITION_WORDS and _PRONOUN_OBJECT.match(after):
        return True
    return bool(re.match(r"^the\s", value, _FLAGS)) and bool(_THERE.match(after))


def enum_values(span: str, spec: AttributeSpec) -> list[str]:
    """The enum value(s) the span names: one, or for a many-valued attribute each item of a
    list ("two dogs and a cat")."""
    if spec.cardinality != "many":
        value = enum_value(span, spec)
        return [value] if value else []
    values: list[str] = []
    for item in re.split(r",\s*(?:and\s+)?|\s+and\s+|\s+or\s+", span)[:4]:
        value = enum_value(re.sub(r"^\s*" + _COUNT + r"\s+", "", item, flags=_FLAGS), spec)
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
    return named.pop() if len(named) == 1 else ""


def number_value(span: str, *, leading: bool = False) -> str:
    """A number at the start of the span (its end, for a leading value), in digits ($1,500,
    26, 95%) or words (two)."""
    words = span.split()
    text = (words[-1] if words else "") if leading else span.strip()
    match = _NUMBER.match(text)
    if match:
        return match.group(1).replace(",", "") + (match.group(2) or "")
    word = text.split(" ", 1)[0].casefold().strip(".,!?")
    return str(NUMBER_WORDS[word]) if word in NUMBER_WORDS else ""


def _cut(span: str, *, leading: bool, phrase: bool = False, short: bool = False) -> str:
    stops = (_SHORT_PHRASE_STOP if short else _PHRASE_STOP) if phrase else _STOP
    if leading:  # the value is what precedes the form, after the last phrase break
        pieces = stops.split(" " + span)
        return pieces[-1].strip() if pieces else ""
    stop = stops.search(span)
    return (span[: stop.start()] if stop else span).strip()


def _clean(item: str) -> str:
    value = _DETERMINER.sub("", item.strip(" .!,'\"/*~")).strip()
    return value if 0 < len(value.split()) <= MAX_VALUE_WORDS and len(value) <= 120 else ""


def _names_something(value: str, *, activity: bool = False, name: bool = False) -> bool:
    words = value.casefold().split()
    if len(words) == 1 and words[0] in _LIGHT_VERBS:
        return False  # "I love doing (it)": the object was a pronoun
    if len(words) <= 2 and words[-1] in _PARTICLES:
        return False  # "I like setting up (my easel)": the object was cut off
    if words[-1] in _ANAPHORIC_END:
        return False  # "I love learning new ones": what they are was said before
    if activity and len(words) > 1 and all(word in _VAGUE_OBJECTS for word in words[1:]):
        return False  # "I like to sing anything", "watch things": no object named
    if name and len(words) > 1 and words[0] in _PLACE_ADJECTIVES:
        words = words[1:]  # "new york", "little rock"
    return words[0] not in _EMPTY_VALUE and not all(word in _EMPTY_VALUE for word in words)


def _is_name(value: str) -> bool:
    if not value or _NAME_FIRST_BAD.match(value) or len(value.split()) > 4:
        return False
    words = value.casefold().split()
    if all(word in _PLACE_ADJECTIVES for word in words):
        return False
    not_names = _NOT_NAMES - _PLACE_ADJECTIVES if len(words) > 1 else _NOT_NAMES
    return not any(word in not_names or _singular(word) in _GENERIC_PLACES for word in words)


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
        if match and len(before) <= 2 and not _FIGURATIVE & set(before):
            return value
    return ""


# "I'm a great cook", "a terrible singer": a judgement of a skill, not an occupation.
_JUDGING = word_set(
    "good great bad terrible awful decent excellent amazing awesome big huge better best worse "
    "worst pretty fine poor lousy natural born"
)


# "my fur babies" are pets, not children.
_FIGURATIVE = word_set("fur furry")


def _leading_term(span: str, terms: list[str]) -> str:
    """The listed term at the start of `span`, after at most two words ("a retired school
    teacher"), as the span spells it; '' when none. The reading that ends furthest wins
    ("a marine vet" is a vet, not a marine)."""
    text = _DETERMINER.sub("", span.strip(" .!,'\"/*~"))
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
            not _STOP.search(" " + match["before"])
            and not (_JUDGING | _FIGURATIVE) & set(before)
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


def is_number_type(spec: AttributeSpec) -> bool:
    return spec.type is ValueType.NUMBER


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
        return _variants(value.casefold().split()[0] for value in spec.values or [])
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
