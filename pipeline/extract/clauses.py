"""Clauses of an episode, and whether each one is asked rather than stated.

The rules read clauses, not sentences: in "Given that my budget is $650, should I upgrade?"
the first clause states a fact and only the last one asks. A sentence ending in `?` has its
last clause questioned (unless that clause is a tag such as "do you?" or "what about you?",
which then is the only one questioned); any clause that opens like a question (`do you`,
`what`, `is it`) is questioned wherever it stands, with or without a question mark. A tail
("how about you?", "what about you", "and you?") ends the clause before it even without a
comma, and a run-on turn is split where "I" starts a new clause after a full one (not inside
a telling: "did I tell you I work at dell" asks). What follows "the fact that", "given that",
"now that", "remind me that" is taken as stated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pipeline.extract.value_words import word_set

_FLAGS = re.IGNORECASE
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+|;\s*|\s+[-–—]+\s+")
_PRONOUN_START = r"(?=(?:i|i'm|i've|i'd|i'll|im|ive|my|we|we're|we've|our)\b)"
_QUESTION_START = (
    r"(?:do|does|did|are|is|was|were|can|could|would|will|should|shall|have|has|had|am|"
    r"what|when|where|which|who|whom|whose|why|how|any|anything|ever|"
    r"isn't|aren't|don't|doesn't|didn't|won't|wouldn't|can't|haven't)\b"
)
# After a comma, "which"/"who"/"where"/"when" start a relative clause, not a question.
_ASKING_AFTER_COMMA = (
    r"(?:do|does|did|are|is|was|were|can|could|would|will|should|shall|have|has|had|am|what|why|"
    r"how|any|anything|ever|isn't|aren't|don't|doesn't|didn't|won't|wouldn't|can't|haven't|"
    # ... unless the verb comes first: "I hike in the mountains, where do you go?"
    r"(?:which|who|where|when)\s+(?:do|does|did|are|is|was|were|can|could|would|will|have|has)"
    r"\s+(?:you|u|they|we|he|she|it|your))\b"
)
_CLAUSE_BREAK = re.compile(
    r",?\s+(?:and|but|so|because|cause|plus|while|whereas|although|though|yet)\s+"
    + _PRONOUN_START
    + r"|(?<!\bhi)(?<!\bhey)(?<!\bhello)(?<!\bhiya),\s+(?:and\s+|but\s+|so\s+)?(?="
    + _ASKING_AFTER_COMMA
    + r"|"
    + _PRONOUN_START[3:-1]
    + r"|right\b|ok\b|okay\b|huh\b|eh\b)"
    # "... 3 cats and 2 dogs how about you?": the tail asks, with or without a comma.
    + r"|\s+(?=(?:how|what)\s+about\s+(?:you|u|yourself)\b|and\s+(?:you|u|yourself)\W*$)",
    _FLAGS,
)
# A run-on turn: "I" starting a new clause after a full clause (a subject, its verb and a
# word more: "well I love animals I have 3 cats"); with no full clause before it, "I" is
# inside a phrase ("the zoo I work at").
# "I've" is left alone: "the number of mentees I've worked with has grown" is one clause.
_RUN_ON = re.compile(r"\s+(?=(?:i|i'm|im)\s+\w)", _FLAGS)
_FULL_CLAUSE = re.compile(
    r"\b(?:i|we|i'm|im|i've|we're)\s+[\w'’-]+\s+[\w'’-]+"
    # "that is awesome I love murder mysteries", "thats very good I just moved"
    r"|^\W*(?:\w+\s+)?(?:that|this|it)\s+(?:is|was)\s+[\w'’-]+|^\W*(?:\w+\s+)?(?:that's|thats|it's)\s+(?:so\s+|very\s+|really\s+)?(?:awesome|great|cool|good|nice|funny|crazy|true|amazing|fine|sad|interesting)",
    _FLAGS,
)
# ... unless what stands before "I" leads into it: a subordinator ("when I work"), a verb of
# saying or thinking ("I can't say I am a fan"), a vague noun ("things I don't like").
_LEADS_IN = word_set(
    "when whenever while if because since as so that which who whom what why how where "
    "though although than until till before after whether once unless say said think "
    "thought guess know knew mean feel felt hope believe wish suppose bet admit swear heard "
    "remember realize realized forget forgot tell told mention mentioned sure glad thing things "
    "stuff something anything everything nothing one ones all way place places time times"
)
# What follows these is taken as given even inside a question: "how can I use the fact that I
# secured 5 interviews?", "given that my budget is $650, should I ...?".
_GIVEN = (
    r"(?:the\s+fact\s+that|given\s+that|considering\s+that|now\s+that|seeing\s+(?:as|that)|"
    r"knowing\s+that|remind\s+me\s+that)\b"
)
_GIVEN_BREAK = re.compile(r"\s+(?=" + _GIVEN + ")", _FLAGS)
_GIVEN_START = re.compile(r"^\W*" + _GIVEN, _FLAGS)
_COMPANION = re.compile(r"^(?:(?i:my|our|his|her|their|the|a|an)\s+[\w'-]+|[A-Z][\w'-]+)$")
_QUESTION = re.compile(r"^\W*(?:and\s+|but\s+|so\s+|also\s+|or\s+)?" + _QUESTION_START, _FLAGS)
_TAG = re.compile(
    r"^\W*(?:(?:and|or)\s+)?(?:(?:do|did|are|have|can|would|will|don't|didn't|aren't|haven't|"
    r"won't|isn't)\s+(?:you|they|we|it)(?:\s+too)?|what\s+about\s+you|how\s+about\s+you|"
    r"and\s+you|you|right|huh|eh|no|ok|okay|or\s+not)\W*$",
    _FLAGS,
)


@dataclass(frozen=True)
class Clause:
    text: str
    start: int
    """Offset of the clause in the episode's text."""
    questioned: bool


