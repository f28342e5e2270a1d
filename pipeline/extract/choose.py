"""The one place that decides which extractor reads an episode — for the worker, the hot path
and `sgam extract` alike. "Is a model configured?" is answered here and nowhere else."""

from __future__ import annotations

from typing import Literal

from pipeline.errors import InvalidInput, SettingError
from pipeline.extract.backends import RULES, ModelBackend
from pipeline.extract.llm import LlmClient
from pipeline.extract.protocol import Extractor
from pipeline.settings import Settings

ExtractorName = Literal["rules", "llm", "auto"]
EXTRACTORS: tuple[ExtractorName, ...] = ("rules", "llm", "auto")


def model(settings: Settings, llm: LlmClient | None = None) -> ModelBackend | None:
    """The model extractor when one is configured (SGAM_LLM_BASE_URL) or `llm` is given."""
    if llm is None and not settings.llm_configured:
        return None
    return ModelBackend(settings, llm)


def choose(settings: Settings, *, name: str = "auto", llm: LlmClient | None = None) -> Extractor:
    """`auto`: the model when one is configured (or `llm` is given), else the rules; `llm`
    without an endpoint is a SettingError."""
    if name not in EXTRACTORS:
        raise InvalidInput("extractor", f"must be one of {', '.join(EXTRACTORS)}")
    if name == "rules":
        return RULES
    backend = model(settings, llm)
    if backend is not None:
        return backend
    if name == "llm":
        raise SettingError(
            "SGAM_LLM_BASE_URL", "is not set: configure an endpoint for --extractor llm"
        )
    return RULES
