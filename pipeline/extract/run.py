"""`extract`: one episode to kept candidates and refusals, through the rules or the model.

A plain function over explicit dependencies (catalogue, settings, an optional LLM client, the
episode, the subject's current values) that writes nothing: the pipeline decides what to do
with its result. Provenance — tenant, scope, source episode, trust — comes from the episode.
The extractor is the one `pipeline.extract.choose` picks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pipeline.extract.choose import ExtractorName, choose
from pipeline.extract.guards import CurrentValues
from pipeline.extract.llm import LlmClient
from pipeline.extract.protocol import ExtractionContext, Turn
from pipeline.extract.result import ExtractionResult
from pipeline.settings import Settings
from pipeline.validation import parse
from schemas.catalog import Catalog
from schemas.episodes import Episode


def extract(
    episode: Episode | Mapping[str, Any],
    *,
    catalog: Catalog,
    settings: Settings,
    current: CurrentValues | None = None,
    llm: LlmClient | None = None,
    extractor: ExtractorName = "auto",
    known_subjects: Collection[str] = (),
    earlier: Sequence[Turn] = (),
) -> ExtractionResult:
    """Candidates from `episode`. `auto` asks the model when one is configured (or `llm` is
    given) and otherwise uses the rules; `llm` without an endpoint is InvalidInput. `earlier`:
    the turns of its conversation before it, which a model sees as context only."""
    episode = parse(Episode, episode)
    chosen = choose(settings, name=extractor, llm=llm)
    context = ExtractionContext(
        catalog,
        current or {},
        known_subjects=frozenset(known_subjects),
        day_first=settings.dates_day_first,
        earlier=earlier,
    )
    return chosen.extract(episode, context)
