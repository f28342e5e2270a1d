"""A stub OpenAI-compatible chat endpoint for the LLM lane's benchmark and tests.

It answers `POST /v1/chat/completions` after a set latency with a valid answer: a tool call
naming the request's tool when tools are offered (Instructor's TOOLS mode), else the JSON as
message content. It counts the requests it holds at once (`peak_in_flight`) and, given a
budget in requests per minute, answers 429 with `Retry-After` past it (a token bucket of one
second's worth); `refuse_first` answers the first requests 429 whatever the budget.
It also answers `POST /v1/embeddings` with a toy embedding that is the same for the same text:
each word but a few stop words, lowercased, a plural's `s` dropped and folded by a small
synonym table (`CONCEPTS`: "automobile" is "car"), counted in one of `EMBEDDING_DIMENSIONS`
dimensions (or `--embedding-dimensions`) by its hash, so texts that share words or synonyms are
close. `embeddings_status` set answers every embeddings request with that HTTP status instead
(a failing endpoint); `embeddings_held` set to an Event holds each answer until it is set (a
slow endpoint); `embedding_requests` and `embedded_texts` count them. `GET /stub/stats` reports the
counters; `POST /stub/config` changes the latency, the budget or the refusals, and zeroes the
counters.

    python bench/stub_llm.py --port 8199 --latency 0.4 [--rpm 600] [--embedding-dimensions 768]
        [--embedding-latency 0.02]

In a test, `with StubServer(latency_s=...) as stub:` serves it from a thread on a free port
(`stub.base_url`); `stub.app.answer` may be set to a function of the request's JSON that
returns the tool's arguments, `stub.app.delay` to one that returns its latency.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn

EMPTY = {"updates": []}
EMBEDDING_DIMENSIONS = 256
# Words the toy embedding treats as one: what a real model knows and BM25 does not.
CONCEPTS = {
    "automobile": "car",
    "vehicle": "car",
    "physician": "doctor",
    "medic": "doctor",
    "canine": "dog",
    "puppy": "dog",
    "feline": "cat",
    "kitten": "cat",
    "residence": "home",
    "house": "home",
    "occupation": "job",
    "profession": "job",
    "employment": "job",
    "equid": "zebra",
}
Answer = Callable[[dict[str, Any]], dict[str, Any]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class Stats:
    requests: int = 0
    answered: int = 0
    rejected: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    first_answer_at: float | None = None  # time.monotonic() of this server's clock
    last_answer_at: float | None = None
    arrivals: list[float] = field(default_factory=list)  # every request's arrival
    refusals: list[tuple[float, float]] = field(default_factory=list)  # (at, Retry-After)

    def as_json(self) -> dict[str, Any]:
        shown = dict(self.__dict__)
        del shown["arrivals"], shown["refusals"]
        return shown


@dataclass
class StubApp:
    """The ASGI application; its fields may be changed while it serves."""

    latency_s: float = 0.0
    rpm: float | None = None
    retry_after_s: float | None = None  # the Retry-After of a 429 (default: when it would fit)
    refuse_first: int = 0  # answer the first N requests 429, whatever the budget
    answer: Answer = field(default=lambda _request: EMPTY)
    delay: Callable[[dict[str, Any]], float] | None = None  # per request, instead of latency_s
    held: threading.Event | None = None  # answers wait until it is set (a test's release)
    stats: Stats = field(default_factory=Stats)
    embeddings_status: int | None = None  # answer every embeddings request with this status
    embeddings_held: threading.Event | None = None  # embeddings answer once it is set
    embedding_dimensions: int = EMBEDDING_DIMENSIONS  # e.g. 768, to time a real model's reads
    embedding_latency_s: float = 0.0  # before each embeddings answer (a remote model's wait)
    embedding_requests: int = 0
    embedded_texts: int = 0
    _tokens: float = 0.0
    _at: float = field(default_factory=time.monotonic)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = await _body(receive)
        path, method = scope["path"], scope["method"]
        if path.endswith("/chat/completions") and method == "POST":
            await self._complete(json.loads(body), send)
        elif path.endswith("/embeddings") and method == "POST":
            await self._embed(json.loads(body), send)
        elif path == "/stub/stats":
            await _reply(send, 200, self.stats.as_json())
        elif path == "/stub/config" and method == "POST":
            self.configure(**json.loads(body or b"{}"))
            await _reply(send, 200, {"latency_s": self.latency_s, "rpm": self.rpm})
        else:
            await _reply(send, 404, {"error": {"message": f"no route {method} {path}"}})

    def configure(
        self,
        latency_s: float | None = None,
        rpm: float | None = None,
        retry_after_s: float | None = None,
        refuse_first: int = 0,
    ) -> None:
        if latency_s is not None:
            self.latency_s = latency_s
        self.rpm, self.retry_after_s, self.refuse_first = rpm, retry_after_s, refuse_first
        self.stats = Stats()
        self._tokens, self._at = (rpm or 0) / 60, time.monotonic()

    def _over_budget(self) -> float | None:
        """Seconds until a request fits the budget, or None when this one fits."""
        if not self.rpm:
            return None
        rate = self.rpm / 60
        now = time.monotonic()
        self._tokens = min(max(rate, 1.0), self._tokens + (now - self._at) * rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return None
        return (1 - self._tokens) / rate

    async def _complete(self, request: dict[str, Any], send: Send) -> None:
        stats = self.stats
        stats.requests += 1
        stats.arrivals.append(time.monotonic())
        wait = 1.0 if stats.requests <= self.refuse_first else self._over_budget()
        if wait is not None:
            wait = self.retry_after_s or wait
            stats.rejected += 1
            stats.refusals.append((time.monotonic(), wait))
            await _reply(send, 429, {"error": {"message": "rate limited"}}, retry_after=wait)
            return
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            latency = self.delay(request) if self.delay is not None else self.latency_s
            if latency:
                await asyncio.sleep(latency)
            while self.held is not None and not self.held.is_set():
                await asyncio.sleep(0.02)
            arguments = json.dumps(self.answer(request))
        finally:
            stats.in_flight -= 1
        stats.answered += 1
        stats.last_answer_at = time.monotonic()
        if stats.first_answer_at is None:
            stats.first_answer_at = stats.last_answer_at
        await _reply(send, 200, completion(request, arguments))

    async def _embed(self, request: dict[str, Any], send: Send) -> None:
        self.embedding_requests += 1
        while self.embeddings_held is not None and not self.embeddings_held.is_set():
            await asyncio.sleep(0.02)
        if self.embedding_latency_s:
            await asyncio.sleep(self.embedding_latency_s)
        if self.embeddings_status is not None:
            message = {"error": {"message": f"stub embeddings answer {self.embeddings_status}"}}
            await _reply(send, self.embeddings_status, message)
            return
        texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
        self.embedded_texts += len(texts)
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": toy_embedding(text, self.embedding_dimensions),
            }
            for index, text in enumerate(texts)
        ]
        tokens = sum(len(_WORDS.findall(text.lower())) for text in texts)
        await _reply(
            send,
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model", "stub"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


_WORDS = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are at be do does i in is it my of on the to what which you".split()  # noqa: SIM905
)


def toy_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A bag of folded words, hashed into `dimensions` counts (not normalised)."""
    vector = [0.0] * dimensions
    for word in _WORDS.findall(text.lower()):
        if word in _STOP:
            continue
        word = word[:-1] if len(word) > 3 and word.endswith("s") else word
        word = CONCEPTS.get(word, word)
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % dimensions] += 1.0
    return vector


