"""What the embeddings endpoint cost: one `embedding_spend` row per call, written in its own
short transaction after the call ended (a failed call too: its attempts were spent), and the
report `sgam usage` shows per tenant, model and UTC day."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, date, datetime

from sqlalchemy import insert, select

from pipeline.db.models import EmbeddingSpendRow
from pipeline.db.store import Store
from schemas.usage import EmbeddingUsageRow

log = logging.getLogger("sgam.embedding")

WRITE, QUERY = "write", "query"


def record_spend(
    store: Store,
    tenant_id: str,
    *,
    use: str,
    texts: int,
    tokens: int,
    attempts: int,
    failed: bool,
) -> None:
    """Count one call; a database fault here is logged, never raised (the call is done)."""
    assert store.settings.embedding_model is not None
    row = {
        "tenant_id": tenant_id,
        "model": store.settings.embedding_model,
        "at": store.clock(),
        "use": use,
        "texts": texts,
        "tokens": tokens,
        "attempts": attempts,
        "failed": failed,
    }
    try:
        store.run(lambda unit: unit.session.execute(insert(EmbeddingSpendRow).values(**row)))
    except Exception:  # the spend of a call that already happened; never fail its caller
        log.warning("embedding spend not recorded", exc_info=True, extra={"tenant": tenant_id})


def embedding_usage(
    store: Store, tenant_id: str | None = None, since: datetime | None = None
) -> list[EmbeddingUsageRow]:
    """The embedding calls per tenant, model and UTC day, oldest day first."""
    spend = EmbeddingSpendRow
    statement = select(
        spend.tenant_id,
        spend.model,
        spend.at,
        spend.use,
        spend.texts,
        spend.tokens,
        spend.attempts,
        spend.failed,
    )
    if tenant_id is not None:
        statement = statement.where(spend.tenant_id == tenant_id)
    if since is not None:
        statement = statement.where(spend.at >= since)
    totals: dict[tuple[str, str, date], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with store.reading() as connection:
        for row in connection.execute(statement):
            at = row.at if row.at.tzinfo else row.at.replace(tzinfo=UTC)
            total = totals[(row.tenant_id, row.model, at.astimezone(UTC).date())]
            total["calls"] += 1
            total["failed"] += int(row.failed)
            total["attempts"] += row.attempts
            total["texts"] += row.texts
            total["query_calls"] += int(row.use == QUERY)
            total["tokens"] += row.tokens
    price = store.settings.embedding_price
    return [
        EmbeddingUsageRow(
            tenant_id=tenant,
            model=model,
            day=day,
            cost=None if price is None else round(total["tokens"] * price / 1_000_000, 6),
            **total,
        )
        for (tenant, model, day), total in sorted(totals.items())
    ]
