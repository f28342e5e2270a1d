"""The lifecycle commands on the command line: results, exit codes and refused input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from pipeline.cli import run
from pipeline.db.models import ClaimRow, EventRow, FactRow, IdempotencyRow
from pipeline.db.store import open_store
from pipeline.settings import Settings

PUT = [
    "put",
    "--tenant",
    "acme",
    "--subject",
    "mira",
    "--attribute",
    "contact_channel",
    "--valid-from",
    "2026-02-01T00:00:00Z",
    "--source",
    "ep-1",
]


@pytest.fixture
def sgam(
    cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, Any, str]]:
    """Run the CLI in-process; returns (exit code, parsed JSON stdout or None, stderr)."""

    def invoke(*args: str) -> tuple[int, Any, str]:
        code = run(list(args))
        captured = capsys.readouterr()
        out = json.loads(captured.out) if captured.out.strip() else None
        return code, out, captured.err

    return invoke


def _row_counts(database_url: str) -> tuple[int, ...]:
    store = open_store(Settings(database_url=database_url))
    try:
        with store.begin() as unit:
            session = unit.session
            return tuple(
                session.scalar(select(func.count()).select_from(table)) or 0
                for table in (ClaimRow, FactRow, EventRow, IdempotencyRow)
            )
    finally:
        store.dispose()


def test_quarantine_promote_forget_roundtrip(sgam: Callable[..., tuple[int, Any, str]]) -> None:
    code, quarantined, _ = sgam(*PUT, "--value", "email", "--trust", "untrusted")
    assert (code, quarantined["status"]) == (0, "quarantined")
    assert sgam("get", "--tenant", "acme", "--subject", "mira")[:2] == (1, [])

    code, promoted, _ = sgam(
        "promote", quarantined["fact_id"], "--tenant", "acme", "--expected-version", "1", "--json"
    )
    assert (code, promoted["status"], promoted["trust"]) == (0, "active", "verified")

    code, stale, err = sgam(
        "promote", quarantined["fact_id"], "--tenant", "acme", "--expected-version", "1"
    )
    assert (code, stale) == (3, None)
    assert err.count("\n") == 1
    assert "VersionConflict" in err

    code, context, _ = sgam(
        "context", "--tenant", "acme", "--subject", "mira", "--query", "email", "--json"
    )
    assert code == 0
    assert [item["source_episode_id"] for item in context["items"]] == ["ep-1"]

    assert sgam("forget", "--tenant", "acme", "--subject", "mira", "--json")[:2] == (
        0,
        {"hidden": 1, "purged": False, "files_scrubbed": None},
    )
    assert sgam("get", "--tenant", "acme", "--subject", "mira")[:2] == (1, [])
    assert sgam("context", "--tenant", "acme", "--subject", "mira")[0] == 1
    code, expired, _ = sgam("expire", "--now", "2040-01-01T00:00:00Z", "--force", "--json")
    assert (code, expired) == (0, {"expired": 0, "fact_ids": []})


def test_a_dismissed_fact_is_hidden_for_good_and_logged_with_its_reason(
    sgam: Callable[..., tuple[int, Any, str]],
) -> None:
    code, quarantined, _ = sgam(*PUT, "--value", "email", "--trust", "untrusted")
    assert (code, quarantined["status"]) == (0, "quarantined")
    fact_id = quarantined["fact_id"]

    code, dismissed, _ = sgam("dismiss", fact_id, "--tenant", "acme", "--reason", "spam", "--json")
    assert (code, dismissed["fact_id"], dismissed["value"]) == (0, fact_id, "email")
    assert dismissed["status"] == "dismissed"  # as the dismissal left it, not "quarantined"

    for again in (["dismiss", fact_id], ["promote", fact_id]):
        code, out, err = sgam(*again, "--tenant", "acme")
        assert (code, out) == (1, None)
        assert err == f"sgam: NotFound: no fact {fact_id} in tenant acme\n"
    assert sgam("get", "--tenant", "acme", "--subject", "mira", "--include-quarantined")[:2] == (
        1,
        [],
    )
    code, (logged,), _ = sgam("log", "--tenant", "acme", "--limit", "1", "--json")  # one event
    assert code == 0
    assert (logged["kind"], logged["reason"], logged["fact_ids"]) == (
        "dismiss",
        "spam",
        [fact_id],
    )


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["promote", "some-id", "--tenant", ""], "--tenant"),
        (
            ["promote", "some-id", "--tenant", "acme", "--expected-version", "zero"],
            "--expected-version",
        ),
        (
            ["promote", "some-id", "--tenant", "acme", "--expected-version", "0"],
            "--expected-version",
        ),
        (["promote", "", "--tenant", "acme"], "--fact-id"),
        (["dismiss", "some-id", "--tenant", "acme", "--reason", "x" * 501], "--reason"),
        (
            ["dismiss", "some-id", "--tenant", "acme", "--expected-version", "0"],
            "--expected-version",
        ),
        (["forget", "--tenant", "acme", "--subject", "  "], "--subject"),
        (["forget", "--tenant", "acme"], "--subject"),
        (
            ["forget", "--tenant", "acme", "--subject", "mira", "--idempotency-key", ""],
            "--idempotency-key",
        ),
        (["expire", "--now", "tomorrow"], "--now"),
        (["expire", "--now", "2026-12-01T00:00:00"], "--now"),
        (["expire", "--tenant", ""], "--tenant"),
        (
            ["context", "--tenant", "acme", "--subject", "mira", "--budget-tokens", "-5"],
            "--budget-tokens",
        ),
        (
            ["context", "--tenant", "acme", "--subject", "mira", "--budget-tokens", "many"],
            "--budget-tokens",
        ),
        (["context", "--subject", "mira"], "--tenant"),
        (["log", "--tenant", "acme", "--limit", "0"], "--limit"),
        (["replay", "--to", "mysql://nowhere/db"], "--to"),
        (["replay"], "--to"),
        (["put", *PUT[1:], "--value", "fax"], "--value"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    sgam: Callable[..., tuple[int, Any, str]], database_url: str, args: list[str], option: str
) -> None:
    before = _row_counts(database_url)

    code, out, err = sgam(*args)

    assert code == 2
    assert out is None
    assert err.count("\n") == 1
    assert err.startswith("sgam: ")
    assert option in err
    assert _row_counts(database_url) == before


def test_unknown_fact_is_exit_1(sgam: Callable[..., tuple[int, Any, str]]) -> None:
    code, _, err = sgam("promote", "no-such-fact", "--tenant", "acme")
    assert code == 1
    assert "NotFound" in err


def test_catalog_show_prints_the_catalogue(sgam: Callable[..., tuple[int, Any, str]]) -> None:
    code, catalog, _ = sgam("catalog", "show")
    assert code == 0
    assert catalog["attributes"]["passport_deadline"]["type"] == "date"


def test_log_is_newest_first_filters_by_time_and_says_when_nothing_matches(
    sgam: Callable[..., tuple[int, Any, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    for month, value in enumerate(("email", "phone", "chat"), start=1):
        assert sgam(*PUT, "--value", value, "--valid-from", f"2026-0{month}-01T00:00:00Z")[0] == 0

    def log(*args: str) -> tuple[int, list[dict[str, Any]]]:
        code = run(["log", "--tenant", "acme", *args, "--json"])
        return code, json.loads(capsys.readouterr().out)

    code, events = log()
    assert code == 0
    assert [event["kind"] for event in events] == ["supersede", "write"] * 2 + ["write"]
    ids = [event["event_id"] for event in events]
    assert ids == sorted(ids, reverse=True)
    assert log("--oldest-first") == (0, list(reversed(events)))
    last = events[0]["occurred_at"]  # both decisions of the last put
    assert log("--since", last) == (0, events[:2])
    assert log("--until", last) == (0, events[2:])
    assert log("--until", "2000-01-01T00:00:00Z") == (1, [])
    assert run(["log", "--tenant", "no-such-tenant"]) == 1
