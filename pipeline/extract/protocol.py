"""The extractor protocol: what every way of reading an episode (the rules, a model) offers the
pipeline, and the context it reads with.

An extractor has a `name` (recorded as the episode's `extractor`, and what the policy's
confidence is judged by), a `version` (what a change to its behaviour bumps: the prompt's
name for a model) and `extract(episode, context) -> ExtractionResult`. It writes nothing, and
whatever it proposes goes through the guards (`judged`): nothing it says can set the tenant,
the scope, the source episode or the trust. The worker, the hot path and `sgam extract` all
take their extractor from `pipeline.extract.choose`, the one place that decides which is used.

Where to change what — adding an extractor backend touches at most three files:
1. a module `pipeline/extract/<backend>.py` with a class that has `name`, `version` and
   `extract`, proposing `MemoryUpdate`s and returning `judged(episode, proposed, context, usage)`;
2. `pipeline/extract/choose.py`: its name in `ExtractorName`/`EXTRACTORS`, and the branch of
   `choose` that builds it (and, if it should be tried on its own, in `auto`);
3. its settings, if any, in `pipeline/settings.py` (and the README's settings table).
The policy (`pipeline/policy/decide.py: confidence`) treats every extractor but `rules` as a
model whose evidence must name the attribute to count as explicit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol, overload

from pipeline.extract.guards import (
    CurrentValues,
    GuardContext,
    HeldSince,
    StoredValues,
    guard_all,
    held_since,
)
from pipeline.extract.result import ExtractionResult
from schemas.catalog import Catalog
from schemas.episodes import Episode
from schemas.extraction import MemoryUpdate, Usage
from schemas.facts import JsonValue


@dataclass(frozen=True)
class Turn:
    """An earlier turn of the episode's conversation: shown to a model as context only (what
    the episode answers or refers to), never a source of facts or of evidence."""

    speaker: str
    occurred_at: datetime
    text: str


@dataclass(frozen=True)
class ExtractionContext:
    """What an extractor may consult besides the episode; none of it comes from a model.
    `current` and `earlier` may be lazy (`LazyValues`, `LazyTurns`): read from the store only
    when an extractor asks — the rules never read the conversation."""

    catalog: Catalog
    current: CurrentValues = field(default_factory=dict)
    known_subjects: frozenset[str] = frozenset()
    day_first: bool = False
    earlier: Sequence[Turn] = ()  # the conversation before the episode, oldest first

    def loaded(self) -> ExtractionContext:
        """The same context with everything lazy read now (e.g. before another thread, which
        holds no database connection, extracts with it)."""
        current = StoredValues(self.current, held_since(self.current))
        return replace(self, current=current, earlier=list(self.earlier))

    def guards(self, episode: Episode, judged_by: str = "model") -> GuardContext:
        return GuardContext(
            episode,
            self.catalog,
            self.current,
            known_subjects=self.known_subjects,
            day_first=self.day_first,
            judged_by=judged_by,
        )


class Extractor(Protocol):
    """One way of reading an episode into candidates."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str | None: ...

    def extract(self, episode: Episode, context: ExtractionContext) -> ExtractionResult: ...


def judged(
    episode: Episode, proposed: Sequence[MemoryUpdate], context: ExtractionContext, usage: Usage
) -> ExtractionResult:
    """The extractor's proposals through every guard: what is kept, what is refused and why."""
    kept, rejected = guard_all(proposed, context.guards(episode, usage.extractor))
    return ExtractionResult(episode=episode, kept=kept, rejected=rejected, usage=usage)


class LazyValues(Mapping[str, Sequence[JsonValue]]):
    """The subject's current values, read once on first use: the rules need them only when
    they found something (to drop restatements), so chatter costs no ledger read."""

    def __init__(self, load: Callable[[], CurrentValues]) -> None:
        self._load = load
        self._values: CurrentValues | None = None

    def _loaded(self) -> CurrentValues:
        if self._values is None:
            self._values = self._load()
        return self._values

    def __getitem__(self, attribute: str) -> Sequence[JsonValue]:
        return self._loaded()[attribute]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    @property
    def since(self) -> HeldSince:
        """Since when each value holds (see `guards.StoredValues`)."""
        return held_since(self._loaded())


class LazyTurns(Sequence[Turn]):
    """The conversation before the episode, read once on first use (only a model asks)."""

    def __init__(self, load: Callable[[], Sequence[Turn]]) -> None:
        self._load = load
        self._turns: Sequence[Turn] | None = None

    @property
    def read(self) -> bool:
        """Whether the turns were read yet."""
        return self._turns is not None

    def _loaded(self) -> Sequence[Turn]:
        if self._turns is None:
            self._turns = self._load()
        return self._turns

    @overload
    def __getitem__(self, index: int) -> Turn: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Turn]: ...

    def __getitem__(self, index: int | slice) -> Turn | Sequence[Turn]:
        return self._loaded()[index]

    def __len__(self) -> int:
        return len(self._loaded())
