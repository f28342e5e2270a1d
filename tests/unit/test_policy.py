"""The policy stage's decisions as a table: catalogue entry x source trust x lane x signal."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipeline.catalog import load_catalog
from pipeline.policy.decide import (
    Buffer,
    Lane,
    Quarantine,
    Thresholds,
    Write,
    confidence,
    decide,
    episode_trust,
)
from schemas.facts import Trust

CATALOG = load_catalog(None, "support")
T = Thresholds()
BG, HOT = Lane.BACKGROUND, Lane.HOT


@pytest.mark.parametrize(
    ("attribute", "trust", "lane", "signal", "expected"),
    [
        # immediate: written, unless weak or untrusted
        ("home_city", Trust.INFERRED, BG, 1.0, Write(Trust.INFERRED, 1.0)),
        (
            "home_city",
            Trust.INFERRED,
            BG,
            0.5,
            Buffer(2, timedelta(days=30), Trust.INFERRED, 0.5, "a weak signal (confidence 0.5)"),
        ),
        ("home_city", Trust.VERIFIED, BG, 0.5, Write(Trust.VERIFIED, 0.5)),
        ("home_city", Trust.UNTRUSTED, BG, 1.0, Quarantine(1.0, "untrusted source")),
        ("home_city", Trust.USER_CONFIRMED, HOT, 1.0, Write(Trust.USER_CONFIRMED, 1.0)),
        # recurrence: buffered from chat, written from a business event or the hot path
        (
            "answer_style",
            Trust.INFERRED,
            BG,
            1.0,
            Buffer(2, timedelta(days=30), Trust.INFERRED, 1.0, "the catalogue asks for 2 sessions"),
        ),
        (
            "export_format",
            Trust.INFERRED,
            BG,
            1.0,
            Buffer(3, timedelta(days=14), Trust.INFERRED, 1.0, "the catalogue asks for 3 sessions"),
        ),
        ("answer_style", Trust.VERIFIED, BG, 1.0, Write(Trust.VERIFIED, 1.0)),
        ("answer_style", Trust.USER_CONFIRMED, HOT, 1.0, Write(Trust.USER_CONFIRMED, 1.0)),
        # confirm: waits for the user whatever the source, except the user's own statement
        (
            "contact_channel",
            Trust.INFERRED,
            BG,
            1.0,
            Buffer(
                None,
                timedelta(days=30),
                Trust.INFERRED,
                1.0,
                "the catalogue asks for the user's confirmation",
            ),
        ),
        (
            "contact_channel",
            Trust.VERIFIED,
            BG,
            1.0,
            Buffer(
                None,
                timedelta(days=30),
                Trust.VERIFIED,
                1.0,
                "the catalogue asks for the user's confirmation",
            ),
        ),
        ("contact_channel", Trust.USER_CONFIRMED, HOT, 1.0, Write(Trust.USER_CONFIRMED, 1.0)),
        # sensitive: quarantined unless stated on the hot path
        (
            "birthday",
            Trust.VERIFIED,
            BG,
            1.0,
            Quarantine(1.0, "a sensitive attribute not stated on the hot path"),
        ),
        (
            "birthday",
            Trust.USER_CONFIRMED,
            BG,
            1.0,
            Quarantine(1.0, "a sensitive attribute not stated on the hot path"),
        ),
        ("birthday", Trust.USER_CONFIRMED, HOT, 1.0, Write(Trust.USER_CONFIRMED, 1.0)),
        ("birthday", Trust.UNTRUSTED, HOT, 1.0, Quarantine(1.0, "untrusted source")),
    ],
)
def test_decide(attribute: str, trust: Trust, lane: Lane, signal: float, expected: object) -> None:
    spec = CATALOG.attributes[attribute]
    assert decide(spec, trust=trust, lane=lane, confidence=signal, thresholds=T) == expected


@pytest.mark.parametrize(
    ("source", "override", "lane", "trust"),
    [
        ("message", None, BG, Trust.INFERRED),
        ("message", None, HOT, Trust.USER_CONFIRMED),
        ("tool_result", None, BG, Trust.UNTRUSTED),
        ("business_event", None, BG, Trust.VERIFIED),
        ("tool_result", Trust.VERIFIED, BG, Trust.VERIFIED),
        ("message", Trust.UNTRUSTED, HOT, Trust.UNTRUSTED),
    ],
)
def test_trust_comes_from_the_episode(
    source: str, override: Trust | None, lane: Lane, trust: Trust
) -> None:
    assert episode_trust(source, override, lane) is trust


@pytest.mark.parametrize(
    ("extractor", "evidence", "expected"),
    [
        ("rules", "my city is Lisbon", 1.0),
        ("llm:m", "My home city is Lisbon now", 0.9),
        ("llm:m", "I moved to Lisbon last week", 0.9),  # "moved to" is a synonym
        ("llm:m", "Lisbon has been great since the move", 0.5),
    ],
)
def test_confidence_reflects_how_explicit_the_evidence_is(
    extractor: str, evidence: str, expected: float
) -> None:
    assert confidence(extractor, evidence, CATALOG.synonyms("home_city")) == expected