def clauses(text: str) -> Iterator[Clause]:
    """Every non-empty clause of `text`, in order."""
    for sentence, start in sentences(text):
        yield from sentence_clauses(sentence, start)


def sentences(text: str) -> Iterator[tuple[str, int]]:
    """Every non-empty sentence of `text` with its offset. Whether a clause is asked depends
    on its sentence only, so a reader may skip a sentence that cannot state anything."""
    return _pieces(text, _SENTENCE_END, 0)


def sentence_clauses(sentence: str, start: int) -> Iterator[Clause]:
    """The clauses of one sentence of `sentences`, which stands at `start` in its text."""
    asked = sentence.rstrip(" \"')]*~:.!").endswith("?")
    parts = _companions_joined(
        sentence,
        start,
        [
            piece
            for clause, offset in _pieces(sentence, _CLAUSE_BREAK, start)
            for given, at in _pieces(clause, _GIVEN_BREAK, offset)
            for piece in _run_on(given, at)
        ],
    )
    last = len(parts) - 1
    if asked and last > 0 and _TAG.match(parts[last][0].rstrip("?!. ")):
        last = -1  # "I live in Ohio, do you?": only the tag asks
    for index, (clause, offset) in enumerate(parts):
        questioned = not _GIVEN_START.match(clause) and (
            bool(_QUESTION.match(clause)) or (asked and index == last)
        )
        yield Clause(clause, offset, questioned)


def _run_on(clause: str, start: int) -> Iterator[tuple[str, int]]:
    """`clause` split where "I" starts a new clause after a full one."""
    position = 0
    for match in _RUN_ON.finditer(clause):
        before = [word.casefold().strip(",") for word in clause[position : match.start()].split()]
        if (
            before
            and before[-1] not in _LEADS_IN
            # "did I tell you I work at dell": what is told is inside the telling
            and not (before[-1] in {"you", "u"} and len(before) > 1 and before[-2] in _LEADS_IN)
            and _FULL_CLAUSE.search(clause, position, match.start())
        ):
            yield from _trimmed(clause[position : match.start()], start + position)
            position = match.end()
    yield from _trimmed(clause[position:], start + position)


def _companions_joined(
    sentence: str, start: int, parts: list[tuple[str, int]]
) -> list[tuple[str, int]]:
    """ "My wife and I live in Ohio" is one clause with a shared subject, not two."""
    joined: list[tuple[str, int]] = []
    for text, offset in parts:
        if joined and _COMPANION.match(joined[-1][0]):
            begin = joined[-1][1]
            between = sentence[begin - start + len(joined[-1][0]) : offset - start]
            if between.strip().casefold() in {"and", "&"}:
                joined[-1] = (sentence[begin - start : offset - start + len(text)], begin)
                continue
        joined.append((text, offset))
    return joined


def _pieces(text: str, separator: re.Pattern[str], base: int) -> Iterator[tuple[str, int]]:
    position = 0
    for match in separator.finditer(text):
        yield from _trimmed(text[position : match.start()], base + position)
        position = match.end()
    yield from _trimmed(text[position:], base + position)


def _trimmed(piece: str, offset: int) -> Iterator[tuple[str, int]]:
    stripped = piece.strip()
    if stripped:
        yield stripped, offset + piece.index(stripped)
