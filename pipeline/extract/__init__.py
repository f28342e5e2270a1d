"""Extraction: episodes to typed memory candidates, by rules or through an LLM, with guards.

Nothing here writes to the ledger; `extract` returns what would be written and why.
"""

from pipeline.extract.run import EXTRACTORS, Extractor, extract, rules_for

__all__ = ["EXTRACTORS", "Extractor", "extract", "rules_for"]
