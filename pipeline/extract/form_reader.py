"""Reading one clause with the catalogue's statement forms: which forms match, what value
each reads, and which check refused the rest (what `sgam extract --explain` shows).

A clause that hedges, wishes, plans, supposes or reports ("I think", "I want to", "if",
"she says") states nothing, and a negation before the form denies it ("I don't live in
Paris"); a form's own words may hold a negation ("I don't eat {value}"). "My wife and I live
in Ohio" is not the subject's alone and yields no home (the partner it names is read). A
clause that tells of an end ("I just divorced my wife", "I quit working at Google") states
what no longer holds, and a taste said to hold for now ("I love murder mysteries right now")
is a passing one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.extract.forms import CompiledForm, anchors, compile_forms
from pipeline.extract.value_words import TASTE_KIND, word_set
from pipeline.extract.values import enum_values, number_value, string_values
from schemas.catalog import AttributeSpec, Catalog, ValueType

_FLAGS = re.IGNORECASE
# Anywhere in the clause these suspend what it states: "if", "I think", "she said", "I'd".
HEDGES = re.compile(
    r"\b(?:if|were|would|could|should|might|suppose|supposing|imagine|assuming|assume|wish|"
    r"wishes|hypothetically|pretend|pretending|unless|whether|when|whenever|once|until|maybe|"
    r"perhaps|probably|possibly|think|thought|guess|doubt|wonder|says|said|say|saying|claims|"
    r"claimed|heard|believes?|jk|kidding|someday|will|shall|used\s+to|told|tells|asked|ask|"
    r"supposed|seems|sounds|feel\s+like|bet)\b|\b\w+['’](?:d|ll)\b",
    _FLAGS,
)
# These only suspend the statement they lead into ("I want to live in Paris", "I'm trying to
# move to Oslo"), within a few words before the form: "I'm trying to fix my app, whose
# response time improved to 250ms" still states the response time.
WEAK_HEDGES = re.compile(
    r"\b(?:hope|hoping|want|wants|wanted|wanna|gonna|going\s+to|plan|plans|planning|try|"
    r"trying|dream|dreaming|soon|almost|nearly|like\s+to\s+think|goal|aim|aims|aiming)\b",
    _FLAGS,
)
NEAR_WORDS = 4
# A clause that tells of an end states what no longer holds: "I just divorced my wife", "my
# ex wife", "my dog passed away", "I lost my job at the bank", "I quit working at Google".
ENDED = re.compile(
    r"\b(?:divorc\w*|separated|broke\s+up|split\s+up|passed\s+away|died|dies|widowed|ex|x|"
    r"former|quit|quitting|lost\s+(?:my|our)|fired|laid\s+off|left\s+me)\b",
    _FLAGS,
)
# A taste said to hold for now ("I love murder mysteries right now") is a passing one, not a
# lasting preference: refused for attributes of the "preference" kind.
PASSING = re.compile(
    r"\b(?:right\s+now|at\s+the\s+moment|for\s+now|for\s+the\s+time\s+being|these\s+days|"
    r"lately|nowadays|this\s+(?:week|weekend|month|morning|evening|afternoon)|today|tonight)\b",
    _FLAGS,
)
NEGATION = re.compile(
    r"\b(?:not|never|no\s+longer|no|nobody|neither|nor|none|cannot|dont|cant|wont|didnt|doesnt|"
    r"isnt|arent|wasnt|havent|hasnt|couldnt|wouldnt|shouldnt|aint)\b|\w['’]?n['’]t\b",
    _FLAGS,
)
_NEW_PHRASE = re.compile(
    r"(?:,\s*|\s+)(?:but|and|although|yet|plus|except|because|cause)\b|,\s*(?:so|though)\b",
    _FLAGS,
)
_SHARED_SUBJECT = re.compile(r"\b(?:and|&|with)\s*$", _FLAGS)
# What may stand between a clause's start and a first-person form: "the zoo I work at" is a
# relative clause, "well, since I work at" is not.
_MAY_PRECEDE = word_set(
    "and but so well oh yes yeah yep also actually now currently still because since as "
    "cause though then plus too really honestly definitely sure ok okay lol haha hi hey "
    "hello that given anyway besides personally myself usually mostly right and ah aw wow "
    "cool nice great hmm um uh nope"
)
# ... and what may stand there whole: an interjection ("oh my goodness", "hi there", "naw"), or
# a setting that opens the clause ("in my spare time I garden", "at home I have 2 snakes").
_SETTING = re.compile(
    r"^\W*(?:(?:and|but|so|well|yes|yeah|yea|also|oh|ah|hi|hey|hello|there|my|goodness|gosh|god|"
    r"naw|nah|ooo|ooh|oooh|yup|totally|absolutely|good|haha|hehe|lol|lolz|lmao|wow|omg|aww)\b[\s,!.]*)*"
    r"(?:(?:(?:in|on|during)\s+)?(?:my|our)\s+(?:spare|free|down)\s+time|at\s+(?:home|work|school|"
    r"night|the\s+(?:beach|gym|weekend|moment))|on\s+weekends|during\s+the\s+(?:day|week)|"
    r"in\s+the\s+(?:summer|winter|evenings?|mornings?))?\W*$",
    _FLAGS,
)
_WORDS = re.compile(r"[\w'’-]+")
_OTHER_OWNERS = word_set("your his her their its")
# The ASCII characters outside words (_WORDS): splitting at them gives _WORDS's words.
_ASCII_BREAKS = {
    code: " " for code in range(128) if not re.fullmatch(r"[\w'’-]", chr(code), re.ASCII)
}
TypedValue = Callable[[str, AttributeSpec], str]


@dataclass(frozen=True)
class FormHit:
    attribute: str
    form: str
    values: tuple[str, ...]
    refused: str
    """'' when the hit stands, else the check that refused it."""
    derived: bool = False
    """The form was derived from the attribute's name, synonyms and type, not declared."""


