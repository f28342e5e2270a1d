"""The seed's passport-deadline trace (e1, the correction e2, the late e0) on both backends,
through the Python API, the command line, and `sgam demo`."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipeline
from pipeline.cli import run
from pipeline.db.store import Store
from tests.integration.ledger_helpers import assert_no_overlap, cli, cli_json, one_at, put, timeline

KEY = {"tenant_id": "acme", "subject": "mira", "attribute": "passport_deadline"}
E1 = {"value": "2026-07-15", "valid_from": "2026-06-01T09:00:00Z", "source_episode_id": "e1"}
E2 = {"value": "2026-06-30", "valid_from": "2026-06-03T10:00:00Z", "source_episode_id": "e2"}
E0 = {"value": "2026-08-01", "valid_from": "2026-05-30T08:00:00Z", "source_episode_id": "e0"}
NOW = "2026-06-04T00:00:00Z"
BEFORE_CORRECTION = "2026-06-02T00:00:00Z"
BEFORE_E1 = "2026-05-31T00:00:00Z"

# What `sgam demo` shows of the seed's trace, through the whole pipeline (ids and clock times
# left out: they differ from run to run).
DEMO_LINES = [
    "       done: passport_deadline written (a strong signal)",
    "       done: answer_style buffered (the catalogue asks for 2 sessions)",
    "       done: answer_style promoted (supported by 2 sessions)",
    "       done: birthday quarantined (a sensitive attribute not stated on the hot path)",
    "  e0 (2026-05-30T08:00:00Z): My passport deadline is 2026-08-01.",
    "  e1 (2026-06-01T09:00:00Z): Remember that my passport deadline is 2026-07-15.",
    "  e3 (2026-06-03T10:00:00Z): Actually, my passport deadline is 2026-06-30.",
    '  answer_style = "concise"  from 2026-06-01T09:02:00Z  source=e2  trust=inferred',
    '  home_city = "Lisbon"  from 2026-06-05T08:00:00Z  source=e6  trust=inferred',
    '  passport_deadline = "2026-06-30"  from 2026-06-03T10:00:00Z  source=e3  trust=inferred',
    "  (birthday is quarantined: sensitive, and not said on the hot path)",
    "  on 2026-06-02 (before the correction took effect): 2026-07-15 (source e1)",
    "  on 2026-05-31 (the late episode e0): 2026-08-01 (source e0)",
    "  for 2026-06-04, as believed before e3 was recorded: 2026-07-15 (source e1)",
    "  done, background lane, extractor rules",
    "  decision episode_processed: 1 kept, 0 refused",
]


def _shows_the_flow(output: str) -> None:
    lines = output.splitlines()
    for expected in DEMO_LINES:
        assert expected in lines, expected


def test_seed_trace_through_the_api(store: Store) -> None:
    e1 = put(store, KEY, **E1)
    e2 = put(store, KEY, **E2)
    assert e1.written
    assert e2.written

    current = one_at(store, KEY, NOW)
    assert (current.value, current.source_episode_id) == ("2026-06-30", "e2")
    historical = one_at(store, KEY, BEFORE_CORRECTION)
    assert (historical.value, historical.source_episode_id) == ("2026-07-15", "e1")
    assert current.supersedes_fact_id == historical.fact_id
    assert historical.fact_id == e1.fact.fact_id
    assert historical.valid_to == current.valid_from

    # A delayed extraction predates e1: it ends at e1's start and e2 stays current.
    e0 = put(store, KEY, **E0)
    assert e0.written
    delayed = one_at(store, KEY, BEFORE_E1)
    assert (delayed.value, delayed.source_episode_id) == ("2026-08-01", "e0")
    current = one_at(store, KEY, NOW)
    assert (current.value, current.source_episode_id) == ("2026-06-30", "e2")
    assert pipeline.get(store, KEY)[0].fact_id == current.fact_id

    assert timeline(pipeline.history(store, KEY)) == [
        ("2026-05-30T08:00:00+00:00", "2026-06-01T09:00:00+00:00", "2026-08-01"),
        ("2026-06-01T09:00:00+00:00", "2026-06-03T10:00:00+00:00", "2026-07-15"),
        ("2026-06-03T10:00:00+00:00", None, "2026-06-30"),
    ]
    assert delayed.supersedes_fact_id is None
    every_version = pipeline.history(store, KEY, versions=True)
    assert all(f.valid_to is None or f.valid_from < f.valid_to for f in every_version)
    assert_no_overlap(pipeline.history(store, KEY))
    assert pipeline.get(store, {**KEY, "at": "2026-05-30T07:59:59Z"}) == []


def test_seed_trace_through_the_cli(
    cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    def put_cli(fact: dict[str, str]) -> dict[str, Any]:
        code, written = cli_json(
            capsys,
            "put",
            "--tenant=acme",
            "--subject=mira",
            "--attribute=passport_deadline",
            f"--value={fact['value']}",
            f"--valid-from={fact['valid_from']}",
            f"--source={fact['source_episode_id']}",
        )
        assert code == 0
        assert isinstance(written, dict)
        return written

    def get_cli(at: str) -> dict[str, Any]:
        code, found = cli_json(
            capsys,
            "get",
            "--tenant",
            "acme",
            "--subject",
            "mira",
            "--attribute",
            "passport_deadline",
            "--at",
            at,
        )
        assert code == 0
        assert isinstance(found, dict), "a single-valued attribute prints one object"
        return found

    e1 = put_cli(E1)
    assert (e1["value"], e1["valid_from"], e1["valid_to"]) == (
        "2026-07-15",
        "2026-06-01T09:00:00Z",
        None,
    )
    put_cli(E2)
    current = get_cli(NOW)
    assert (current["value"], current["source_episode_id"]) == ("2026-06-30", "e2")
    historical = get_cli(BEFORE_CORRECTION)
    assert (historical["value"], historical["source_episode_id"]) == ("2026-07-15", "e1")
    assert current["supersedes_fact_id"] == historical["fact_id"] == e1["fact_id"]
    assert historical["valid_to"] == "2026-06-03T10:00:00Z"

    put_cli(E0)
    delayed = get_cli(BEFORE_E1)
    assert (delayed["value"], delayed["source_episode_id"]) == ("2026-08-01", "e0")
    assert delayed["valid_to"] == "2026-06-01T09:00:00Z"
    current = get_cli(NOW)
    assert (current["value"], current["source_episode_id"]) == ("2026-06-30", "e2")

    code, intervals = cli_json(
        capsys, "history", "--tenant", "acme", "--subject", "mira", "--attribute",
        "passport_deadline",
    )  # fmt: skip
    assert code == 0
    assert [(f["source_episode_id"], f["valid_from"], f["valid_to"]) for f in intervals] == [
        ("e0", "2026-05-30T08:00:00Z", "2026-06-01T09:00:00Z"),
        ("e1", "2026-06-01T09:00:00Z", "2026-06-03T10:00:00Z"),
        ("e2", "2026-06-03T10:00:00Z", None),
    ]
    code, versions = cli_json(
        capsys, "history", "--tenant", "acme", "--subject", "mira", "--attribute",
        "passport_deadline", "--versions",
    )  # fmt: skip
    assert code == 0
    assert len(versions) == 4, "e1 was closed once: its open version is kept"
    assert all(v["valid_to"] is None or v["valid_from"] < v["valid_to"] for v in versions)


def test_cli_fact_json_has_the_documented_fields(
    cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    code, fact = cli_json(
        capsys,
        "put",
        "--tenant=acme",
        "--subject=mira",
        "--attribute=passport_deadline",
        "--value=2026-06-30",
        "--valid-from=2026-06-03T12:00:00+02:00",
        "--source=e2",
    )
    assert code == 0
    for field in (
        "fact_id", "tenant_id", "subject", "attribute", "value", "valid_from", "valid_to",
        "recorded_at", "superseded_at", "supersedes_fact_id", "source_episode_id", "trust",
        "confidence", "status",
    ):  # fmt: skip
        assert field in fact, field
    assert fact["valid_from"] == "2026-06-03T10:00:00Z"
    assert fact["valid_to"] is None
    assert fact["superseded_at"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", fact["recorded_at"])
    assert (fact["trust"], fact["confidence"], fact["status"]) == ("verified", 1.0, "active")


def test_cli_get_prints_null_and_exits_1_when_nothing_holds(
    cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        capsys,
        "get",
        "--tenant=acme",
        "--subject=mira",
        "--attribute=passport_deadline",
        "--json",
    )
    assert code == 1
    assert out.strip() == "null"
    code, out, _ = cli(capsys, "get", "--tenant=acme", "--subject=mira", "--json")
    assert code == 1
    assert out.strip() == "[]"


def test_sgam_demo_shows_the_whole_flow_on_a_store_of_its_own(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert run(["demo"]) == 0
    first = capsys.readouterr().out
    _shows_the_flow(first)
    # It wrote nothing into the configured store, and runs again from scratch.
    assert pipeline.get(store, {"tenant_id": "acme", "subject": "mira"}) == []
    assert (tmp_path / "sgam-demo.sqlite3").exists()
    assert run(["demo"]) == 0
    _shows_the_flow(capsys.readouterr().out)


def test_sgam_demo_on_a_named_store_is_rerunnable(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        capsys.readouterr()
        assert run(["demo", "--database-url", database_url]) == 0
        _shows_the_flow(capsys.readouterr().out)


def test_cli_get_of_a_multi_valued_attribute_prints_a_list(
    cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    for value in ("en", "de"):
        code, _ = cli_json(
            capsys,
            "put",
            "--tenant=acme",
            "--subject=mira",
            "--attribute=languages",
            f"--value={value}",
            "--valid-from=2026-06-01T00:00:00Z",
            f"--source=e-{value}",
        )
        assert code == 0
    code, found = cli_json(
        capsys, "get", "--tenant=acme", "--subject=mira", "--attribute=languages",
        "--at=2026-06-02T00:00:00Z",
    )  # fmt: skip
    assert code == 0
    assert isinstance(found, list)
    assert sorted(fact["value"] for fact in found) == ["de", "en"]


@pytest.mark.slow
def test_the_demo_ends_by_saying_how_to_explore_its_store_and_that_works(tmp_path: Path) -> None:
    import os
    import shlex
    import subprocess
    import sys

    sgam = os.path.join(os.path.dirname(sys.executable), "sgam")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_")}
    demo = subprocess.run(
        [sgam, "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert demo.returncode == 0, demo.stderr
    ending = demo.stdout.split("Explore the demo's store yourself:\n")[1].splitlines()
    exported = dict(item.split("=", 1) for item in shlex.split(ending[0])[1:])
    assert exported["SGAM_DATABASE_URL"].endswith("sgam-demo.sqlite3")
    for line in ending[1:]:
        command = shlex.split(line)
        assert command[0] == sgam  # the path that works without activating the virtualenv
        done = subprocess.run(
            command + ["--json"],
            cwd=tmp_path,
            env=env | exported,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, (line, done.stderr)
        assert done.stdout.strip(), line
