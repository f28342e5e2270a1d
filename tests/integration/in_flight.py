"""A first call held at the model: the window in which a repeat of its idempotency key must be
refused as in progress (Python, CLI and HTTP alike)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pipeline.db.store import Store, open_store
from tests.factories import isolated_settings
from tests.integration.stub_llm import StubServer

T = TypeVar("T")


@dataclass
class InFlight(Generic[T]):
    store: Store
    base_url: str  # the model's, for a second process
    thread: threading.Thread
    release: threading.Event  # the model answers once it is set
    answered: list[T] = field(default_factory=list)

    def join(self) -> T:
        """Let the model answer and wait for the first call's answer."""
        self.release.set()
        self.thread.join(timeout=60)
        (answer,) = self.answered
        return answer


@contextmanager
def first_call_in_flight(
    postgres_url: str, call: Callable[[Store], T], **settings: Any
) -> Iterator[InFlight[T]]:
    """Run `call` in a thread on a store whose model answers only when the block lets it (its
    `join`); the block runs once the model has been asked, so the call holds its idempotency
    reservation throughout, however long a second process takes to start."""
    with StubServer() as stub:
        release = threading.Event()
        stub.app.held = release
        store = open_store(
            isolated_settings(
                database_url=postgres_url, llm_base_url=stub.base_url, llm_model="stub", **settings
            )
        )
        answered: list[T] = []
        thread = threading.Thread(target=lambda: answered.append(call(store)))
        try:
            thread.start()
            deadline = time.monotonic() + 30
            while stub.app.stats.requests == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            yield InFlight(store, stub.base_url, thread, release, answered)
        finally:
            release.set()
            thread.join(timeout=60)
            store.dispose()
