"""What the search benchmarks share: a scratch store on each backend, the plain-Python BM25
reference computed in the same run, recall and latency figures.

The reference is BM25 (k1 1.2, b 0.75) over each scope's documents, words lowercased, the
same stop words dropped, no stemming: what a search without SGAM's index would rank.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import scratch_databases

from pipeline.db.store import Store
from pipeline.read.search_terms import STOP_WORDS, WORD
from pipeline.settings import Settings

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_search_bench"


@contextmanager
def scratch_store(
    backend: str, postgres_url: str, catalog: Path | None = None, **extra: Any
) -> Iterator[Store]:
    """An empty migrated store on `backend` (with `extra` settings), dropped afterwards."""
    with tempfile.TemporaryDirectory(prefix="sgam-search-bench-") as folder:
        if backend == "postgresql":
            scratch_databases.recreate(postgres_url)
            url = postgres_url
        else:
            url = f"sqlite:///{Path(folder) / 'search_bench.sqlite3'}"
        fields: dict[str, Any] = {"database_url": url} | extra
        if catalog is not None:
            fields["catalog_path"] = catalog
        settings = Settings(_env_file=None, **fields)  # type: ignore[call-arg]
        store = Store(settings)
        store.upgrade()
        try:
            yield store
        finally:
            store.dispose()
            if backend == "postgresql":
                scratch_databases.drop(postgres_url)


def words(text: str) -> list[str]:
    return [word for word in WORD.findall(text.casefold()) if word not in STOP_WORDS]


class Bm25Reference:
    """Plain BM25 over one scope's documents (id -> text)."""

    def __init__(self, documents: dict[str, str]) -> None:
        self.terms = {doc: Counter(words(text)) for doc, text in documents.items()}
        self.lengths = {doc: sum(counts.values()) for doc, counts in self.terms.items()}
        self.mean = statistics.fmean(self.lengths.values()) if self.lengths else 1.0
        self.frequency: Counter[str] = Counter()
        for counts in self.terms.values():
            self.frequency.update(counts.keys())

    def rank(self, query: str, limit: int) -> list[str]:
        asked = set(words(query))
        n = len(self.terms)
        scores: dict[str, float] = {}
        for doc, counts in self.terms.items():
            score = 0.0
            for term in asked & counts.keys():
                df = self.frequency[term]
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = counts[term]
                norm = 1.2 * (1 - 0.75 + 0.75 * self.lengths[doc] / self.mean)
                score += idf * tf * 2.2 / (tf + norm)
            if score > 0:
                scores[doc] = score
        return sorted(scores, key=lambda doc: -scores[doc])[:limit]


def recall(found: Sequence[str], wanted: Sequence[str]) -> float:
    return len(set(found) & set(wanted)) / len(set(wanted))


def timed(call: Callable[[], Any], laps: list[float]) -> Any:
    start = time.perf_counter()
    result = call()
    laps.append((time.perf_counter() - start) * 1000)
    return result


def percentiles(laps: Sequence[float]) -> dict[str, float]:
    ordered = sorted(laps)
    return {
        "p50_ms": round(ordered[len(ordered) // 2], 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, math.ceil(len(ordered) * 0.99) - 1)], 2),
    }


def mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 3) if values else float("nan")


def add_embedding_options(parser: argparse.ArgumentParser) -> None:
    """The embedding arm's options of a search benchmark (off unless --embedding-url)."""
    parser.add_argument("--embedding-url", help="an OpenAI-compatible /v1 (default: arm off)")
    parser.add_argument("--embedding-model", default="all-MiniLM-L6-v2")
    parser.add_argument(
        "--embedding-timeout", type=float, default=300.0, help="seconds per request (a CPU model)"
    )
    parser.add_argument("--embedding-batch", type=int, default=16, help="texts per request")


def embedding_settings(options: argparse.Namespace) -> dict[str, Any] | None:
    """The store settings that turn the arm on, or None without --embedding-url."""
    if not options.embedding_url:
        return None
    return {
        "embedding_base_url": options.embedding_url,
        "embedding_model": options.embedding_model,
        "embedding_timeout_s": options.embedding_timeout,
        "embedding_batch": options.embedding_batch,
    }
