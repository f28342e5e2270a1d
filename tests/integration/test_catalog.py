"""The catalogue governs writes: declared attributes only, typed values, recorded version."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

import pipeline
from pipeline.catalog import load_catalog
from pipeline.cli import run
from pipeline.db.models import FactRow
from pipeline.db.store import Store, open_store
from pipeline.errors import CatalogError, InvalidInput
from pipeline.read.catalog_check import check_catalog
from pipeline.settings import Settings

BASE = {
    "tenant_id": "acme",
    "subject": "mira",
    "valid_from": "2026-06-01T00:00:00Z",
    "source_episode_id": "ep",
}

CUSTOM = """\
version: "shop-7"
kinds:
  fact: {retention: P30D}
attributes:
  tier:
    type: enum
    values: [bronze, gold]
  visits:
    type: number
"""


@pytest.mark.parametrize(
    ("attribute", "given", "stored"),
    [
        ("passport_deadline", "2026-06-30", "2026-06-30"),
        ("meeting_at", "2026-06-30T14:00:00+02:00", "2026-06-30T12:00:00Z"),
        ("monthly_budget", "1500", 1500),
        ("monthly_budget", "12.5", 12.5),
        ("newsletter_opt_in", "yes", True),
        ("answer_style", "Concise", "concise"),
        ("compliance_flag", '{"reason": "kyc", "ok": true}', {"reason": "kyc", "ok": True}),
    ],
)
def test_values_are_normalised_by_type(
    store: Store, attribute: str, given: str, stored: object
) -> None:
    fact = pipeline.put(store, BASE | {"attribute": attribute, "value": given}).fact
    assert fact.value == stored
    assert fact.schema_version == store.catalog.version


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("passport_deadline", "next week"),
        ("monthly_budget", "lots"),
        ("monthly_budget", True),
        ("newsletter_opt_in", "maybe"),
        ("answer_style", "verbose"),
        ("compliance_flag", "{not json"),
        ("home_city", 42),
    ],
)
def test_values_of_the_wrong_type_are_refused(store: Store, attribute: str, value: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        pipeline.put(store, BASE | {"attribute": attribute, "value": value})
    assert refused.value.field == "value"
    assert pipeline.get(store, {"tenant_id": "acme", "subject": "mira"}) == []


def test_undeclared_attribute_and_wrong_cardinality_are_refused(store: Store) -> None:
    with pytest.raises(InvalidInput) as unknown:
        pipeline.put(store, BASE | {"attribute": "shoe_size", "value": "44"})
    with pytest.raises(InvalidInput) as cardinality:
        pipeline.put(store, BASE | {"attribute": "languages", "value": "nl", "cardinality": "one"})
    assert (unknown.value.field, cardinality.value.field) == ("attribute", "cardinality")


def test_a_custom_catalogue_from_settings(database_url: str, tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(CUSTOM)
    store = open_store(Settings(database_url=database_url, catalog_path=path))
    try:
        fact = pipeline.put(store, BASE | {"attribute": "tier", "value": "gold"}).fact
        assert (fact.schema_version, fact.kind) == ("shop-7", "fact")
        assert fact.expires_at is not None
        assert (fact.expires_at - fact.recorded_at).days == 30
        with pytest.raises(InvalidInput):
            pipeline.put(store, BASE | {"attribute": "passport_deadline", "value": "2026-06-30"})
    finally:
        store.dispose()


def test_catalog_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(CUSTOM.replace("type: number", "type: numeric"))

    with pytest.raises(CatalogError) as bad:
        load_catalog(path)

    assert bad.value.location == f"{path}:9"  # the line of `type: numeric`
    assert "attributes.visits.type" in bad.value.problem


def test_catalog_check_reports_orphaned_and_mistyped_facts(
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = open_store(Settings(database_url=database_url))
    try:
        pipeline.put(store, BASE | {"attribute": "monthly_budget", "value": "1500"})
        pipeline.put(store, BASE | {"attribute": "answer_style", "value": "concise"})
        pipeline.put(store, BASE | {"attribute": "home_city", "value": "Utrecht"})
        assert check_catalog(store) == []
        with store.begin() as unit:  # a value written by an older, looser release
            session = unit.session
            session.execute(update(FactRow).where(FactRow.attribute == "home_city").values(value=7))
    finally:
        store.dispose()
    path = tmp_path / "next.yaml"
    path.write_text(
        CUSTOM.replace("  visits:", "  monthly_budget:\n    type: string\n  visits:").replace(
            "attributes:", "attributes:\n  home_city: {type: string}"
        )
    )
    monkeypatch.setenv("SGAM_DATABASE_URL", database_url)
    monkeypatch.setenv("SGAM_CATALOG_PATH", str(path))

    code = run(["catalog", "check", "--json"])

    problems = {p["attribute"]: p["problem"] for p in _json(capsys.readouterr().out)["problems"]}
    assert code == 3
    assert problems.keys() == {"monthly_budget", "answer_style", "home_city"}
    assert problems["answer_style"].startswith("orphaned")
    assert problems["monthly_budget"].startswith("mis-typed")
    assert problems["home_city"].startswith("mis-typed")


def _json(text: str) -> dict[str, list[dict[str, str]]]:
    import json

    data: dict[str, list[dict[str, str]]] = json.loads(text)
    return data


def test_cli_names_the_catalogue_file_and_line(
    cli_env: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(CUSTOM.replace("type: number", "type: numeric"))
    monkeypatch.setenv("SGAM_CATALOG_PATH", str(path))

    code = run(["get", "--tenant", "acme", "--subject", "mira"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"sgam: catalogue {path}:9: attributes.visits.type: Input should be")
    assert err.count("\n") == 1


def test_reading_an_attribute_the_catalogue_does_not_know_names_the_close_matches(
    cli_env: object, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(["get", "--tenant", "acme", "--subject", "mira", "--attribute", "passport_deadlin"])

    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "sgam: --attribute: 'passport_deadlin' is not in catalogue 2026-11-29.1; "
        "did you mean passport_deadline?\n"
    )


def test_put_suggests_the_close_matches_too(store: Store) -> None:
    with pytest.raises(InvalidInput, match="did you mean home_city"):
        pipeline.put(store, BASE | {"attribute": "home_cty", "value": "Utrecht"})


def test_a_retired_attribute_stays_readable_while_facts_hold_it(
    database_url: str, tmp_path: Path
) -> None:
    writer = open_store(Settings(database_url=database_url))
    try:
        pipeline.put(writer, BASE | {"attribute": "home_city", "value": "Utrecht"})
    finally:
        writer.dispose()
    path = tmp_path / "retired.yaml"
    path.write_text(CUSTOM)  # declares neither home_city nor passport_deadline
    reader = open_store(Settings(database_url=database_url, catalog_path=path))
    try:
        key = {"tenant_id": "acme", "subject": "mira"}
        (fact,) = pipeline.get(reader, key | {"attribute": "home_city"})
        assert fact.value == "Utrecht"
        assert pipeline.history(reader, key | {"attribute": "home_city"})
        with pytest.raises(InvalidInput):
            pipeline.get(reader, key | {"attribute": "passport_deadline"})
    finally:
        reader.dispose()
