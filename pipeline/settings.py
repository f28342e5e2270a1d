"""All configuration in one typed object, read from SGAM_* environment variables at the edge."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

import prompts
from pipeline.errors import SettingError

ENV_PREFIX = "SGAM_"
ENV_FILE_VARIABLE = "SGAM_ENV_FILE"  # the one env file settings are read from, if any
# Episodes per worker task when SGAM_WORKER_BATCH is unset (`Settings.batch_for`).
RULES_BATCH, MODEL_BATCH = 128, 32


class Settings(BaseSettings):
    # No env file unless one is named (SGAM_ENV_FILE, read by `load_settings`): a stray
    # ./.env in whatever directory a command runs in must not change what it does.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=None, extra="ignore")

    database_url: str = Field(
        default="sqlite:///sgam.sqlite3",
        description="sqlite:///path (embedded default) or postgresql+psycopg://user@host/db",
    )
    catalog_path: Path | None = Field(
        default=None,
        description="YAML or TOML memory-schema catalogue; None uses the bundled `catalog`",
    )
    catalog: Literal["personal", "support"] = Field(
        default="personal",
        description="the bundled catalogue used when catalog_path is unset: personal (what "
        "people tell an assistant about themselves) or support (a support product's attributes)",
    )
    max_value_bytes: int = Field(default=64 * 1024, gt=0, description="UTF-8 size of a value")
    write_retries: int = Field(
        default=5, ge=1, description="attempts for a write that hits a serialisation failure"
    )
    lock_timeout_ms: int = Field(default=10_000, gt=0, description="wait for a per-key lock")
    batch_size: int = Field(
        default=500, ge=1, le=100_000, description="fact commands per transaction in put_many"
    )

    # The LLM endpoint used by extraction; any OpenAI-compatible server (OpenAI, vLLM,
    # Ollama, llama.cpp). Unset base URL: no LLM is configured and extraction uses the rules.
    llm_base_url: str | None = Field(
        default=None, description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1"
    )
    llm_api_key: SecretStr = Field(default=SecretStr(""), description="sent as a bearer token")
    llm_model: str = Field(
        default="gpt-4o-mini", min_length=1, description="the model name the endpoint serves"
    )
    llm_timeout_s: float = Field(default=60.0, gt=0, le=3600, description="per HTTP request")
    llm_mode: Literal["tools", "json_schema", "json", "md_json"] = Field(
        default="tools",
        description="how the answer's shape is enforced: tool calling, a JSON schema response "
        "format, JSON mode, or JSON in a Markdown block for endpoints with none of those",
    )
    llm_max_attempts: int = Field(
        default=4, ge=1, le=20, description="HTTP attempts per model call (429, 5xx, timeouts)"
    )
    llm_deadline_s: float = Field(
        default=180.0, gt=0, le=86_400, description="no transport retry starts after this"
    )
    llm_max_reasks: int = Field(
        default=2, ge=0, le=10, description="re-asks after an answer that fails validation"
    )
    llm_max_tokens: int = Field(default=1024, ge=16, le=32_768, description="per answer")
    llm_prompt: str = Field(
        default="extract/v2",
        pattern=r"^extract/v[1-9][0-9]*$",
        description="the extraction prompt (prompts/extract/vN.j2), recorded on every write",
    )
    llm_context_turns: int = Field(
        default=6,
        ge=0,
        le=50,
        description="earlier turns of the session the model sees as context (0: none)",
    )
    llm_context_tokens: int = Field(
        default=600,
        ge=0,
        le=32_768,
        description="the most those earlier turns may take of the prompt (estimated tokens)",
    )
    llm_concurrency: int = Field(
        default=32, ge=1, le=1024, description="model requests a process keeps in flight"
    )
    llm_rpm: float | None = Field(
        default=None, gt=0, description="requests a minute to the endpoint, all workers together"
    )
    llm_tpm: float | None = Field(
        default=None, gt=0, description="tokens a minute to the endpoint, all workers together"
    )
    llm_max_wait_s: float = Field(
        default=600.0,
        ge=0,
        le=86_400,
        description="longest an extraction waits for the budget or a 429's pause, then retried",
    )
    llm_price_in: float | None = Field(
        default=None, ge=0, description="price per million prompt tokens (usage reports cost)"
    )
    llm_price_out: float | None = Field(
        default=None, ge=0, description="price per million completion tokens"
    )
    # The search read's optional embedding arm: unset model, no vectors and lexical search only.
    # Any OpenAI-compatible /v1/embeddings endpoint; the model lane's URL and key by default.
    embedding_model: str | None = Field(
        default=None,
        description="the embedding model the endpoint serves (unset: no embedding arm, search "
        "is lexical only), e.g. text-embedding-3-small",
    )
    embedding_base_url: str | None = Field(
        default=None, description="the embeddings endpoint; unset: SGAM_LLM_BASE_URL"
    )
    embedding_api_key: SecretStr | None = Field(
        default=None, description="sent as a bearer token; unset: SGAM_LLM_API_KEY"
    )
    embedding_timeout_s: float = Field(default=30.0, gt=0, le=600, description="per request")
    embedding_max_attempts: int = Field(
        default=3, ge=1, le=20, description="HTTP attempts per embedding call (429, 5xx, timeouts)"
    )
    embedding_batch: int = Field(
        default=64, ge=1, le=2048, description="texts embedded in one request at write time"
    )
    embedding_price: float | None = Field(
        default=None, ge=0, description="price per million embedding tokens (usage reports cost)"
    )
    dates_day_first: bool = Field(
        default=False, description="read 03/04/2026 as 3 April (else slash dates are not read)"
    )

    redis_url: str | None = Field(
        default=None,
        description="Redis for the HTTP service's rate limits and the workers' LLM budget "
        "(unset: each server process keeps its own limits; the workers use a Redis broker's)",
    )
    # The HTTP service (`sgam serve`) and the MCP server (`sgam mcp`).
    api_key: SecretStr = Field(
        default=SecretStr(""), description="the API key `sgam mcp` acts with (stdio)"
    )
    api_max_body_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, le=1024**3, description="largest request body"
    )
    api_max_batch: int = Field(
        default=1000, ge=1, le=100_000, description="episodes in one POST /v1/episodes"
    )
    api_rate_per_s: float = Field(
        default=50.0, ge=0, le=1_000_000, description="requests per second per key; 0: no limit"
    )
    api_key_cache_s: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="how long a process trusts a key it checked (0: check every request); a "
        "revocation still refuses the key's next request where SGAM_REDIS_URL is set, and "
        "takes this long to reach `sgam mcp` over stdio",
    )
    api_rate_burst: int = Field(
        default=100, ge=1, le=1_000_000, description="requests a key may send at once"
    )
    ui_session_secret: SecretStr | None = Field(
        default=None,
        description="signs the review pages' session cookies and CSRF tokens; unset: a random "
        "secret per `sgam serve` (sessions end when it restarts)",
    )
    ui_session_hours: float = Field(
        default=8.0, gt=0, le=24 * 30, description="how long a review-page sign-in lasts"
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="/metrics answers a request with `Authorization: Bearer TOKEN`; unset: "
        "only requests from the loopback address (a scraper on the same host)",
    )
    metrics_tenant_label: bool = Field(
        default=False,
        description="label sgam_llm_tokens by tenant (lists every tenant to whoever scrapes); "
        "off: one series per model",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="proxies whose X-Forwarded-For and X-Forwarded-Proto are believed (comma "
        "separated addresses or networks, `*` for any); empty: none, the peer is the client",
    )

    # The pipeline: intake, workers, the recurrence buffer, the hot path, consolidation.
    broker_url: str | None = Field(
        default=None,
        description="Celery broker (redis://...); unset: inline mode, episodes are processed "
        "in the process that ingests them",
    )
    ingest_chunk: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="the most episodes per intake transaction: the first holds a worker task's "
        "batch and each next twice as many, up to this",
    )
    worker_batch: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="episodes per worker task; unset: 128 with the rules, 32 with a model "
        "(SGAM_LLM_BASE_URL set)",
    )
    episode_lease_s: int = Field(
        default=300,
        ge=10,
        description="how long a worker may hold an episode before the sweeper gives it to another",
    )
    episode_max_attempts: int = Field(
        default=3,
        ge=1,
        le=100,
        description="failed attempts, then `failed`; attempts lost to crashes count apart",
    )
    episode_max_redrives: int = Field(
        default=3, ge=0, le=100, description="times consolidation re-drives a failed episode"
    )
    sweep_interval_s: int = Field(default=60, ge=1, description="how often beat sweeps")
    sweep_grace_s: int = Field(
        default=60, ge=1, description="a pending episode older than this is queued again"
    )
    hot_path_deadline_ms: int = Field(
        default=2000, ge=50, description="the hot path defers to the workers after this"
    )
    weak_confidence: float = Field(
        default=0.7, ge=0, le=1, description="a candidate below this confidence is buffered"
    )
    weak_support: int = Field(default=2, ge=2, description="sessions that promote a weak signal")
    weak_window_days: int = Field(
        default=30, ge=1, le=36500, description="the days within which weak_support sessions count"
    )
    buffer_window_days: int = Field(
        default=30, ge=1, le=36500, description="how long a candidate waits for confirmation"
    )
    consolidate_cron: str = Field(
        default="0 3 * * *", description="when beat runs consolidation (UTC, crontab syntax)"
    )
    worker_metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="a worker serves its Prometheus metrics on this port (sgam worker "
        "--metrics-port sets it, with PROMETHEUS_MULTIPROC_DIR)",
    )
    otel: Literal["off", "console", "otlp"] | None = Field(
        default=None,
        description="traces: `otlp` (to OTEL_EXPORTER_OTLP_ENDPOINT, the default when that is "
        "set), `console` (printed on stderr) or `off`; unset and no endpoint: off",
    )
    task_time_limit_s: int = Field(
        default=300, ge=10, description="a worker task is killed after this"
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="how every process logs on stderr: lines for people, or one JSON object "
        "per line (tenant, episode, task and trace ids, outcome, duration; never a value)",
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        default="warning",
        description="the command line's log level (sgam serve --log-level and sgam worker "
        "--loglevel set their own)",
    )

    @field_validator("llm_prompt")
    @classmethod
    def _shipped_prompt(cls, name: str) -> str:
        if name not in prompts.names():
            raise ValueError(f"must be one of {', '.join(prompts.names())}")
        return name

    @field_validator("llm_base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        return _http_url_or_none(url)

    @property
    def llm_configured(self) -> bool:
        return self.llm_base_url is not None

    def batch_for(self, *, model: bool) -> int:
        """Episodes per worker task (SGAM_WORKER_BATCH). Unset, the lanes differ: the rules
        take microseconds an episode, so a batch's two transactions and commits are most of
        its cost and a larger batch pays; a model's batch is what waits beside the calls in
        flight (SGAM_LLM_CONCURRENCY + a batch), and what a crash strands until the lease
        runs out."""
        if self.worker_batch is not None:
            return self.worker_batch
        return MODEL_BATCH if model else RULES_BATCH

    @property
    def lane_batch(self) -> int:
        """Episodes per worker task on the lane these settings choose (a model when one is
        configured): what the intake sizes its wake-ups and its first transaction by."""
        return self.batch_for(model=self.llm_configured)

    @field_validator("embedding_base_url")
    @classmethod
    def _embedding_url(cls, url: str | None) -> str | None:
        return _http_url_or_none(url)

    @field_validator("embedding_model")
    @classmethod
    def _embedding_model(cls, model: str | None) -> str | None:
        return model.strip() if model is not None and model.strip() else None

    @property
    def embedding_url(self) -> str | None:
        """The embeddings endpoint: its own setting, else the model lane's."""
        return self.embedding_base_url or self.llm_base_url

    @property
    def embedding_key(self) -> str:
        key = self.embedding_api_key if self.embedding_api_key is not None else self.llm_api_key
        return key.get_secret_value()

    @property
    def embedding_configured(self) -> bool:
        """The embedding arm is on: a model is named and an endpoint is known."""
        return self.embedding_model is not None and self.embedding_url is not None

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        return url if url is not None and url.strip() else None  # set but empty: unset

    @field_validator("broker_url")
    @classmethod
    def _broker_url(cls, url: str | None) -> str | None:
        if url is None or not url.strip():
            return None
        from kombu.transport import TRANSPORT_ALIASES

        scheme, separator, _ = url.partition("://")
        if not separator or scheme not in TRANSPORT_ALIASES:
            raise ValueError("must be a broker URL with its scheme, e.g. redis://127.0.0.1:6379/0")
        return url

    @field_validator("consolidate_cron")
    @classmethod
    def _cron(cls, cron: str) -> str:
        fields = cron.split()
        if len(fields) != 5:
            raise ValueError("must have 5 fields: minute hour day-of-month month day-of-week")
        if cron != "0 3 * * *":  # the default needs no check (and no import of Celery)
            from celery.schedules import crontab

            minute, hour, day_of_month, month_of_year, day_of_week = fields
            try:
                crontab(minute, hour, day_of_week, day_of_month, month_of_year)
            except ValueError as exc:
                raise ValueError(f"is not a crontab schedule: {exc}") from None
        return cron

    @field_validator("database_url")
    @classmethod
    def _supported_url(cls, url: str) -> str:
        return normalise_database_url(url)


