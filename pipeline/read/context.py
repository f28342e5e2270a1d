"""Context assembly, the read path's last step: the smallest cited context for a model.

Only current, visible facts of the caller's scope and subject are candidates (hard filters
first); ranking comes after: an exact attribute or synonym match with the query, then the
number of shared words, then confidence, then recency. Facts are taken whole in that order
while they fit the token budget; one that does not fit is skipped, so a long low-ranked fact
never crowds out shorter ones behind it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field, computed_field

from pipeline.db.store import Store
from pipeline.read.facts import SubjectQuery, get
from pipeline.validation import parse
from schemas.catalog import Catalog
from schemas.facts import Fact
from schemas.fields import Text, format_utc

TokenCounter = Callable[[str], int]
_WORD = re.compile(r"\w+")


def estimate_tokens(text: str) -> int:
    """About four characters per token, the usual rule of thumb for English text with GPT
    tokenizers; pass the target model's tokenizer where exact limits matter."""
    return max(1, math.ceil(len(text) / 4))


class ContextQuery(SubjectQuery):
    query: Text | None = None
    budget_tokens: int = Field(default=500, ge=1, le=1_000_000)


class ContextItem(BaseModel):
    fact_id: str
    attribute: str
    value: Any
    valid_from: str | None
    source_episode_id: str
    confidence: float
    trust: str
    text: str
    tokens: int


class Context(BaseModel):
    subject: str
    budget_tokens: int
    used_tokens: int
    items: list[ContextItem]
    skipped: list[ContextItem] = Field(description="ranked candidates that did not fit")

    @computed_field(description="the items joined as a model would be given them")  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        return _joined(self.items)


def assemble(
    store: Store,
    query: ContextQuery | Mapping[str, Any],
    count_tokens: TokenCounter = estimate_tokens,
) -> Context:
    query = parse(ContextQuery, query)
    facts = get(
        store,
        {
            "tenant_id": query.tenant_id,
            "agent_id": query.agent_id,
            "purpose": query.purpose,
            "subject": query.subject,
        },
    )
    ranked = sorted(facts, key=lambda fact: rank(fact, query.query, store.catalog), reverse=True)
    items: list[ContextItem] = []
    skipped: list[ContextItem] = []
    used = 0
    for fact in ranked:
        item = _item(fact, count_tokens)
        # The budget bounds the text as handed to the model, separators included.
        tokens = count_tokens(_joined([*items, item]))
        if tokens <= query.budget_tokens:
            items.append(item)
            used = tokens
        else:
            skipped.append(item)
    return Context(
        subject=query.subject,
        budget_tokens=query.budget_tokens,
        used_tokens=used,
        items=items,
        skipped=skipped,
    )


def _joined(items: list[ContextItem]) -> str:
    return "\n".join(item.text for item in items)


def rank(fact: Fact, query: str | None, catalog: Catalog) -> tuple[bool, int, float, float]:
    """Sort key, highest first: exact name match (the attribute's identifier, its spaced form
    or a synonym), shared words, confidence, recency."""
    names = [name.casefold() for name in [fact.attribute, *catalog.synonyms(fact.attribute)]]
    text = (query or "").casefold()
    exact = any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)
    words = set(_WORD.findall(text))
    vocabulary = set(_WORD.findall(" ".join(names) + " " + json.dumps(fact.value).casefold()))
    return exact, len(words & vocabulary), fact.confidence, fact.valid_from.timestamp()


def _item(fact: Fact, count_tokens: TokenCounter) -> ContextItem:
    value = fact.value if isinstance(fact.value, str) else json.dumps(fact.value)
    since = format_utc(fact.valid_from)
    text = f"- {fact.attribute}: {value} (since {since}; source {fact.source_episode_id})"
    return ContextItem(
        fact_id=fact.fact_id,
        attribute=fact.attribute,
        value=fact.value,
        valid_from=since,
        source_episode_id=fact.source_episode_id,
        confidence=fact.confidence,
        trust=fact.trust.value,
        text=text,
        tokens=count_tokens(text),
    )
