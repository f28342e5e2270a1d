"""The pipeline's commands: ingest (receipts, line numbers, exit codes), remember (exit codes
0/1/3), episodes (list, show, retry), candidates/confirm/reject, consolidate, and the worker
commands without a broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.ledger_helpers import cli
from tests.integration.pipeline_helpers import episode

SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")


def _file(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    path = tmp_path / "episodes.jsonl"
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def test_ingest_prints_a_receipt_per_line_and_twice_is_duplicates(
    cli_env: object, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1", episode_id="e1"),
        "",
        episode("Nice weather today.", "2026-06-01T09:01:00Z", "s1", episode_id="e2"),
    )

    code, out, err = cli(capsys, "ingest", str(path), "--json")
    again = cli(capsys, "ingest", str(path), "--json")

    receipts = json.loads(out)
    note = receipts[1].pop("note")  # "Nice weather today." names no attribute
    assert (code, err) == (0, f"sgam: note: line 3: {note}\n")
    assert receipts == [
        {"line": 1, "episode_id": "e1", "status": "done"},
        {"line": 3, "episode_id": "e2", "status": "done"},
    ]
    assert [receipt["status"] for receipt in json.loads(again[1])] == ["duplicate"] * 2


def test_ingest_names_every_bad_line_and_stores_nothing(
    cli_env: object, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1")
    path = _file(
        tmp_path,
        good,
        "{not json",
        good | {"occurred_at": "2026-06-01T09:00:00"},
        "[1, 2]",
        good | {"source": "email"},
    )

    code, out, err = cli(capsys, "ingest", str(path))

    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert [line.split(":")[0:2] for line in lines] == [
        ["sgam", " line 2"],
        ["sgam", " line 3"],
        ["sgam", " line 4"],
        ["sgam", " line 5"],
    ]
    assert "occurred_at: " in lines[1]
    assert "source: " in lines[3]
    assert cli(capsys, "episodes", "--tenant", "acme")[0] == 1  # nothing stored

    code, out, err = cli(capsys, "ingest", str(path), "--skip-invalid", "--json")
    assert code == 2
    assert [receipt["line"] for receipt in json.loads(out)] == [1]
    assert len(err.splitlines()) == 4


def test_remember_exit_codes(cli_env: object, capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "remember",
        "--tenant",
        "acme",
        "--subject",
        "mira",
        "--at",
        "2026-06-01T09:00:00Z",
        "--json",
    ]

    code, out, _ = cli(capsys, *base, "--text", "Remember that my home city is Lisbon.")
    assert code == 0
    answer = json.loads(out)
    assert set(answer) == {"episode_id", "facts", "rejected", "deferred"}
    assert [(f["value"], f["trust"]) for f in answer["facts"]] == [("Lisbon", "user_confirmed")]

    assert cli(capsys, *base, "--text", "What a nice day.")[0] == 1
    code, _, err = cli(capsys, *base, "--text", "My home city is Porto.")
    assert code == 3
    assert err.startswith("sgam: FactConflict: ")
    assert cli(capsys, *base, "--text", "")[0] == 2


def test_episodes_list_show_and_retry(
    cli_env: object, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        episode("My contact channel is email.", "2026-06-01T09:00:00Z", "s1", episode_id="e1"),
    )
    cli(capsys, "ingest", str(path))

    code, out, _ = cli(capsys, "episodes", "--tenant", "acme", "--status", "done", "--json")
    assert code == 0
    assert [e["episode_id"] for e in json.loads(out)] == ["e1"]
    code, out, _ = cli(capsys, "episodes", "show", "e1", "--tenant", "acme", "--json")
    shown = json.loads(out)
    assert (code, shown["status"], shown["candidates"]) == (0, "done", [])  # a reader's view
    reviewer = ("--include-quarantined", "--json")
    code, out, _ = cli(capsys, "episodes", "show", "e1", "--tenant", "acme", *reviewer)
    shown = json.loads(out)
    assert (code, shown["status"], len(shown["candidates"])) == (0, "done", 1)
    assert cli(capsys, "episodes", "show", "e1", "--tenant", "acme", "--agent", "bot9")[0] == 1
    assert cli(capsys, "episodes", "show", "e1", "--tenant", "globex")[0] == 1
    assert cli(capsys, "episodes", "retry", "--tenant", "acme")[0] == 1  # nothing failed


def test_candidates_confirm_and_reject(
    cli_env: object, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        episode("My contact channel is email.", "2026-06-01T09:00:00Z", "s1"),
        episode("I prefer concise answers.", "2026-06-01T09:00:00Z", "s1"),
    )
    cli(capsys, "ingest", str(path))
    code, out, _ = cli(capsys, "candidates", "--tenant", "acme", "--json")
    waiting = {c["attribute"]: c["candidate_id"] for c in json.loads(out)}
    assert (code, set(waiting)) == (0, {"contact_channel", "answer_style"})
    for candidate in json.loads(out):  # each lists the episode that supports it
        (support,) = candidate["supporting"]
        assert (support["session_id"], support["occurred_at"]) == ("s1", "2026-06-01T09:00:00Z")
        assert support["episode_id"]
        assert support["evidence"]

    code, out, _ = cli(capsys, "confirm", waiting["contact_channel"], "--tenant", "acme", "--json")
    assert (code, json.loads(out)["status"], json.loads(out)["fact"]["value"]) == (
        0,
        "confirmed",
        "email",
    )
    assert cli(capsys, "reject", waiting["answer_style"], "--tenant", "acme")[0] == 0
    assert (
        cli(capsys, "reject", waiting["answer_style"], "--tenant", "acme")[0] == 3
    )  # not buffered
    assert cli(capsys, "confirm", waiting["answer_style"], "--tenant", "globex")[0] == 1
    assert cli(capsys, "candidates", "--tenant", "acme")[0] == 1  # none left waiting


def test_consolidate_reports_and_is_idempotent(
    cli_env: object, capsys: pytest.CaptureFixture[str]
) -> None:
    now = "2026-11-01T00:00:00Z"
    first = json.loads(cli(capsys, "consolidate", "--now", now, "--json")[1])
    second = json.loads(cli(capsys, "consolidate", "--now", now, "--json")[1])
    assert first == second
    assert set(first) == {
        "now",
        "tenant_id",
        "promoted",
        "expired_candidates",
        "expired_facts",
        "redriven",
        "requeued",
    }
    assert cli(capsys, "consolidate", "--now", "2099-01-01T00:00:00Z")[0] == 2


def test_worker_and_beat_need_a_broker(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "SGAM_BROKER_URL"}
    for command in (["worker"], ["beat"]):
        done = subprocess.run(
            [SGAM, *command],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert done.stderr.startswith("sgam: SGAM_BROKER_URL: is not set")