class FormReader:
    """The compiled forms of one catalogue, indexed by the words that can trigger them."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.forms = compile_forms(catalog)
        self._index: dict[str, list[int]] = {}
        for number, form in enumerate(self.forms):
            for word in anchors(catalog, form):
                self._index.setdefault(word, []).append(number)
        self._always = self._index.pop("", [])
        self._keys = frozenset(self._index)
        self._slots = {(form.attribute, form.form): form.slot for form in self.forms}
        # One pattern per anchor word, every form it triggers as an alternative: a turn is
        # tested with one search per anchor word it holds, not one per form.
        self._probes = {
            word: _probe([self.forms[n] for n in numbers + self._always])
            for word, numbers in self._index.items()
        }
        self._always_probe = _probe([self.forms[n] for n in self._always])
        self._form_probes = [_probe([form]) for form in self.forms]
        self._own_values = {
            name: frozenset(value.casefold() for value in spec.values or [])
            for name, spec in catalog.attributes.items()
        }

    def may_match(self, text: str) -> bool:
        """Whether any form matches somewhere in `text`, clauses aside: a turn or a sentence
        that matches none is never split into clauses. A text is only searched with the forms
        of the anchor words it holds, and most chat turns hold none."""
        folded = text.casefold()
        if self._always and self._always_probe.search(folded):
            return True
        return any(self._probes[word].search(folded) for word in self._folded_words(folded))

    def read(self, clause: str, typed_value: TypedValue) -> list[FormHit]:
        """Every form that matches `clause`, refused or not; one standing hit per attribute,
        and a {term} reading wins over a free value read from the same words."""
        numbers = self._tried(clause)
        folded = clause.casefold()
        hits: list[FormHit] = []
        standing: dict[str, FormHit] = {}
        for number in numbers:
            form = self.forms[number]
            if form.attribute in standing or not self._form_probes[number].search(folded):
                continue
            match = form.pattern.search(clause)
            if match is None:
                continue
            hit = self._judge(form, clause, match, typed_value)
            hits.append(hit)
            if not hit.refused:
                standing[form.attribute] = hit
        return _prefer_terms(hits, standing, self._slots) if len(hits) > 1 else hits

    def tried(self, clause: str) -> list[CompiledForm]:
        """The forms a clause is searched with: those one of whose words it contains."""
        return [self.forms[number] for number in self._tried(clause)]

    def _words(self, text: str) -> frozenset[str]:
        """The text's words that are anchors of some form."""
        return self._folded_words(text.casefold())

    def _folded_words(self, folded: str) -> frozenset[str]:
        if folded.isascii():  # most chat: ASCII punctuation to spaces, then split (faster)
            return self._keys.intersection(folded.translate(_ASCII_BREAKS).split())
        return self._keys.intersection(_WORDS.findall(folded.replace("’", "'")))

    def _tried(self, clause: str) -> list[int]:
        numbers = {n for word in self._words(clause) for n in self._index[word]}
        return sorted(numbers.union(self._always))

    def _judge(
        self, form: CompiledForm, clause: str, match: re.Match[str], typed_value: TypedValue
    ) -> FormHit:
        spec = self.catalog.attributes[form.attribute]
        span = match["value"]
        if form.leading:  # "I can't say cooking is my passion": the words before count too
            outside = clause
            prefix = ""
        else:
            prefix = clause[: match.start()]
            # What follows "but", "and", "because" is a phrase of its own: "I like to travel
            # too, but only where my jeep will take me", "I love cooking and would do it more
            # often" still state the liking.
            outside = prefix + " " + _NEW_PHRASE.split(span, maxsplit=1)[0]
        refused = _refusal(prefix, outside, span, form, self._own_values[form.attribute], clause)
        if not refused and spec.kind == TASTE_KIND:
            passing = PASSING.search(clause)
            if passing:
                refused = f"a passing taste ({passing.group(0)!r})"
        if refused:
            return FormHit(form.attribute, form.form, (), refused, form.derived)
        values = _values(span, spec, form, typed_value)
        if not values:
            refused = f"no {spec.type.value} value in {span!r}"
            return FormHit(form.attribute, form.form, (), refused, form.derived)
        return FormHit(form.attribute, form.form, tuple(values), "", form.derived)


