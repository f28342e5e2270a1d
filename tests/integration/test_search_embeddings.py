"""The search read's embedding arm on both stores, against the stub OpenAI-protocol server's
toy `/v1/embeddings` (bench/stub_llm.py: folded, hashed bags of words, so "automobile" is near
"car"): vectors written after the ledger's writes, a paraphrase BM25 misses found by the fused
ranking, a failing endpoint that leaves writes and search working, purge erasing the vectors,
and the spend in `sgam usage`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

import pipeline
from pipeline.cli import run
from pipeline.db.models import EpisodeVectorRow, FactRow, FactVectorRow
from pipeline.db.store import Store, open_store
from pipeline.embedding.client import close_clients
from pipeline.embedding.vectors import decode, fill_missing
from pipeline.errors import InvalidInput
from pipeline.settings import load_settings
from schemas.results import SearchResult, VectorArm
from tests.factories import isolated_settings, put_fact
from tests.integration.pipeline_helpers import episode
from tests.integration.stub_llm import EMBEDDING_DIMENSIONS, StubServer

READ = {"tenant_id": "acme", "subject": "mira"}
MODEL = "toy-embed"


@pytest.fixture(scope="module")
def stub() -> Iterator[Any]:
    with StubServer() as server:
        yield server
    close_clients()


@pytest.fixture
def endpoint(stub: Any) -> Any:
    """The stub's embeddings, answering and with their counters at zero."""
    stub.app.embeddings_status = None
    stub.app.embedding_requests = stub.app.embedded_texts = 0
    return stub.app


@pytest.fixture
def embedding(database_url: str, stub: Any, endpoint: Any) -> Iterator[Store]:
    """A store with the embedding arm on."""
    settings = isolated_settings(
        database_url=database_url, embedding_model=MODEL, embedding_base_url=stub.base_url
    )
    opened = open_store(settings)
    yield opened
    opened.dispose()


@pytest.fixture
def lexical(database_url: str, embedding: Store) -> Iterator[Store]:
    """The same database with the arm off (the default)."""
    opened = open_store(isolated_settings(database_url=database_url))
    yield opened
    opened.dispose()


def _search(store: Store, query: str, **options: object) -> SearchResult:
    return pipeline.search(store, READ | {"query": query} | options)


def _count(store: Store, table: Any) -> int:
    with store.reading() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def _episodes(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode("My car broke down on the highway again", "2026-03-01T10:00:00Z", "s1"),
            # Three sessions: no episode is another's neighbour (search_turns).
            episode("We watched a film about whales", "2026-03-02T10:00:00Z", "s2"),
            episode("The garden needs watering twice a week", "2026-03-03T10:00:00Z", "s3"),
        ],
    )


def test_episodes_get_vectors_when_processed_and_facts_by_the_backfill(
    embedding: Store, endpoint: Any
) -> None:
    _episodes(embedding)  # inline mode: processed here, then embedded

    assert _count(embedding, EpisodeVectorRow) == 3
    with embedding.reading() as connection:
        rows = connection.execute(select(EpisodeVectorRow.model, EpisodeVectorRow.vector)).all()
    models = {model for model, _ in rows}
    vector = rows[0].vector
    assert models == {MODEL}
    stored = decode(vector)
    assert len(stored) == EMBEDDING_DIMENSIONS
    assert abs(sum(x * x for x in stored) - 1.0) < 1e-5  # unit length: a cosine is a dot

    # A put writes no vector itself (nothing waits on the endpoint); the backfill does.
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I fix cars")
    assert _count(embedding, FactVectorRow) == 0
    filled = fill_missing(embedding)
    assert (filled.facts, filled.episodes, filled.failed) == (1, 0, 0)
    assert fill_missing(embedding).facts == 0  # nothing left to fill
    assert endpoint.embedded_texts == 4


def test_the_fused_ranking_finds_a_paraphrase_bm25_misses(embedding: Store, lexical: Store) -> None:
    _episodes(embedding)
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    put_fact(embedding, **READ, attribute="home_city", value="Utrecht", evidence="I live here")
    fill_missing(embedding)

    assert not _search(lexical, "automobile").found  # no shared word
    assert _search(lexical, "automobile").vectors is None  # the arm is off: field absent
    assert "vectors" not in _search(lexical, "automobile").model_dump(mode="json")

    found = _search(embedding, "automobile")
    assert found.vectors is VectorArm.FUSED
    assert found.episodes[0].snippet == "My car broke down on the highway again"
    assert found.facts[0].value == "Initech"
    # The whales by both arms, the car by the cosine alone: both answered, in that order.
    both = _search(embedding, "automobile whales", kinds=["episodes"])
    assert [item.snippet.split()[-1] for item in both.episodes] == ["whales", "again"]
    assert both.episodes[0].score > both.episodes[1].score
    assert [item.snippet for item in _search(lexical, "automobile whales").episodes] == [
        "We watched a film about whales"
    ]


