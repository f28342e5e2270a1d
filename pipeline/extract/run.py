"""`extract`: one episode to kept candidates and refusals, through the rules or the model.

A plain function over explicit dependencies (catalogue, settings, an optional LLM client, the
episode, the subject's current values) that writes nothing: the pipeline decides what to do
with its result. Provenance — tenant, scope, source episode, trust — comes from the episode.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any, Literal

from pipeline.errors import InvalidInput
from pipeline.extract.guards import CurrentValues, GuardContext, guard_all
from pipeline.extract.llm import LlmClient, shared_client
from pipeline.extract.prompting import PROMPT_NAME, render_messages
from pipeline.extract.result import ExtractionResult
from pipeline.extract.rules import RulesExtractor
from pipeline.settings import Settings
from pipeline.validation import parse
from schemas.catalog import Catalog
from schemas.episodes import Episode
from schemas.extraction import MemoryUpdate, Usage, response_model

Extractor = Literal["rules", "llm", "auto"]
EXTRACTORS: tuple[Extractor, ...] = ("rules", "llm", "auto")

_compiled: dict[tuple[int, bool], tuple[Catalog, RulesExtractor]] = {}


def extract(
    episode: Episode | Mapping[str, Any],
    *,
    catalog: Catalog,
    settings: Settings,
    current: CurrentValues | None = None,
    llm: LlmClient | None = None,
    extractor: Extractor = "auto",
    known_subjects: Collection[str] = (),
) -> ExtractionResult:
    """Candidates from `episode`. `auto` asks the model when one is configured (or `llm` is
    given) and otherwise uses the rules; `llm` without an endpoint is InvalidInput."""
    episode = parse(Episode, episode)
    if extractor not in EXTRACTORS:
        raise InvalidInput("extractor", f"must be one of {', '.join(EXTRACTORS)}")
    use_llm = extractor == "llm" or (
        extractor == "auto" and (llm is not None or settings.llm_configured)
    )
    if use_llm and llm is None and not settings.llm_configured:
        raise InvalidInput(
            "SGAM_LLM_BASE_URL", "is not set: configure an endpoint for --extractor llm"
        )
    context = GuardContext(
        episode,
        catalog,
        current or {},
        known_subjects=frozenset(known_subjects),
        day_first=settings.dates_day_first,
    )
    if not use_llm:
        started = time.perf_counter()
        proposed = rules_for(catalog, settings.dates_day_first).propose(episode, context.current)
        usage = Usage(extractor="rules", latency_ms=_ms_since(started))
        return _judged(episode, proposed, context, usage)
    client = llm if llm is not None else shared_client(settings)
    answer, usage = client.ask(
        render_messages(episode, catalog, context.current),
        response_model(catalog),
        prompt_version=PROMPT_NAME,
    )
    return _judged(episode, answer.updates, context, usage)


def rules_for(catalog: Catalog, day_first: bool = False) -> RulesExtractor:
    """The compiled rules of `catalog`, built once per catalogue object."""
    key = (id(catalog), day_first)
    entry = _compiled.get(key)
    if entry is None or entry[0] is not catalog:
        if len(_compiled) > 16:
            _compiled.clear()
        entry = _compiled[key] = (catalog, RulesExtractor(catalog, day_first=day_first))
    return entry[1]


def _judged(
    episode: Episode, proposed: list[MemoryUpdate], context: GuardContext, usage: Usage
) -> ExtractionResult:
    kept, rejected = guard_all(proposed, context)
    return ExtractionResult(episode=episode, kept=kept, rejected=rejected, usage=usage)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
