"""Every table of the SGAM database, in one place: import tables and `Base.metadata` from here.

The ledger (`ledger_tables`: claims, facts, events, idempotency keys) and the pipeline's
intake and recurrence buffer (`stage_tables`: episodes, candidates and their support) share
one declarative base (`base`) and one set of migrations, with the HTTP service's API keys
(`access_tables`) and the search read's vectors (`vector_tables`).
"""

from pipeline.db.access_tables import ROLES, ApiKeyRow
from pipeline.db.base import ID, NAMING_CONVENTION, TRUST_LEVELS, Base, JsonColumn, UtcDateTime
from pipeline.db.ledger_tables import (
    FACT_COLUMNS,
    FACT_STATUSES,
    ClaimRow,
    Content,
    EventRow,
    FactRow,
    IdempotencyRow,
    ScopedKey,
)
from pipeline.db.stage_tables import EPISODES, CandidateRow, EpisodeRow, SupportRow
from pipeline.db.vector_tables import (
    EPISODE_VECTORS,
    FACT_VECTORS,
    EmbeddingSpendRow,
    EpisodeVectorRow,
    FactVectorRow,
)

__all__ = [
    "ROLES",
    "ApiKeyRow",
    "EPISODES",
    "EPISODE_VECTORS",
    "FACT_VECTORS",
    "FACT_COLUMNS",
    "FACT_STATUSES",
    "ID",
    "NAMING_CONVENTION",
    "TRUST_LEVELS",
    "Base",
    "CandidateRow",
    "EmbeddingSpendRow",
    "EpisodeVectorRow",
    "FactVectorRow",
    "EpisodeRow",
    "ClaimRow",
    "Content",
    "EventRow",
    "FactRow",
    "IdempotencyRow",
    "JsonColumn",
    "ScopedKey",
    "SupportRow",
    "UtcDateTime",
]
