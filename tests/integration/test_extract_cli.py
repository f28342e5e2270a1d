"""`sgam extract` on a real store: it reads what holds now, shows what would be kept and
rejected and why, and writes nothing — not a fact, not an event, not even a new database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store
from tests.integration.ledger_helpers import cli, cli_json, ledger_counts, put
from tests.integration.stub_llm import StubServer

AT = "2026-06-03T10:00:00Z"
BASE = ("extract", "--tenant", "acme", "--subject", "mira", "--at", AT)


def test_json_report_with_stored_values(
    capsys: pytest.CaptureFixture[str], store: Store, cli_env: Any
) -> None:
    key = {"tenant_id": "acme", "subject": "mira", "valid_from": "2026-01-01T00:00:00Z"}
    for attribute, value in (("home_city", "Berlin"), ("account_plan", "free")):
        put(store, key, attribute=attribute, value=value)
    before = ledger_counts(store)
    text = "My city is Berlin. Actually, my plan is now pro. My sister's city is Rome."
    code, report = cli_json(capsys, *BASE, "--text", text)
    assert code == 0
    assert ledger_counts(store) == before
    assert set(report) == {
        "extractor",
        "prompt_version",
        "kept",
        "rejected",
        "usage",
        "context_turns",
    }
    assert report["context_turns"] == 0  # the rules read no conversation
    assert (report["extractor"], report["prompt_version"]) == ("rules", None)
    (kept,) = report["kept"]
    assert kept["attribute"] == "account_plan"
    assert (kept["value"], kept["current_value"], kept["change"]) == ("pro", "free", "update")
    assert kept["valid_from"] == AT
    assert kept["evidence"] == "my plan is now pro."
    (rejected,) = report["rejected"]
    assert (rejected["update"]["attribute"], rejected["reason"]) == ("home_city", "restatement")
    assert rejected["message"]
    assert set(report["usage"]) >= {"prompt_tokens", "completion_tokens", "attempts", "latency_ms"}


def test_nothing_kept_is_still_exit_0(
    capsys: pytest.CaptureFixture[str], store: Store, cli_env: Any
) -> None:
    code, report = cli_json(capsys, *BASE, "--text", "Is my plan pro?")
    assert code == 0
    assert (report["kept"], report["rejected"]) == ([], [])


@pytest.mark.parametrize(
    ("source", "trust"),
    [("message", "inferred"), ("business_event", "verified"), ("tool_result", "untrusted")],
)
def test_the_preview_shows_the_trust_the_background_lane_gives_the_source(
    capsys: pytest.CaptureFixture[str], store: Store, cli_env: Any, source: str, trust: str
) -> None:
    code, report = cli_json(capsys, *BASE, "--source", source, "--text", "My plan is now pro.")
    assert code == 0
    assert [kept["trust"] for kept in report["kept"]] == [trust]


def test_human_table_for_a_terminal() -> None:
    from pipeline.cli.extract import table
    from pipeline.extract import extract
    from pipeline.settings import Settings
    from tests.unit.extract_helpers import catalog, episode

    text = "My passport deadline is next Friday. My city is Rome."
    result = extract(
        episode(text),
        catalog=catalog(),
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
        current={"home_city": ["Rome"]},
        extractor="rules",
    )
    lines = table(result).splitlines()
    assert lines[0].startswith("extractor rules: 1 kept, 1 rejected, 0 request(s)")
    assert lines[1].startswith(
        'kept      passport_deadline = "2026-06-05" from 2026-06-03T10:00:00Z'
    )
    assert lines[2].startswith('rejected  home_city = "Rome"  restatement: ')


def test_text_from_stdin(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    cli_env: Any,
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"account_plan: enterprise")))
    code, report = cli_json(capsys, *BASE, "--text", "-")
    assert code == 0
    assert [k["value"] for k in report["kept"]] == ["enterprise"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--at", "2026-06-03T10:00:00"), "--occurred-at"),  # as `sgam remember` names it
        (("--occurred-at", "yesterday"), "--occurred-at"),
        (("--text", ""), "--text"),
        (("--text", "   "), "--text"),
        (("--source", "email"), "--source"),
        (("--extractor", "magic"), "--extractor"),
        (("--session", " padded "), "--session"),
        (("--tenant", ""), "--tenant"),
    ],
)
def test_invalid_input_is_exit_2_naming_the_option(
    capsys: pytest.CaptureFixture[str],
    store: Store,
    cli_env: Any,
    args: tuple[str, ...],
    option: str,
) -> None:
    fields = {"--text": "my plan is pro", "--at": AT} | dict(
        zip(args[::2], args[1::2], strict=True)
    )
    argv = ["extract", "--tenant", fields.pop("--tenant", "acme"), "--subject", "mira"]
    for name, value in fields.items():
        argv += [name, value]
    before = ledger_counts(store)
    code, _, err = cli(capsys, *argv)
    assert code == 2
    assert err.startswith(f"sgam: {option}")
    assert ledger_counts(store) == before


def test_llm_without_an_endpoint_is_exit_2(
    capsys: pytest.CaptureFixture[str], store: Store, cli_env: Any
) -> None:
    code, _, err = cli(capsys, *BASE, "--text", "my plan is pro", "--extractor", "llm")
    assert code == 2
    assert err.startswith("sgam: SGAM_LLM_BASE_URL")


@pytest.mark.slow
def test_a_model_sees_the_sessions_stored_turns_before_the_episode(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    cli_env: Any,
) -> None:
    """As in the worker: the turns before it (one instant, ordered by their intake line)."""
    earlier = ["Since when do you live there?", "And which plan are you on?"]
    lines = [
        {"tenant_id": "acme", "subject": "mira", "session_id": "s1", "occurred_at": AT, "text": t}
        for t in [*earlier, "A later session's turn."]
    ]
    lines[-1] |= {"session_id": "s2"}
    pipeline.ingest(store, lines)
    prompts: list[str] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        prompts.append(str(request["messages"][-1]["content"]))
        return {"updates": []}

    with StubServer() as stub:
        stub.app.answer = answer
        monkeypatch.setenv("SGAM_LLM_BASE_URL", stub.base_url)
        monkeypatch.setenv("SGAM_LLM_MODEL", "stub")
        asked = [*BASE, "--session", "s1", "--text", "Yes, since March."]
        code, report = cli_json(capsys, *asked)
        assert (code, report["context_turns"]) == (0, 2)
        code, alone = cli_json(capsys, *asked, "--no-context")
        assert (code, alone["context_turns"]) == (0, 0)
    with_context, without = prompts
    assert all(turn in with_context for turn in earlier)
    assert "later session" not in with_context
    assert not any(turn in without for turn in earlier)


def test_an_unreachable_endpoint_is_exit_5(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    cli_env: Any,
) -> None:
    monkeypatch.setenv("SGAM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SGAM_LLM_MAX_ATTEMPTS", "1")
    code, _, err = cli(capsys, *BASE, "--text", "my plan is pro")
    assert code == 5
    assert err.startswith("sgam: LlmUnavailable: the endpoint is unreachable after 1 attempt(s)")


@pytest.mark.parametrize("setting", ["SGAM_LLM_TIMEOUT_S=-1", "SGAM_LLM_MODE=xml"])
def test_a_bad_llm_setting_is_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    cli_env: Any,
    setting: str,
) -> None:
    name, value = setting.split("=")
    monkeypatch.setenv(name, value)
    code, _, err = cli(capsys, *BASE, "--text", "my plan is pro")
    assert code == 2
    assert err.startswith(f"sgam: {name}")


def test_a_missing_sqlite_file_is_not_created(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "never.sqlite3"
    monkeypatch.setenv("SGAM_DATABASE_URL", f"sqlite:///{missing}")
    code, report = cli_json(capsys, *BASE, "--text", "my plan is pro")
    assert code == 0
    assert [k["value"] for k in report["kept"]] == ["pro"]
    assert not missing.exists()


def test_explain_shows_each_clause_its_forms_matches_refusals_and_guards(
    capsys: pytest.CaptureFixture[str],
    store: Store,
    cli_env: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGAM_CATALOG", "personal")
    key = {"tenant_id": "acme", "subject": "mira", "valid_from": "2026-01-01T00:00:00Z"}
    put(store, key, attribute="home_city", value="Boston")
    before = ledger_counts(store)
    text = "I think I live in Ohio. My city is Boston and I work at Google, do you?"
    code, report = cli_json(capsys, *BASE, "--explain", "--text", text)
    assert code == 0
    assert ledger_counts(store) == before
    clauses = {reading["clause"]: reading for reading in report["explain"]}
    assert list(clauses) == [
        "I think I live in Ohio.",
        "My city is Boston",
        "I work at Google",
        "do you?",
    ]
    (hedged,) = clauses["I think I live in Ohio."]["hits"]
    assert (hedged["attribute"], hedged["values"]) == ("home_city", [])
    assert "hedged" in hedged["refused"]
    assert clauses["My city is Boston"]["statement"] == "home_city = 'Boston'"
    (employer,) = clauses["I work at Google"]["hits"]
    assert (employer["values"], employer["refused"]) == (["Google"], "")
    assert any(form.startswith("employer: ") for form in clauses["I work at Google"]["tried"])
    assert clauses["do you?"]["skipped"] == "a question"
    assert [k["attribute"] for k in report["kept"]] == ["employer"]
    (restated,) = report["rejected"]
    assert restated["reason"] == "restatement"


def test_explain_table_for_a_terminal() -> None:
    from pipeline.catalog import bundled_catalog
    from pipeline.cli.explain import explain_table
    from pipeline.extract import extract, rules_for
    from pipeline.settings import Settings
    from tests.unit.extract_helpers import episode

    catalog = bundled_catalog("personal")
    said = episode("I think I live in Ohio. I live in Rome, do you?")
    result = extract(
        said,
        catalog=catalog,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
        current={"home_city": ["Rome"]},
        extractor="rules",
    )
    shown = explain_table(rules_for(catalog).explain(said), result).splitlines()
    assert shown[1:4] == [
        "clause 1: 'I think I live in Ohio.'",
        shown[2],
        "  refused  home_city  '(I|we) live in {name}': hedged or hypothetical ('think')",
    ]
    assert shown[2].startswith("  tried ")
    assert "  matched  home_city  '(I|we) live in {name}' -> \"Rome\"" in shown
    assert "clause 3: 'do you?'" in shown
    assert "  skipped: a question" in shown
    assert shown[-1].startswith('guard refused home_city = "Rome": restatement')