def _values(
    span: str, spec: AttributeSpec, form: CompiledForm, typed_value: TypedValue
) -> list[str]:
    if spec.type is ValueType.STRING:
        return string_values(span, spec, form.slot, leading=form.leading, inner=form.inner)
    if spec.type is ValueType.ENUM:
        return enum_values(span, spec)
    if spec.type is ValueType.NUMBER:
        if form.inner and len(span.split()) > 1:
            return []  # "my 8 grand kids" is no "my 8 kids"
        value = number_value(span, leading=form.leading)
    else:
        value = typed_value(span, spec)  # dates, datetimes, booleans: the rules' readers
    return [value] if value else []


def _refusal(
    prefix: str,
    outside: str,
    span: str,
    form: CompiledForm,
    own_values: frozenset[str],
    clause: str,
) -> str:
    """Why the form's match states nothing, or ''. `outside` is the clause up to the value's
    phrase: an end told anywhere in `clause` undoes the form ("my wife and I just divorced",
    "lost my job as a banker"), unless it is one of `own_values`, the attribute's enum values
    ("I recently got divorced" states a marital status, not the end of one)."""
    hedge = HEDGES.search(outside)
    near = " ".join(prefix.split()[-NEAR_WORDS:])
    if hedge is None:
        # A value that comes first: the words just before it ("I'm trying to build the
        # gallery with 8 cards" states the 8 cards).
        hedge = WEAK_HEDGES.search(near) or _weak_hedge_in(
            " ".join(span.split()[-NEAR_WORDS - 1 :])
            if form.leading
            else _NEW_PHRASE.split(span, maxsplit=1)[0]
        )
    if hedge:
        return f"hedged or hypothetical ({hedge.group(0)!r})"
    ended = ENDED.search(clause)
    if ended and ended.group(0).casefold() not in own_values:
        return f"no longer so ({ended.group(0)!r})"
    # A first-person form owns its clause: any negation before it denies it. A noun phrase
    # ("a budget of {value}") is denied by a negation just before it, not by one that belongs
    # to another verb further back.
    negation = NEGATION.search(prefix if form.personal else near)
    if negation is None:
        negation = NEGATION.search(span) if form.leading else NEGATION.match(span)
    if negation:
        return f"negated ({negation.group(0)!r})"
    owner = prefix.split()[-1].casefold().replace("’", "'") if prefix.split() else ""
    if owner.endswith(("'s", "s'")) or owner in _OTHER_OWNERS:
        return f"someone else's (after {owner!r})"  # "my sister's city is Rome"
    if form.personal and _SHARED_SUBJECT.search(prefix):
        return "the subject is shared with someone else"
    last = prefix.rstrip()
    if last.endswith(('"', "“", "‘")) or prefix.count('"') % 2:
        return "quoted (someone's words, not a statement)"
    if form.personal and last and last[-1].isalnum():
        word = last.split()[-1].casefold()
        if word not in _MAY_PRECEDE and not _SETTING.match(last):
            return f"inside another phrase (after {word!r})"
    return ""


def _weak_hedge_in(span: str) -> re.Match[str] | None:
    """A wish or plan inside the value's span; a value that is itself a going ("I love
    going to Disney World", "I like going to the beach") plans nothing."""
    for hedge in WEAK_HEDGES.finditer(span):
        if not (hedge.start() == 0 and hedge.group(0).casefold().startswith("going")):
            return hedge
    return None


def _probe(forms: list[CompiledForm]) -> re.Pattern[str]:
    """One pattern for `forms`, searched in casefolded text: case-sensitive, so the engine
    skips an alternative on its first letter, and at a word boundary only where one of the
    forms' first letters stands; leading-value forms are tried at every position."""
    initials = "".join(sorted({letter for form in forms for letter in form.initials}))
    fixed = "|".join(f"(?:{form.probe})" for form in forms if form.initials)
    loose = [f"(?:{form.probe})" for form in forms if not form.initials]
    alternatives = [rf"\b(?=[{re.escape(initials)}])(?:{fixed})"] if fixed else []
    return re.compile("|".join(alternatives + loose) or "(?!)")


def _prefer_terms(
    hits: list[FormHit], standing: dict[str, FormHit], slots: dict[tuple[str, str], str]
) -> list[FormHit]:
    termed = {
        value
        for hit in standing.values()
        if slots[(hit.attribute, hit.form)] == "term"
        for value in hit.values
    }
    out = []
    for hit in hits:
        slot = slots[(hit.attribute, hit.form)]
        if not hit.refused and slot != "term" and set(hit.values) & termed:
            hit = FormHit(
                hit.attribute, hit.form, (), "the same words name a listed term", hit.derived
            )
        out.append(hit)
    return out
