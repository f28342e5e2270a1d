"""The harness of bench/extract_llm_eval.py (extract_eval.py --base-url) end to end against the
stub OpenAI-compatible server, on the MSC and BEAM data where they lie: the stub proposes one
update per episode, quoting it and holding the numbers it states, so every figure the harness
prints can be computed here from the data files themselves."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from tests.integration.stub_llm import StubServer

_PATH = Path(__file__).resolve().parents[2] / "bench" / "extract_llm_eval.py"
_spec = importlib.util.spec_from_file_location("extract_llm_eval", _PATH)
assert _spec is not None
assert _spec.loader is not None
harness: Any = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("extract_llm_eval", harness)  # its dataclasses look their module up
_spec.loader.exec_module(harness)

pytestmark = pytest.mark.skipif(
    not (harness.MSC.exists() and harness.BEAM.exists()), reason="../shared/data is not here"
)
NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    """One update quoting the episode, its value the numbers the episode states."""
    prompt = request["messages"][-1]["content"]
    subject = re.search(r"^Subject: (\S+)", prompt, re.M)
    assert subject is not None
    text = prompt.split("\nEpisode (", 1)[1].split("\n", 1)[1]
    update = {
        "evidence": text[:40],
        "subject": subject.group(1),
        "attribute": "home_city",
        "current_value": None,
        "change": "new",
        "value": " ".join(NUMBER.findall(text)) or "none",
        "valid_from": None,
    }
    return {"updates": [update]}


@pytest.fixture
def stub() -> Iterator[Any]:
    with StubServer() as server:
        server.app.answer = _answer
        yield server


def test_the_harness_reports_coverage_precision_captures_and_cost(stub: Any) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        llm_base_url=stub.base_url,
        llm_model="stub",
        llm_price_in=1.0,
        llm_price_out=4.0,
    )
    printed: list[str] = []
    report = harness.run(settings, msc_dialogs=2, print_line=printed.append)

    turns = []
    for session in (1, 2):
        lines = (harness.MSC / f"session_{session}" / "test.txt").read_text().splitlines()[:2]
        turns += [turn for line in lines for turn in json.loads(line)["dialog"]]
    labelled = sum(1 for turn in turns if (turn.get("persona_text") or "").strip())
    assert report["msc"] == {
        "turns": len(turns),
        "labelled": labelled,
        "coverage": 1.0,  # every turn had its update kept
        "kept": len(turns),
        "precision": labelled / len(turns),
    }
    beam = report["beam_knowledge_update"]
    assert beam["probes"] == 20
    expected = _captured_by_numbers()
    assert set(beam["captured_ids"]) == expected
    assert 0 < len(expected) < 20, "both branches of the rule: captured and missed probes"
    spent = report["spent"]
    assert (spent["episodes"], spent["failed"]) == (len(turns) + 40, 0)
    assert stub.stats.answered == len(turns) + 40
    per_episode = (
        spent["prompt_tokens_per_episode"] * 1.0 + spent["completion_tokens_per_episode"] * 4.0
    ) / 1e6
    assert spent["cost_per_episode"] == pytest.approx(per_episode, rel=1e-3)
    assert printed[0].startswith("## llm:stub")


def _captured_by_numbers() -> set[str]:
    """Probes whose rubric's numbers all occur in the updated message (what the stub keeps)."""
    captured = set()
    for chat in range(1, 11):
        folder = harness.BEAM / str(chat)
        name = "chat_trunecated.json" if (folder / "chat_trunecated.json").exists() else "chat.json"
        messages = {
            message["id"]: message["content"]
            for batch in json.loads((folder / name).read_text())
            for pair in batch["turns"]
            for message in pair
        }
        questions = json.loads(
            (folder / "probing_questions" / "probing_questions.json").read_text()
        )
        for number, probe in enumerate(questions["knowledge_update"]):
            key = probe["rubric"][0].split("state:", 1)[-1]
            wanted = NUMBER.findall(key)
            said = NUMBER.findall(messages[probe["source_chat_ids"]["updated_info"][0]][:20_000])
            if wanted and all(value in said for value in wanted):
                captured.add(f"beam{chat}:{number}")
    return captured
