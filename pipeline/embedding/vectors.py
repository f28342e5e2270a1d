"""Vectors of facts and episodes, filled after the ledger's writes and never inside them.

What is embedded is what the text index holds: a fact version's attribute name (underscores
as spaces), the strings and numbers of its value and its evidence; an episode's text. A row
without a vector is still found lexically. `fill_written` gives vectors to exactly the rows
committed units of work wrote (whatever the writer: by fact and episode id, read in one
statement per tenant and kind, run in the background by `background`); `fill_missing` to every
row that lacks one (of the current model), in `sgam embed` and in the nightly consolidation:
the pass that catches whatever the first missed. Either cuts what it read once, into requests
of SGAM_EMBEDDING_BATCH texts of one tenant (`requests`); when the endpoint fails after its
retries, it stops, logs it and leaves the rest for the next pass: nothing the ledger committed
waits on or depends on it.

A forgotten row (a purged one is forgotten too) gets no vector: it never surfaces again. A
vector is written only while its row is not forgotten, read under a share lock (PostgreSQL):
a forget or purge that committed first leaves nothing to write, and one that comes after
deletes the vector with the rest (`ledger.erase`).
"""

from __future__ import annotations

import logging
from array import array
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, select

from pipeline.db.keyed import one_of
from pipeline.db.models import (
    EPISODE_VECTORS,
    FACT_VECTORS,
    EpisodeRow,
    EpisodeVectorRow,
    FactRow,
    FactVectorRow,
)
from pipeline.db.store import Store
from pipeline.db.unit import Unit, Written
from pipeline.embedding.client import EmbeddingFailed, client_for
from pipeline.embedding.spend import WRITE, record_spend

log = logging.getLogger("sgam.embedding")

PASS_LIMIT = 5_000  # rows of each kind one pass looks at; the next pass takes the rest


def encode(vector: Sequence[float]) -> bytes:
    packed = array("f", vector)
    if packed.itemsize != 4:  # pragma: no cover - every platform SGAM runs on
        raise RuntimeError("float32 arrays are needed")
    return packed.tobytes()


def decode(stored: bytes) -> array[float]:
    vector = array("f")
    vector.frombytes(stored)
    return vector


def fact_text(attribute: str, value: Any, evidence: str | None) -> str:
    words = [attribute.replace("_", " "), *_atoms(value)]
    if evidence:
        words.append(evidence)
    return " ".join(words)


