"""Forget and purge win every race, on both stores and through a real `sgam serve`: random
mixes of forget, purge, confirm, reject, promote, dismiss, put and remember fired at once at
one subject, round after round, and an invariant checker over every answer, the log and every
read (tests/integration/forget_race_helpers.py). SGAM_RACE_ROUNDS sets the rounds per store:
40 by default (100 before: the suite is CPU-bound), with a fresh random seed each run; the
long run is the soak's (bench/forget_race_soak.py: thousands of rounds), which is where a rare
interleaving is hunted."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings
from tests.integration.forget_race_helpers import (
    Doors,
    Keys,
    Round,
    check,
    race,
    run_rounds,
    set_up,
)
from tests.integration.server_helpers import Server, migrated_database, start_server, stop_server

ROUNDS = int(os.environ.get("SGAM_RACE_ROUNDS", "40"))


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def raced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Keys]]:
    """A server of its own on each store, and a tenant's writer, reviewer and admin keys."""
    workdir = tmp_path_factory.mktemp(f"race-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{workdir / 'race.sqlite3'}"
        migrating = Store(Settings(database_url=url))
        migrating.upgrade()
        migrating.dispose()
    else:
        url = migrated_database(request.getfixturevalue("postgres_url"), "race")
    store = open_store(Settings(database_url=url))
    tenant = f"race-{random.randrange(10**9)}"
    made = [
        create_key(store, {"tenant_id": tenant, "role": role})[1] for role in Keys.__annotations__
    ]
    store.dispose()
    server = start_server(
        url, workdir, ready_within_s=180, SGAM_API_RATE_PER_S="0", SGAM_CATALOG="support"
    )
    yield server, Keys(*made)
    stop_server(server)


def test_eight_parallel_dismisses_have_one_winner(raced: tuple[Server, Keys]) -> None:
    """Today seven of them could answer 200 and log a dismiss each (five tries: a busy
    machine may serialise one)."""
    with Doors(*raced) as doors, ThreadPoolExecutor(max_workers=8) as pool:
        for attempt in range(5):
            state = set_up(doors, f"eight-dismisses-{attempt}")
            race(doors, state, ["dismiss"] * 8, pool)
            codes = sorted(code for _, code in state.answers)
            assert codes.count(200) == 1, codes
            assert set(codes) - {200} <= {404, 409}, codes
            assert check(doors, state) == []


def test_a_dismiss_and_promote_mix_logs_one_terminal_event(raced: tuple[Server, Keys]) -> None:
    """Today a promote could be logged after a dismiss of the same quarantined fact."""
    with Doors(*raced) as doors, ThreadPoolExecutor(max_workers=8) as pool:
        for attempt in range(5):
            state = set_up(doors, f"dismiss-promote-{attempt}")
            race(doors, state, ["dismiss", "promote"] * 4, pool)
            log = doors("admin").get("/v1/log", params={"subject": state.subject}).json()
            moved = [
                e["kind"]
                for e in log
                if e["kind"] in ("promote", "dismiss") and state.quarantined_id in e["fact_ids"]
            ]
            won = [name for name, code in state.answers if code == 200]
            assert len(won) == 1, state.answers
            assert moved == won, (moved, state.answers)  # one event, the winner's
            assert {code for _, code in state.answers} - {200} <= {404, 409}, state.answers
            assert check(doors, state) == []


@pytest.mark.slow
def test_a_confirm_racing_a_purge_is_never_a_5xx(raced: tuple[Server, Keys]) -> None:
    """A purge fired at once with confirms and promotes of the subject's candidate and
    quarantined fact: whoever wins, no answer is a 5xx and nothing is readable after."""
    with Doors(*raced) as doors, ThreadPoolExecutor(max_workers=5) as pool:
        for attempt in range(12):
            state = set_up(doors, f"purge-confirm-{attempt}")
            race(doors, state, ["purge", "confirm", "confirm", "promote", "promote"], pool)
            assert [code for _, code in state.answers if code >= 500] == [], state.answers
            assert dict(state.answers)["purge"] == 200, state.answers
            assert check(doors, state) == [], state.answers


def test_a_confirm_after_a_forget_or_purge_is_not_found(raced: tuple[Server, Keys]) -> None:
    """The candidate read before the forget is not written after it (404, never a 500)."""
    with Doors(*raced) as doors:
        for purge in (False, True):
            _confirm_after_forget(doors, purge=purge)


def _confirm_after_forget(doors: Doors, *, purge: bool) -> None:
    state: Round = set_up(doors, f"late-confirm-{purge}")
    params = {"purge": "true"} if purge else {}
    forgot = doors("admin").delete(f"/v1/subjects/{state.subject}", params=params)
    confirmed = doors("reviewer").post(f"/v1/candidates/{state.candidate_id}/confirm")
    promoted = doors("reviewer").post(f"/v1/facts/{state.quarantined_id}/promote")
    assert forgot.status_code == 200
    assert confirmed.status_code == 404, confirmed.text
    assert promoted.status_code == 404, promoted.text
    state.answers = [("forget", 200), ("confirm", 404), ("promote", 404)]
    assert check(doors, state) == []


@pytest.mark.slow
def test_forget_and_purge_win_every_race(raced: tuple[Server, Keys]) -> None:
    server, keys = raced
    tally = run_rounds(server, keys, ROUNDS, seed=random.randrange(10**6))
    assert tally.violations == []
    assert tally.rounds == ROUNDS
    # The mix really raced: forgets ran, and terminal moves both won and lost.
    assert tally.forgotten_rounds > ROUNDS // 2
    assert tally.statuses[("dismiss", 200)] + tally.statuses[("promote", 200)] > 0
    assert sum(n for (name, code), n in tally.statuses.items() if code == 404) > 0
