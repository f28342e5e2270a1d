"""The embeddings endpoint: any OpenAI-compatible `/v1/embeddings` through the `openai` client.

The client's own retries are off; tenacity retries what may pass (connection faults, timeouts,
429 and 5xx) up to SGAM_EMBEDDING_MAX_ATTEMPTS with a short backoff, and whatever finally fails
is one `EmbeddingFailed` carrying the attempts. Each vector comes back scaled to unit length, so
that a cosine is a dot product.

The answer's bytes are validated by pydantic-core straight into floats (`_Answer`), not built
into the `openai` client's response objects: those took 7 ms for one 768-dimension vector, most
of a fused search's own time.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx2
from pydantic import BaseModel, ValidationError
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from pipeline.settings import Settings

_NO_KEY = "none"  # local servers need no key, but the client insists on one


def _retryable() -> tuple[type[Exception], ...]:
    # `openai` is imported by the client that uses it, not by every process that imports the
    # read path: it (and the aiohttp it loads) is a quarter of the HTTP server's start-up CPU.
    import openai

    return (
        openai.APIConnectionError,  # timeouts too
        openai.RateLimitError,
        openai.InternalServerError,
    )


class EmbeddingFailed(Exception):
    """The endpoint gave no vectors, after `attempts` requests."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class _Vector(BaseModel):
    index: int
    embedding: list[float]


class _Usage(BaseModel):
    prompt_tokens: int = 0


class _Answer(BaseModel):
    """What an OpenAI-compatible `/v1/embeddings` answers (with `encoding_format="float"`)."""

    data: list[_Vector]
    usage: _Usage | None = None


@dataclass(frozen=True)
class Embedded:
    vectors: list[list[float]]
    tokens: int
    attempts: int


class EmbeddingClient:
    """One endpoint and model from the settings; `embed` may be called from many threads."""

    def __init__(
        self,
        settings: Settings,
        transport: httpx2.BaseTransport | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if settings.embedding_model is None or settings.embedding_url is None:
            raise ValueError("SGAM_EMBEDDING_MODEL and an endpoint URL must be set")
        self.model = settings.embedding_model
        self.max_attempts = settings.embedding_max_attempts
        self._sleep = sleep
        http = httpx2.Client(
            transport=transport or httpx2.HTTPTransport(), timeout=settings.embedding_timeout_s
        )
        self._http = http
        import openai

        self._client = openai.OpenAI(
            base_url=settings.embedding_url,
            api_key=settings.embedding_key or _NO_KEY,
            http_client=http,
            max_retries=0,  # ours, below
            timeout=settings.embedding_timeout_s,
        )

    def close(self) -> None:
        self._http.close()

    def embed(self, texts: Sequence[str]) -> Embedded:
        """One unit vector per text, in order; EmbeddingFailed when the endpoint gives none."""
        import openai

        attempts = 0
        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception_type(_retryable()),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    raw = self._client.embeddings.with_raw_response.create(
                        model=self.model, input=list(texts), encoding_format="float"
                    )
        except openai.OpenAIError as error:
            raise EmbeddingFailed(f"{type(error).__name__}: {error}", attempts) from None
        try:
            response = _Answer.model_validate_json(raw.http_response.content)
        except ValidationError as error:
            problem = error.errors()[0]
            place = ".".join(str(part) for part in problem["loc"])
            where = f" at {place}" if place else ""
            raise EmbeddingFailed(f"malformed answer{where}: {problem['msg']}", attempts) from None
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingFailed(f"{len(data)} vectors for {len(texts)} texts", attempts)
        tokens = response.usage.prompt_tokens if response.usage is not None else 0
        return Embedded([unit(item.embedding) for item in data], tokens, attempts)


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0 for _ in vector]


_clients: dict[tuple[object, ...], EmbeddingClient] = {}
_lock = threading.Lock()


def client_for(settings: Settings) -> EmbeddingClient:
    """The process's client for these settings, built once (one connection pool)."""
    key = (
        settings.embedding_url,
        settings.embedding_key,
        settings.embedding_model,
        settings.embedding_timeout_s,
        settings.embedding_max_attempts,
    )
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = EmbeddingClient(settings)
        return client


def close_clients() -> None:
    """Close every client this process built (their connections), e.g. when a test's
    endpoint goes away."""
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()
