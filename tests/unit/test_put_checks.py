"""check_put: the catalogue's rules for one fact command, applied with no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.catalog import load_catalog
from pipeline.errors import InvalidInput
from pipeline.ledger.checks import check_put
from pipeline.settings import Settings
from schemas.commands import PutFact
from tests.factories import fact_command

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CATALOG = load_catalog(None, "support")
SETTINGS = Settings(database_url="sqlite:///unused.sqlite3", max_value_bytes=64)


def _command(**fields: Any) -> PutFact:
    base = fact_command(attribute="account_plan", value="Pro", source_episode_id="crm")
    return PutFact.model_validate(base | fields)


def _refused(**fields: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        check_put(_command(**fields), CATALOG, SETTINGS, NOW)
    return refused.value


def test_a_valid_command_is_normalised_and_given_its_retention() -> None:
    checked = check_put(_command(), CATALOG, SETTINGS, NOW)
    assert (checked.value, checked.value_text) == ("pro", '"pro"')
    assert checked.expires_at == NOW + CATALOG.retention("account_plan")


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"attribute": "acount_plan"}, "attribute", "did you mean account_plan?"),
        ({"value": "platinum"}, "value", "account_plan is"),
        ({"cardinality": "many"}, "cardinality", "is declared one"),
        ({"attribute": "home_city", "value": "x" * 100}, "value", "SGAM_MAX_VALUE_BYTES"),
        ({"expires_at": "2026-11-01T00:00:00Z"}, "expires_at", "must be in the future"),
        ({"expires_at": "2099-01-01T00:00:00Z"}, "expires_at", "may only shorten"),
    ],
)
def test_each_rule_names_its_field(fields: dict[str, Any], field: str, says: str) -> None:
    refused = _refused(**fields)
    assert refused.field == field
    assert says in refused.problem


def test_an_earlier_expiry_is_kept() -> None:
    soon = NOW + timedelta(days=1)
    assert check_put(_command(expires_at=soon), CATALOG, SETTINGS, NOW).expires_at == soon
