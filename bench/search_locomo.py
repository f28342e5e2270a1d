"""The search read on LoCoMo: turns as episodes, observations as facts.

    .venv/bin/python bench/search_locomo.py [--locomo ../shared/data/locomo/locomo10.json]

Each of the 10 conversations is a subject; its turns are episodes ("Speaker: text", dated by
their session), its observations facts of `observation` (bench/search_catalog.yaml) whose
evidence is the cited turn. For every question with evidence: recall@5/10 of the evidence
turns among the episodes found, and the context recall at 500 tokens (the share of evidence
turns cited by a fact of `sgam context --query`), each beside the plain-Python BM25 reference
of the same run (facts ranked over value + evidence, taken whole while they fit, in the same
lines). Latency per search on each store.

With --embedding-url (an OpenAI-compatible /v1/embeddings, e.g. bench/embedding_server.py),
the embedding arm is on: turns and facts get their vectors once loaded, and each question is
also asked of the same store with the arm off (`lexical_*` figures), in the same run.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from search_runs import (
    DEFAULT_POSTGRES,
    Bm25Reference,
    add_embedding_options,
    embedding_settings,
    mean,
    percentiles,
    recall,
    scratch_store,
    timed,
)

import pipeline
from pipeline.db.store import Store
from pipeline.embedding.vectors import fill_missing
from pipeline.read.context import estimate_tokens

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo10.json"
CATALOG = Path(__file__).with_name("search_catalog.yaml")
BUDGET = 500


def _episode_id(subject: str, dia_id: str) -> str:
    return f"{subject}-" + re.sub(r"[^0-9A-Za-z]+", "-", dia_id)


def load(store: Store, sample: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """Ingests the turns and writes the observations; returns turn texts and fact texts."""
    subject = f"c{sample['sample_id'].split('-')[-1]}"
    conversation = sample["conversation"]
    turns: dict[str, str] = {}
    episodes = []
    for key, session in conversation.items():
        if not key.startswith("session_") or key.endswith("date_time") or not session:
            continue
        start = datetime.strptime(conversation[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
        for number, turn in enumerate(session):
            text = f"{turn['speaker']}: {turn['text']}"
            episode_id = _episode_id(subject, turn["dia_id"])
            turns[episode_id] = text
            at = start.replace(tzinfo=UTC) + timedelta(minutes=number)
            episodes.append(
                {
                    "tenant_id": "locomo",
                    "subject": subject,
                    "session_id": key,
                    "episode_id": episode_id,
                    "occurred_at": at.isoformat(),
                    "text": text,
                }
            )
    pipeline.ingest(store, episodes)
    facts: dict[str, str] = {}
    commands = []
    for observations in sample["observation"].values():
        for said in observations.values():
            for text, dia in said:
                dias = dia if isinstance(dia, list) else [dia]
                source = _episode_id(subject, dias[0]) if dias else "none"
                evidence = turns.get(source, "")
                commands.append(
                    {
                        "tenant_id": "locomo",
                        "subject": subject,
                        "attribute": "observation",
                        "value": text,
                        "evidence": evidence,
                        "source_episode_id": source,
                        "valid_from": "2023-01-01T00:00:00Z",
                    }
                )
    for command, outcome in zip(commands, pipeline.put_many(store, commands), strict=True):
        if isinstance(outcome, pipeline.PutResult):
            facts[outcome.fact.fact_id] = f"{command['value']} {command['evidence']}"
    return turns, facts


def run(
    backend: str,
    path: Path,
    postgres: str,
    samples: int = 10,
    embedding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))[:samples]
    rows: dict[int, list[dict[str, float]]] = defaultdict(list)
    laps: list[float] = []
    with scratch_store(backend, postgres, CATALOG, **(embedding or {})) as store:
        lexical = Store(store.settings.model_copy(update={"embedding_model": None}))
        for sample in data:
            subject = f"c{sample['sample_id'].split('-')[-1]}"
            turns, facts = load(store, sample)
            if embedding is not None:
                left = fill_missing(store, tenant_ids=["locomo"])
                assert not left.failed, "the embedding endpoint failed"
            turn_reference = Bm25Reference(turns)
            fact_reference = Bm25Reference(facts)
            sources = {
                fact.fact_id: fact.source_episode_id
                for fact in pipeline.get(store, {"tenant_id": "locomo", "subject": subject})
            }
            for question in sample["qa"]:
                wanted = [_episode_id(subject, d) for d in question.get("evidence", []) if d]
                wanted = [w for w in wanted if w in turns]
                if not wanted:
                    continue
                text = question["question"]
                scope = {"tenant_id": "locomo", "subject": subject}
                asked = scope | {"query": text, "kinds": ["episodes"], "limit": 10}
                found = timed(lambda asked=asked: pipeline.search(store, asked), laps)
                ranked = [e.episode_id for e in found.episodes]
                plain = turn_reference.rank(text, 10)
                context = pipeline.assemble(store, scope | {"query": text, "budget_tokens": BUDGET})
                cited = [item.source_episode_id for item in context.items]
                reference_cited = _reference_context(fact_reference, store, subject, text, sources)
                row = {
                    "sgam@5": recall(ranked[:5], wanted),
                    "sgam@10": recall(ranked, wanted),
                    "bm25@5": recall(plain[:5], wanted),
                    "bm25@10": recall(plain, wanted),
                    "context": recall(cited, wanted),
                    "bm25_context": recall(reference_cited, wanted),
                }
                if embedding is not None:
                    alone = [e.episode_id for e in pipeline.search(lexical, asked).episodes]
                    plain_context = pipeline.assemble(
                        lexical, scope | {"query": text, "budget_tokens": BUDGET}
                    )
                    row["lexical@10"] = recall(alone, wanted)
                    row["lexical_context"] = recall(
                        [item.source_episode_id for item in plain_context.items], wanted
                    )
                rows[question["category"]].append(row)
        lexical.dispose()
    every = [row for group in rows.values() for row in group]
    keys: tuple[str, ...] = ("sgam@5", "sgam@10", "bm25@5", "bm25@10", "context", "bm25_context")
    if embedding is not None:
        keys += ("lexical@10", "lexical_context")
    return {
        "backend": backend,
        "questions": len(every),
        "per_category": {
            str(name): {key: mean([r[key] for r in group]) for key in ("sgam@10", "context")}
            for name, group in sorted(rows.items())
        },
        **{key: mean([r[key] for r in every]) for key in keys},
        **percentiles(laps),
    }


def _reference_context(
    reference: Bm25Reference, store: Store, subject: str, text: str, sources: dict[str, str]
) -> list[str]:
    """The reference's facts in BM25 order, taken whole while they fit the budget, each line
    as `sgam context` writes it (one attribute line, then a line per fact)."""
    facts = {
        fact.fact_id: fact
        for fact in pipeline.get(store, {"tenant_id": "locomo", "subject": subject})
    }
    used, cited = estimate_tokens("- observation (since, source):"), []
    for fact_id in reference.rank(text, len(facts)):
        fact = facts[fact_id]
        line = f"  - {fact.value} ({fact.valid_from.date()}, {fact.source_episode_id})"
        tokens = estimate_tokens(line) + 1
        if used + tokens <= BUDGET:
            used += tokens
            cited.append(sources[fact_id])
    return cited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--samples", type=int, default=10, help="the first N conversations")
    add_embedding_options(parser)
    options = parser.parse_args()
    embedding = embedding_settings(options)
    for backend in options.backends.split(","):
        figures = run(backend, options.locomo, options.postgres, options.samples, embedding)
        print(json.dumps(figures, indent=2), flush=True)


if __name__ == "__main__":
    main()