def _atoms(value: Any) -> Iterable[str]:
    """The strings and numbers of a JSON value, at any depth (booleans and nulls are not)."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str | int | float):
        yield str(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _atoms(item)
    elif isinstance(value, list):
        for item in value:
            yield from _atoms(item)


@dataclass(frozen=True)
class Filled:
    facts: int = 0
    episodes: int = 0
    failed: int = 0  # texts left without a vector because the endpoint failed

    def __add__(self, other: Filled) -> Filled:
        return Filled(
            self.facts + other.facts, self.episodes + other.episodes, self.failed + other.failed
        )


@dataclass(frozen=True)
class _Pending:
    kind: str  # "fact" or "episode"
    tenant_id: str
    subject: str
    key: Any  # a fact's row_id, an episode's episode_id
    text: str


def fill_missing(
    store: Store, *, tenant_ids: Collection[str] | None = None, limit: int = PASS_LIMIT
) -> Filled:
    """Vectors for up to `limit` facts and `limit` episodes that lack one (of these tenants,
    or all); a no-op when the embedding arm is off."""
    if not store.settings.embedding_configured or (tenant_ids is not None and not tenant_ids):
        return Filled()
    facts: list[ColumnElement[bool]] = []
    episodes: list[ColumnElement[bool]] = []
    if tenant_ids is not None:
        facts.append(FactRow.tenant_id.in_(list(tenant_ids)))
        episodes.append(EpisodeRow.tenant_id.in_(list(tenant_ids)))
    return _fill(store, _pending(store, facts, episodes, limit))


def fill_written(
    store: Store, written: Written, *, each: Callable[[], None] | None = None
) -> Filled:
    """Vectors for the rows of `written` (what units of work wrote) that lack one: every
    version of its facts, its episodes; a no-op when the embedding arm is off. `each` is
    called after every request, answered or failed (the background's sign of progress)."""
    if not store.settings.embedding_configured or not written:
        return Filled()
    dialect = store.backend.name
    pending: list[_Pending] = []
    for tenant_id in sorted(written.facts.keys() | written.episodes.keys()):
        facts = written.facts.get(tenant_id)
        episodes = written.episodes.get(tenant_id)
        pending += _pending(
            store,
            [FactRow.tenant_id == tenant_id, one_of(dialect, FactRow.fact_id, facts)]
            if facts
            else None,
            [EpisodeRow.tenant_id == tenant_id, one_of(dialect, EpisodeRow.episode_id, episodes)]
            if episodes
            else None,
            limit=None,
        )
    return _fill(store, pending, each)


def requests(pending: Sequence[_Pending], size: int) -> list[list[_Pending]]:
    """`pending` cut once, into requests of up to `size` texts of one tenant each, in order."""
    by_tenant: dict[str, list[_Pending]] = defaultdict(list)
    for item in pending:
        by_tenant[item.tenant_id].append(item)
    return [
        items[start : start + size]
        for _, items in sorted(by_tenant.items())
        for start in range(0, len(items), size)
    ]


def _fill(
    store: Store, pending: Sequence[_Pending], each: Callable[[], None] | None = None
) -> Filled:
    """Embed and store `pending`, a request per SGAM_EMBEDDING_BATCH texts of one tenant;
    the first failed request stops it (what is left waits for the next pass)."""
    filled = Filled()
    for chunk in requests(pending, store.settings.embedding_batch):
        try:
            filled += _embed_chunk(store, chunk[0].tenant_id, chunk)
        except EmbeddingFailed as failure:
            log.warning(
                "embedding endpoint failed; vectors left for the next pass",
                extra={
                    "tenant": chunk[0].tenant_id,
                    "attempts": failure.attempts,
                    "error": str(failure),
                },
            )
            left = len(pending) - filled.facts - filled.episodes
            return Filled(filled.facts, filled.episodes, left)
        finally:
            if each is not None:
                each()
    return filled


def fill_quietly(
    store: Store, tenant_ids: Collection[str] | None, limit: int = PASS_LIMIT
) -> Filled:
    """`fill_missing` after work the ledger has committed (a consolidation): never raises,
    what fails here is filled by a later pass."""
    if not store.settings.embedding_configured:
        return Filled()
    try:
        return fill_missing(store, tenant_ids=tenant_ids, limit=limit)
    except Exception:  # the ledger's work is done; the vectors can wait for the next pass
        log.warning("embedding pass failed", exc_info=True)
        return Filled()


def _pending(
    store: Store,
    facts_where: Sequence[ColumnElement[bool]] | None,
    episodes_where: Sequence[ColumnElement[bool]] | None,
    limit: int | None,
) -> list[_Pending]:
    """The rows without a vector of the current model, not forgotten, that these conditions
    choose (None: no row of that kind), newest first, up to `limit` of each kind."""
    model = store.settings.embedding_model
    facts = (
        select(FactRow.row_id, FactRow.tenant_id, FactRow.subject, FactRow.attribute)
        .add_columns(FactRow.value, FactRow.evidence)
        .outerjoin(
            FactVectorRow,
            and_(FactVectorRow.row_id == FactRow.row_id, FactVectorRow.model == model),
        )
        .where(FactVectorRow.row_id.is_(None), FactRow.forgotten_at.is_(None))
        .where(*facts_where or ())
        .order_by(FactRow.row_id.desc())  # newest first: what a batch just wrote
        .limit(limit)
    )
    episodes = (
        select(EpisodeRow.tenant_id, EpisodeRow.episode_id, EpisodeRow.subject, EpisodeRow.text)
        .outerjoin(
            EpisodeVectorRow,
            and_(
                EpisodeVectorRow.tenant_id == EpisodeRow.tenant_id,
                EpisodeVectorRow.episode_id == EpisodeRow.episode_id,
                EpisodeVectorRow.model == model,
            ),
        )
        .where(
            EpisodeVectorRow.episode_id.is_(None),
            EpisodeRow.forgotten_at.is_(None),
            EpisodeRow.text.is_not(None),
        )
        .where(*episodes_where or ())
        .order_by(EpisodeRow.received_at.desc(), EpisodeRow.episode_id)
        .limit(limit)
    )
    with store.reading() as connection:
        found = [
            _Pending(
                "fact",
                r.tenant_id,
                r.subject,
                r.row_id,
                fact_text(r.attribute, r.value, r.evidence),
            )
            for r in (connection.execute(facts) if facts_where is not None else ())
        ]
        found += [
            _Pending("episode", r.tenant_id, r.subject, r.episode_id, r.text)
            for r in (connection.execute(episodes) if episodes_where is not None else ())
        ]
    return found


def _embed_chunk(store: Store, tenant_id: str, chunk: Sequence[_Pending]) -> Filled:
    client = client_for(store.settings)
    texts = [item.text for item in chunk]
    try:
        embedded = client.embed(texts)
    except EmbeddingFailed as failure:
        record_spend(
            store,
            tenant_id,
            use=WRITE,
            texts=len(texts),
            tokens=0,
            attempts=failure.attempts,
            failed=True,
        )
        raise
    record_spend(
        store,
        tenant_id,
        use=WRITE,
        texts=len(texts),
        tokens=embedded.tokens,
        attempts=embedded.attempts,
        failed=False,
    )
    vectors = [encode(vector) for vector in embedded.vectors]
    return store.run(lambda unit: _write(unit, tenant_id, chunk, vectors, client.model))


def _write(
    unit: Unit, tenant_id: str, chunk: Sequence[_Pending], vectors: Sequence[bytes], model: str
) -> Filled:
    """The vectors of the rows still not forgotten (locked against a purge until this
    commits) that have none yet."""
    session, now = unit.session, unit.clock()
    paired = list(zip(chunk, vectors, strict=True))
    facts = {item.key: (item, vector) for item, vector in paired if item.kind == "fact"}
    episodes = {item.key: (item, vector) for item, vector in paired if item.kind == "episode"}
    written = Filled()
    if facts:
        held = session.scalars(
            select(FactRow.row_id)
            .where(FactRow.row_id.in_(list(facts)), FactRow.forgotten_at.is_(None))
            .with_for_update(read=True)
        ).all()
        session.execute(  # another model's vector is replaced
            delete(FactVectorRow).where(
                FactVectorRow.row_id.in_(list(held)), FactVectorRow.model != model
            )
        )
        have = set(
            session.scalars(
                select(FactVectorRow.row_id).where(FactVectorRow.row_id.in_(list(held)))
            )
        )
        rows = [
            {
                "row_id": key,
                "tenant_id": tenant_id,
                "subject": facts[key][0].subject,
                "model": model,
                "vector": facts[key][1],
                "embedded_at": now,
            }
            for key in held
            if key not in have
        ]
        if rows:  # a concurrent pass may have written one since: it stays
            session.execute(unit.backend.insert_new(FACT_VECTORS), rows)
        written += Filled(facts=len(rows))
    if episodes:
        kept = session.scalars(
            select(EpisodeRow.episode_id)
            .where(
                EpisodeRow.tenant_id == tenant_id,
                EpisodeRow.episode_id.in_(list(episodes)),
                EpisodeRow.forgotten_at.is_(None),
                EpisodeRow.text.is_not(None),
            )
            .with_for_update(read=True)
        ).all()
        of_held = (
            EpisodeVectorRow.tenant_id == tenant_id,
            EpisodeVectorRow.episode_id.in_(list(kept)),
        )
        session.execute(delete(EpisodeVectorRow).where(*of_held, EpisodeVectorRow.model != model))
        stored = set(session.scalars(select(EpisodeVectorRow.episode_id).where(*of_held)))
        rows = [
            {
                "tenant_id": tenant_id,
                "episode_id": key,
                "subject": episodes[key][0].subject,
                "model": model,
                "vector": episodes[key][1],
                "embedded_at": now,
            }
            for key in kept
            if key not in stored
        ]
        if rows:
            session.execute(unit.backend.insert_new(EPISODE_VECTORS), rows)
        written += Filled(episodes=len(rows))
    return written
