"""What the model lane and the embedding arm cost, per tenant, model and day: one shape for
the Python answer, the command line's JSON and the HTTP body."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, ConfigDict, Field


class UsageRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant_id: str
    model: str
    day: date = Field(description="UTC day the extractions ended (or started, if unfinished)")
    requests: int = Field(description="model extractions (one per episode read by the model)")
    attempts: int = Field(description="HTTP requests sent: transport retries and re-asks too")
    prompt_tokens: int
    completion_tokens: int
    latency_p50_ms: float
    latency_p99_ms: float
    cost: float | None = Field(
        default=None, description="when SGAM_LLM_PRICE_IN/OUT are set: per million tokens"
    )


def _empty(rows: list[EmbeddingUsageRow]) -> bool:
    return not rows


class EmbeddingUsageRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant_id: str
    model: str
    day: date = Field(description="UTC day of the calls")
    calls: int = Field(description="requests to the embeddings endpoint that ended")
    failed: int = Field(description="of those, calls that gave no vectors after their retries")
    attempts: int = Field(description="HTTP requests sent, retries included")
    texts: int = Field(description="texts embedded: facts, episodes and search queries")
    query_calls: int = Field(description="of the calls, those that embedded a search's query")
    tokens: int
    cost: float | None = Field(
        default=None, description="when SGAM_EMBEDDING_PRICE is set: per million tokens"
    )


class UsageReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    rows: list[UsageRow] = Field(default_factory=list)
    embeddings: list[EmbeddingUsageRow] = Field(
        default_factory=list,
        exclude_if=_empty,
        description="the search read's embedding arm's calls (absent: none in the period)",
    )
    total_cost: float | None = None
