"""Prompt token counts: the served model's own tokenizer when a llama.cpp server is given
(its /extras/tokenize/count endpoint), else the documented estimate of four characters per
token (`pipeline.read.context.estimate_tokens`)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2

from pipeline.read.context import estimate_tokens
from schemas.catalog import Catalog
from schemas.extraction import response_model

TEMPLATE_TOKENS = 14
"""Chat-template tokens around a system and a user message: measured on SmolLM2's template
(llama-cpp-python reported 657 prompt tokens where the two messages count 643)."""


def token_counter(url: str | None, catalog: Catalog) -> tuple[Callable[[str], int], int, str]:
    """(count, schema tokens, description). llama.cpp's server uses the response schema only
    for its grammar; OpenAI-style servers add it (as tool definitions) to the prompt."""
    schema = json.dumps(response_model(catalog).model_json_schema())
    if url is None:
        return estimate_tokens, estimate_tokens(schema), "estimate: 4 characters per token"
    client = httpx2.Client(base_url=url.rstrip("/").removesuffix("/v1"), timeout=30)

    def count(text: str) -> int:
        response = client.post("/extras/tokenize/count", json={"input": text})
        response.raise_for_status()
        return int(response.json()["count"])

    return count, count(schema), f"tokenizer of the model at {url}"
