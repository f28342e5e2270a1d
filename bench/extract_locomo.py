"""LoCoMo turns as episodes: the rules extractor's yield and throughput, and the size of the
extraction prompt on real chat traffic. The data is read where it lies (never copied here).

Usable alone: `.venv/bin/python bench/extract_locomo.py [--locomo PATH] [--tokenize-url URL]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extract_msc import stored_clauses
from extract_tokens import TEMPLATE_TOKENS

from pipeline.catalog.loader import bundled_catalog
from pipeline.extract import extract, rules_for
from pipeline.extract.prompting import render_messages
from pipeline.extract.rules import RulesExtractor
from pipeline.settings import Settings
from schemas.catalog import Catalog
from schemas.episodes import Episode

DEFAULT_LOCOMO = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
)
TokenCounter = Callable[[str], int]
_WORDS = re.compile(r"[\w'’-]+")


def locomo_episodes(path: Path) -> list[Episode]:
    """Every turn as an episode about its speaker, at its session's time (LoCoMo gives no
    zone: read as UTC)."""
    episodes = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        turns = conversation["conversation"]
        sessions = sorted(
            (int(key.removeprefix("session_")), value)
            for key, value in turns.items()
            if key.startswith("session_") and isinstance(value, list)
        )
        for number, session in sessions:
            at = datetime.strptime(turns[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y")
            for turn in session:
                speaker = turn["speaker"]
                episodes.append(
                    Episode(
                        episode_id=f"{conversation['sample_id']}:{turn['dia_id']}",
                        tenant_id="locomo",
                        subject=speaker.casefold(),
                        subject_names=[speaker],
                        session_id=f"{conversation['sample_id']}:{number}",
                        occurred_at=at.replace(tzinfo=UTC),
                        text=turn["text"] or " ",
                    )
                )
    return episodes


def built_in_only(catalog: Catalog) -> Catalog:
    """`catalog` with every attribute opted out of forms (`forms: []`, none derived)."""
    attributes = {
        name: spec.model_copy(update={"forms": []}) for name, spec in catalog.attributes.items()
    }
    return catalog.model_copy(update={"attributes": attributes})


def rules_run(episodes: list[Episode], catalog: Catalog, settings: Settings) -> dict[str, Any]:
    """Candidates the rules extractor yields over every turn, and turns per second: through
    `extract` (rules, guards, the protocol), the rules alone (`RulesExtractor.propose`), and two
    baselines timed in the same run, in turn with the rules, so that a loaded machine slows all
    alike: splitting each turn into casefolded words (the least any reader does) and the
    support catalogue's rules (the built-in `my X is Y` readings, no forms). Best of five
    passes each, wall clock and CPU time of this process; compiling the rules is not timed."""
    rules = rules_for(catalog, settings.dates_day_first)
    support = RulesExtractor(built_in_only(bundled_catalog("support")))
    kept: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    clauses: list[dict[str, Any]] = []
    for episode in episodes:
        result = extract(episode, catalog=catalog, settings=settings, extractor="rules")
        kept.update(candidate.attribute for candidate in result.kept)
        clauses += stored_clauses(episode.episode_id, result.kept)
        rejected.update(rejection.reason.value for rejection in result.rejected)
    passes: dict[str, Callable[[Episode], object]] = {
        "words (baseline)": lambda episode: _WORDS.findall(episode.text.casefold()),
        "support rules (baseline)": lambda episode: support.propose(episode, {}),
        "rules alone": lambda episode: rules.propose(episode, {}),
        "extract (rules, guards, protocol)": lambda episode: extract(
            episode, catalog=catalog, settings=settings, extractor="rules"
        ),
    }
    wall: dict[str, float] = dict.fromkeys(passes, float("inf"))
    cpu: dict[str, float] = dict.fromkeys(passes, float("inf"))
    for _ in range(5):
        for name, run in passes.items():
            started, started_cpu = time.perf_counter(), time.process_time()
            for episode in episodes:
                run(episode)
            wall[name] = min(wall[name], time.perf_counter() - started)
            cpu[name] = min(cpu[name], time.process_time() - started_cpu)
    words = len(episodes) / cpu["words (baseline)"]
    return {
        "turns": len(episodes),
        "kept": sum(kept.values()),
        "kept_per_1000_turns": round(1000 * sum(kept.values()) / len(episodes), 1),
        "kept_by_attribute": dict(kept.most_common()),
        "rejected_by_reason": dict(rejected.most_common()),
        "values_that_are_clauses": clauses,
        "load_average": [round(load, 1) for load in os.getloadavg()],
        "turns_per_s": {
            name: {
                "wall": round(len(episodes) / wall[name]),
                "cpu": round(len(episodes) / cpu[name]),
                "cpu_vs_words": round(len(episodes) / cpu[name] / words, 3),
            }
            for name in passes
        },
    }


def prompt_sizes(
    episodes: list[Episode], catalog: Catalog, count: TokenCounter, schema_tokens: int
) -> dict[str, Any]:
    """Prompt tokens per turn: the system message (the same for every turn, counted once), the
    user message and the chat template; and the same plus the response schema, for servers
    that put tool definitions into the prompt."""
    system = None
    sizes = []
    for episode in episodes:
        messages = render_messages(episode, catalog, {})
        if system is None:
            system = count(messages[0]["content"])
        sizes.append(system + count(messages[1]["content"]) + TEMPLATE_TOKENS)
    sizes.sort()
    return {
        "turns": len(sizes),
        "system_tokens": system,
        "median": statistics.median(sizes),
        "p90": sizes[int(0.9 * (len(sizes) - 1))],
        "max": sizes[-1],
        "schema_tokens": schema_tokens,
        "median_with_schema": statistics.median(sizes) + schema_tokens,
    }


def main() -> None:
    from extract_tokens import token_counter

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--tokenize-url", help="llama.cpp server base URL for exact counts")
    args = parser.parse_args()
    from pipeline.catalog.loader import load_catalog

    catalog = load_catalog(None)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    episodes = locomo_episodes(args.locomo)
    print(json.dumps(rules_run(episodes, catalog, settings), indent=2))
    count, schema_tokens, name = token_counter(args.tokenize_url, catalog)
    print(name, json.dumps(prompt_sizes(episodes, catalog, count, schema_tokens), indent=2))


if __name__ == "__main__":
    main()
