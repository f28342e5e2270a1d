"""The extractor protocol: one place chooses the extractor, the rules read the subject's
current values only once a rule matched, and the promotion rule is one pure function."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipeline.errors import InvalidInput
from pipeline.extract import RULES, ExtractionContext, LazyValues, ModelBackend, choose, model
from pipeline.extract.llm import LlmClient
from pipeline.extract.prompting import PROMPT_NAME
from pipeline.policy.decide import Thresholds, Wait, buffered_rule, wait_rule
from pipeline.settings import Settings
from schemas.extraction import RejectReason
from schemas.facts import JsonValue
from tests.unit.extract_helpers import catalog, episode

NO_MODEL = Settings(database_url="sqlite:///unused.sqlite3")
WITH_MODEL = NO_MODEL.model_copy(update={"llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "m"})


def test_auto_is_the_rules_without_a_model_and_the_model_with_one() -> None:
    assert choose(NO_MODEL) is RULES
    assert model(NO_MODEL) is None
    chosen = choose(WITH_MODEL)
    assert isinstance(chosen, ModelBackend)
    assert (chosen.name, chosen.version) == ("llm:m", PROMPT_NAME)
    assert (RULES.name, RULES.version) == ("rules", None)


def test_a_client_given_is_a_model_even_without_settings_for_one() -> None:
    client = LlmClient(WITH_MODEL)
    chosen = choose(NO_MODEL, llm=client)
    assert isinstance(chosen, ModelBackend)
    assert chosen.client is client
    assert choose(NO_MODEL, name="rules", llm=client) is RULES


def test_llm_without_an_endpoint_and_an_unknown_name_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="SGAM_LLM_BASE_URL"):
        choose(NO_MODEL, name="llm")
    with pytest.raises(InvalidInput, match="must be one of rules, llm, auto"):
        choose(NO_MODEL, name="regex")


class Loads:
    """A ledger read the test counts."""

    def __init__(self, values: dict[str, list[JsonValue]]) -> None:
        self.values = values
        self.calls = 0

    def __call__(self) -> dict[str, list[JsonValue]]:
        self.calls += 1
        return self.values


def test_the_rules_read_current_values_only_once_a_rule_matched() -> None:
    load = Loads({"home_city": ["Lisbon"]})
    context = ExtractionContext(catalog(), LazyValues(load))
    chatter = RULES.extract(episode("Lovely weather today, thanks!"), context)
    assert (chatter.kept, chatter.rejected, load.calls) == ([], [], 0)

    stated = RULES.extract(episode("My home city is Lisbon. My employer is Initech."), context)
    assert load.calls == 1  # read once, for both matches
    assert [c.attribute for c in stated.kept] == ["employer"]
    assert [(r.update.attribute, r.reason) for r in stated.rejected] == [
        ("home_city", RejectReason.RESTATEMENT)
    ]


T = Thresholds()


@pytest.mark.parametrize(
    ("attribute", "signal", "expected"),
    [
        ("answer_style", 1.0, Wait(2, timedelta(days=30), "the catalogue asks for 2 sessions")),
        (
            "contact_channel",
            1.0,
            Wait(None, timedelta(days=30), "the catalogue asks for the user's confirmation"),
        ),
        ("home_city", 1.0, None),  # immediate and strong: no wait
        ("home_city", 0.5, Wait(2, timedelta(days=30), "a weak signal (confidence 0.5)")),
        ("home_city", None, Wait(2, timedelta(days=30), "a weak signal")),  # already waiting
    ],
)
def test_the_promotion_rule(attribute: str, signal: float | None, expected: Wait | None) -> None:
    assert wait_rule(catalog().attributes[attribute], T, signal) == expected


def test_a_buffered_candidate_of_a_sensitive_attribute_waits_for_no_rule() -> None:
    assert buffered_rule(catalog().attributes["birthday"], T) is None
    assert buffered_rule(catalog().attributes["export_format"], T) == Wait(
        3, timedelta(days=14), "the catalogue asks for 3 sessions"
    )
