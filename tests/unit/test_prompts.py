"""Every prompt renders; a missing variable is an error; the extraction prompt keeps its
static part first (a cacheable prefix) and the episode last."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from jinja2 import UndefinedError

import prompts
from pipeline.episodes.conversation import within_cap
from pipeline.extract.prompting import PROMPT_NAME, render_messages, shown_values
from pipeline.extract.protocol import Turn
from pipeline.read.context import estimate_tokens
from schemas.extraction import Extraction, MemoryUpdate, response_model
from tests.unit.extract_helpers import catalog, episode

# Sample variables per stage; a new stage's prompt must add its own here to be rendered.
SAMPLES: dict[str, dict[str, Any]] = {
    "extract": {
        "max_updates": 5,
        "attributes": [
            {
                "name": "home_city",
                "type": "string",
                "allowed": None,
                "many": False,
                "description": "City the subject lives in.",
                "synonyms": ["city"],
            }
        ],
        "subject": "mira",
        "subject_names": ["Mira"],
        "current": [{"attribute": "home_city", "value": "Berlin"}],
        "source": "message",
        "occurred_at": "2026-06-03T10:00:00+00:00",
        "weekday": "Wednesday",
        "text": "I moved to Lisbon.",
        "earlier": [
            {"speaker": "Tom", "occurred_at": "2026-06-03T09:59:00+00:00", "text": "Where to?"}
        ],
    }
}


@pytest.mark.parametrize("name", prompts.names())
def test_every_prompt_renders(name: str) -> None:
    stage = name.split("/")[0]
    assert stage in SAMPLES, f"add sample variables for {name} to SAMPLES"
    messages = prompts.load(name).render(**SAMPLES[stage])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert all(m["content"].strip() for m in messages)


def test_the_extraction_prompt_is_shipped() -> None:
    assert PROMPT_NAME in prompts.names()


def test_a_missing_variable_is_an_error() -> None:
    variables = dict(SAMPLES["extract"])
    del variables["weekday"]
    with pytest.raises(UndefinedError):
        prompts.load(PROMPT_NAME).render(**variables)


@pytest.mark.parametrize("name", ["extract", "extract/v0", "../etc/passwd", "extract/v99"])
def test_unknown_prompt_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="prompt"):
        prompts.load(name)


def test_static_part_first_episode_last() -> None:
    first = render_messages(episode("My city is Lisbon."), catalog(), {})
    other = render_messages(
        episode("Hello there", subject="tom", occurred_at="2027-01-01T00:00:00+01:00"),
        catalog(),
        {"home_city": ["Paris"]},
    )
    assert first[0] == other[0]  # the system message is the same for every episode
    assert not set("{}") & set(first[0]["content"])
    for name in catalog().attributes:
        assert f"- {name}:" in first[0]["content"]
    user = first[1]["content"]
    assert user.endswith("My city is Lisbon.")
    assert "2026-06-03T10:00:00+00:00, a Wednesday" in user


def test_only_stored_values_the_episode_mentions_are_shown() -> None:
    current = {"home_city": ["Berlin"], "account_plan": ["pro"], "not_catalogued": ["x"]}
    shown = shown_values("I moved to another city", catalog(), current)
    assert shown == [{"attribute": "home_city", "value": "Berlin"}]
    assert shown_values("nothing relevant", catalog(), current) == []


def test_the_response_model_names_only_catalogued_attributes_in_sgr_order() -> None:
    model = response_model(catalog())
    assert issubclass(model, Extraction)
    schema = model.model_json_schema()
    update_schema = schema["$defs"]["MemoryUpdate"]
    assert (
        list(update_schema["properties"])
        == list(MemoryUpdate.model_fields)
        == [
            "evidence",
            "subject",
            "attribute",
            "current_value",
            "change",
            "value",
            "valid_from",
        ]
    )
    assert update_schema["properties"]["attribute"]["enum"] == list(catalog().attributes)
    assert all(p.get("description") for p in update_schema["properties"].values())
    assert response_model(catalog()) is model  # built once per catalogue


EARLIER = [
    Turn("Tom", datetime(2026, 6, 3, 9, 58, tzinfo=UTC), "Did you move in the end?"),
    Turn("mira", datetime(2026, 6, 3, 9, 59, tzinfo=UTC), "We did!"),
]


def test_earlier_turns_come_before_the_episode_marked_as_context_only() -> None:
    alone = render_messages(episode("Yes, since March."), catalog(), {})
    told = render_messages(episode("Yes, since March."), catalog(), {}, EARLIER)
    assert told[0] == alone[0]  # the static prefix does not depend on the conversation
    assert "context only" in told[0]["content"]
    assert "never quote them" in told[0]["content"]
    user = told[1]["content"]
    assert "Earlier in the conversation (context only, oldest first):" in user
    shown = [
        "- Tom (2026-06-03T09:58:00+00:00): Did you move in the end?",
        "- mira (2026-06-03T09:59:00+00:00): We did!",
    ]
    assert user.index(shown[0]) < user.index(shown[1]) < user.index("Episode (")
    assert user.endswith("Yes, since March.")
    assert "Earlier in the conversation" not in alone[1]["content"]  # no empty section


def test_a_long_conversation_is_cut_to_the_token_cap_latest_first() -> None:
    at = datetime(2026, 6, 3, 9, 0, tzinfo=UTC)
    latest_first = [Turn("a", at, "x" * 40), Turn("b", at, "y" * 40), Turn("c", at, "z" * 40)]
    assert [t.speaker for t in within_cap(latest_first, 20)] == ["b", "a"]  # 10 tokens each
    (cut,) = within_cap([Turn("a", at, "w" * 400)], 20)  # alone longer than the cap
    assert cut.text.startswith("…")
    assert estimate_tokens(cut.text) <= 20
    assert within_cap(latest_first, 0) == []
