"""All configuration in one typed object, read from SGAM_* environment variables at the edge."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SGAM_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite:///sgam.sqlite3",
        description="sqlite:///path (embedded default) or postgresql+psycopg://user@host/db",
    )
    catalog_path: Path | None = Field(
        default=None,
        description="YAML or TOML memory-schema catalogue; None uses the bundled default",
    )
    max_value_bytes: int = Field(default=64 * 1024, gt=0, description="UTF-8 size of a value")
    write_retries: int = Field(
        default=5, ge=1, description="attempts for a write that hits a serialisation failure"
    )
    lock_timeout_ms: int = Field(default=10_000, gt=0, description="wait for a per-key lock")

    # The LLM endpoint used by extraction (later stages); any OpenAI-compatible server.
    llm_base_url: str | None = None
    llm_api_key: SecretStr = SecretStr("")
    llm_model: str = "gpt-4o-mini"

    redis_url: str = "redis://127.0.0.1:6379/0"
