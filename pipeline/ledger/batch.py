"""The entry points of the write path. Every write is a batch, one command long or many.

A batch locks its idempotency keys and then its (subject, attribute) keys, each set in one
sorted order so concurrent batches never wait on each other in a cycle; reads the stored keys
and every slot of its keys in one statement per table; decides each command in order from that
state in memory, exactly as `put` would after the commands before it; and sends the writes
together at the end, one statement per table (a batch of more than `_SEND_EARLY_ABOVE`
commands on PostgreSQL sends them in parts as it decides, `inserts.sending_early`). The
ledger, claims and decision log it leaves are those of the same commands put one by one.

Once a transaction of `put` or `put_many` committed, the fact versions it inserted go to the
store's after-commit hooks (`Store.run`: the embedding arm's vectors, made in the background),
as every other unit of work's do: neither waits for the endpoint or fails because of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from itertools import islice
from typing import Any

from pipeline.db import inserts
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, IdempotencyConflict, InvalidInput, NotFound
from pipeline.ledger.batch_reads import Locks, lock_and_read
from pipeline.ledger.idempotency import FactOutcome, KeyedBatch, put_step
from pipeline.ledger.pending import PendingWrites
from pipeline.ledger.results import PutResult, settled
from pipeline.ledger.slots import SlotKey, subject_lock_name
from pipeline.ledger.write import judge_and_store, resolve
from pipeline.validation import parse
from schemas.commands import PutFact

# What put_many answers for one command: the fact that now holds, or why it was not written
# (NotFound: a repeated key whose fact was forgotten since).
PutOutcome = PutResult | ConflictError | InvalidInput | NotFound
Command = PutFact | Mapping[str, Any]


def put(store: Store, command: Command) -> PutResult:
    """Write one fact in a transaction of its own. Raises InvalidInput, FactConflict,
    TrustRejected, VersionConflict or IdempotencyConflict."""
    command = parse(PutFact, command)
    return settled(store, lambda unit: _written_alone(unit, command))


def write_fact(unit: Unit, command: Command) -> PutResult | ConflictError:
    """Write one fact in the caller's unit of work. A refusal (conflict, lower trust, stale
    version) is logged and returned; invalid input or a reused idempotency key raises before
    any write."""
    return _raised(write_many(unit, [parse(PutFact, command)]))


def _written_alone(unit: Unit, command: PutFact) -> PutResult | ConflictError:
    """`write_fact` in a unit that commits as soon as it returns (`put`)."""
    return _raised(write_many(unit, [command], commits=True))


def _raised(outcomes: list[PutOutcome]) -> PutResult | ConflictError:
    (outcome,) = outcomes
    if isinstance(outcome, InvalidInput | IdempotencyConflict | NotFound):
        raise outcome
    return outcome


def put_many(
    store: Store, commands: Iterable[Command], *, chunk: int | None = None
) -> list[PutOutcome]:
    """Write `commands` in order, `chunk` per transaction (default SGAM_BATCH_SIZE). One
    outcome per command: a failing command does not fail the others."""
    size = chunk if chunk is not None else store.settings.batch_size
    if size < 1:
        raise InvalidInput("chunk", "must be at least 1")
    outcomes: list[PutOutcome] = []
    for part in _chunks(commands, size):
        outcomes += store.run(partial(write_many, commands=part, commits=True))
    return outcomes


def write_many(
    unit: Unit, commands: Iterable[Command], *, commits: bool = False
) -> list[PutOutcome]:
    """`put_many` in the caller's unit of work, all commands in it. `commits`: the unit is
    committed as soon as this returns (`put`, `put_many`), so on PostgreSQL the COMMIT may go
    in the round trip of the inserts (`inserts.Flush`)."""
    parsed = [_parsed(command) for command in commands]
    valid = [command for command in parsed if isinstance(command, PutFact)]
    if not valid:
        return [command for command in parsed if not isinstance(command, PutFact)]
    batch = _Batch(unit, valid)
    with inserts.batch(unit.session) as flush:
        outcomes = []
        with _early(unit, len(valid)) as send:
            for number, command in enumerate(parsed, start=1):
                outcomes.append(batch.write(command) if isinstance(command, PutFact) else command)
                if send is not None and number % _SENT_EVERY == 0:
                    batch.pending.close_replaced()
                    send()
                    batch.pending.sent()
        batch.pending.close_replaced()
        # Never when an outcome is to be raised: `put` raises it, and the unit rolls back.
        flush.commit = commits and all(isinstance(o, PutResult | ConflictError) for o in outcomes)
    return outcomes


# A batch of more commands than this sends its writes in parts of `_SENT_EVERY` as it decides
# them (`inserts.sending_early`): on PostgreSQL, where deciding 1,000 new facts took about as
# long as the server took to insert them, the two now overlap.
_SEND_EARLY_ABOVE = 256
_SENT_EVERY = 128


def _early(unit: Unit, commands: int) -> AbstractContextManager[Callable[[], None] | None]:
    if commands <= _SEND_EARLY_ABOVE:
        return nullcontext()
    return inserts.sending_early(unit.session)


def _parsed(command: Command) -> PutFact | InvalidInput:
    try:
        return parse(PutFact, command)
    except InvalidInput as problem:
        return problem


# Up to this many keys a batch locks each key (writes to other attributes of its subjects go
# on beside it); above, each subject.
_KEY_LOCKS_UP_TO = 16


class _Batch:
    """The state a batch decides from, read once under its locks, and what it has queued."""

    def __init__(self, unit: Unit, commands: list[PutFact]) -> None:
        self.unit = unit
        keyed = KeyedBatch.keys(commands)
        keys = {SlotKey.of(command) for command in commands}
        subjects = [subject_lock_name(*s) for s in sorted({(k.tenant_id, k.subject) for k in keys})]
        idempotency = KeyedBatch.lock_names(keyed)
        if len(keys) <= _KEY_LOCKS_UP_TO:
            locks = Locks(idempotency, sorted(key.lock_name() for key in keys), subjects)
        else:
            # Each lock takes a slot of the server's shared lock table (on PostgreSQL
            # max_locks_per_transaction x max_connections): a large batch holds its subjects
            # whole instead of a lock per key and one per subject.
            locks = Locks(idempotency, subjects, ())
        used, self.slots = lock_and_read(unit, locks, keyed, keys)
        self.keyed = KeyedBatch(unit, used)
        self.pending = PendingWrites(unit.session)

    def write(self, command: PutFact) -> PutOutcome:
        try:
            return self.keyed.run(put_step(command), lambda: self._apply(command))
        except (InvalidInput, IdempotencyConflict, NotFound) as problem:
            return problem

    def _apply(self, command: PutFact) -> FactOutcome:
        # The clock is read under the lock, so recorded_at follows the order of writes.
        claim = resolve(self.unit, command, claim_id=str(uuid.uuid4()), now=self.unit.clock())
        return judge_and_store(self.unit, self.pending, self.slots, claim, command)


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while part := list(islice(iterator, size)):
        yield part
