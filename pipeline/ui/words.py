"""Lifecycle values as a newcomer reads them: an episode's source and trust in words."""

from __future__ import annotations

from pipeline.policy.decide import SOURCE_TRUST
from schemas.episodes import SourceKind
from schemas.facts import Trust

SOURCES = {
    SourceKind.MESSAGE: "a chat message",
    SourceKind.TOOL_RESULT: "a tool's result",
    SourceKind.BUSINESS_EVENT: "a business event (a system of record)",
}
TRUSTS = {
    Trust.UNTRUSTED: "untrusted — quarantined until a reviewer promotes it",
    Trust.INFERRED: "inferred — read from what was said",
    Trust.VERIFIED: "verified — from a system of record",
    Trust.USER_CONFIRMED: "confirmed by the user",
}


def source_words(source: str) -> str:
    return SOURCES.get(SourceKind(source), source) if source in set(SourceKind) else source


def trust_words(trust: str | None, source: str) -> str:
    """The episode's trust: the caller's override, else its source's default (said so)."""
    if trust is not None and trust in set(Trust):
        return TRUSTS[Trust(trust)]
    if source in set(SourceKind):
        return TRUSTS[SOURCE_TRUST[SourceKind(source)]] + " (its source's default)"
    return "—"
