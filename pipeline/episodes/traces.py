"""The spans of one episode's processing: `process_episode` from its claim to the commit of its
outcome, and the stages inside it (`extract`, its model call and reads, `upsert_memory`).

The episodes of a batch are read one after another (the rules) or all at once (a model), and
finished in one transaction, so an episode's span is opened and ended by hand, and made current
around each stage of that episode. With tracing off nothing is opened.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict

from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.observe.memory import count, memory_span
from schemas.lifecycle import ReceiptStatus

if TYPE_CHECKING:
    from pipeline.episodes.claimed import Claimed, Outcome
    from pipeline.episodes.dispatch import EpisodeKey
    from pipeline.extract.protocol import ExtractionContext, Extractor
    from pipeline.extract.result import ExtractionResult
    from pipeline.policy.apply import Decision
    from schemas.episodes import Episode

PROCESS_EPISODE = "process_episode"
EXTRACT = "extract"


class EpisodeSpans:
    """One open `process_episode` span per claimed episode (none when tracing is off)."""

    def __init__(self, claimed: Sequence[Claimed]) -> None:
        self._open: dict[EpisodeKey, Any] = {}
        self.add(claimed)

    def add(self, claimed: Sequence[Claimed]) -> None:
        """Open the spans of more claimed episodes (the model lane's next batch)."""
        if not tracing.enabled():
            return
        for item in claimed:
            self._open[item.key] = tracing.start_span(
                PROCESS_EPISODE,
                attributes={
                    names.SGAM_TENANT: item.episode.tenant_id,
                    names.SGAM_EPISODE: item.episode.episode_id,
                    names.SGAM_LANE: item.origin.lane.value,
                    names.SGAM_ATTEMPT: item.attempt,
                },
            )

    @contextmanager
    def current(self, key: EpisodeKey) -> Iterator[None]:
        """The episode's span is the current one for the block."""
        opened = self._open.get(key)
        if opened is None:
            yield
            return
        with tracing.using(opened, end=False):
            yield

    def end(self, outcomes: Mapping[EpisodeKey, Outcome]) -> None:
        """Record how each episode ended, and end its span."""
        for key, outcome in outcomes.items():
            opened = self._open.pop(key, None)
            if opened is None:
                continue
            opened.set_attribute(names.SGAM_OUTCOME, str(outcome.status))
            if outcome.status in (ReceiptStatus.FAILED, ReceiptStatus.PENDING):
                tracing.failed(opened, outcome.error_type or "_OTHER")
            opened.end()

    def close(self, error: BaseException | None = None) -> None:
        """End the spans of episodes left without an outcome (the batch's commit failed)."""
        for opened in self._open.values():
            if error is not None:
                tracing.failed(opened, error)
            opened.end()
        self._open.clear()


def extract_traced(
    extractor: Extractor, episode: Episode, context: ExtractionContext
) -> ExtractionResult:
    """`extractor.extract`, in an `extract` span saying which extractor and prompt read the
    episode and how many candidates it kept and refused."""
    if not tracing.enabled():
        return extractor.extract(episode, context)
    attributes: dict[str, str] = {names.SGAM_EXTRACTOR: extractor.name}
    if extractor.version is not None:
        attributes[names.SGAM_PROMPT_VERSION] = extractor.version
    with tracing.span(EXTRACT, attributes=attributes) as opened:
        result = extractor.extract(episode, context)
        opened.set_attributes(
            {
                names.SGAM_CANDIDATES_KEPT: len(result.kept),
                names.SGAM_CANDIDATES_REFUSED: len(result.rejected),
            }
        )
        return result


@contextmanager
def upserting(episode: Episode, prompt_version: str | None) -> Iterator[Any]:
    """The policy and the ledger writes of one episode's candidates: an `upsert_memory` on
    the episode's scope (each candidate may create, supersede, buffer or be refused — the
    policy decides, not the caller)."""
    more = {names.SGAM_EPISODE: episode.episode_id}
    if prompt_version is not None:
        more[names.SGAM_PROMPT_VERSION] = prompt_version
    with memory_span(names.UPSERT_MEMORY, **_scope(episode), more=more) as opened:
        yield opened


def record_decisions(opened: Any, candidates: int, decisions: Sequence[Decision]) -> None:
    """How many candidates the write was asked to place, and how many got each action."""
    if not opened.is_recording():
        return
    counts: dict[str, int] = {}
    for decision in decisions:
        counts[str(decision.action)] = counts.get(str(decision.action), 0) + 1
    count(opened, candidates)
    for action, times in counts.items():
        opened.set_attribute(names.decisions_attribute(action), times)


@contextmanager
def searching(episode: Episode) -> Iterator[Any]:
    """A read of the subject's current facts for the extractor: a `search_memory` on the
    episode's scope."""
    with memory_span(names.SEARCH_MEMORY, **_scope(episode)) as opened:
        yield opened


class _Scope(TypedDict):
    tenant_id: str
    agent_id: str
    purpose: str


def _scope(episode: Episode) -> _Scope:
    return {
        "tenant_id": episode.tenant_id,
        "agent_id": episode.agent_id,
        "purpose": episode.purpose,
    }
