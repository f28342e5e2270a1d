"""Extraction with its context: what an extractor may consult about an episode (the subject's
current values, the conversation's earlier turns), read lazily for one episode or at once for a
claimed batch."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from pipeline.db.store import Store
from pipeline.episodes.claimed import Extracted
from pipeline.episodes.conversation import earlier_turns, earlier_turns_of
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.traces import EpisodeSpans, extract_traced, searching
from pipeline.extract.guards import CurrentValues, current_values
from pipeline.extract.protocol import ExtractionContext, Extractor, LazyTurns, LazyValues
from pipeline.observe import conventions as names
from pipeline.read.facts import get
from schemas.episodes import Episode


def run_extraction(store: Store, episode: Episode, extractor: Extractor) -> Extracted:
    """Candidates for one episode; a failure is returned, to be recorded on the episode."""
    try:
        return extract_traced(extractor, episode, context_for(store, episode))
    except Exception as error:  # recorded on the episode, which stays retryable
        return error


def context_for(store: Store, episode: Episode) -> ExtractionContext:
    """What the extractor may consult; the subject's current values and the conversation's
    earlier turns are read only when it asks (both always for a model's prompt; the rules read
    the values once they found something, and never the conversation)."""
    return ExtractionContext(
        store.catalog,
        LazyValues(lambda: _current(store, episode)),
        day_first=store.settings.dates_day_first,
        earlier=LazyTurns(lambda: earlier_turns(store, episode)),
    )


def batch_contexts(
    store: Store, episodes: Sequence[Episode], spans: EpisodeSpans | None = None
) -> dict[EpisodeKey, ExtractionContext]:
    """The model's context for every episode of a claimed batch, read here at once: the
    conversation of each session in one go, each subject's values once. Read per episode
    on the pool's threads, they cost a transaction each and more CPU than the model call;
    the calls of a batch are in flight together, so none of them could see what another
    one's answer will write anyway. A subject's read is traced in the span of the first of
    its episodes (of `spans`, if given)."""
    turns = earlier_turns_of(store, episodes)
    values: dict[tuple[str, str, str, str], CurrentValues] = {}
    contexts: dict[EpisodeKey, ExtractionContext] = {}
    for episode in episodes:
        scope = (episode.tenant_id, episode.agent_id, episode.purpose, episode.subject)
        key = (episode.tenant_id, episode.episode_id)
        if scope not in values:
            with spans.current(key) if spans is not None else nullcontext():
                values[scope] = _current(store, episode)
        contexts[key] = ExtractionContext(
            store.catalog,
            values[scope],
            day_first=store.settings.dates_day_first,
            earlier=turns.get(key, []),
        )
    return contexts


def _current(store: Store, episode: Episode) -> dict[str, list[Any]]:
    scope = {
        "tenant_id": episode.tenant_id,
        "agent_id": episode.agent_id,
        "purpose": episode.purpose,
        "subject": episode.subject,
    }
    with searching(episode) as opened:
        facts = get(store, scope)
        opened.set_attribute(names.GEN_AI_MEMORY_RECORD_COUNT, len(facts))
    return current_values(facts)
