"""Bad input is refused before anything is written: InvalidInput naming the field through the
Python API, exit code 2 and one line on stderr naming the option through the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from tests.integration.ledger_helpers import cli, count_rows

SGAM = str(Path(sys.executable).with_name("sgam"))
TEN_MB = 10 * 1024 * 1024
TABLES = ("facts", "claims", "events", "idempotency_keys")

GOOD: dict[str, Any] = {
    "tenant_id": "acme",
    "subject": "mira",
    "attribute": "home_city",
    "value": "Berlin",
    "valid_from": "2026-06-03T10:00:00Z",
    "source_episode_id": "e1",
}
OPTION = {
    "tenant_id": "--tenant",
    "subject": "--subject",
    "attribute": "--attribute",
    "value": "--value",
    "valid_from": "--valid-from",
    "valid_to": "--valid-to",
    "source_episode_id": "--source",
    "trust": "--trust",
    "confidence": "--confidence",
    "cardinality": "--cardinality",
}

# (case id, fields changed from GOOD, the field the error must name)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("word-timestamp", {"valid_from": "yesterday"}, "valid_from"),
    ("month-13", {"valid_from": "2026-13-01T00:00:00Z"}, "valid_from"),
    ("february-30", {"valid_from": "2026-02-30T00:00:00Z"}, "valid_from"),
    ("naive-valid-from", {"valid_from": "2026-06-03T10:00:00"}, "valid_from"),
    ("impossible-date-only", {"valid_from": "2026-02-30"}, "valid_from"),
    ("naive-valid-to", {"valid_to": "2026-07-01T00:00:00"}, "valid_to"),
    ("utc-overflow", {"valid_from": "9999-12-31T23:00:00-05:00"}, "valid_from"),
    ("empty-tenant", {"tenant_id": ""}, "tenant_id"),
    ("blank-tenant", {"tenant_id": "   "}, "tenant_id"),
    ("padded-tenant", {"tenant_id": " acme "}, "tenant_id"),
    ("empty-subject", {"subject": ""}, "subject"),
    ("blank-subject", {"subject": " \t "}, "subject"),
    ("empty-attribute", {"attribute": ""}, "attribute"),
    ("blank-attribute", {"attribute": "  "}, "attribute"),
    ("empty-source", {"source_episode_id": ""}, "source_episode_id"),
    ("control-char-subject", {"subject": "mi\x07ra"}, "subject"),
    ("c1-control-subject", {"subject": "mi\x85ra"}, "subject"),
    ("c1-control-tenant", {"tenant_id": "acme\x9b"}, "tenant_id"),
    ("bidi-override-subject", {"subject": "mira\u202egnp.exe"}, "subject"),
    ("bidi-isolate-attribute", {"attribute": "home\u2066_city"}, "attribute"),
    ("invisible-subject", {"subject": "\u200b\u2060"}, "subject"),
    ("bom-only-tenant", {"tenant_id": "\ufeff"}, "tenant_id"),
    ("json-nan", {"attribute": "compliance_flag", "value": '{"a": NaN}'}, "value"),
    ("json-infinity", {"attribute": "compliance_flag", "value": "[Infinity]"}, "value"),
    ("json-minus-infinity", {"attribute": "compliance_flag", "value": "-Infinity"}, "value"),
    ("json-null", {"attribute": "compliance_flag", "value": "null"}, "value"),
    ("json-too-deep", {"attribute": "compliance_flag", "value": "[" * 65 + "]" * 65}, "value"),
    ("json-lone-surrogate", {"attribute": "compliance_flag", "value": '"\\ud800"'}, "value"),
    ("unknown-trust", {"trust": "godlike"}, "trust"),
    ("valid-to-before-from", {"valid_to": "2026-06-01T00:00:00Z"}, "valid_to"),
    ("valid-to-equals-from", {"valid_to": "2026-06-03T12:00:00+02:00"}, "valid_to"),
    ("unknown-attribute", {"attribute": "shoe_size"}, "attribute"),
    ("number-wrong-type", {"attribute": "monthly_budget", "value": "lots"}, "value"),
    ("date-wrong-type", {"attribute": "passport_deadline", "value": "soon"}, "value"),
    ("enum-wrong-value", {"attribute": "answer_style", "value": "verbose"}, "value"),
    ("cardinality-mismatch", {"cardinality": "many"}, "cardinality"),
    ("confidence-above-1", {"confidence": "1.5"}, "confidence"),
    ("confidence-below-0", {"confidence": "-0.1"}, "confidence"),
    ("confidence-nan", {"confidence": "nan"}, "confidence"),
    ("confidence-word", {"confidence": "high"}, "confidence"),
]


def assert_nothing_written(store: Store) -> None:
    assert {table: count_rows(store, table) for table in TABLES} == dict.fromkeys(TABLES, 0)


def cli_args(fields: dict[str, Any]) -> list[str]:
    args = ["put"]
    for field, value in fields.items():
        args += [OPTION[field], str(value)]
    return [*args, "--json"]


def assert_one_line_naming(err: str, option: str) -> None:
    assert err.endswith("\n")
    assert err.count("\n") == 1, f"expected one line on stderr, got {err!r}"
    assert err.startswith(f"sgam: {option}: "), err


@pytest.mark.parametrize(("changes", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_api_refuses_bad_input(store: Store, changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        pipeline.put(store, {**GOOD, **changes})
    assert refused.value.field == field
    assert refused.value.problem
    assert_nothing_written(store)


@pytest.mark.parametrize(("changes", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cli_refuses_bad_input(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    changes: dict[str, Any],
    field: str,
) -> None:
    code, out, err = cli(capsys, *cli_args({**GOOD, **changes}))
    assert code == 2
    assert out == ""
    assert_one_line_naming(err, OPTION[field])
    assert_nothing_written(store)


def test_good_input_is_accepted_by_both_surfaces(
    store: Store, cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    # The control for every case above: the unchanged command is written.
    code, out, err = cli(capsys, *cli_args(GOOD))
    assert (code, err) == (0, "")
    assert '"value": "Berlin"' in out
    assert pipeline.put(store, GOOD).written is False
    assert count_rows(store, "facts") == 1


def test_api_refuses_a_ten_megabyte_value(store: Store) -> None:
    with pytest.raises(InvalidInput) as refused:
        pipeline.put(store, {**GOOD, "value": "x" * TEN_MB})
    assert refused.value.field == "value"
    assert "bytes" in refused.value.problem
    assert_nothing_written(store)


def test_cli_refuses_a_ten_megabyte_value_file(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * TEN_MB)
    fields = {key: value for key, value in GOOD.items() if key != "value"}
    code, out, err = cli(capsys, *cli_args(fields), "--value-file", str(big))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert re.match(r"sgam: --value(-file)?: .*bytes", err), err
    assert_nothing_written(store)


def test_cli_refuses_a_value_file_that_is_not_utf8(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Köln".encode("latin-1"))
    fields = {key: value for key, value in GOOD.items() if key != "value"}
    code, out, err = cli(capsys, *cli_args(fields), "--value-file", str(latin1))
    assert code == 2
    assert_one_line_naming(err, "--value-file")
    assert_nothing_written(store)


def test_cli_needs_exactly_one_of_value_and_value_file(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    fields = {key: value for key, value in GOOD.items() if key != "value"}
    code, _, err = cli(capsys, *cli_args(fields))
    assert code == 2
    assert_one_line_naming(err, "--value")
    source = tmp_path / "v.txt"
    source.write_text("Berlin", encoding="utf-8")
    code, _, err = cli(capsys, *cli_args(GOOD), "--value-file", str(source))
    assert code == 2
    assert_one_line_naming(err, "--value")
    assert_nothing_written(store)


@pytest.mark.parametrize(
    "field", ["tenant_id", "subject", "attribute", "value", "source_episode_id", "valid_from"]
)
def test_api_refuses_text_that_is_not_utf8(store: Store, field: str) -> None:
    # What Python makes of undecodable bytes (surrogate escapes) must not reach the store.
    with pytest.raises(InvalidInput) as refused:
        pipeline.put(store, {**GOOD, field: "mi\udcff\udcfera"})
    assert refused.value.field == field
    assert_nothing_written(store)


@pytest.mark.parametrize(
    "option", ["--tenant", "--subject", "--attribute", "--value", "--source", "--valid-from"]
)
def test_sgam_refuses_non_utf8_argv_bytes(store: Store, database_url: str, option: str) -> None:
    argv: list[bytes] = [SGAM.encode(), b"put"]
    for field, value in GOOD.items():
        flag = OPTION[field].encode()
        argv += [flag, b"\xff\xfe" if OPTION[field] == option else str(value).encode()]
    done = subprocess.run(
        argv,
        capture_output=True,
        env={**os.environ, "SGAM_DATABASE_URL": database_url},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.count(b"\n") == 1, done.stderr
    assert done.stderr.startswith(f"sgam: {option}: ".encode()), done.stderr
    assert_nothing_written(store)


@pytest.mark.slow
def test_sgam_process_exit_codes(store: Store, database_url: str) -> None:
    env = {**os.environ, "SGAM_DATABASE_URL": database_url}

    def sgam(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SGAM, *args], capture_output=True, text=True, env=env, timeout=60, check=False
        )

    base = [f"{OPTION[field]}={value}" for field, value in GOOD.items() if field != "value"]
    assert sgam("put", *base, "--value=Berlin").returncode == 0
    conflict = sgam("put", *base, "--value=Paris")
    assert conflict.returncode == 3
    assert conflict.stderr.startswith("sgam: FactConflict")
    assert conflict.stderr.count("\n") == 1
    bad = sgam("put", *base, "--value=Paris", "--trust=godlike")
    assert bad.returncode == 2
    assert bad.stderr.startswith("sgam: --trust: ")
    key = ["--tenant=acme", "--subject=mira", "--attribute=home_city"]
    assert sgam("get", *key, "--at=2026-06-03T09:59:59Z").returncode == 1
    found = sgam("get", *key)
    assert found.returncode == 0
    assert '"value": "Berlin"' in found.stdout
    assert count_rows(store, "facts") == 1


@pytest.mark.parametrize(
    "value",
    [
        {"a": float("nan")},
        [float("inf")],
        "\ud800",
        {"k": ["\udfff"]},
        None,
    ],
    ids=["nan", "infinity", "lone-surrogate", "nested-surrogate", "null"],
)
def test_api_refuses_values_json_cannot_hold(store: Store, value: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        pipeline.put(store, GOOD | {"attribute": "compliance_flag", "value": value})
    assert refused.value.field == "value"
    assert_nothing_written(store)


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def test_api_refuses_a_value_nested_100000_deep(store: Store) -> None:
    with pytest.raises(InvalidInput, match="nested more than 64 levels") as refused:
        pipeline.put(store, GOOD | {"attribute": "compliance_flag", "value": _nested(100_000)})
    assert refused.value.field == "value"
    assert_nothing_written(store)


def test_api_accepts_a_value_nested_to_the_limit(store: Store) -> None:
    pipeline.put(store, GOOD | {"attribute": "compliance_flag", "value": _nested(63)})
    assert count_rows(store, "facts") == 1


@pytest.mark.parametrize(
    ("name", "text"),
    [("deep", "[" * 100_000 + "]" * 100_000), ("surrogate", '"\\ud800"')],
)
def test_cli_refuses_bad_json_in_a_value_file(
    store: Store,
    cli_env: Callable[[], None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    text: str,
) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(text, encoding="utf-8")
    fields = {key: value for key, value in GOOD.items() if key != "value"}
    args = [*cli_args(fields | {"attribute": "compliance_flag"}), "--value-file", str(path)]
    code, _, err = cli(capsys, *args)
    assert code == 2
    assert_one_line_naming(err, "--value")
    assert_nothing_written(store)


def test_identifiers_are_one_key_whatever_their_unicode_composition(store: Store) -> None:
    decomposed, composed = "Jose\u0301", "Jos\u00e9"
    pipeline.put(store, GOOD | {"subject": decomposed})

    (fact,) = pipeline.get(store, {"tenant_id": "acme", "subject": composed})
    assert fact.subject == composed
    assert pipeline.forget(store, {"tenant_id": "acme", "subject": composed}).hidden == 1
    assert pipeline.get(store, {"tenant_id": "acme", "subject": decomposed}) == []


def test_identifiers_are_case_sensitive(store: Store) -> None:
    pipeline.put(store, GOOD | {"subject": "Mira"})
    assert pipeline.get(store, {"tenant_id": "acme", "subject": "mira"}) == []
