"""Many puts at once: `put_many` writes a list of fact commands with exactly the result of
`put` applied to each in order, a chunk of commands per transaction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from itertools import islice
from typing import Any

from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, InvalidInput
from pipeline.ledger.results import PutResult
from pipeline.ledger.write import write_fact
from pipeline.validation import parse
from schemas.commands import PutFact

# What put_many answers for one command: the fact that now holds, or why it was not written.
PutOutcome = PutResult | ConflictError | InvalidInput


def put_many(
    store: Store,
    commands: Iterable[PutFact | Mapping[str, Any]],
    *,
    chunk: int | None = None,
) -> list[PutOutcome]:
    """Write `commands` in order, `chunk` per transaction (default SGAM_BATCH_SIZE). One
    outcome per command: a failing command does not fail the others."""
    size = chunk if chunk is not None else store.settings.batch_size
    if size < 1:
        raise InvalidInput("chunk", "must be at least 1")
    outcomes: list[PutOutcome] = []
    for part in _chunks(commands, size):
        outcomes += store.run(partial(write_many, commands=part))
    return outcomes


def write_many(unit: Unit, commands: Iterable[PutFact | Mapping[str, Any]]) -> list[PutOutcome]:
    """`put_many` in the caller's unit of work."""
    outcomes: list[PutOutcome] = []
    for command in commands:
        try:
            outcomes.append(write_fact(unit, parse(PutFact, command)))
        except (InvalidInput, ConflictError) as problem:
            outcomes.append(problem)
    return outcomes


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while part := list(islice(iterator, size)):
        yield part
