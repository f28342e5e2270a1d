"""`sgam import`: fact commands from JSON Lines — checked whole before any write, one receipt per
line, a conflict reported without stopping the rest, a re-run with idempotency keys writing
nothing, stdin, the chunk size, and the exit codes 0/2/3."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.db.store import Store
from tests.factories import fact_command
from tests.integration.ledger_helpers import cli, ledger_counts


def fact(subject: str, attribute: str, value: Any, **fields: Any) -> dict[str, Any]:
    """One line of a CRM export: a verified fact with a key that makes a re-run safe."""
    return (
        fact_command(
            subject=subject,
            attribute=attribute,
            value=value,
            source_episode_id="crm-export-2026-01",
            idempotency_key=f"crm:{subject}:{attribute}",
        )
        | fields
    )


def _file(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    path = tmp_path / "facts.jsonl"
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def _receipts(out: str) -> list[dict[str, Any]]:
    receipts = json.loads(out)  # one JSON array, as every list the CLI prints
    assert isinstance(receipts, list)
    return receipts


def _holds(capsys: pytest.CaptureFixture[str], subject: str, attribute: str) -> Any:
    code, out, _ = cli(
        capsys, "get", "--tenant", "acme", "--subject", subject, "--attribute", attribute, "--json"
    )
    return json.loads(out)["value"] if code == 0 else None


def test_a_valid_file_is_written_with_a_receipt_per_line(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        fact("c-1", "home_city", "Lisbon"),
        "",
        fact("c-1", "account_plan", "Pro"),
        fact("c-2", "languages", "Portuguese"),
    )

    code, out, err = cli(capsys, "import", str(path), "--json")

    assert (code, err) == (0, "")
    receipts = _receipts(out)
    assert [(r["line"], r["outcome"], r["version"]) for r in receipts] == [
        (1, "written", 1),
        (3, "written", 1),
        (4, "written", 1),
    ]
    assert all(set(r) == {"line", "outcome", "fact_id", "version"} for r in receipts)
    assert _holds(capsys, "c-1", "home_city") == "Lisbon"
    assert _holds(capsys, "c-1", "account_plan") == "pro"  # normalised by the catalogue


def test_invalid_lines_are_all_named_and_nothing_is_stored(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = fact("c-1", "home_city", "Lisbon")
    missing = {key: value for key, value in good.items() if key != "source_episode_id"}
    path = _file(
        tmp_path,
        good,
        "{not json",
        missing,
        good | {"attribute": "home_cty"},
        good | {"attribute": "passport_deadline", "value": "next spring"},
        good | {"attribute": "languages", "cardinality": "one"},
        good | {"expires_at": "2020-01-01T00:00:00Z"},
    )

    code, out, err = cli(capsys, "import", str(path), "--json")

    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert [line.split(":")[1] for line in lines] == [f" line {n}" for n in range(2, 8)]
    assert "is not JSON" in lines[0]
    assert "source_episode_id: is required" in lines[1]
    assert "did you mean home_city?" in lines[2]
    assert "value: " in lines[3]
    assert "cardinality: 'languages' is declared many" in lines[4]
    assert "expires_at: must be in the future" in lines[5]
    assert ledger_counts(store) == {"facts": 0, "claims": 0, "events": 0}


def test_skip_invalid_writes_the_good_lines_and_reports_the_bad(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        fact("c-1", "home_city", "Lisbon"),
        "[1, 2]",
        fact("c-1", "acount_plan", "pro"),
        fact("c-2", "home_city", "Porto"),
    )

    # One command per transaction: the invalid lines fall between the chunks' receipts.
    code, out, err = cli(capsys, "import", str(path), "--skip-invalid", "--chunk", "1", "--json")

    assert code == 2
    receipts = _receipts(out)
    assert [(r["line"], r["outcome"]) for r in receipts] == [
        (1, "written"),
        (2, "invalid"),
        (3, "invalid"),
        (4, "written"),
    ]
    assert receipts[1]["error"] == "must be a JSON object, not list"
    assert "did you mean account_plan?" in receipts[2]["error"]
    assert err == "sgam: 2 lines not written: 2 invalid\n"
    assert _holds(capsys, "c-2", "home_city") == "Porto"


def test_a_rerun_with_idempotency_keys_writes_nothing(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(tmp_path, fact("c-1", "home_city", "Lisbon"), fact("c-1", "account_plan", "pro"))
    first = _receipts(cli(capsys, "import", str(path), "--json")[1])
    before = ledger_counts(store)

    code, out, _ = cli(capsys, "import", str(path), "--json")

    assert code == 0
    again = _receipts(out)
    assert [r["outcome"] for r in again] == ["unchanged", "unchanged"]
    assert [r["fact_id"] for r in again] == [r["fact_id"] for r in first]
    assert ledger_counts(store) == before


def test_a_keyed_rerun_with_refused_lines_writes_nothing_and_answers_alike(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        fact("c-1", "home_city", "Lisbon", trust="user_confirmed"),
        fact("c-1", "home_city", "Porto", idempotency_key="k2"),  # lower trust: rejected
        fact("c-2", "home_city", "Faro"),
        fact("c-2", "home_city", "Braga", idempotency_key="k4"),  # equal trust: conflict
    )
    first_code, first_out, _ = cli(capsys, "import", str(path), "--json")
    before = ledger_counts(store)

    code, out, _ = cli(capsys, "import", str(path), "--json")

    assert (first_code, code) == (3, 3)
    outcomes = [(r["outcome"], r.get("error")) for r in _receipts(out)]
    first = [(r["outcome"], r.get("error")) for r in _receipts(first_out)]
    assert [outcomes[1], outcomes[3]] == [first[1], first[3]]  # the same refusals again
    assert [outcome for outcome, _ in outcomes] == [
        "unchanged",
        "rejected",
        "unchanged",
        "conflict",
    ]
    assert ledger_counts(store) == before  # not even a second reject event


def test_refused_lines_get_their_own_receipts_and_the_rest_is_written(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        fact("c-1", "home_city", "Lisbon", trust="user_confirmed"),
        fact("c-1", "home_city", "Porto", idempotency_key="k2"),  # lower trust
        fact("c-2", "home_city", "Faro"),
        fact("c-2", "home_city", "Braga", idempotency_key="k4"),  # equal trust
        fact("c-3", "home_city", "Evora", expected_version=1),  # nothing holds yet
        fact("c-1", "home_city", "Lisbon", valid_from="2026-02-01T00:00:00Z"),  # reused key
        fact("c-3", "account_plan", "free"),
    )

    code, out, err = cli(capsys, "import", str(path), "--json")

    assert code == 2  # a key reused for another command: the file needs fixing, as `put` says
    receipts = _receipts(out)
    assert [r["outcome"] for r in receipts] == [
        "written",
        "rejected",
        "written",
        "conflict",
        "version_conflict",
        "conflict",
        "written",
    ]
    assert receipts[1]["error"].startswith("TrustRejected: home_city has a different value")
    assert receipts[3]["error"].startswith("FactConflict: ")
    assert receipts[5]["error"].startswith("IdempotencyConflict: ")
    assert "fact_id" not in receipts[3]
    assert err == ("sgam: 4 lines not written: 1 rejected, 2 conflict, 1 version_conflict\n")
    assert _holds(capsys, "c-3", "account_plan") == "free"


def test_an_invalid_line_ranks_before_a_conflict(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(
        tmp_path,
        fact("c-1", "home_city", "Lisbon"),
        fact("c-1", "home_city", "Porto", idempotency_key="k2"),
        "null",
    )
    assert cli(capsys, "import", str(path), "--skip-invalid")[0] == 2


def test_stdin(
    cli_env: object,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = "\r\n".join(json.dumps(fact(f"c-{n}", "home_city", "Lisbon")) for n in range(3))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))

    code, out, _ = cli(capsys, "import", "-", "--json")

    assert code == 0
    assert [(r["line"], r["outcome"]) for r in _receipts(out)] == [
        (1, "written"),
        (2, "written"),
        (3, "written"),
    ]


def test_the_chunk_size_defaults_to_the_batch_size_and_must_be_positive(
    cli_env: object,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import pipeline.ledger.batch

    path = _file(tmp_path, *(fact(f"c-{n}", "home_city", "Lisbon") for n in range(5)))
    code, _, err = cli(capsys, "import", str(path), "--chunk", "0")
    assert code == 2
    assert "--chunk" in err
    assert ledger_counts(store)["facts"] == 0

    calls: list[tuple[int, int | None]] = []
    put_many = pipeline.ledger.batch.put_many

    def spy(store: Store, commands: Any, *, chunk: int | None = None) -> Any:
        commands = list(commands)
        calls.append((len(commands), chunk))
        return put_many(store, commands, chunk=chunk)

    monkeypatch.setattr(pipeline.ledger.batch, "put_many", spy)
    monkeypatch.setenv("SGAM_BATCH_SIZE", "2")
    assert cli(capsys, "import", str(path))[0] == 0
    assert calls == [(2, 2), (2, 2), (1, 2)]
    assert ledger_counts(store)["facts"] == 5


def test_an_empty_file_imports_nothing(
    cli_env: object, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _file(tmp_path, "", "  ")
    assert cli(capsys, "import", str(path), "--json") == (0, "[]\n", "")  # a list, empty


def test_people_get_the_failed_lines_and_a_count_per_outcome(
    cli_env: object,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr("pipeline.cli.output.wants_json", lambda flag: flag)
    path = _file(
        tmp_path,
        fact("c-1", "home_city", "Lisbon"),
        fact("c-1", "home_city", "Porto", idempotency_key="k2"),
    )
    cli(capsys, "import", str(path))

    code, out, _ = cli(capsys, "import", str(path))

    assert code == 3
    assert out.splitlines()[-1] == "2 lines: 1 unchanged, 1 conflict"
    assert out.startswith("line 2: conflict  FactConflict: ")
    assert cli(capsys, "import", str(_file(tmp_path)))[1] == "0 lines: nothing to import\n"