def _http_url_or_none(url: str | None) -> str | None:
    if url is None or not url.strip():
        return None
    if not url.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:8080/v1")
    return url.rstrip("/")


def normalise_database_url(url: str) -> str:
    """SQLite as `sqlite:///PATH`; PostgreSQL through psycopg 3, whichever spelling is used."""
    for alias in ("postgres://", "postgresql://"):
        if url.startswith(alias):
            return "postgresql+psycopg://" + url.removeprefix(alias)
    if url.startswith("postgresql+psycopg://"):
        return url
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return url
    if url.startswith("sqlite://"):
        raise ValueError("a SQLite URL has three slashes and a path: sqlite:///sgam.sqlite3")
    raise ValueError("use sqlite:///PATH or postgresql://USER@HOST/DATABASE")


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, or SettingError naming the SGAM_* variable at fault."""
    env_file = os.environ.get(ENV_FILE_VARIABLE) or None
    if env_file is not None and not Path(env_file).is_file():
        raise SettingError(ENV_FILE_VARIABLE, f"{env_file} is not a file")
    try:
        return Settings(_env_file=env_file, **overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = ENV_PREFIX + "_".join(str(part) for part in error["loc"]).upper()
        raise SettingError(name, error["msg"].removeprefix("Value error, ")) from None
