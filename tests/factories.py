"""Builders the tests share: a settings object that only the test decides, a clock the test
moves by hand, and a fact command (or a put) with defaults for every field a test does not care
about. A helper that more than one test module needs lives here or in a `*_helpers` module,
never in a test module or in conftest (tests/unit/test_layers.py checks it)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

import pipeline
from pipeline.db.store import Store
from pipeline.settings import Settings


class _OnlyGiven(Settings):
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def isolated_settings(**fields: Any) -> Settings:
    """Settings from `fields` and the defaults only: never the developer's SGAM_* environment
    or a `.env` file, so a test runs alike on every machine. The catalogue is the bundled
    support one the suite was written against, unless `fields` names another."""
    return _OnlyGiven(**({"catalog": "support"} | fields))


class FrozenClock:
    """A clock the test moves by hand; each reading advances a microsecond so that
    transaction times stay distinct, as they are in real time."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


TENANT = "acme"
SUBJECT = "mira"
FACT_DEFAULTS: dict[str, Any] = {
    "tenant_id": TENANT,
    "subject": SUBJECT,
    "attribute": "home_city",
    "value": "Utrecht",
    "valid_from": "2026-01-01T00:00:00Z",
    "source_episode_id": "ep",
}


def fact_command(**fields: Any) -> dict[str, Any]:
    """A put's fields: FACT_DEFAULTS with `fields` over them."""
    return FACT_DEFAULTS | fields


def put_fact(store: Store, **fields: Any) -> pipeline.PutResult:
    """`pipeline.put` of `fact_command(**fields)`."""
    return pipeline.put(store, fact_command(**fields))


# Every field of the intake table in the README, none at its default.
FULL_EPISODE: dict[str, Any] = {
    "tenant_id": "acme",
    "subject": "mira",
    "session_id": "chat-9",
    "source": "business_event",
    "occurred_at": "2026-06-03T10:00:00+02:00",
    "text": "Order 1182 shipped to Mira.",
    "episode_id": "ep-full",
    "agent_id": "support-bot",
    "purpose": "orders",
    "subject_names": ["Mira", "M. Jansen"],
    "trust": "inferred",
    "idempotency_key": "crm-1182",
    "metadata": {"channel": "email", "ticket": {"id": 1182, "tags": ["vip"]}},
    "actor": "crm-sync",
}

# Every field of a put (the README's import line), none at its default.
FULL_PUT: dict[str, Any] = {
    "tenant_id": "acme",
    "subject": "mira",
    "attribute": "home_city",
    "value": "Lisbon",
    "valid_from": "2026-06-03T08:00:00Z",
    "valid_to": "2026-09-01T00:00:00Z",
    "source_episode_id": "ep-full",
    "agent_id": "support-bot",
    "purpose": "orders",
    "evidence": "I moved to Lisbon",
    "trust": "inferred",
    "confidence": 0.75,
    "cardinality": "one",
    "expires_at": "2027-01-01T00:00:00Z",
    "expected_version": 0,
    "idempotency_key": "put-full",
    "actor": "crm-import",
}


def three_session_catalog(folder: Path) -> Path:
    """The support catalogue, but `answer_style` promoted after three sessions, not two: a
    file in `folder`, for a consolidation under the stock catalogue to find newly eligible."""
    default = (
        Path(pipeline.__file__).parent.parent / "schemas" / "support_catalog.yaml"
    ).read_text()
    asked = "promotion: {times: 2, window: P30D}\n    synonyms: [concise"
    assert asked in default
    stricter = folder / "three.yaml"
    stricter.write_text(default.replace(asked, asked.replace("times: 2", "times: 3")))
    return stricter
