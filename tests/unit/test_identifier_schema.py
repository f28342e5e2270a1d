"""The OpenAPI document's rule for identifiers accepts exactly what the validator accepts, so a
client generating from the document sends nothing the server refuses, and nothing the document
forbids is read: the pattern and `maxLength` as JSON Schema checks them, and the length in NFC
that the document states in `x-nfc-max-length` (and in words)."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from pipeline.api.bodies import Subject
from schemas.fields import MAX_ID_LENGTH, Identifier

# Characters the rules single out, mixed into arbitrary text so that every branch is reached.
EDGES = "\x00\x1f\x7f\x85\x9f\xa0\u200b\u202e\u2066\u3000\ufeff\U000e0001 \t\n./aé"
# No surrogates: neither UTF-8 nor JSON text can carry one to the server.
CHARACTERS = st.characters(exclude_categories=["Cs"])
TEXTS = st.text(st.sampled_from(EDGES) | CHARACTERS, max_size=12) | st.text(
    CHARACTERS, min_size=MAX_ID_LENGTH - 1, max_size=MAX_ID_LENGTH + 1
)


def accepted(adapter: TypeAdapter[str], text: str) -> bool:
    try:
        adapter.validate_python(text)
    except ValidationError:
        return False
    return True


def described(adapter: TypeAdapter[str], text: str) -> bool:
    schema = adapter.json_schema()
    return (
        schema["minLength"] <= len(text) <= schema["maxLength"]
        and re.search(schema["pattern"], text) is not None  # as JSON Schema validators match
        and len(unicodedata.normalize("NFC", text)) <= schema["x-nfc-max-length"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("annotation", [Identifier, Subject], ids=["identifier", "subject"])
@settings(max_examples=1000, deadline=None)
@given(text=TEXTS)
@example(text="a\n")
@example(text="..")
@example(text="\u200b")
@example(text="\u200ba")
@example(text="e\u0301" * (MAX_ID_LENGTH // 2 + 1))  # 202 sent, 101 in NFC
@example(text="\u0958" * MAX_ID_LENGTH)  # 200 sent, 400 in NFC
def test_the_pattern_accepts_what_the_validator_accepts(annotation: object, text: str) -> None:
    adapter: TypeAdapter[str] = TypeAdapter(annotation)
    assert described(adapter, text) == accepted(adapter, text), ascii(text)


@pytest.mark.parametrize(
    "text",
    [
        "e\u0301" * (MAX_ID_LENGTH // 2 + 1),  # decomposed: 202 characters, 101 in NFC
        "\u0958" * MAX_ID_LENGTH,  # 200 characters that NFC makes 400
        "a" * (MAX_ID_LENGTH - 1) + "\u0958",  # 200 sent, 201 in NFC
    ],
    ids=["longer-as-sent", "longer-in-nfc", "one-over-in-nfc"],
)
def test_an_identifier_over_the_limit_as_sent_or_in_nfc_is_refused(text: str) -> None:
    """The limit holds both ways, and the document says so (maxLength for the text as sent,
    `x-nfc-max-length` and the description for NFC): before, a decomposed name of 202
    characters was read and a 200-character one that NFC lengthens was refused unannounced."""
    adapter: TypeAdapter[str] = TypeAdapter(Identifier)
    schema = adapter.json_schema()
    assert schema["maxLength"] == schema["x-nfc-max-length"] == MAX_ID_LENGTH
    assert "as sent and in Unicode NFC" in schema["description"]
    assert not accepted(adapter, text)
    assert not described(adapter, text)
    within = "e\u0301" * (MAX_ID_LENGTH // 2)  # 200 sent, 100 in NFC: read, stored composed
    assert adapter.validate_python(within) == "\u00e9" * (MAX_ID_LENGTH // 2)
