"""The write path of one claim: validate a fact command against the catalogue, judge the claim
against its slot, queue what it stores, log the decision.

The entry points (`put`, `write_fact`, `put_many`) are in `batch`: every write is a batch,
one command long or many.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from pipeline.db import inserts
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, TrustRejected, VersionConflict
from pipeline.ledger import events
from pipeline.ledger.checks import check_put
from pipeline.ledger.intervals import Interval, holding_at
from pipeline.ledger.judging import trust_refusal
from pipeline.ledger.pending import PendingWrites
from pipeline.ledger.results import PutResult
from pipeline.ledger.slots import SlotKey, SlotState, load_slot, lock_key
from pipeline.ledger.state_tag import state_tag
from pipeline.ledger.versions import (
    Change,
    change_reason,
    holds,
    new_version,
    reprojection,
    row_values,
    stored_intervals,
    to_fact,
)
from schemas.commands import PutFact
from schemas.events import ClaimPayload
from schemas.facts import ClaimRecord, Fact, FactStatus, Trust
from schemas.fields import format_utc
from schemas.lifecycle import EventKind


def resolve(unit: Unit, command: PutFact, *, claim_id: str, now: datetime) -> ClaimRecord:
    """Check the command against the catalogue and settle every derived field."""
    checked = check_put(command, unit.catalog, unit.settings, now)
    return ClaimRecord(
        claim_id=claim_id,
        tenant_id=command.tenant_id,
        agent_id=command.agent_id,
        purpose=command.purpose,
        subject=command.subject,
        attribute=command.attribute,
        cardinality=checked.spec.cardinality,
        value=checked.value,
        value_hash=hashlib.sha256(checked.value_text.encode("utf-8")).hexdigest(),
        kind=checked.spec.kind,
        schema_version=unit.catalog.version,
        valid_from=command.valid_from,
        valid_to=command.valid_to,
        source_episode_id=command.source_episode_id,
        evidence=command.evidence,
        confidence=command.confidence,
        trust=command.trust,
        recorded_at=now,
        expires_at=checked.expires_at,
    )


def judge_and_store(
    unit: Unit,
    pending: PendingWrites,
    slots: dict[SlotKey, SlotState],
    claim: ClaimRecord,
    command: PutFact,
) -> PutResult | ConflictError:
    """Judge a resolved claim against its slot as `slots` holds it (read under the key lock,
    with everything queued in `pending` before) and queue what it writes."""
    state = slots.setdefault(SlotKey.of(claim), SlotState({}, {}))
    if claim.trust is Trust.UNTRUSTED:
        fact = _quarantine(pending, state, claim)
        # Why it is untrusted (its source, or a sensitive attribute) is the policy's to say.
        hidden = "quarantined: hidden until a reviewer promotes it"
        _Log(unit, claim, command).event(EventKind.QUARANTINE, [claim.claim_id], hidden)
        return PutResult(fact=fact, written=True, state=state_tag(state))

    claim = _after_earlier_claims(claim, state)
    log = _Log(unit, claim, command)
    problem = _refusal(state, claim, command)
    if problem is not None:
        log.event(refusal_decision(problem), [], str(problem))
        return problem

    changes = _store(pending, claim, state)
    written = next((change for change in changes if change.fact_id == claim.claim_id), None)
    if written is not None:
        holder = written.after
        log.event(EventKind.WRITE, [claim.claim_id])
    else:
        # The claim joined a fact that already holds its value: provenance, or (when its
        # end differs) a new version of that fact.
        holder = _holding(state, changes, claim.valid_from)
        reason = "the claim joins the fact that holds its value"
        log.event(EventKind.WRITE if changes else EventKind.RESTATE, [holder["fact_id"]], reason)
    for change in changes:
        if change.fact_id != holder["fact_id"]:
            log.derived(EventKind.SUPERSEDE, change, claim.claim_id)
    return PutResult(fact=to_fact(holder), written=bool(changes), state=state_tag(state))


def _store(pending: PendingWrites, claim: ClaimRecord, state: SlotState) -> list[Change]:
    pending.claim(claim_columns(claim))
    state.add(claim)
    changes = reprojection(claim.recorded_at, state)
    pending.versions(state, changes)
    return changes


def store_claim(unit: Unit, payload: ClaimPayload) -> None:
    """Replay: store an accepted claim exactly as it was decided, judging and logging nothing
    (the log already holds the original decisions)."""
    claim = payload.claim
    key = SlotKey.of(claim)
    lock_key(unit, key)
    pending = PendingWrites(unit.session)
    with inserts.batch(unit.session):
        state = load_slot(unit.session, key)
        if claim.trust is Trust.UNTRUSTED:
            _quarantine(pending, state, claim)
        else:
            _store(pending, claim, state)
        pending.close_replaced()


def _holding(state: SlotState, changes: list[Change], moment: datetime) -> Mapping[str, Any]:
    """The fact version holding at `moment` once `changes` are applied to the slot."""
    versions: dict[str, Mapping[str, Any]] = {
        fact_id: row_values(row) for fact_id, row in state.current.items()
    }
    versions |= {change.fact_id: change.after for change in changes}
    holding = [
        Interval(v["fact_id"], v["value_hash"], v["valid_from"], v["valid_to"])
        for v in versions.values()
        if holds(v["status"], v["trust"])
    ]
    interval = holding_at(holding, moment)
    assert interval is not None, "an accepted claim always holds at its valid_from"
    return versions[interval.fact_id]


def _after_earlier_claims(claim: ClaimRecord, state: SlotState) -> ClaimRecord:
    """Order the claim after every claim of its slot even if this host's clock lags, so an
    equal claim arriving later can never displace the one that came first."""
    latest = max((other.recorded_at for other in state.claims.values()), default=None)
    if latest is None or claim.recorded_at > latest:
        return claim
    shift = latest - claim.recorded_at + timedelta(microseconds=1)
    expires_at = claim.expires_at + shift if claim.expires_at is not None else None
    return claim.model_copy(
        update={"recorded_at": claim.recorded_at + shift, "expires_at": expires_at}
    )


def _refusal(state: SlotState, claim: ClaimRecord, command: PutFact) -> ConflictError | None:
    """Why the claim may not be written, or None. Decided before anything is changed."""
    if command.expected_version is not None:
        holder: Interval | None = holding_at(stored_intervals(state.current), claim.valid_from)
        actual = state.current[holder.fact_id].version if holder else 0
        if actual != command.expected_version:
            return VersionConflict(
                f"expected_version {command.expected_version}, but the fact holding at "
                f"{format_utc(claim.valid_from)} is at version {actual}",
                expected=command.expected_version,
                actual=actual,
            )
    if command.expected_state is not None:
        actual_state = state_tag(state)
        if actual_state != command.expected_state:
            return VersionConflict(
                f"the key {claim.subject}.{claim.attribute} changed since it was read "
                f'(If-Match "{command.expected_state}", now "{actual_state}")',
                expected=command.expected_state,
                actual=actual_state,
            )
    return trust_refusal(state, claim)


def refusal_decision(problem: ConflictError) -> EventKind:
    return EventKind.REJECT if isinstance(problem, TrustRejected) else EventKind.CONFLICT


def _quarantine(pending: PendingWrites, state: SlotState, claim: ClaimRecord) -> Fact:
    pending.claim(claim_columns(claim) | {"quarantined": True})
    row = new_version(
        claim,
        version=1,
        status=FactStatus.QUARANTINED,
        valid_to=claim.valid_to,
        supersedes=None,
        now=claim.recorded_at,
    )
    pending.version(state, row)
    return to_fact(row)


def claim_columns(claim: ClaimRecord) -> dict[str, Any]:
    return claim.model_dump() | {
        "quarantined": False,
        "slot": claim.slot,
        "cardinality": claim.cardinality.value,
        "trust": claim.trust.value,
    }


class _Log:
    """The decisions of one put. Its primary event carries the resolved claim for replay."""

    def __init__(self, unit: Unit, claim: ClaimRecord, command: PutFact) -> None:
        self.unit = unit
        self.claim = claim
        self.command = command

    def event(self, decision: EventKind, fact_ids: list[str], reason: str | None = None) -> None:
        self._record(decision, fact_ids, reason, ClaimPayload(claim=self.claim))

    def derived(self, decision: EventKind, change: Change, by: str) -> None:
        self._record(decision, [change.fact_id], change_reason(change, by), None)

    def _record(
        self,
        decision: EventKind,
        fact_ids: list[str],
        reason: str | None,
        payload: BaseModel | None,
    ) -> None:
        events.record(
            self.unit,
            decision,
            payload,
            occurred_at=self.claim.recorded_at,
            actor=self.command.actor,
            tenant_id=self.claim.tenant_id,
            subject=self.claim.subject,
            fact_ids=fact_ids,
            idempotency_key=self.command.idempotency_key,
            reason=reason,
        )
