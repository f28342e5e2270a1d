"""The extraction prompt for one episode: which catalogue entries, stored values and earlier
turns of the conversation it shows.

The catalogue section is the same for every episode of a catalogue version (a cacheable
prefix); of the subject's stored values only those of attributes the episode names are shown,
so the prompt stays small however much the ledger holds; the earlier turns (context only,
`pipeline.episodes.conversation`) come before the episode, which ends the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import prompts
from pipeline.extract.guards import CurrentValues
from schemas.catalog import Catalog
from schemas.episodes import Episode
from schemas.extraction import MAX_UPDATES
from schemas.facts import Cardinality

if TYPE_CHECKING:
    from pipeline.extract.protocol import Turn

PROMPT_NAME = "extract/v2"  # the default of SGAM_LLM_PROMPT
MAX_SHOWN_VALUES = 8


def render_messages(
    episode: Episode,
    catalog: Catalog,
    current: CurrentValues,
    earlier: Sequence[Turn] = (),
    *,
    prompt: str = PROMPT_NAME,
) -> list[dict[str, str]]:
    """The chat messages that ask the model for `Extraction` of `episode`; `earlier`: the
    turns of its conversation before it, shown as context only."""
    template = prompts.load(prompt)
    attributes, system = _static(template, catalog)
    variables = dict(
        earlier=[
            {
                "speaker": turn.speaker,
                "occurred_at": turn.occurred_at.isoformat(),
                "text": turn.text,
            }
            for turn in earlier
        ],
        max_updates=MAX_UPDATES,
        attributes=attributes,
        subject=episode.subject,
        subject_names=episode.subject_names,
        current=shown_values(episode.text, catalog, current),
        source=episode.source.value,
        occurred_at=episode.occurred_at.isoformat(),
        weekday=episode.occurred_at.strftime("%A"),
        text=episode.text,
    )
    return [
        {
            "role": role,
            "content": system if role == "system" else template.render_block(role, **variables),
        }
        for role in template.roles
    ]


_rendered: dict[tuple[str, int], tuple[Catalog, list[dict[str, Any]], str]] = {}


def _static(template: prompts.Prompt, catalog: Catalog) -> tuple[list[dict[str, Any]], str]:
    """The catalogue's attributes as the prompt lists them and the system message, rendered
    once per prompt and catalogue: they read nothing else (the static prefix a server caches),
    and rendering them was most of the prompt's CPU."""
    key = (template.name, id(catalog))
    entry = _rendered.get(key)
    if entry is None or entry[0] is not catalog:
        if len(_rendered) > 16:
            _rendered.clear()
        attributes = _attributes(catalog)
        system = (
            template.render_block("system", max_updates=MAX_UPDATES, attributes=attributes)
            if "system" in template.roles
            else ""
        )
        entry = _rendered[key] = (catalog, attributes, system)
    return entry[1], entry[2]


def shown_values(text: str, catalog: Catalog, current: CurrentValues) -> list[dict[str, str]]:
    """Stored values of catalogued attributes whose name or a synonym occurs in `text`."""
    folded = text.casefold()
    shown = []
    for attribute, values in current.items():
        if attribute not in catalog.attributes or not values:
            continue
        if not _mentions(catalog, attribute).search(folded):
            continue
        spec = catalog.attributes[attribute]
        value: Any = values[0] if spec.cardinality is Cardinality.ONE else list(values)
        shown.append({"attribute": attribute, "value": _text(value)})
        if len(shown) == MAX_SHOWN_VALUES:
            break
    return shown


def _attributes(catalog: Catalog) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "type": spec.type.value,
            "allowed": spec.values,
            "many": spec.cardinality is Cardinality.MANY,
            "description": spec.description,
            "synonyms": _new_words(spec.synonyms, name, spec.values or []),
        }
        for name, spec in catalog.attributes.items()
    ]


def _new_words(synonyms: list[str], name: str, values: list[str]) -> list[str]:
    """Synonyms the line does not already show as the name or a value: fewer tokens."""
    shown = {*name.split("_"), *(value.casefold() for value in values)}
    return [synonym for synonym in synonyms if synonym.casefold() not in shown]


@lru_cache(maxsize=1024)
def _mentions_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(re.escape(name.casefold()) for name in names) + r")\b")


def _mentions(catalog: Catalog, attribute: str) -> re.Pattern[str]:
    return _mentions_pattern(tuple([attribute, *catalog.synonyms(attribute)]))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
