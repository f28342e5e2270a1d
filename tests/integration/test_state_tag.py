"""A key's state tag outside HTTP: `pipeline.state_tag` and `put(..., expected_state=)` in
Python, `sgam get`/`put` printing `etag: "..."` and `sgam put --if-match` on the command line.

A fact's version cannot be the tag (every new fact starts again at version 1), so of writers
holding the same stale tag exactly one wins, whatever their valid_from, and every other is
refused (VersionConflict; exit 3 and one line on the command line).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from collections import Counter
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.errors import VersionConflict
from pipeline.settings import Settings
from tests.integration.server_helpers import SGAM

WRITERS = 16
CLI_WRITERS = 8  # processes: each CLI start costs about a second of CPU
START = "2026-03-01T00:00:00Z"


def _key(tenant: str) -> dict[str, str]:
    return {"tenant_id": tenant, "subject": "mira", "attribute": "home_city"}


def _put(key: dict[str, str], value: str, valid_from: str) -> dict[str, Any]:
    return key | {"value": value, "valid_from": valid_from, "source_episode_id": f"ep-{value}"}


def _day(writer: int) -> str:
    """Before, at and after the fact that holds from START: each writer a day of its own."""
    return f"2026-{1 + writer // 4:02d}-1{writer % 4}T00:00:00Z"


def test_a_stale_tag_is_refused_though_the_newer_fact_has_the_same_version(
    store: Store,
) -> None:
    key = _key(f"tag-{uuid.uuid4()}")
    assert pipeline.state_tag(store, key) == "0"
    pipeline.put(store, _put(key, "Berlin", "2026-01-01T00:00:00Z"))
    tag = pipeline.state_tag(store, key)
    first = pipeline.put(store, _put(key, "Paris", START) | {"expected_state": tag})
    assert first.fact.version == 1  # the version the stale writer read too
    assert first.state == pipeline.state_tag(store, key) != tag

    with pytest.raises(VersionConflict) as refused:
        pipeline.put(store, _put(key, "Rome", START) | {"expected_state": tag})
    assert (refused.value.expected, refused.value.actual) == (tag, first.state)
    assert [fact.value for fact in pipeline.get(store, key | {"at": START})] == ["Paris"]


def test_in_one_batch_a_tag_is_stale_once_an_earlier_command_wrote_the_key(
    store: Store,
) -> None:
    """`put_many` (and `sgam import`'s `expected_state`) judge each command against the key
    as the commands before it in the chunk left it."""
    key = _key(f"tag-{uuid.uuid4()}")
    tag = pipeline.state_tag(store, key)
    commands = [
        _put(key, city, f"2026-0{month}-01T00:00:00Z") | {"expected_state": tag}
        for month, city in enumerate(["Oslo", "Bergen", "Tromso"], 1)
    ]
    outcomes = pipeline.put_many(store, commands)
    assert [type(outcome).__name__ for outcome in outcomes] == [
        "PutResult",
        "VersionConflict",
        "VersionConflict",
    ]
    assert [fact.value for fact in pipeline.history(store, key)] == ["Oslo"]


def test_only_a_single_valued_key_has_a_tag(store: Store) -> None:
    tenant = f"tag-{uuid.uuid4()}"
    with pytest.raises(pipeline.InvalidInput, match="multi-valued"):
        pipeline.state_tag(
            store, {"tenant_id": tenant, "subject": "mira", "attribute": "languages"}
        )
    with pytest.raises(pipeline.InvalidInput, match="did you mean home_city"):
        pipeline.state_tag(store, {"tenant_id": tenant, "subject": "m", "attribute": "home_cty"})


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("held", ["a fact", "nothing"])
def test_of_16_concurrent_python_writers_with_one_tag_exactly_one_wins(
    postgres_url: str, held: str
) -> None:
    key = _key(f"tag-{uuid.uuid4()}")
    stores = [open_store(Settings(database_url=postgres_url)) for _ in range(WRITERS)]
    try:
        if held == "a fact":
            pipeline.put(stores[0], _put(key, "Utrecht", START))
        tag = pipeline.state_tag(stores[0], key)
        assert (tag == "0") == (held == "nothing")
        start = threading.Barrier(WRITERS)
        outcomes: list[str] = [""] * WRITERS

        def write(writer: int) -> None:
            command = _put(key, f"City{writer}", _day(writer)) | {"expected_state": tag}
            start.wait(timeout=60)
            try:
                pipeline.put(stores[writer], command)
            except VersionConflict:
                outcomes[writer] = "refused"
            except Exception as error:  # reported below, failing the test
                outcomes[writer] = f"{type(error).__name__}: {error}"
            else:
                outcomes[writer] = "written"

        threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert Counter(outcomes) == {"written": 1, "refused": WRITERS - 1}, outcomes
        winner = f"City{outcomes.index('written')}"
        written = {fact.value for fact in pipeline.history(stores[0], key)} - {"Utrecht"}
        assert written == {winner}
    finally:
        for opened in stores:
            opened.dispose()


def _sgam(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SGAM_DATABASE_URL": url}
    return subprocess.run([SGAM, *args], env=env, capture_output=True, text=True, timeout=120)


def _scope(tenant: str) -> list[str]:
    return ["--tenant", tenant, "--subject", "mira", "--attribute", "home_city"]


def _etag(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("etag: ")]
    return line.removeprefix("etag: ")


@pytest.mark.postgres
@pytest.mark.slow
def test_of_8_concurrent_cli_writers_with_one_tag_exactly_one_wins(postgres_url: str) -> None:
    tenant = f"tag-{uuid.uuid4()}"
    put = ["put", *_scope(tenant), "--json", "--etag"]
    first = _sgam(postgres_url, *put, "--value", "Utrecht", "--valid-from", START, "--source", "e0")
    assert first.returncode == 0, first.stderr
    read = _sgam(postgres_url, "get", *_scope(tenant), "--json", "--etag")
    tag = _etag(read.stderr)
    assert tag == _etag(first.stderr) != '"0"'  # as HTTP shows it: quoted

    def command(writer: int) -> list[str]:
        city = ["--value", f"City{writer}", "--valid-from", _day(writer)]
        return [SGAM, *put, *city, "--source", f"e{writer}", "--if-match", tag]

    env = {**os.environ, "SGAM_DATABASE_URL": postgres_url}
    writers = [
        subprocess.Popen(command(w), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for w in range(CLI_WRITERS)
    ]
    answers = [(writer.wait(timeout=180), writer.communicate()) for writer in writers]

    codes = [code for code, _ in answers]
    assert sorted(codes) == [0] + [3] * (CLI_WRITERS - 1), [err for _, (_, err) in answers]
    for code, (_, err) in answers:
        if code == 3:
            (line,) = err.decode().splitlines()
            assert line.startswith("sgam: VersionConflict: the key mira.home_city changed since")
            assert tag in line
    winner = codes.index(0)
    now = _sgam(postgres_url, "get", *_scope(tenant), "--at", _day(winner), "--json", "--etag")
    assert json.loads(now.stdout)["value"] == f"City{winner}"
    history = json.loads(_sgam(postgres_url, "history", *_scope(tenant), "--json").stdout)
    assert {fact["value"] for fact in history} - {"Utrecht"} == {f"City{winner}"}
    assert _etag(now.stderr) == _etag(answers[winner][1][1].decode())


@pytest.mark.slow
def test_the_cli_takes_the_tag_quoted_or_bare_and_refuses_a_malformed_one(
    database_url: str,
) -> None:
    tenant = f"tag-{uuid.uuid4()}"
    put = ["put", *_scope(tenant), "--source", "e1", "--json"]
    empty = _sgam(database_url, "get", *_scope(tenant), "--etag")
    assert (empty.returncode, _etag(empty.stderr)) == (1, '"0"')
    bare = _sgam(database_url, *put, "--value", "Oslo", "--valid-from", START, "--if-match", "0")
    assert bare.returncode == 0, bare.stderr
    stale = _sgam(database_url, *put, "--value", "Rome", "--valid-from", START, "--if-match", '"0"')
    assert stale.returncode == 3
    assert stale.stderr.count("\n") == 1
    malformed = _sgam(
        database_url, *put, "--value", "Rome", "--valid-from", START, "--if-match", "W/1"
    )
    assert malformed.returncode == 2
    assert malformed.stderr.startswith("sgam: --if-match: must be one tag")


def test_expected_version_still_works_and_says_it_is_deprecated(database_url: str) -> None:
    tenant = f"tag-{uuid.uuid4()}"
    put = ["put", *_scope(tenant), "--source", "e1", "--valid-from", START]
    done = _sgam(database_url, *put, "--value", "Oslo", "--expected-version", "0")
    assert done.returncode == 0, done.stderr
    assert "--expected-version is deprecated" in done.stderr
    assert "--if-match" in done.stderr
    stale = _sgam(database_url, *put, "--value", "Rome", "--expected-version", "0")
    assert stale.returncode == 3
