"""Search latency at about 600 and about 6,000 episodes in one scope, on each store.

    .venv/bin/python bench/search_latency.py [--questions 200] [--postgres URL]

LoCoMo's turns are the episodes: the first 600 of them in one scope (its conversations hold
369 to 689 turns each) and all ten conversations' (5,882) in another; LoCoMo's questions are
the queries, facts and episodes both searched. p50/p99 of `pipeline.search` as a caller sees
it (Python included). The first ten questions are asked once before, apart (`first_ms`): they
build the statements and plan them, as a process's first searches do.

With --embedding-url the embedding arm is on (the scope's vectors filled after intake) and
each search is fused; the query's vector is part of its time, so point it at a cache of the
questions' vectors to time the read itself. `--scopes 600` leaves out the 5,882 (a CPU model
takes long to embed them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from search_locomo import CATALOG, DEFAULT_LOCOMO
from search_runs import (
    DEFAULT_POSTGRES,
    add_embedding_options,
    embedding_settings,
    percentiles,
    scratch_store,
    timed,
)

import pipeline
from pipeline.db.store import Store
from pipeline.embedding.vectors import fill_missing

# The first searches of a scope build the statements and plan them (psycopg prepares them at
# the fifth use): kept out of p50/p99, as bench/api.py's warm-up calls are, and printed apart.
WARMUP = 10


def _turns(sample: dict[str, Any]) -> list[str]:
    conversation = sample["conversation"]
    return [
        f"{turn['speaker']}: {turn['text']}"
        for key, session in conversation.items()
        if key.startswith("session_") and not key.endswith("date_time") and session
        for turn in session
    ]


def _search(store: Store, subject: str, question: str, laps: list[float]) -> None:
    query = {"tenant_id": "t", "subject": subject, "query": question}
    timed(lambda: pipeline.search(store, query), laps)


def run(
    backend: str,
    path: Path,
    postgres: str,
    questions: int,
    scopes: list[str],
    embedding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    asked = [q["question"] for sample in data for q in sample["qa"]][:questions]
    every = [turn for sample in data for turn in _turns(sample)]
    by_size = {"600": ("some", every[:600]), "5882": ("all", every)}
    figures: dict[str, Any] = {"backend": backend}
    with scratch_store(backend, postgres, CATALOG, **(embedding or {})) as store:
        for subject, turns in [by_size[scope] for scope in scopes]:
            episodes = [
                {
                    "tenant_id": "t",
                    "subject": subject,
                    "session_id": "s",
                    "episode_id": f"{subject}-{number}",
                    "occurred_at": "2026-01-01T00:00:00Z",
                    "text": text,
                }
                for number, text in enumerate(turns)
            ]
            for start in range(0, len(episodes), 1000):
                pipeline.ingest(store, episodes[start : start + 1000])
            if embedding is not None:
                assert not fill_missing(store, tenant_ids=["t"]).failed, "the endpoint failed"
            store.analyze()
            first: list[float] = []  # the warm-up, apart
            laps: list[float] = []
            for question in asked[:WARMUP]:
                _search(store, subject, question, first)
            for question in asked:
                _search(store, subject, question, laps)
            figures[f"{len(turns)}_episodes"] = percentiles(laps)
            figures[f"{len(turns)}_first_ms"] = [round(lap, 2) for lap in first]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES.replace("bench", "latency_bench"))
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--scopes", default="600,5882", help="which scopes: 600, 5882")
    add_embedding_options(parser)
    options = parser.parse_args()
    scopes = options.scopes.split(",")
    if not set(scopes) <= {"600", "5882"}:
        parser.error("--scopes takes 600 and 5882")
    embedding = embedding_settings(options)
    for backend in options.backends.split(","):
        figures = run(
            backend, options.locomo, options.postgres, options.questions, scopes, embedding
        )
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
