"""All configuration in one typed object, read from SGAM_* environment variables at the edge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.errors import InvalidInput

ENV_PREFIX = "SGAM_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

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
    debug: bool = Field(default=False, description="print tracebacks of internal errors")

    # The LLM endpoint used by extraction; any OpenAI-compatible server.
    llm_base_url: str | None = None
    llm_api_key: SecretStr = SecretStr("")
    llm_model: str = "gpt-4o-mini"

    redis_url: str = "redis://127.0.0.1:6379/0"

    @field_validator("database_url")
    @classmethod
    def _supported_url(cls, url: str) -> str:
        return normalise_database_url(url)


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
    """Settings from the environment, or InvalidInput naming the SGAM_* variable at fault."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = ENV_PREFIX + "_".join(str(part) for part in error["loc"]).upper()
        raise InvalidInput(name, error["msg"].removeprefix("Value error, ")) from None
