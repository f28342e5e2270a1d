"""The search read's optional embedding arm: one vector per fact version and per episode, and
what computing them cost.

A vector is the endpoint's float32 array as little-endian bytes (no pgvector: cosine is
computed over the filtered scope in Python). Each row names its tenant and subject, so a purge
deletes them with the rest of the subject's content (`ledger.erase`); a fact's vector is keyed
by the fact version's `row_id`, an episode's by its key. `model` says which model made it: a
vector of another model is not compared with the query's.

`embedding_spend` is one row per call to the endpoint (writes and queries alike): what
`sgam usage` reports beside the model lane's extractions.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Boolean, Index, Integer, LargeBinary, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from pipeline.db.base import ID, Base, UtcDateTime

VECTOR_TABLES = ("fact_vectors", "episode_vectors")


class FactVectorRow(Base):
    __tablename__ = "fact_vectors"

    row_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=False
    )
    tenant_id: Mapped[str] = mapped_column(ID)
    subject: Mapped[str] = mapped_column(ID)
    model: Mapped[str] = mapped_column(ID)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    embedded_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (Index(None, "tenant_id", "subject"),)


class EpisodeVectorRow(Base):
    __tablename__ = "episode_vectors"

    tenant_id: Mapped[str] = mapped_column(ID, primary_key=True)
    episode_id: Mapped[str] = mapped_column(ID, primary_key=True)
    subject: Mapped[str] = mapped_column(ID)
    model: Mapped[str] = mapped_column(ID)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    embedded_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (Index(None, "tenant_id", "subject"),)


FACT_VECTORS = cast(Table, FactVectorRow.__table__)
EPISODE_VECTORS = cast(Table, EpisodeVectorRow.__table__)


class EmbeddingSpendRow(Base):
    __tablename__ = "embedding_spend"

    spend_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    tenant_id: Mapped[str] = mapped_column(ID)
    model: Mapped[str] = mapped_column(ID)
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    # `write` (facts and episodes) or `query` (a search's query text).
    use: Mapped[str] = mapped_column(String(8))
    texts: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[int] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer)
    failed: Mapped[bool] = mapped_column(Boolean)

    __table_args__ = (Index(None, "tenant_id", "at"),)