def test_hidden_facts_never_surface_through_the_vector_arm(embedding: Store) -> None:
    """Decoys closer to the query than what holds: an earlier version, a quarantined fact,
    another subject's and another tenant's."""
    put_fact(embedding, **READ, attribute="employer", value="Car Corp", valid_from="2025-01-01")
    put_fact(
        embedding,
        **READ,
        attribute="employer",
        value="Initech",
        evidence="I sell cars there",
        valid_from="2026-01-01",
    )
    put_fact(embedding, **READ, attribute="home_city", value="car", trust="untrusted")
    other = {"tenant_id": "acme", "subject": "jo"}
    put_fact(embedding, **other, attribute="employer", value="car")
    put_fact(embedding, tenant_id="globex", subject="mira", attribute="employer", value="car")
    versions = _count(embedding, FactRow)
    assert fill_missing(embedding).facts == versions == _count(embedding, FactVectorRow)

    found = _search(embedding, "automobile", kinds=["facts"])
    shown = pipeline.get(embedding, READ)
    assert found.vectors is VectorArm.FUSED
    assert {fact.fact_id for fact in found.facts} == {fact.fact_id for fact in shown}
    assert [fact.value for fact in found.facts] == ["Initech"]  # the arm ranks all it may see
    at = _search(embedding, "automobile", kinds=["facts"], at="2025-06-01T00:00:00Z")
    assert [fact.value for fact in at.facts] == ["Car Corp"]  # an --at inside its interval
    reviewer = _search(embedding, "automobile", kinds=["facts"], include_quarantined=True)
    assert {fact.value for fact in reviewer.facts} == {"Initech", "car"}

    pipeline.forget(embedding, READ)
    assert not _search(embedding, "automobile").found


def test_a_failing_endpoint_keeps_writes_and_search_working(
    embedding: Store, endpoint: Any
) -> None:
    endpoint.embeddings_status = 500
    _episodes(embedding)  # processed and committed although no vector could be made
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    statuses = {item.status for item in pipeline.list_episodes(embedding, {"tenant_id": "acme"})}
    assert statuses == {"done"}
    assert _count(embedding, EpisodeVectorRow) == 0
    assert endpoint.embedding_requests == 3  # one call, retried up to the 3 attempts

    found = _search(embedding, "car")
    assert found.vectors is VectorArm.FAILED  # said so, and answered lexically
    assert found.episodes[0].snippet.startswith("My car")
    assert [fact.value for fact in found.facts] == ["Initech"]
    assert fill_missing(embedding).failed == 4  # left for the next pass

    endpoint.embeddings_status = None
    filled = fill_missing(embedding)
    assert (filled.facts, filled.episodes, filled.failed) == (1, 3, 0)
    assert _search(embedding, "automobile").vectors is VectorArm.FUSED


