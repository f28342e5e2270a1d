"""A string value is a value, not a clause: "I hate it here" is no job title, and "boring stuff
all day long with no end in sight" is no occupation.

Every string the rules read passes `clause_problem` — the catalogue's forms (bundled and a
user's) and the built-in `my X is Y` — and the benches list any stored value that fails it.
"""

from __future__ import annotations

import re

from pipeline.extract.value_words import word_set

MAX_VALUE_WORDS = 6
"""A value longer than this is a description, not a value (README, "What the rules read")."""

_SUBJECT = word_set(
    "i i'm im i've ive i'd i'll we we're we've you you're he he's she she's they they're "
    "it's there's that's"
)
# Verbs that are finite (and a few common ones in the third person: "drink goes well"): a
# value holding one says something of its own.
_FINITE = word_set(
    "am is are was were has have had do does did will would can could should shall might "
    "must isn't aren't wasn't weren't don't doesn't didn't won't can't couldn't hasn't "
    "haven't wouldn't shouldn't goes makes gets says comes looks seems feels means needs wants "
    "tastes sounds smells gives takes keeps lets"
)
_PRONOUN = word_set("i we he she they you")
_WORD = re.compile(r"[\w'’-]+")


def clause_problem(value: str) -> str:
    """Why `value` is a clause rather than a value, or '' for a value. A title in title case
    ("I Am Legend", "We Will Rock You") is a name, not a clause."""
    words = [word.replace("’", "'") for word in _WORD.findall(value)]
    if len(words) > MAX_VALUE_WORDS:
        return f"longer than {MAX_VALUE_WORDS} words"
    if len(words) > 1 and all(word[:1].isupper() or word[:1].isdigit() for word in words):
        return ""
    folded = [word.casefold() for word in words]
    if folded and folded[0] in _SUBJECT:
        return f"starts with a subject ({words[0]!r})"
    # The first word may be a verb: an activity ("have a glass of beer", "do graphic design").
    verb = next((word for word in folded[1:] if word in _FINITE), "")
    if verb:
        return f"holds a verb of its own ({verb!r})"
    if len(folded) > 1 and folded[-1] in _PRONOUN:
        return f"ends with a new subject ({words[-1]!r})"  # "kids they (are the best)"
    for before, after in zip(folded, folded[1:], strict=False):
        if before in _PRONOUN and after not in _PRONOUN:
            return f"holds a clause of its own ({before} {after})"
    return ""
