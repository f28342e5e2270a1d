"""Forget and purge racing every state change on a subject, through a real `sgam serve`, with a
checker of what must hold afterwards. Shared by the race test
(tests/integration/api/test_forget_races.py) and its soak (bench/forget_race_soak.py).

A round makes a fresh subject with one fact, one buffered candidate and one quarantined fact,
then fires a random mix of forget, purge, confirm, reject, promote, dismiss (several of each of
the last four), put and remember at it at once, and reads everything back. What must hold:

- no answer is a 5xx, and every loser answers 404 or 409 (412 for a stale version);
- after a forget or purge that answered 200, nothing stated before it is readable: not the
  setup's values (facts, the quarantine, the candidates, the context), and every fact read has
  a recorded_at after the forget;
- one terminal transition per candidate (confirm or reject) and per quarantined fact (promote
  or dismiss), in the answers and in the log.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx2

from tests.integration.server_helpers import Server

SETUP_VALUES = {"Utrecht", "email", "Globex"}
LOSING = {404, 409, 412}
REMEMBERED = "Remember that my passport deadline is June 30, 2026."


@dataclass
class Keys:
    writer: str
    reviewer: str
    admin: str


@dataclass
class Round:
    subject: str
    candidate_id: str
    quarantined_id: str
    answers: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Tally:
    rounds: int = 0
    operations: Counter[str] = field(default_factory=Counter)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    forgotten_rounds: int = 0
    violations: list[str] = field(default_factory=list)


class Doors:
    """One HTTP client per key and thread (httpx clients are not shared across threads)."""

    def __init__(self, server: Server, keys: Keys) -> None:
        self.server, self.keys, self.local = server, keys, threading.local()
        self.opened: list[httpx2.Client] = []
        self.lock = threading.Lock()

    def __call__(self, role: str) -> httpx2.Client:
        clients: dict[str, httpx2.Client] = getattr(self.local, "clients", {})
        self.local.clients = clients
        if role not in clients:
            # Idle connections are dropped before the server's keep-alive (5 s) may close
            # them under a request: on a busy machine that reset is the client's, not SGAM's.
            limits = httpx2.Limits(keepalive_expiry=1.0)
            clients[role] = self.server.client(getattr(self.keys, role), limits=limits)
            with self.lock:
                self.opened.append(clients[role])
        return clients[role]

    def __enter__(self) -> Doors:
        return self

    def __exit__(self, *_: object) -> None:
        for client in self.opened:
            client.close()


def set_up(doors: Doors, subject: str) -> Round:
    writer, reviewer = doors("writer"), doors("reviewer")
    fact = {"subject": subject, "attribute": "home_city", "value": "Utrecht"}
    fact |= {"valid_from": "2026-01-01T00:00:00Z", "source_episode_id": "setup"}
    _ok(writer.put("/v1/facts", json=fact))
    episode = {"subject": subject, "session_id": "a", "text": "please contact me by email"}
    episode |= {"occurred_at": "2026-06-01T10:00:00+02:00"}
    _ok(writer.post("/v1/episodes", json=episode))
    held = fact | {"attribute": "employer", "value": "Globex", "trust": "untrusted"}
    _ok(writer.put("/v1/facts", json=held))
    (candidate,) = reviewer.get("/v1/candidates", params={"subject": subject}).json()
    quarantine = reviewer.get("/v1/quarantine").json()
    (quarantined,) = [f for f in quarantine if f["subject"] == subject]
    return Round(subject, candidate["candidate_id"], quarantined["fact_id"])


def _ok(response: httpx2.Response) -> None:
    assert response.status_code < 300, (response.status_code, response.text)


def operations(doors: Doors, state: Round) -> dict[str, Callable[[], httpx2.Response]]:
    subject, candidate, fact_id = state.subject, state.candidate_id, state.quarantined_id
    later = {"subject": subject, "attribute": "home_city", "value": "Paris"}
    later |= {"valid_from": "2026-09-01T00:00:00Z", "source_episode_id": "later"}
    return {
        "forget": lambda: doors("admin").delete(f"/v1/subjects/{subject}"),
        "purge": lambda: doors("admin").delete(f"/v1/subjects/{subject}", params={"purge": "true"}),
        "confirm": lambda: doors("reviewer").post(f"/v1/candidates/{candidate}/confirm"),
        "reject": lambda: doors("reviewer").post(f"/v1/candidates/{candidate}/reject"),
        "promote": lambda: doors("reviewer").post(f"/v1/facts/{fact_id}/promote"),
        "dismiss": lambda: doors("reviewer").post(f"/v1/facts/{fact_id}/dismiss"),
        "put": lambda: doors("writer").put("/v1/facts", json=later),
        "remember": lambda: doors("writer").post(
            "/v1/remember", json={"subject": subject, "text": REMEMBERED}
        ),
    }


def mix(rng: random.Random) -> list[str]:
    """A random mix: a forget or a purge in most rounds, several of each terminal move."""
    chosen = [rng.choice(["forget", "purge"])] if rng.random() < 0.85 else []
    for name in ("confirm", "reject", "promote", "dismiss"):
        chosen += [name] * rng.choice([0, 1, 1, 2, 3])
    chosen += [name for name in ("put", "remember") if rng.random() < 0.5]
    rng.shuffle(chosen)
    return chosen


def race(doors: Doors, state: Round, chosen: list[str], pool: ThreadPoolExecutor) -> None:
    calls = operations(doors, state)
    start = threading.Barrier(len(chosen)) if chosen else None

    def run(name: str) -> tuple[str, int]:
        if start is not None:
            start.wait(timeout=30)
        return name, calls[name]().status_code

    state.answers = list(pool.map(run, chosen))


def check(doors: Doors, state: Round) -> list[str]:
    """What broke in this round (empty when every invariant held)."""
    reviewer, admin = doors("reviewer"), doors("admin")
    found = [f"{name} answered {code}" for name, code in state.answers if code >= 500]
    found += [
        f"{name} answered {code}"
        for name, code in state.answers
        if code not in LOSING | {200, 201} and code < 500
    ]
    log = admin.get("/v1/log", params={"subject": state.subject, "limit": 1000}).json()
    forgets = [e for e in log if e["kind"] in ("forget", "purge")]
    facts = reviewer.get(
        f"/v1/subjects/{state.subject}/facts", params={"include_quarantined": "true"}
    ).json()
    if forgets:
        moment = max(datetime.fromisoformat(e["occurred_at"]) for e in forgets)
        candidates = reviewer.get("/v1/candidates", params={"subject": state.subject}).json()
        quarantine = [
            f for f in reviewer.get("/v1/quarantine").json() if f["subject"] == state.subject
        ]
        context = doors("writer").get(f"/v1/subjects/{state.subject}/context").json()
        shown = [f["value"] for f in facts + quarantine] + [c["value"] for c in candidates]
        found += [
            f"{value!r} readable after the forget" for value in shown if value in SETUP_VALUES
        ]
        found += [
            f"{value!r} in the context after the forget"
            for value in SETUP_VALUES
            if value in context["text"]
        ]
        found += [
            f"fact {f['fact_id']} recorded before the forget is readable"
            for f in facts
            if datetime.fromisoformat(f["recorded_at"]) <= moment
        ]
    found += _one_winner(state, log)
    return found


def _one_winner(state: Round, log: list[dict[str, Any]]) -> list[str]:
    won = Counter(name for name, code in state.answers if code == 200)
    found = []
    if won["confirm"] + won["reject"] > 1:
        found.append(f"candidate decided {won['confirm'] + won['reject']} times")
    if won["promote"] + won["dismiss"] > 1:
        found.append(
            f"quarantined fact released or refused {won['promote'] + won['dismiss']} times"
        )
    decided = [
        e
        for e in log
        if e["kind"] in ("candidate_confirmed", "candidate_rejected")
        and state.candidate_id in (e["reason"] or "")
    ]
    moved = [
        e
        for e in log
        if e["kind"] in ("promote", "dismiss") and state.quarantined_id in e["fact_ids"]
    ]
    if len(decided) > 1:
        found.append(f"the log decides the candidate {len(decided)} times")
    if len(moved) > 1:
        found.append(f"the log moves the quarantined fact {len(moved)} times")
    return found


def run_rounds(
    server: Server,
    keys: Keys,
    rounds: int,
    *,
    seed: int,
    parallel: int = 3,
    progress: Callable[[Tally], None] | None = None,
    until: float | None = None,
) -> Tally:
    """`rounds` rounds, `parallel` subjects at a time, each with its own random mix;
    `progress` is called with the tally after each round; no round starts after `until`
    (a `time.monotonic()` instant)."""
    tally = Tally()
    lock = threading.Lock()
    racers = ThreadPoolExecutor(max_workers=16 * parallel)

    def one(index: int) -> None:
        if until is not None and time.monotonic() > until:
            return
        rng = random.Random(seed * 100_003 + index)
        state = set_up(doors, f"s{seed}-{index}")
        chosen = mix(rng)
        race(doors, state, chosen, racers)
        broken = check(doors, state)
        with lock:
            tally.rounds += 1
            tally.operations.update(chosen)
            tally.statuses.update(state.answers)
            tally.forgotten_rounds += any(n in ("forget", "purge") for n in chosen)
            tally.violations += [f"round {index} ({state.subject}): {v}" for v in broken]
            if progress is not None:
                progress(tally)

    with Doors(server, keys) as doors, racers, ThreadPoolExecutor(parallel) as rounds_pool:
        list(rounds_pool.map(one, range(rounds)))
    return tally
