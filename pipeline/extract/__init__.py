"""Extraction: episodes to typed memory candidates, by rules or through an LLM, with guards.

Nothing here writes to the ledger; `extract` returns what would be written and why. Every
extractor follows `protocol.Extractor`; `choose` is the one place that picks one.
"""

from pipeline.extract.backends import RULES, ModelBackend, RulesBackend, rules_for
from pipeline.extract.choose import EXTRACTORS, ExtractorName, choose, model
from pipeline.extract.protocol import (
    ExtractionContext,
    Extractor,
    LazyTurns,
    LazyValues,
    Turn,
    judged,
)
from pipeline.extract.run import extract

__all__ = [
    "EXTRACTORS",
    "RULES",
    "ExtractionContext",
    "Extractor",
    "ExtractorName",
    "LazyTurns",
    "LazyValues",
    "ModelBackend",
    "RulesBackend",
    "Turn",
    "choose",
    "extract",
    "judged",
    "model",
    "rules_for",
]