def test_the_spend_appears_in_usage(
    embedding: Store, cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    _episodes(embedding)
    _search(embedding, "automobile")
    report = pipeline.llm_usage(embedding, {"tenant_id": "acme"})

    [row] = report.embeddings
    assert (row.model, row.calls, row.query_calls, row.failed) == (MODEL, 2, 1, 0)
    assert row.texts == 4
    # The stub counts a token a word: 8 + 6 + 7 written, 1 asked.
    assert row.tokens == 22
    assert row.attempts == 2

    assert run(["usage", "--tenant", "acme", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["embeddings"][0]["calls"] == 2


def test_sgam_embed_fills_what_is_missing(
    embedding: Store,
    stub: Any,
    cli_env: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    put_fact(embedding, **READ, attribute="employer", value="Initech")

    assert run(["embed", "--json"]) == 2  # the arm is off in this environment
    assert "SGAM_EMBEDDING_MODEL" in capsys.readouterr().err

    monkeypatch.setenv("SGAM_EMBEDDING_MODEL", MODEL)
    monkeypatch.setenv("SGAM_LLM_BASE_URL", stub.base_url)  # the model lane's, by default
    assert run(["embed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"facts": 1, "episodes": 0, "failed": 0}
    assert run(["embed", "--json"]) == 1  # nothing left

    stub.app.embeddings_status = 503
    put_fact(embedding, **READ, attribute="home_city", value="Utrecht")
    assert run(["embed", "--json"]) == 5
    assert "1 texts left without a vector" in capsys.readouterr().err


def test_the_settings_default_to_the_model_lanes_endpoint() -> None:
    lane = isolated_settings(
        embedding_model="m", llm_base_url="http://127.0.0.1:1/v1", llm_api_key="k"
    )
    assert (lane.embedding_configured, lane.embedding_url, lane.embedding_key) == (
        True,
        "http://127.0.0.1:1/v1",
        "k",
    )
    own = isolated_settings(
        embedding_model="m",
        llm_base_url="http://127.0.0.1:1/v1",
        embedding_base_url="http://127.0.0.1:2/v1/",
        embedding_api_key="e",
    )
    assert (own.embedding_url, own.embedding_key) == ("http://127.0.0.1:2/v1", "e")
    assert not isolated_settings(llm_base_url="http://127.0.0.1:1/v1").embedding_configured
    assert not isolated_settings(embedding_model="m").embedding_configured  # no endpoint


def test_a_bad_embedding_url_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGAM_EMBEDDING_BASE_URL", "127.0.0.1:8080")
    with pytest.raises(InvalidInput, match="SGAM_EMBEDDING_BASE_URL"):
        load_settings()


def _vectors(store: Store) -> list[bytes]:
    with store.reading() as connection:
        return [
            *connection.execute(select(FactVectorRow.vector)).scalars(),
            *connection.execute(select(EpisodeVectorRow.vector)).scalars(),
        ]


def test_purge_erases_the_subjects_vectors(embedding: Store, database_url: str) -> None:
    _episodes(embedding)
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    put_fact(embedding, tenant_id="acme", subject="jo", attribute="employer", value="Globex")
    fill_missing(embedding)
    kept = {"tenant_id": "acme", "subject": "jo"}
    with embedding.reading() as connection:
        theirs = connection.execute(
            select(FactVectorRow.vector).where(FactVectorRow.subject == "jo")
        ).scalar_one()
    purged = [vector for vector in _vectors(embedding) if vector != theirs]
    assert len(purged) == 4

    result = pipeline.forget(embedding, READ | {"purge": True})

    assert _vectors(embedding) == [theirs]  # jo's stays
    assert fill_missing(embedding).facts == 0  # nothing of the purged rows comes back
    assert not _search(embedding, "automobile").found
    assert pipeline.search(embedding, kept | {"query": "Globex"}).found
    if database_url.startswith("sqlite"):
        assert result.files_scrubbed is True
        path = Path(database_url.removeprefix("sqlite:///"))
        files = [path, path.with_name(path.name + "-wal")]
        contents = b"".join(file.read_bytes() for file in files if file.exists())
        assert theirs in contents  # the check can see a vector in the files
        assert [vector for vector in purged if vector in contents] == []


@pytest.mark.postgres
def test_purge_vacuum_leaves_no_vector_in_postgres_pages(
    postgres_url: str, stub: Any, endpoint: Any
) -> None:
    from tests.databases import empty_database

    empty_database(postgres_url)
    store = open_store(
        isolated_settings(
            database_url=postgres_url, embedding_model=MODEL, embedding_base_url=stub.base_url
        )
    )
    try:
        _episodes(store)
        put_fact(store, **READ, attribute="employer", value="Initech", evidence="I repair cars")
        fill_missing(store)
        vectors = _vectors(store)
        assert len(_pages_holding(store, vectors)) == len(vectors) == 4

        pipeline.forget(store, READ | {"purge": True})
        store.vacuum(wait_s=120)

        assert _pages_holding(store, vectors) == []
    finally:
        store.dispose()


def _pages_holding(store: Store, vectors: list[bytes]) -> list[bytes]:
    """The vectors found in any page of the vector tables, read raw."""
    found = []
    with store.engine.begin() as connection:
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pageinspect"))
        pages = b""
        for relation in ("fact_vectors", "episode_vectors"):
            count = connection.execute(
                text("SELECT pg_relation_size(CAST(:r AS regclass)) / 8192"), {"r": relation}
            ).scalar_one()
            for page in range(count):
                pages += bytes(
                    connection.execute(
                        text("SELECT get_raw_page(:r, :p)"), {"r": relation, "p": page}
                    ).scalar_one()
                )
        found = [vector for vector in vectors if vector in pages]
    return found
