"""vcrpy cassettes for the LLM tests: one per test under tests/cassettes/<module>/<test>.yaml,
readable YAML, credentials scrubbed, matched on method + URI + body, replay-only unless
SGAM_RECORD_CASSETTES=1 (scripts/record-cassettes), and every recorded interaction must be
played: a cassette the code no longer needs fails its test."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import vcr

from pipeline.settings import Settings
from tests.factories import isolated_settings

CASSETTES = Path(__file__).resolve().parents[1] / "cassettes"
RECORDING = os.environ.get("SGAM_RECORD_CASSETTES") == "1"
SCRUBBED = [
    "authorization",
    "api-key",
    "x-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
]


def _drop_noise(response: dict[str, Any]) -> dict[str, Any]:
    response["headers"] = {
        name: value
        for name, value in response["headers"].items()
        if name.lower() in {"content-type", "retry-after"}
    }
    return response


RECORDER = vcr.VCR(
    serializer="yaml",
    record_mode="all" if RECORDING else "none",
    match_on=["method", "uri", "body"],
    filter_headers=SCRUBBED,
    before_record_response=_drop_noise,
    decode_compressed_response=True,
)


def cassette_path(request: pytest.FixtureRequest) -> Path:
    module = request.node.module.__name__.rsplit(".", 1)[-1]
    return CASSETTES / module / f"{request.node.name}.yaml"


@contextmanager
def cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Replay (or record) this test's cassette; fail on a missing one or an unplayed request."""
    path = cassette_path(request)
    if RECORDING:
        path.unlink(missing_ok=True)  # vcrpy's "all" mode would append to the old recording
    elif not path.exists():
        pytest.fail(f"no cassette {path}: run scripts/record-cassettes")
    with RECORDER.use_cassette(str(path), allow_playback_repeats=False) as played:
        yield played
    if not RECORDING:
        assert played.play_count > 0, f"{path.name}: the test sent no request"
        assert played.all_played, f"{path.name}: recorded interactions were not used"


BASE_URL = "http://127.0.0.1:18765/v1"  # scripts/record-cassettes serves the model here
MODEL = "smollm2-135m-instruct"
# The prompt the cassettes were recorded with, pinned so that a new default prompt does not
# silently leave them unmatched: a new prompt needs a new recording (tests/cassettes/README.md).
RECORDED_PROMPT = "extract/v2"


def settings(**overrides: Any) -> Settings:
    """The recorded server's settings (a re-recording must keep them: they are in the bodies)."""
    fields: dict[str, Any] = {
        "llm_base_url": BASE_URL,
        "llm_model": MODEL,
        "llm_prompt": RECORDED_PROMPT,
        "llm_max_tokens": 256,  # a small model rambles; this bounds a recording's time
        "llm_max_reasks": 1,
        "llm_timeout_s": 900,  # recording on a CPU is slow; replaying is instant
        "llm_deadline_s": 3600,
    }
    return isolated_settings(**(fields | overrides))


def answers(played: Any) -> list[dict[str, Any]]:
    """The chat completions the server sent, as recorded."""
    return [json.loads(response["body"]["string"]) for response in played.responses]


def recorded_tokens(played: Any) -> tuple[int, int]:
    usages = [answer["usage"] for answer in answers(played)]
    return sum(u["prompt_tokens"] for u in usages), sum(u["completion_tokens"] for u in usages)
