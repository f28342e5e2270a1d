"""The rules extractor: explicit statements about the episode's subject, without a model.

It reads a few statement forms whose attribute the catalogue names (the attribute's name with
`_` as a space, or one of its synonyms), and would rather miss a fact than invent one:

- `my X is Y`, `my X is now Y`, `remember that my X is Y`, `actually, my X is Y`
- `my X changed to Y`, `my X has been updated to Y` (a change)
- `X: Y` on a line of its own (X the attribute name or a synonym of two words or more)
- `no, it's Y`, `actually it's Y`: a correction of the attribute named earlier in the episode
- `I prefer Y`, `please always answer Y`: an enum attribute whose value Y names
- a date clause anywhere in the sentence — `on DATE`, `from DATE`, `since DATE`, `as of DATE`
  — sets valid_from (dates as `pipeline.extract.dates` reads them)

Questions, negations, hypotheticals, reported speech, hedges and jokes yield nothing. A string
value in the `my X is Y` form must start with a capital letter or a digit (a name, an address,
an id), so "my job is stressful" is not an employer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pipeline.extract.clause_values import clause_problem
from pipeline.extract.clauses import Clause, sentence_clauses, sentences
from pipeline.extract.dates import DATE_EXPRESSION, TRAILING_EXPRESSION, resolve_date
from pipeline.extract.form_reader import FormHit, FormReader
from pipeline.extract.guards import CurrentValues
from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.episodes import Episode
from schemas.extraction import MemoryUpdate
from schemas.facts import Cardinality
from schemas.fields import canonical_json

_FLAGS = re.IGNORECASE
# Hypotheticals, reported speech, hedges and jokes anywhere in the sentence: nothing is stated.
_HEDGES = re.compile(
    r"\b(?:if|were|would|could|should|might|suppose|supposing|imagine|assuming|assume|wish|"
    r"hypothetically|pretend|unless|whether|when|whenever|once|until|what|maybe|perhaps|"
    r"probably|possibly|think|thought|guess|hope|doubt|wonder|says|said|say|claims|claimed|"
    r"heard|believes?|jk|lol|haha|kidding)\b",
    _FLAGS,
)
# A negation before the value denies it ("my city is not Paris"); one after it contrasts
# ("my city is Lyon, not Paris") and is cut off with the rest of the clause.
_NEGATION = re.compile(r"\b(?:not|never|no longer)\b|n't\b", _FLAGS)
_DATE_CLAUSE = re.compile(
    r"\s*,?\s*\b(?:on|from|since|as of|starting|effective)\s+(?P<date>"
    + DATE_EXPRESSION
    + r")\b,?",
    _FLAGS,
)
_BARE_DAY = re.compile(r"\s+(?P<date>yesterday|today)\b", _FLAGS)
# "I moved to Lisbon two weeks ago": a date counted back, after the value, at the clause's end.
_TRAILING_DATE = re.compile(r"\s+(?P<date>" + TRAILING_EXPRESSION + r")\b(?=[\s.!,;]*$)", _FLAGS)
_VALUE_END = re.compile(
    r",\s+(?:but|and|so|because|which|not|though|thanks|thank|please|right|ok|okay|as|if|when|"
    r"i|i'm|we|it|it's|that)\b|\s+(?:but|because|though|although|which|so that)\s|\s[-–—]\s|"
    r"\s\(|\s+(?:now|from now on|anymore|as well|too|please|thanks)[\s.!]*$",
    _FLAGS,
)
_ANY_DATE = re.compile(DATE_EXPRESSION, _FLAGS)
_DATELESS = {ValueType.ENUM, ValueType.NUMBER, ValueType.BOOLEAN}
_LEADING_FILLER = re.compile(r"^(?:now|still|actually|officially)\s+", _FLAGS)
_NUMBER = re.compile(r"^[$€£]?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.])")
_BOOLEAN = re.compile(r"^(yes|no|true|false|on|off)\b", _FLAGS)
_ISO_INSTANT = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})"
)
_CORRECTION = re.compile(
    r"^\W*(?:no|nope|actually|sorry|correction|wait|i mean)\b[\s,!.:-]*"
    r"(?:it'?s|it is|make (?:that|it))\s+(?P<rest>.+)$",
    _FLAGS,
)
_CORRECTION_WORDS = re.compile(r"\b(?:no|nope|actually|sorry|correction|wait|i mean)\b", _FLAGS)
_PREFERENCE = re.compile(
    r"\b(?:i(?:\s+would|'d|\s+do|\s+really)?\s+prefer|please\s+(?:always\s+)?"
    r"(?:answer|reply|respond|write|contact|reach|send|export)|always\s+(?:answer|reply|respond))"
    r"\b(?P<rest>.*)$",
    _FLAGS,
)


@dataclass(frozen=True)
class _Found:
    attribute: str
    evidence: str
    value: str
    valid_from: str | None
    form: str = ""
    """The catalogue form that read it; '' for the built-in readings."""


@dataclass(frozen=True)
class ClauseReading:
    """What the rules made of one clause: `sgam extract --explain`."""

    clause: str
    skipped: str
    """'' when the clause was read, else why not (a question)."""
    statement: str
    """The built-in reading (`my X is Y`, `X: Y`, a correction, a preference), if any."""
    tried: tuple[str, ...]
    """`attribute: form` of every catalogue form the clause was searched with."""
    hits: tuple[FormHit, ...]
    """The forms that matched, each with its value(s) or the check that refused it."""


class RulesExtractor:
    """Compiled rules for one catalogue; build once and reuse (compiling costs more than a turn)."""

    def __init__(self, catalog: Catalog, *, day_first: bool = False) -> None:
        self.catalog = catalog
        self.day_first = day_first
        self._by_phrase: dict[str, str] = {}
        ambiguous: set[str] = set()
        for name in catalog.attributes:
            for phrase in {name, *catalog.synonyms(name)}:
                key = phrase.casefold()
                if self._by_phrase.get(key, name) != name:
                    ambiguous.add(key)
                self._by_phrase[key] = name
        for key in ambiguous:
            del self._by_phrase[key]
        phrases = "|".join(
            re.escape(phrase).replace(r"\ ", r"\s+")
            for phrase in sorted(self._by_phrase, key=len, reverse=True)
        )
        self._statement = re.compile(
            rf"\bmy\s+(?P<attr>{phrases})\s+(?:(?P<change>(?:has\s+|have\s+)?(?:been\s+|was\s+|is\s+)?"
            r"(?:changed|updated|switched|moved)\s+to)|is|'s|are|=)\s+(?P<rest>.+)$",
            _FLAGS,
        )
        labels = [p for p in self._by_phrase if " " in p or "_" in p or p in catalog.attributes]
        self._label = re.compile(
            r"^\s*(?P<attr>"
            + "|".join(re.escape(p) for p in sorted(labels, key=len, reverse=True))
            + r")\s*:\s*(?P<rest>\S.*?)\s*$",
            _FLAGS,
        )
        self._forms = FormReader(catalog)
        # What `my X is Y` needs, a date clause allowed between X and the verb; case-sensitive
        # over casefolded text, so that the engine skips on first letters.
        self._my_attribute = re.compile(
            rf"\bmy\s+(?:{phrases.casefold()})\s*,?\s*(?:is|'s|’s|are|=|has|have|been|was|"
            r"changed|updated|switched|moved|on|from|since|as|starting|effective|yesterday|today)"
            r"(?![\w'])"
        )
        # Preferences name a value of a preference-kind enum ("I prefer email"); an account
        # plan or a task status is never inferred from "I'd prefer to be free".
        self._preference_words: dict[str, set[tuple[str, str]]] = {}
        for name, spec in catalog.attributes.items():
            if spec.type is ValueType.ENUM and spec.kind == "preference":
                for value in spec.values or []:
                    for word in _word_forms(value):
                        self._preference_words.setdefault(word, set()).add((name, value))

    def propose(self, episode: Episode, current: CurrentValues) -> list[MemoryUpdate]:
        """Every update the covered forms state, before the guards."""
        # A later statement about a single-valued attribute corrects an earlier one in the
        # same episode ("my city is Paris. No, it's Lyon.").
        latest: dict[tuple[str, str], _Found] = {}
        for found in self._find(episode):
            many = self.catalog.attributes[found.attribute].cardinality is Cardinality.MANY
            latest[(found.attribute, found.value if many else "")] = found
        return [self._update(episode, current, found) for found in latest.values()]

    def explain(self, episode: Episode) -> list[ClauseReading]:
        """Clause by clause, what was skipped, read and refused (before the guards)."""
        readings = []
        for clause, found, hits in self._readings(episode, every_clause=True):
            skipped = "a question" if clause.questioned else ""
            builtin = [f for f in found if f.form == ""]
            statement = f"{builtin[0].attribute} = {builtin[0].value!r}" if builtin else ""
            tried = (
                ()
                if skipped
                else tuple(
                    f"{form.attribute}: {form.form}" for form in self._forms.tried(clause.text)
                )
            )
            readings.append(ClauseReading(clause.text, skipped, statement, tried, tuple(hits)))
        return readings

    def _find(self, episode: Episode) -> Iterator[_Found]:
        for _, found, _ in self._readings(episode):
            yield from found

    def _readings(
        self, episode: Episode, *, every_clause: bool = False
    ) -> Iterator[tuple[Clause, list[_Found], list[FormHit]]]:
        text = episode.text
        if not (every_clause or self._forms.may_match(text) or self._builtin(text)):
            return  # most chat turns match no form at all: no need to split them
        pieces = list(sentences(text))
        last_attribute: str | None = None
        for sentence, start in pieces:
            # A sentence without a built-in form's words, a form's match or (after a
            # statement) a correction's words states nothing; a turn of one sentence passed.
            if not (
                every_clause
                or len(pieces) == 1
                or self._may_read(sentence, last_attribute)
                or self._forms.may_match(sentence)
            ):
                continue
            for clause in sentence_clauses(sentence, start):
                if clause.questioned:
                    yield clause, [], []
                    continue
                found: list[_Found] = []
                statement = (
                    self._read(clause.text, last_attribute, episode)
                    if self._may_read(clause.text, last_attribute)
                    else None
                )
                if statement is not None:
                    last_attribute = statement.attribute
                    found.append(statement)
                read, trailing = _without_trailing_date(clause.text)
                hits = self._forms.read(read, self._typed(episode))
                standing = [
                    hit
                    for hit in hits
                    if not hit.refused and all(f.attribute != hit.attribute for f in found)
                ]
                valid_from = self._valid_from(clause.text, episode) if standing else None
                if standing and trailing is not None and valid_from is None:
                    valid_from = self._iso_date(trailing, episode)
                for hit in standing:
                    last_attribute = hit.attribute
                    found += [
                        _Found(hit.attribute, clause.text, v, valid_from, hit.form)
                        for v in hit.values
                    ]
                yield clause, found, hits

    def _may_read(self, text: str, last_attribute: str | None) -> bool:
        """Whether the built-in readings may find something in `text`: their words, or after
        a statement a correction's ("no, it's Lyon")."""
        return self._builtin(text) or (
            last_attribute is not None and _CORRECTION_WORDS.search(text) is not None
        )

    def _builtin(self, text: str) -> bool:
        """Whether `text` may hold a built-in reading: `my X ...`, `X: Y` or a preference."""
        folded = text.casefold()
        return (
            ":" in text
            or ("my" in folded and self._my_attribute.search(folded) is not None)
            or (bool(self._preference_words) and _PREFERENCE.search(text) is not None)
        )

    def _typed(self, episode: Episode) -> Callable[[str, AttributeSpec], str]:
        return lambda span, spec: self._value(span, spec, episode, strict=False)

    def _valid_from(self, clause: str, episode: Episode) -> str | None:
        date_clause = _DATE_CLAUSE.search(clause)
        return self._iso_date(date_clause["date"], episode) if date_clause else None

    def _read(self, sentence: str, last: str | None, episode: Episode) -> _Found | None:
        label = self._label.match(sentence)
        if label is not None:
            attribute = self._by_phrase[_phrase(label["attr"])]
            return self._found(attribute, label["rest"], sentence, None, episode, strict=False)
        if _HEDGES.search(sentence):
            return None
        valid_from = None
        date_clause = _DATE_CLAUSE.search(sentence)
        text = sentence
        if date_clause is None:  # "my plan changed to pro yesterday", "... two weeks ago"
            date_clause = _BARE_DAY.search(sentence) or _TRAILING_DATE.search(sentence)
        if date_clause is not None:
            valid_from = self._iso_date(date_clause["date"], episode)
            text = sentence[: date_clause.start()] + sentence[date_clause.end() :]
        statement = self._statement.search(text)
        if statement is not None:
            if _NEGATION.search(text[: statement.start("rest")]) or _NEGATION.match(
                statement["rest"]
            ):
                return None
            attribute = self._by_phrase[_phrase(statement["attr"])]
            terms = {t.casefold() for t in self.catalog.attributes[attribute].terms or ()}
            relation = _phrase(statement["attr"])
            if {relation, relation.removesuffix("s")} & terms and statement["rest"][:1].isdigit():
                return None  # "my brother is 1 year younger": how old, not who; forms read it
            return self._found(attribute, statement["rest"], sentence, valid_from, episode)
        if _NEGATION.search(text):
            return None
        correction = _CORRECTION.match(text)
        if correction is not None and last is not None:
            return self._found(last, correction["rest"], sentence, valid_from, episode)
        preference = _PREFERENCE.search(text)
        if preference is not None:
            words = _words(preference["rest"])
            named = {pair for word in words for pair in self._preference_words.get(word, ())}
            if len(named) == 1:
                attribute, value = named.pop()
                return _Found(attribute, sentence, value, valid_from)
        return None

    def _found(
        self,
        attribute: str,
        rest: str,
        sentence: str,
        valid_from: str | None,
        episode: Episode,
        *,
        strict: bool = True,
    ) -> _Found | None:
        value = self._value(rest, self.catalog.attributes[attribute], episode, strict=strict)
        return _Found(attribute, sentence, value, valid_from) if value else None

    def _value(self, rest: str, spec: AttributeSpec, episode: Episode, *, strict: bool) -> str:
        """The value at the start of `rest` in the attribute's type, or '' when unreadable."""
        end = _VALUE_END.search(rest)
        text = _LEADING_FILLER.sub("", rest[: end.start()] if end else rest).strip(" .!,\"'")
        if spec.type in _DATELESS and _ANY_DATE.search(text):
            return ""  # a date we could not place: when does it hold? Better to miss it.
        if spec.type is ValueType.DATE:
            match = re.match(DATE_EXPRESSION, text, _FLAGS)
            return (self._iso_date(match.group(0), episode) or "") if match else ""
        if spec.type is ValueType.DATETIME:
            match = _ISO_INSTANT.match(text)
            return match.group(0) if match else ""
        if spec.type is ValueType.NUMBER:
            match = _NUMBER.match(text)
            return (match.group(1).replace(",", "") + (match.group(2) or "")) if match else ""
        if spec.type is ValueType.BOOLEAN:
            match = _BOOLEAN.match(text)
            return match.group(1).lower() if match else ""
        if spec.type is ValueType.ENUM:
            values = {v for word in _words(text) for v in [self._enum_value(spec, word)] if v}
            return values.pop() if len(values) == 1 else ""
        if spec.type is ValueType.STRING:
            if strict and not (text[:1].isupper() or text[:1].isdigit()):
                return ""
            return text if 0 < len(text) <= 200 and not clause_problem(text) else ""
        return ""  # json values need a model

    def _enum_value(self, spec: AttributeSpec, word: str) -> str:
        for value in spec.values or []:
            if word in _word_forms(value):
                return value
        return ""

    def _iso_date(self, expression: str, episode: Episode) -> str | None:
        day = resolve_date(expression, episode.occurred_at, day_first=self.day_first)
        return day.isoformat() if day else None

    def _update(self, episode: Episode, current: CurrentValues, found: _Found) -> MemoryUpdate:
        stored = list(current.get(found.attribute, ()))
        spec = self.catalog.attributes[found.attribute]
        try:
            same = canonical_json(spec.normalise(found.value)) in map(canonical_json, stored)
        except ValueError:
            same = False
        shown = stored[0] if len(stored) == 1 else (stored or None)
        return MemoryUpdate(
            evidence=found.evidence,
            subject=episode.subject,
            attribute=found.attribute,
            current_value=None if shown is None else canonical_json(shown).strip('"'),
            change="no_change" if same else ("update" if stored else "new"),
            value=found.value,
            valid_from=found.valid_from,
        )


def _without_trailing_date(clause: str) -> tuple[str, str | None]:
    """The clause without a date counted back at its end, and that date's words."""
    if _DATE_CLAUSE.search(clause) is not None:
        return clause, None
    trailing = _TRAILING_DATE.search(clause)
    if trailing is None:
        return clause, None
    return clause[: trailing.start()] + clause[trailing.end() :], trailing["date"]


def _phrase(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def _words(text: str) -> list[str]:
    return re.findall(r"[\w-]+", text.casefold())


def _word_forms(value: str) -> set[str]:
    """How a sentence may name an enum value: 'concise', 'concisely'; 'detailed', 'detail'."""
    word = value.casefold()
    return {word, word + "ly", word.removesuffix("ed")} - {""}
