"""The search read on BEAM chats 1-10: user messages as episodes, the probing questions that
cite source messages as queries.

    .venv/bin/python bench/search_beam.py [--beam ../shared/data/beam] [--postgres URL]
        [--embedding-url http://127.0.0.1:8299/v1 --embedding-model all-MiniLM-L6-v2]

Each chat is a tenant; its user messages are episodes (ingested inline, dated as
bench/extract_beam.py dates them). For each recall question (contradiction, event ordering,
information extraction, knowledge update, multi-session, temporal) recall@5/10 of the cited
user messages, by SGAM's search and by the plain-Python BM25 reference of the same run; for
knowledge-update questions, whether the updated message ranks above the original. Latency
per search on each store.

With --embedding-url (an OpenAI-compatible /v1/embeddings, e.g. bench/embedding_server.py),
the embedding arm is on: every message gets its vector as it is processed, and each question
is asked twice in the same run, fused (`sgam@k`, `update_first`, the latency) and lexical
only (`lexical@k`, `lexical_update_first`, `lexical_p50_ms`/`p99`).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from extract_beam import DEFAULT_BEAM, chat_file, messages
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

CATEGORIES = (
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "knowledge_update",
    "multi_session_reasoning",
    "temporal_reasoning",
)


def cited(question: dict[str, Any]) -> tuple[list[int], list[int], list[int]]:
    """All cited message ids, and for an update the original and updated ones."""
    sources = question.get("source_chat_ids") or []
    if isinstance(sources, dict):
        ids = [i for group in sources.values() for i in group]
        return ids, sources.get("original_info", []), sources.get("updated_info", [])
    return list(sources), [], []


def sessions(said: list[dict[str, Any]]) -> list[str]:
    """Each message's session: the first number of its `index` ("session,question"), which
    only a session's numbered questions carry; a message without one belongs to the session
    it is in, as a message without a `time_anchor` keeps the last date."""
    current, out = "0", []
    for message in said:
        if message.get("index"):
            current = str(message["index"]).split(",")[0]
        out.append(f"s{current}")
    return out


def load(store: Store, beam: Path, chat: int) -> dict[str, str]:
    said = messages(beam, chat)
    episodes = [
        {
            "tenant_id": f"beam-{chat}",
            "subject": "user",
            "episode_id": f"m{message['id']}",
            "session_id": session,
            "occurred_at": message["at"].isoformat(),
            "text": message["content"][:20_000],
        }
        for message, session in zip(said, sessions(said), strict=True)
    ]
    pipeline.ingest(store, episodes)
    return {e["episode_id"]: e["text"] for e in episodes}


def run(
    backend: str, beam: Path, postgres: str, embedding: dict[str, Any] | None = None
) -> dict[str, Any]:
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    laps: list[float] = []
    lexical_laps: list[float] = []
    extra = {} if embedding is None else embedding
    with scratch_store(backend, postgres, **extra) as store:
        lexical = Store(store.settings.model_copy(update={"embedding_model": None}))
        for chat in range(1, 11):
            documents = load(store, beam, chat)
            if embedding is not None:
                left = fill_missing(store, tenant_ids=[f"beam-{chat}"])
                assert not left.failed, "the embedding endpoint failed"
            reference = Bm25Reference(documents)
            probes = json.loads(
                (
                    chat_file(beam, chat).parent / "probing_questions" / "probing_questions.json"
                ).read_text(encoding="utf-8")
            )
            for category in CATEGORIES:
                for question in probes.get(category, []):
                    ids, original, updated = cited(question)
                    wanted = [f"m{i}" for i in ids if f"m{i}" in documents]
                    if not wanted:
                        continue
                    asked = {"tenant_id": f"beam-{chat}", "subject": "user", "limit": 10}
                    asked |= {"query": question["question"], "kinds": ["episodes"]}
                    found = timed(lambda asked=asked: pipeline.search(store, asked), laps)
                    ranked = [e.episode_id for e in found.episodes]
                    plain = reference.rank(question["question"], 10)
                    row = {
                        "sgam@5": recall(ranked[:5], wanted),
                        "sgam@10": recall(ranked, wanted),
                        "bm25@5": recall(plain[:5], wanted),
                        "bm25@10": recall(plain, wanted),
                    }
                    if original and updated:
                        row["sgam_update_first"] = _above(ranked, updated, original)
                        row["bm25_update_first"] = _above(plain, updated, original)
                    if embedding is not None:
                        alone = timed(lambda a=asked: pipeline.search(lexical, a), lexical_laps)
                        words = [e.episode_id for e in alone.episodes]
                        row["lexical@5"] = recall(words[:5], wanted)
                        row["lexical@10"] = recall(words, wanted)
                        if original and updated:
                            row["lexical_update_first"] = _above(words, updated, original)
                    rows[category].append(row)
        lexical.dispose()
    every = [row for group in rows.values() for row in group]
    updates = rows["knowledge_update"]
    compared = {}
    if embedding is not None:
        lexical_times = percentiles(lexical_laps)
        compared = {
            "lexical_recall@5": mean([r["lexical@5"] for r in every]),
            "lexical_recall@10": mean([r["lexical@10"] for r in every]),
            "lexical_update_first": mean(
                [r["lexical_update_first"] for r in updates if "lexical_update_first" in r]
            ),
            "lexical_per_category": {
                name: mean([r["lexical@10"] for r in group]) for name, group in rows.items()
            },
            **{f"lexical_{name}": value for name, value in lexical_times.items()},
        }
    return {
        "backend": backend,
        "questions": len(every),
        "per_category": {
            name: {key: mean([r[key] for r in group]) for key in ("sgam@10", "bm25@10")}
            for name, group in rows.items()
        },
        "recall@5": mean([r["sgam@5"] for r in every]),
        "recall@10": mean([r["sgam@10"] for r in every]),
        "bm25_recall@5": mean([r["bm25@5"] for r in every]),
        "bm25_recall@10": mean([r["bm25@10"] for r in every]),
        "update_first": mean([r["sgam_update_first"] for r in updates if "sgam_update_first" in r]),
        "bm25_update_first": mean(
            [r["bm25_update_first"] for r in updates if "bm25_update_first" in r]
        ),
        **percentiles(laps),
        **compared,
    }


def _above(ranked: list[str], updated: list[int], original: list[int]) -> float:
    """1 when the first updated message ranks above every original one (missing: last)."""

    def position(ids: list[int]) -> int:
        places = [ranked.index(f"m{i}") for i in ids if f"m{i}" in ranked]
        return min(places) if places else len(ranked) + 1

    new, old = position(updated), position(original)
    return 1.0 if new < old else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beam", type=Path, default=DEFAULT_BEAM)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--backends", default="sqlite,postgresql")
    add_embedding_options(parser)
    options = parser.parse_args()
    embedding = embedding_settings(options)
    for backend in options.backends.split(","):
        figures = run(backend, options.beam, options.postgres, embedding)
        print(json.dumps(figures, indent=2), flush=True)


if __name__ == "__main__":
    main()
