"""The two extractors SGAM ships: the rules (explicit statements, no model) and a model behind
an OpenAI-compatible endpoint. Both follow `pipeline.extract.protocol.Extractor`."""

from __future__ import annotations

import time

from pipeline.extract.llm import LlmClient, shared_client
from pipeline.extract.prompting import render_messages
from pipeline.extract.protocol import ExtractionContext, judged
from pipeline.extract.result import ExtractionResult
from pipeline.extract.rules import RulesExtractor
from pipeline.settings import Settings
from schemas.catalog import Catalog
from schemas.episodes import Episode
from schemas.extraction import Usage, response_model

_compiled: dict[tuple[int, bool], tuple[Catalog, RulesExtractor]] = {}


def rules_for(catalog: Catalog, day_first: bool = False) -> RulesExtractor:
    """The compiled rules of `catalog`, built once per catalogue object."""
    key = (id(catalog), day_first)
    entry = _compiled.get(key)
    if entry is None or entry[0] is not catalog:
        if len(_compiled) > 16:
            _compiled.clear()
        entry = _compiled[key] = (catalog, RulesExtractor(catalog, day_first=day_first))
    return entry[1]


class RulesBackend:
    """The rules of the context's catalogue; the subject's current values are read only when
    a rule matched (they mark a restatement)."""

    name = "rules"
    version: str | None = None  # no prompt: the rules are versioned with the code

    def extract(self, episode: Episode, context: ExtractionContext) -> ExtractionResult:
        started = time.perf_counter()
        rules = rules_for(context.catalog, context.day_first)
        proposed = rules.propose(episode, context.current)
        usage = Usage(extractor=self.name, latency_ms=_ms_since(started))
        return judged(episode, proposed, context, usage)


RULES = RulesBackend()


class ModelBackend:
    """A model asked through `client`, or, without one, through this process's client for
    `settings` (`llm.shared_client`: one per process, its connections reused)."""

    def __init__(self, settings: Settings, client: LlmClient | None = None) -> None:
        self.settings = client.settings if client is not None else settings
        self.client = client

    @property
    def name(self) -> str:
        return f"llm:{self.settings.llm_model}"

    @property
    def version(self) -> str | None:
        """The prompt (SGAM_LLM_PROMPT), recorded on the episode and on every write."""
        return self.settings.llm_prompt

    def within(self, seconds: float) -> ModelBackend:
        """The same endpoint, giving up after `seconds` in all (the hot path's deadline)."""
        return ModelBackend(self.settings, self._client().within(seconds))

    def _client(self) -> LlmClient:
        return self.client if self.client is not None else shared_client(self.settings)

    def extract(self, episode: Episode, context: ExtractionContext) -> ExtractionResult:
        answer, usage = self._client().ask(
            render_messages(
                episode,
                context.catalog,
                context.current,
                context.earlier,
                prompt=self.settings.llm_prompt,
            ),
            response_model(context.catalog),
            prompt_version=self.settings.llm_prompt,
        )
        return judged(episode, answer.updates, context, usage)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