def completion(request: dict[str, Any], arguments: str) -> dict[str, Any]:
    """A chat completion carrying `arguments` the way the request asked for an answer."""
    tools = request.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": arguments}
    reason = "stop"
    if tools:
        name = tools[0]["function"]["name"]
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_stub",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
        reason = "tool_calls"
    prompt_tokens = sum(len(str(m.get("content", ""))) for m in request["messages"]) // 4
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "stub"),
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(arguments) // 4 + 1,
            "total_tokens": prompt_tokens + len(arguments) // 4 + 1,
        },
    }


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _reply(
    send: Send, status: int, payload: dict[str, Any], *, retry_after: float | None = None
) -> None:
    headers = [(b"content-type", b"application/json")]
    if retry_after is not None:
        headers.append((b"retry-after", f"{retry_after:.3f}".encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class StubServer:
    """The stub served from a thread of this process, on a free port of 127.0.0.1."""

    def __init__(self, latency_s: float = 0.0, rpm: float | None = None) -> None:
        self.app = StubApp()
        self.app.configure(latency_s=latency_s, rpm=rpm)
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def stats(self) -> Stats:
        return self.app.stats

    def __enter__(self) -> StubServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the stub LLM server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8199)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before answering")
    parser.add_argument("--rpm", type=float, default=None, help="429 past this many a minute")
    parser.add_argument(
        "--embedding-dimensions", type=int, default=EMBEDDING_DIMENSIONS, help="per toy vector"
    )
    parser.add_argument(
        "--embedding-latency", type=float, default=0.0, help="seconds before an embeddings answer"
    )
    args = parser.parse_args()
    app = StubApp(
        embedding_dimensions=args.embedding_dimensions, embedding_latency_s=args.embedding_latency
    )
    app.configure(latency_s=args.latency, rpm=args.rpm)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
