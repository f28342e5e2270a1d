"""The policy stage's one write step: carry out the decision for each candidate in the caller's
unit of work — write through the ledger (every rule of it applies), quarantine, or buffer —
and say what was done. Idempotent per episode: writes carry a key derived from the episode
and the candidate, and an episode's support is counted once, so a retry writes nothing twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.buffer.candidates import (
    Buffered,
    Subject,
    add_support,
    promote_if_eligible,
    put_command,
    reset_contradicted,
    settle,
    value_hash,
    waiting,
)
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError
from pipeline.ledger.batch import write_fact
from pipeline.policy.decide import (
    Buffer,
    Lane,
    Quarantine,
    Thresholds,
    Wait,
    buffered_rule,
    confidence,
    decide,
)
from schemas.buffer import SupportRecord
from schemas.episodes import Episode
from schemas.extraction import Candidate
from schemas.facts import Cardinality, Fact, Trust
from schemas.fields import canonical_json
from schemas.lifecycle import CandidateStatus, DecisionAction
from schemas.pipeline_events import DecisionRecord

ACTOR = "pipeline"


@dataclass(frozen=True)
class Provenance:
    """What the policy knows about the episode a candidate came from — never from the model.
    The episode carries the trust (decided once, when it was read), its session and time."""

    episode: Episode
    lane: Lane
    extractor: str = ""  # the extractor's name, once the episode was read
    actor: str = ACTOR  # who sent the episode: named on every decision taken for it

    @property
    def episode_id(self) -> str:
        return self.episode.episode_id

    @property
    def session_id(self) -> str | None:
        return self.episode.session_id

    @property
    def occurred_at(self) -> datetime:
        return self.episode.occurred_at

    @property
    def trust(self) -> Trust:
        return self.episode.trust


@dataclass(frozen=True)
class Decision:
    """What was done with one candidate: written, quarantined, buffered, promoted, confirmed
    or rejected (the ledger refused it; `error` says why)."""

    attribute: str
    action: DecisionAction
    reason: str
    fact: Fact | None = None
    candidate_id: str | None = None
    error: ConflictError | None = None

    def record(self) -> DecisionRecord:
        """Ids and reasons only: a decision record never carries the value or the evidence."""
        return DecisionRecord(
            attribute=self.attribute,
            action=self.action,
            reason=self.reason,
            fact_id=self.fact.fact_id if self.fact else None,
            candidate_id=self.candidate_id,
        )


def thresholds_of(unit: Unit) -> Thresholds:
    settings = unit.settings
    return Thresholds(
        weak_confidence=settings.weak_confidence,
        weak_support=settings.weak_support,
        weak_window=timedelta(days=settings.weak_window_days),
        buffer_window=timedelta(days=settings.buffer_window_days),
    )


def promotion_rule(unit: Unit, attribute: str) -> Wait | None:
    """What a buffered candidate of `attribute` waits for now (the catalogue may have changed
    since it was buffered): consolidation promotes and expires by it, and the review pages
    show how far a candidate has got. None: it never leaves the buffer on its own."""
    spec = unit.catalog.attributes.get(attribute)
    return buffered_rule(spec, thresholds_of(unit)) if spec is not None else None


def apply_candidate(unit: Unit, origin: Provenance, candidate: Candidate) -> Decision:
    catalog = unit.catalog
    spec = catalog.attributes[candidate.attribute]
    signal = confidence(origin.extractor, candidate.evidence, catalog.synonyms(candidate.attribute))
    verdict = decide(
        spec,
        trust=origin.trust,
        lane=origin.lane,
        confidence=signal,
        thresholds=thresholds_of(unit),
    )
    where = Subject(
        candidate.tenant_id,
        candidate.agent_id,
        candidate.purpose,
        candidate.subject,
        candidate.attribute,
    )
    digest = value_hash(candidate.value)
    key = waiting(unit, where)
    if spec.cardinality is Cardinality.ONE:
        reset_contradicted(unit, key, digest, origin.occurred_at, actor=origin.actor)
    support = SupportRecord(
        episode_id=origin.episode_id,
        session_id=origin.session_id,
        occurred_at=origin.occurred_at,
        valid_from=candidate.valid_from,
        evidence=candidate.evidence,
    )
    if isinstance(verdict, Buffer):
        row = add_support(unit, key, candidate.value, support, actor=origin.actor)
        result = promote_if_eligible(
            unit,
            row,
            times=verdict.times,
            window=verdict.window,
            trust=verdict.trust,
            confidence=signal,
            actor=origin.actor,
        )
        sessions = f"supported by {result.support} sessions"
        promoted = _settled(candidate.attribute, result, DecisionAction.PROMOTED, sessions)
        return promoted or Decision(
            candidate.attribute, DecisionAction.BUFFERED, verdict.reason, None, row.candidate_id
        )
    if isinstance(verdict, Quarantine):
        quarantined = DecisionAction.QUARANTINED
        return _write(
            unit,
            where,
            origin,
            candidate,
            support,
            trust=Trust.UNTRUSTED,
            signal=signal,
            action=quarantined,
            reason=verdict.reason,
        )
    waits = key.of_value(digest)
    if waits is not None:
        # A strong statement of a value that was waiting: the wait is over, and the fact
        # holds from the first time it was said.
        add_support(unit, key, candidate.value, support, actor=origin.actor)
        hot = origin.lane is Lane.HOT
        status = CandidateStatus.CONFIRMED if hot else CandidateStatus.PROMOTED
        result = settle(
            unit,
            waits,
            status,
            trust=verdict.trust,
            confidence=signal,
            actor=origin.actor,
            reason=f"stated by episode {origin.episode_id}",
        )
        action = DecisionAction.CONFIRMED if hot else DecisionAction.PROMOTED
        settled = _settled(candidate.attribute, result, action, "it was waiting in the buffer")
        if settled is not None:
            return settled
    return _write(
        unit,
        where,
        origin,
        candidate,
        support,
        trust=verdict.trust,
        signal=signal,
        action=DecisionAction.WRITTEN,
        reason="a strong signal",
    )


def _settled(
    attribute: str, result: Buffered, action: DecisionAction, reason: str
) -> Decision | None:
    """What a promotion or confirmation led to; None while the candidate still waits."""
    if result.refused is not None:
        refused = str(result.refused)
        rejected = DecisionAction.REJECTED
        return Decision(attribute, rejected, refused, None, result.candidate_id, result.refused)
    if result.fact is not None:
        return Decision(attribute, action, reason, result.fact.fact, result.candidate_id)
    return None


def _write(
    unit: Unit,
    where: Subject,
    origin: Provenance,
    candidate: Candidate,
    support: SupportRecord,
    *,
    trust: Trust,
    signal: float,
    action: DecisionAction,
    reason: str,
) -> Decision:
    command = put_command(
        where,
        candidate.value,
        support,
        trust=trust,
        confidence=signal,
        actor=origin.actor,
        idempotency_key=write_key(candidate),
    )
    outcome = write_fact(unit, command)
    if isinstance(outcome, ConflictError):
        return Decision(candidate.attribute, DecisionAction.REJECTED, str(outcome), error=outcome)
    return Decision(candidate.attribute, action, reason, outcome.fact)


def write_key(candidate: Candidate) -> str:
    """The idempotency key of a candidate's write: the same episode and candidate, retried or
    redelivered, write nothing twice."""
    parts = [candidate.tenant_id, candidate.source_episode_id, candidate.attribute]
    digest = hashlib.sha256("\x1f".join([*parts, canonical_json(candidate.value)]).encode())
    return "episode:" + digest.hexdigest()[:40]
