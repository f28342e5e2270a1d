"""Prometheus counters of the extraction lane, kept by whichever process extracts (a worker's
pool processes, or the process in inline mode or on the hot path): model requests by outcome,
tokens by model (and by tenant when SGAM_METRICS_TENANT_LABEL opts in: the label lists every
tenant to whoever scrapes), model latency — the hot path's model calls as the workers'; episodes
processed by lane and outcome, the extraction's latency by extractor, and the policy's
decisions by lane and action (consolidation's promotions and expiries under the lane
`consolidation`).

In a worker started with `sgam worker --metrics-port`, PROMETHEUS_MULTIPROC_DIR is set before
anything is imported, so every pool process writes its values to files there and the worker's
main process serves their sum (`workers.metrics`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import Counter, Histogram

from pipeline.errors import LlmFailure
from schemas.extraction import Usage

# Seconds; a model answers in tens of milliseconds to tens of seconds.
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)

REQUESTS = Counter(
    "sgam_llm_requests",
    "Model extractions by outcome: ok, or the class of the final failure",
    ("model", "outcome"),
)
TOKENS = Counter(
    "sgam_llm_tokens",
    "Tokens spent on the model, prompt or completion",
    ("tenant", "model", "kind"),
)
LATENCY = Histogram(
    "sgam_llm_request_duration_seconds",
    "Time one model extraction took, retries and re-asks included",
    ("model",),
    buckets=MODEL_BUCKETS,
)
EPISODES = Counter(
    "sgam_episodes_processed",
    "Episodes processed, by lane and outcome (done, failed, pending: to be tried again)",
    ("lane", "outcome"),
)
# Seconds; the rules take tens of microseconds, a model up to minutes.
EXTRACTION_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 120)
EXTRACTION = Histogram(
    "sgam_extraction_duration_seconds",
    "Time one episode's extraction took, by extractor (rules or llm)",
    ("extractor",),
    buckets=EXTRACTION_BUCKETS,
)
DECISIONS = Counter(
    "sgam_decisions",
    "What the policy did with each candidate, by lane and action",
    ("lane", "action"),
)
# The decisions' lane of a consolidation run (the episodes' lanes are background and hot).
CONSOLIDATION_LANE = "consolidation"
COUNTERS = (REQUESTS, TOKENS, LATENCY, EPISODES, EXTRACTION, DECISIONS)


# The tenant label's value when the tenant is not to be named.
ANY_TENANT = "all"


def observe_model(
    tenant_id: str, usage: Usage, failure: LlmFailure | None = None, *, by_tenant: bool = False
) -> None:
    """One extraction through the model (a result or its final failure)."""
    model = usage.model or "unknown"
    tenant = tenant_id if by_tenant else ANY_TENANT
    REQUESTS.labels(model, "ok" if failure is None else type(failure).__name__).inc()
    TOKENS.labels(tenant, model, "prompt").inc(usage.prompt_tokens)
    TOKENS.labels(tenant, model, "completion").inc(usage.completion_tokens)
    LATENCY.labels(model).observe(usage.latency_ms / 1000)


def observe_extraction(usage: Usage) -> None:
    EXTRACTION.labels(usage.extractor.partition(":")[0]).observe(usage.latency_ms / 1000)


def observe_episode(lane: str, outcome: str, actions: Iterable[str] = ()) -> None:
    EPISODES.labels(lane, outcome).inc()
    for action in actions:
        DECISIONS.labels(lane, action).inc()


def observe_consolidation(decisions: Mapping[str, int]) -> None:
    """What one consolidation run decided, by action (promoted, expired_candidates,
    expired_facts)."""
    for action, count in decisions.items():
        DECISIONS.labels(CONSOLIDATION_LANE, action).inc(count)
