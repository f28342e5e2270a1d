"""The keyed steps of the operations that answer no fact of their own: a decision on a
buffered candidate (confirm, reject) and the retry of a failed episode. Like `put_step`, each
answers a repeated key with the first answer again (marked `replayed`), or the first refusal,
and NotFound once what it answered about was forgotten since: a replay never shows a forgotten
value, and never says a forgotten thing still stands."""

from __future__ import annotations

from pipeline.db.models import CandidateRow, EpisodeRow
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, NotFound
from pipeline.ledger.idempotency import KeyedStep, StoredKey
from pipeline.ledger.refusals import refusal_of, stored_outcome
from pipeline.ledger.stored_keys import Forgotten, reserved
from schemas.commands import CandidateCommand, RetryEpisode
from schemas.lifecycle import ReceiptStatus
from schemas.results import Decided, Retried

DecidedOutcome = Decided | ConflictError  # a confirm the ledger refused answers its refusal


def decision_step(command: CandidateCommand, verb: str) -> KeyedStep[DecidedOutcome]:
    """The step of a confirm or a reject (`verb`: a key is one operation's): a repeat answers
    the first decision again, or the ledger's first refusal of a confirm — NotFound once the
    candidate's subject was forgotten since (the candidate and the fact it became with it)."""

    def replay(unit: Unit, seen: StoredKey, forgotten_facts: Forgotten) -> DecidedOutcome:
        refused = refusal_of(seen.result)
        if refused is not None:
            return refused
        row = unit.session.get(CandidateRow, command.candidate_id)
        fact = seen.result.get("fact") or {}
        if (
            row is None
            or row.forgotten_at is not None
            or forgotten_facts(command.tenant_id, [fact["fact_id"]] if fact else [])
        ):  # checked before the answer is read: a purge erased its content
            raise NotFound(
                f"the candidate decided under this idempotency key was forgotten since "
                f"(candidate {command.candidate_id})"
            )
        return Decided.model_validate(seen.result).model_copy(update={"replayed": True})

    return KeyedStep.of(command, replay, stored_outcome, kind=verb)


def retry_step(command: RetryEpisode, *, retry_s: float) -> KeyedStep[Retried]:
    """The step of an episode's retry, its key reserved while the episode is processed (see
    `pipeline/episodes/drive.py: retry_episode`): a repeat answers the first answer again —
    `queued` for one whose first request died while it held the reservation (the episode was
    reopened: the sweeper sends it again) — NotFound once the episode was forgotten since."""

    def replay(unit: Unit, seen: StoredKey, _: Forgotten) -> Retried:
        row = unit.session.get(EpisodeRow, (command.tenant_id, command.episode_id))
        if row is None or row.forgotten_at is not None:
            raise NotFound(
                f"the episode retried under this idempotency key was forgotten since "
                f"(episode {command.episode_id})"
            )
        if reserved(seen.result):
            return Retried(
                episode_id=command.episode_id, status=ReceiptStatus.QUEUED, replayed=True
            )
        return Retried.model_validate(seen.result).model_copy(update={"replayed": True})

    return KeyedStep.of(
        command, replay, stored_outcome, kind="retry", retry_s=retry_s, replay_expired=True
    )
