"""Usage of the model lane per tenant, model and UTC day, read from the episodes' own records
(`episodes.usage`, written with each episode's outcome): requests, attempts, tokens, latency
percentiles and, with SGAM_LLM_PRICE_IN/OUT set, cost; and beside them the embedding arm's
calls (`embedding.spend`).

Every model extraction of an episode is counted: its row keeps the last one's usage and the
earlier ones beside it (`earlier`: the tries that failed before a retry, or were lost to a
crash). A call's spend is written as soon as its answer is in, before the answer is decided
(`process.record_spend`), so an attempt lost after its answer is counted too, once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select

from pipeline.db.models import EpisodeRow
from pipeline.db.store import Store
from pipeline.embedding.spend import embedding_usage
from pipeline.settings import Settings
from pipeline.validation import parse
from schemas.fields import Identifier, UtcDatetime
from schemas.usage import UsageReport, UsageRow


class UsageQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier | None = None
    since: UtcDatetime | None = None


def llm_usage(store: Store, query: UsageQuery | Mapping[str, Any] | None = None) -> UsageReport:
    """Model usage per tenant, model and day, oldest day first."""
    query = parse(UsageQuery, query or {})
    when = func.coalesce(EpisodeRow.finished_at, EpisodeRow.started_at)
    statement = select(EpisodeRow.tenant_id, EpisodeRow.usage, when).where(
        EpisodeRow.usage.is_not(None)
    )
    if query.tenant_id is not None:
        statement = statement.where(EpisodeRow.tenant_id == query.tenant_id)
    if query.since is not None:
        statement = statement.where(when >= query.since)
    groups: dict[tuple[str, str, date], list[dict[str, Any]]] = defaultdict(list)
    with store.reading() as connection:
        for tenant_id, spent, at in connection.execute(statement):
            # None: not processed yet (the column's JSON null).
            if spent is None or at is None:
                continue
            day = _utc(at).date()
            for extraction in [*spent.get("earlier", []), spent]:
                if extraction.get("model"):  # the rules spend nothing
                    groups[(tenant_id, extraction["model"], day)].append(extraction)
    rows = [_row(key, spent, store.settings) for key, spent in sorted(groups.items())]
    embeddings = embedding_usage(store, query.tenant_id, query.since)
    costs = [row.cost for row in rows if row.cost is not None]
    costs += [row.cost for row in embeddings if row.cost is not None]
    return UsageReport(
        rows=rows, embeddings=embeddings, total_cost=round(sum(costs), 6) if costs else None
    )


def _row(key: tuple[str, str, date], spent: list[dict[str, Any]], settings: Settings) -> UsageRow:
    tenant_id, model, day = key
    prompt = sum(int(item.get("prompt_tokens", 0)) for item in spent)
    completion = sum(int(item.get("completion_tokens", 0)) for item in spent)
    latencies = sorted(float(item.get("latency_ms", 0.0)) for item in spent)
    return UsageRow(
        tenant_id=tenant_id,
        model=model,
        day=day,
        requests=len(spent),
        attempts=sum(int(item.get("attempts", 0)) for item in spent),
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_p50_ms=_percentile(latencies, 0.5),
        latency_p99_ms=_percentile(latencies, 0.99),
        cost=cost(settings, prompt, completion),
    )


def cost(settings: Settings, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The price of the tokens, when a price is configured (per million tokens)."""
    if settings.llm_price_in is None and settings.llm_price_out is None:
        return None
    price_in, price_out = settings.llm_price_in or 0.0, settings.llm_price_out or 0.0
    return round((prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000, 6)


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[int(rank) - 1]


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
