"""The model extractor measured on external chats, with your endpoint: a sample of MSC sessions
1-2 (labelled and unlabelled turns) and the knowledge-update probes of BEAM chats 1-10.

    .venv/bin/python bench/extract_eval.py --base-url URL --model M [--api-key K]
        [--msc-dialogs 20] [--catalog FILE] [--price-in P --price-out P]

Each turn is one episode read by `pipeline.extract` through the model (the catalogue of
`--catalog`, else SGAM_CATALOG_PATH or the bundled one), up to SGAM_LLM_CONCURRENCY at once.
The matching rules (deterministic, no judge):

- MSC: a turn with `persona_text` states a fact about its speaker; one without states none.
  *Coverage* is the share of labelled turns from which at least one candidate was kept;
  *precision* is the share of kept candidates that come from a labelled turn (a candidate kept
  from an unlabelled turn is a false positive). The labels are free text, not catalogue
  attributes: coverage is bounded by what the catalogue can name.
- BEAM knowledge update: a probe is *captured* when a candidate kept from its `updated_info`
  message has a value matching the rubric's key ("should state: 165 commits" → `165 commits`):
  every number of the key occurs in the value, or, for a key without numbers, one contains the
  other (case-folded).

Tokens and cost are per episode, from the endpoint's usage (cost with prices per million
tokens).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.catalog.loader import load_catalog
from pipeline.episodes.usage import cost
from pipeline.errors import LlmFailure
from pipeline.extract import extract
from pipeline.extract.llm import shared_client
from pipeline.extract.result import ExtractionResult
from pipeline.settings import Settings, load_settings
from schemas.catalog import Catalog
from schemas.episodes import Episode

# ../shared/data beside the checkout (or beside the directory of worktrees holding it).
_HERE = Path(__file__).resolve()
DATA = next(
    (up / "shared" / "data" for up in _HERE.parents[2:4] if (up / "shared" / "data").exists()),
    _HERE.parents[2] / "shared" / "data",
)
MSC = DATA / "msc" / "msc_personasummary"
BEAM = DATA / "beam" / "chats" / "100K"
ANCHOR = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # MSC has no dates: session 2 a week later
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


@dataclass
class Turn:
    episode: Episode
    labelled: bool
    label: str = ""


@dataclass
class Read:
    """What the model made of each episode, and what it cost."""

    results: dict[str, ExtractionResult] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def spent(self, settings: Settings) -> dict[str, Any]:
        usages = [result.usage for result in self.results.values()]
        prompt = [usage.prompt_tokens for usage in usages]
        completion = [usage.completion_tokens for usage in usages]
        total = cost(settings, sum(prompt), sum(completion))
        return {
            "episodes": len(self.results) + len(self.failures),
            "failed": len(self.failures),
            "prompt_tokens_per_episode": statistics.mean(prompt) if prompt else 0,
            "completion_tokens_per_episode": statistics.mean(completion) if completion else 0,
            "cost_per_episode": None if total is None else total / max(1, len(usages)),
        }


def msc_turns(root: Path, dialogs: int) -> list[Turn]:
    """The first `dialogs` dialogues of sessions 1 and 2, every turn an episode of its
    speaker."""
    turns = []
    for session in (1, 2):
        lines = (root / f"session_{session}" / "test.txt").read_text(encoding="utf-8")
        for record in map(json.loads, lines.splitlines()[:dialogs]):
            dialog_id = record["initial_data_id"]
            started = ANCHOR + timedelta(days=7 * (session - 1))
            for index, turn in enumerate(record["dialog"]):
                label = (turn.get("persona_text") or "").strip()
                episode = Episode(
                    episode_id=f"{dialog_id}:s{session}:{index}",
                    tenant_id="msc",
                    subject=f"{dialog_id}-{turn['id']}",
                    session_id=f"{dialog_id}:s{session}",
                    occurred_at=started + timedelta(minutes=index),
                    text=turn["text"],
                )
                turns.append(Turn(episode, bool(label), label))
    return turns


def beam_probes(root: Path, chats: Iterable[int] = range(1, 11)) -> list[dict[str, Any]]:
    """Each knowledge-update probe with its original and updated user messages as episodes."""
    probes = []
    for chat in chats:
        folder = root / str(chat)
        name = "chat_trunecated.json" if (folder / "chat_trunecated.json").exists() else "chat.json"
        messages, anchor = {}, ANCHOR
        for batch in json.loads((folder / name).read_text(encoding="utf-8")):
            for pair in batch["turns"]:
                for message in pair:
                    if message.get("time_anchor"):
                        anchor = datetime.strptime(message["time_anchor"], "%B-%d-%Y").replace(
                            tzinfo=UTC
                        )
                    messages[message["id"]] = (message, anchor)
        questions = json.loads(
            (folder / "probing_questions" / "probing_questions.json").read_text()
        )
        for number, probe in enumerate(questions["knowledge_update"]):
            ids = probe["source_chat_ids"]
            pair = []
            for kind in ("original_info", "updated_info"):
                message, at = messages[ids[kind][0]]
                pair.append(
                    Episode(
                        episode_id=f"beam{chat}:{number}:{kind}",
                        tenant_id="beam",
                        subject="user",
                        session_id=f"beam{chat}",
                        occurred_at=at + timedelta(minutes=int(message["id"])),
                        text=message["content"][:20_000],
                    )
                )
            key = probe["rubric"][0].split("state:", 1)[-1].strip().rstrip(".")
            probes.append({"id": f"beam{chat}:{number}", "episodes": pair, "key": key})
    return probes


def read_all(episodes: list[Episode], catalog: Catalog, settings: Settings) -> Read:
    """Every episode through the model, up to SGAM_LLM_CONCURRENCY at once."""
    client = shared_client(settings)
    read = Read()

    def one(episode: Episode) -> None:
        try:
            read.results[episode.episode_id] = extract(
                episode, catalog=catalog, settings=settings, llm=client, extractor="llm"
            )
        except LlmFailure as failure:
            read.failures[episode.episode_id] = type(failure).__name__

    with ThreadPoolExecutor(settings.llm_concurrency) as pool:
        list(pool.map(one, episodes))
    return read


def msc_report(turns: list[Turn], read: Read) -> dict[str, Any]:
    labelled = [turn for turn in turns if turn.labelled]
    covered = sum(1 for turn in labelled if _kept(read, turn.episode))
    kept_labelled = sum(len(_kept(read, turn.episode)) for turn in labelled)
    kept_all = sum(len(_kept(read, turn.episode)) for turn in turns)
    return {
        "turns": len(turns),
        "labelled": len(labelled),
        "coverage": covered / len(labelled) if labelled else 0.0,
        "kept": kept_all,
        "precision": kept_labelled / kept_all if kept_all else None,
    }


def beam_report(probes: list[dict[str, Any]], read: Read) -> dict[str, Any]:
    captured = [
        probe["id"]
        for probe in probes
        if any(matches(probe["key"], c.value) for c in _kept(read, probe["episodes"][1]))
    ]
    return {"probes": len(probes), "captured": len(captured), "captured_ids": captured}


def matches(key: str, value: Any) -> bool:
    """The rubric's key against a kept value (the module's matching rule)."""
    text = value if isinstance(value, str) else json.dumps(value)
    numbers = _NUMBER.findall(key)
    if numbers:
        return all(number in _NUMBER.findall(text) for number in numbers)
    folded, wanted = text.casefold(), key.casefold()
    return bool(folded) and (folded in wanted or wanted in folded)


def _kept(read: Read, episode: Episode) -> list[Any]:
    result = read.results.get(episode.episode_id)
    return list(result.kept) if result is not None else []


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="your OpenAI-compatible endpoint: MSC and BEAM eval")
    parser.add_argument("--model", help="the model name to send (default SGAM_LLM_MODEL)")
    parser.add_argument("--api-key", help="bearer token (default SGAM_LLM_API_KEY)")
    parser.add_argument("--catalog", type=Path, help="catalogue file (default: SGAM_CATALOG_PATH)")
    parser.add_argument("--msc-dialogs", type=int, default=20, help="MSC dialogues per session")
    parser.add_argument("--price-in", type=float, help="per million prompt tokens")
    parser.add_argument("--price-out", type=float, help="per million completion tokens")


def settings_from(args: argparse.Namespace) -> Settings:
    """SGAM_* settings from the environment, the flags given over them."""
    given = {
        "llm_base_url": args.base_url,
        "llm_model": args.model,
        "llm_api_key": args.api_key,
        "catalog_path": args.catalog,
        "llm_price_in": args.price_in,
        "llm_price_out": args.price_out,
    }
    return load_settings(**{name: value for name, value in given.items() if value is not None})


def run(
    settings: Settings,
    *,
    msc_dialogs: int = 20,
    msc: Path = MSC,
    beam: Path = BEAM,
    print_line: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Both evaluations against the endpoint of `settings`; the report, also printed."""
    catalog = load_catalog(settings.catalog_path)
    turns = msc_turns(msc, msc_dialogs)
    probes = beam_probes(beam)
    episodes = [turn.episode for turn in turns]
    episodes += [episode for probe in probes for episode in probe["episodes"]]
    read = read_all(episodes, catalog, settings)
    report = {
        "model": settings.llm_model,
        "msc": msc_report(turns, read),
        "beam_knowledge_update": beam_report(probes, read),
        "spent": read.spent(settings),
    }
    print_line(f"## llm:{settings.llm_model} on MSC s1-2 and BEAM knowledge updates")
    print_line(json.dumps(report, indent=2))
    return report
