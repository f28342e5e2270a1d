"""Pure decisions of the policy stage: no I/O, no clock, tested as a table.

Trust comes from the episode, never from the model: its source's default (below), unless the
caller set the episode's trust, and `user_confirmed` for an explicit statement on the hot path.
Confidence comes from how the candidate was found: the rules only match explicit statements;
a model's candidate counts as explicit when its evidence names the attribute, else as inferred.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from schemas.catalog import AttributeSpec, Recurrence, Sensitivity
from schemas.episodes import SOURCE_TRUST as SOURCE_TRUST  # the policy reads trust from it
from schemas.episodes import Lane as Lane  # the policy decides per lane
from schemas.episodes import SourceKind
from schemas.facts import Trust

RULES_CONFIDENCE = 1.0
STATED_CONFIDENCE = 0.9  # a model's candidate whose evidence names the attribute
INFERRED_CONFIDENCE = 0.5  # a model's candidate read between the lines


@dataclass(frozen=True)
class Thresholds:
    """The policy's settings (SGAM_WEAK_CONFIDENCE, SGAM_WEAK_SUPPORT, SGAM_WEAK_WINDOW_DAYS,
    SGAM_BUFFER_WINDOW_DAYS)."""

    weak_confidence: float = 0.7
    weak_support: int = 2
    weak_window: timedelta = timedelta(days=30)
    buffer_window: timedelta = timedelta(days=30)


@dataclass(frozen=True)
class Write:
    trust: Trust
    confidence: float


@dataclass(frozen=True)
class Quarantine:
    """Stored hidden until a reviewer promotes it."""

    confidence: float
    reason: str


@dataclass(frozen=True)
class Buffer:
    """Wait in the recurrence buffer for `times` distinct sessions within `window`, or for a
    user's confirmation (`times` None: confirmation only; `window` then bounds the wait)."""

    times: int | None
    window: timedelta
    trust: Trust
    confidence: float
    reason: str


Verdict = Write | Quarantine | Buffer


def episode_trust(source: str, override: Trust | None, lane: Lane) -> Trust:
    if override is not None:
        return override
    if lane is Lane.HOT:
        return Trust.USER_CONFIRMED
    return SOURCE_TRUST[SourceKind(source)]


def confidence(extractor: str, evidence: str, names: list[str]) -> float:
    """How explicit the candidate is. `names`: the attribute's spoken names and synonyms."""
    if extractor == "rules":
        return RULES_CONFIDENCE
    said = evidence.casefold()
    explicit = any(re.search(rf"\b{re.escape(name.casefold())}\b", said) for name in names)
    return STATED_CONFIDENCE if explicit else INFERRED_CONFIDENCE


def decide(
    spec: AttributeSpec, *, trust: Trust, lane: Lane, confidence: float, thresholds: Thresholds
) -> Verdict:
    """What to do with one candidate the guards kept.

    Untrusted sources are quarantined, and so is a sensitive attribute unless the user stated
    it on the hot path. A user's own statement is written at once. `promotion: confirm` waits
    for the user's confirmation whatever the source. A verified source (a business event) is
    written; anything else follows the catalogue: `{times, window}` waits for recurrence, and
    `immediate` is written unless the signal is weak (confidence below the threshold).
    """
    if trust is Trust.UNTRUSTED:
        return Quarantine(confidence, "untrusted source")
    if spec.sensitivity is Sensitivity.SENSITIVE and lane is not Lane.HOT:
        return Quarantine(confidence, "a sensitive attribute not stated on the hot path")
    if lane is Lane.HOT or trust is Trust.USER_CONFIRMED:
        return Write(trust, confidence)
    wait = wait_rule(spec, thresholds, confidence)
    if wait is None or (trust is Trust.VERIFIED and wait.times is not None):
        return Write(trust, confidence)
    return Buffer(wait.times, wait.window, trust, confidence, wait.reason)


@dataclass(frozen=True)
class Wait:
    """What a buffered candidate waits for: `times` distinct sessions within `window`, or
    (`times` None) the user's confirmation, `window` bounding the wait."""

    times: int | None
    window: timedelta
    reason: str


def wait_rule(
    spec: AttributeSpec, thresholds: Thresholds, confidence: float | None = None
) -> Wait | None:
    """The promotion rule: how a candidate of `spec` earns its way out of the buffer, None
    when it need not wait. `confidence` None: a candidate already waiting, which (for an
    `immediate` attribute) waits only because its signal was weak."""
    if spec.promotion == "confirm":
        reason = "the catalogue asks for the user's confirmation"
        return Wait(None, thresholds.buffer_window, reason)
    if isinstance(spec.promotion, Recurrence):
        times, window = spec.promotion.times, spec.promotion.window
        return Wait(times, window, f"the catalogue asks for {times} sessions")
    if confidence is None or confidence < thresholds.weak_confidence:
        weak = "" if confidence is None else f" (confidence {confidence:g})"
        return Wait(thresholds.weak_support, thresholds.weak_window, f"a weak signal{weak}")
    return None


def buffered_rule(spec: AttributeSpec, thresholds: Thresholds) -> Wait | None:
    """What a candidate already in the buffer waits for now (the catalogue may have changed
    since it was buffered); a sensitive attribute's never leaves the buffer on its own."""
    if spec.sensitivity is Sensitivity.SENSITIVE:
        return None
    return wait_rule(spec, thresholds)
