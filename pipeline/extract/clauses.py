"""Clauses of an episode, and whether each one is asked rather than stated.

The rules read clauses, not sentences: in "Given that my budget is $650, should I upgrade?"
the first clause states a fact and only the last one asks. A sentence ending in `?` has its
last clause questioned (unless that clause is a tag such as "do you?" or "what about you?",
which then is the only one questioned); any clause that opens like a question (`do you`,
`what`, `is it`) is questioned wherever it stands, with or without a question mark.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_FLAGS = re.IGNORECASE
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+|;\s*|\s+[-–—]+\s+")
_PRONOUN_START = r"(?=(?:i|i'm|i've|i'd|i'll|im|ive|my|we|we're|we've|our)\b)"
_QUESTION_START = (
    r"(?:do|does|did|are|is|was|were|can|could|would|will|should|shall|have|has|had|am|"
    r"what|when|where|which|who|whom|whose|why|how|any|anything|ever|"
    r"isn't|aren't|don't|doesn't|didn't|won't|wouldn't|can't|haven't)\b"
)
_CLAUSE_BREAK = re.compile(
    r",?\s+(?:and|but|so|because|cause|plus|while|whereas|although|though|yet)\s+"
    + _PRONOUN_START
    + r"|,\s+(?:and\s+|but\s+|so\s+)?(?="
    + _QUESTION_START
    + r"|"
    + _PRONOUN_START[3:-1]
    + r"|right\b|ok\b|okay\b|huh\b|eh\b)",
    _FLAGS,
)
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
    for sentence, start in _pieces(text, _SENTENCE_END, 0):
        asked = sentence.rstrip(" \"')]*~:.!").endswith("?")
        parts = list(_pieces(sentence, _CLAUSE_BREAK, start))
        last = len(parts) - 1
        if asked and last > 0 and _TAG.match(parts[last][0].rstrip("?!. ")):
            last = -1  # "I live in Ohio, do you?": only the tag asks
        for index, (clause, offset) in enumerate(parts):
            questioned = bool(_QUESTION.match(clause)) or (asked and index == last)
            yield Clause(clause, offset, questioned)


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
