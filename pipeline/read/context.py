"""Context assembly, the read path's last step: the smallest cited context for a model.

Only current, visible facts of the caller's scope and subject are candidates (hard filters
first); ranking comes after: an exact attribute or synonym match with the query, then the
fact's relevance to the query, then confidence, then recency. Relevance is the search read's
BM25 of the fact (its attribute, value and evidence) over the scope, plus BESIDE times the
better BM25 of the turns said just before and after its source episode: a fact read from an
answer is found through the question beside it. With the embedding arm, that ranking is
fused with the facts' cosine to the query by reciprocal rank, as the search read fuses.
Episodes enter only when asked (`episodes`), after the facts, each labelled with when it was
said, best match first. Facts are taken whole in that order while they fit the token budget;
one that does not fit is skipped, so a long low-ranked fact never crowds out shorter ones
behind it.

The text a model is given names each attribute once, with its facts under it in the order
they were taken, each with the day it holds from and its source episode:

    - diet (since, source):
      - vegetarian (2026-06-03, e2)

The exact `valid_from`, the fact id and the source episode id stay in each item.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC
from typing import Any

from pydantic import BaseModel, Field, computed_field

from pipeline.db.store import Store
from pipeline.read.facts import SubjectQuery, get
from pipeline.read.search import Relevance, relevance, search
from pipeline.read.search_vectors import fuse
from pipeline.validation import parse
from schemas.catalog import Catalog
from schemas.facts import Fact
from schemas.fields import Text, format_utc

TokenCounter = Callable[[str], int]

# The share of the turns' BM25 beside a fact's source that the fact takes: measured on LoCoMo
# at 0.3, 0.5, 0.7 and 1.0 (bench/HISTORY.md); above a half, facts that match nothing of
# their own begin to push out the ones that do.
BESIDE = 0.5


def estimate_tokens(text: str) -> int:
    """About four characters per token, the usual rule of thumb for English text with GPT
    tokenizers; pass the target model's tokenizer where exact limits matter."""
    return max(1, math.ceil(len(text) / 4))


class ContextQuery(SubjectQuery):
    query: Text | None = None
    budget_tokens: int = Field(default=500, ge=1, le=1_000_000)
    episodes: bool = Field(default=False, description="also the episodes matching the query")


class ContextEpisode(BaseModel):
    episode_id: str
    occurred_at: str
    text: str
    tokens: int


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
    episodes: list[ContextEpisode] = Field(
        default_factory=list, description="matching episodes, after the facts (when asked)"
    )

    @computed_field(description="the items joined as a model would be given them")  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        return _joined(self.items, self.episodes)


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
    relevant = _relevance(store, query)
    scores = _scores(relevant, facts)
    ranked = sorted(
        facts,
        key=lambda fact: rank(fact, query.query, store.catalog, scores.get(fact.fact_id, 0.0)),
        reverse=True,
    )
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
    said: list[ContextEpisode] = []
    if query.episodes and query.query:
        for found in _episodes(store, query, count_tokens, relevant):
            tokens = count_tokens(_joined(items, [*said, found]))
            if tokens <= query.budget_tokens:
                said.append(found)
                used = tokens
    return Context(
        subject=query.subject,
        budget_tokens=query.budget_tokens,
        used_tokens=used,
        items=items,
        skipped=skipped,
        episodes=said,
    )


def _joined(items: Sequence[ContextItem], episodes: Sequence[ContextEpisode] = ()) -> str:
    """The facts under one line per attribute (in the order of each one's first fact), then
    the episodes."""
    groups: dict[str, list[ContextItem]] = {}
    for item in items:
        groups.setdefault(item.attribute, []).append(item)
    lines = []
    for attribute, group in groups.items():
        lines.append(f"- {attribute} (since, source):")
        lines.extend(item.text for item in group)
    return "\n".join([*lines, *(episode.text for episode in episodes)])


def _scope(query: ContextQuery) -> dict[str, Any]:
    return query.model_dump(include={"tenant_id", "agent_id", "purpose", "subject"})


def _relevance(store: Store, query: ContextQuery) -> Relevance:
    if not query.query:
        return Relevance()
    return relevance(store, _scope(query) | {"query": query.query})


def _scores(scores: Relevance, facts: Sequence[Fact]) -> dict[str, float]:
    """Each fact's relevance: its own BM25 and BESIDE times its neighbours'; with the
    embedding arm, that ranking fused with the cosine's by reciprocal rank, as search does."""
    lexical = {
        fact.fact_id: scores.facts.get(fact.fact_id, 0.0)
        + BESIDE * scores.beside.get(fact.source_episode_id, 0.0)
        for fact in facts
    }
    if not scores.similar:
        return lexical
    ranked = sorted(
        ((fact_id, score) for fact_id, score in lexical.items() if score > 0),
        key=lambda item: (-item[1], item[0]),
    )
    similar = sorted(scores.similar.items(), key=lambda item: (-item[1], item[0]))
    return fuse(ranked, similar, len(facts))


def _episodes(
    store: Store, query: ContextQuery, count_tokens: TokenCounter, relevant: Relevance
) -> list[ContextEpisode]:
    asked = _scope(query) | {"query": query.query, "kinds": ["episodes"]}
    found = search(store, asked, embedded=relevant.embedded)  # the query embedded once
    episodes = []
    for episode in found.episodes:
        said = format_utc(episode.occurred_at) or ""
        text = f"- said {said}: {episode.snippet} (episode {episode.episode_id})"
        episodes.append(
            ContextEpisode(
                episode_id=episode.episode_id,
                occurred_at=said,
                text=text,
                tokens=count_tokens(text),
            )
        )
    return episodes


def rank(
    fact: Fact, query: str | None, catalog: Catalog, relevance: float = 0.0
) -> tuple[bool, float, float, float]:
    """Sort key, highest first: exact name match (the attribute's identifier, its spaced form
    or a synonym), relevance to the query, confidence, recency."""
    names = [name.casefold() for name in [fact.attribute, *catalog.synonyms(fact.attribute)]]
    text = (query or "").casefold()
    exact = any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)
    return exact, relevance, fact.confidence, fact.valid_from.timestamp()


def _item(fact: Fact, count_tokens: TokenCounter) -> ContextItem:
    value = fact.value if isinstance(fact.value, str) else json.dumps(fact.value)
    since = format_utc(fact.valid_from)
    day = fact.valid_from.astimezone(UTC).date().isoformat()
    text = f"  - {value} ({day}, {fact.source_episode_id})"
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
