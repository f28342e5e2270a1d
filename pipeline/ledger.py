"""The write path: validate a fact against the catalogue, judge it, store it, log the decision."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from pipeline import decisions, idempotency, writes
from pipeline.decisions import Decision
from pipeline.errors import (
    ConflictError,
    FactConflict,
    InvalidInput,
    TrustRejected,
    VersionConflict,
)
from pipeline.intervals import Interval, Verdict, holding_at, judge
from pipeline.models import ClaimRow, FactRow
from pipeline.projection import (
    HOLDING,
    Change,
    SlotKey,
    SlotState,
    as_claim,
    load_slot,
    new_version,
    reproject,
    row_values,
    stored_intervals,
    to_fact,
)
from pipeline.store import Store
from pipeline.validation import parse
from schemas.commands import PutFact
from schemas.facts import ClaimRecord, Fact, FactStatus, Trust, format_utc
from schemas.fields import canonical_json


@dataclass(frozen=True)
class PutResult:
    """The fact that now holds the written value at its valid_from. `written` is False when the
    ledger already said so (a restatement or a repeated idempotency key)."""

    fact: Fact
    written: bool

    def to_json(self) -> dict[str, Any]:
        return {"fact": self.fact.model_dump(mode="json"), "written": self.written}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PutResult:
        return cls(Fact.model_validate(data["fact"]), written=False)


def put(store: Store, command: PutFact | Mapping[str, Any]) -> PutResult:
    """Write one fact. Raises InvalidInput, FactConflict, TrustRejected or VersionConflict."""
    command = parse(PutFact, command)
    claim_id = str(uuid.uuid4())

    def work(session: Session) -> PutResult | ConflictError:
        def apply() -> PutResult | ConflictError:
            lock_key(store, session, SlotKey.of(command))
            # The clock is read under the lock, so recorded_at follows the order of writes.
            claim = resolve(store, command, claim_id=claim_id, now=store.clock())
            return apply_claim(store, session, claim, command=command, locked=True)

        return idempotency.once(store, session, command, apply, PutResult.from_json)

    outcome = store.run(work)
    if isinstance(outcome, ConflictError):
        raise outcome
    return outcome


def resolve(store: Store, command: PutFact, *, claim_id: str, now: datetime) -> ClaimRecord:
    """Check the command against the catalogue and settle every derived field."""
    catalog = store.catalog
    spec = catalog.attributes.get(command.attribute)
    if spec is None:
        raise InvalidInput(
            "attribute",
            f"{command.attribute!r} is not in catalogue {catalog.version}; declare it there first",
        )
    if command.cardinality is not None and command.cardinality is not spec.cardinality:
        raise InvalidInput(
            "cardinality",
            f"{command.attribute!r} is declared {spec.cardinality.value} in the catalogue",
        )
    try:
        value = spec.normalise(command.value)
    except ValueError as exc:
        raise InvalidInput("value", f"{exc} ({command.attribute} is a {spec.type})") from None
    text = canonical_json(value)
    size = len(text.encode("utf-8"))
    limit = store.settings.max_value_bytes
    if size > limit:
        raise InvalidInput("value", f"is {size} bytes; the limit is {limit} (SGAM_MAX_VALUE_BYTES)")
    expires_at = now + catalog.retention(command.attribute)
    if command.expires_at is not None:
        if command.expires_at > expires_at:
            raise InvalidInput(
                "expires_at",
                f"may only shorten the retention of kind {spec.kind} "
                f"(latest allowed: {format_utc(expires_at)})",
            )
        if command.expires_at <= now:
            raise InvalidInput("expires_at", "must be in the future")
        expires_at = command.expires_at
    return ClaimRecord(
        claim_id=claim_id,
        tenant_id=command.tenant_id,
        agent_id=command.agent_id,
        purpose=command.purpose,
        subject=command.subject,
        attribute=command.attribute,
        cardinality=spec.cardinality,
        value=value,
        value_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        kind=spec.kind,
        schema_version=catalog.version,
        valid_from=command.valid_from,
        valid_to=command.valid_to,
        source_episode_id=command.source_episode_id,
        evidence=command.evidence,
        confidence=command.confidence,
        trust=command.trust,
        recorded_at=now,
        expires_at=expires_at,
    )


def lock_key(store: Store, session: Session, key: SlotKey) -> None:
    store.lock(session, key.lock_name(), shared=(key.subject_lock_name(),))


def apply_claim(
    store: Store,
    session: Session,
    claim: ClaimRecord,
    *,
    command: PutFact | None,
    locked: bool = False,
) -> PutResult | ConflictError:
    """Judge and store one resolved claim. `command` is None during replay: nothing is judged
    or logged then, because the log already holds the original decision."""
    key = SlotKey.of(claim)
    if not locked:
        lock_key(store, session, key)
    with writes.batch(session):
        return _judge_and_store(session, key, claim, command)


def _judge_and_store(
    session: Session, key: SlotKey, claim: ClaimRecord, command: PutFact | None
) -> PutResult | ConflictError:
    if claim.trust is Trust.UNTRUSTED:
        fact = _quarantine(session, claim)
        _Log(session, claim, command).event(
            Decision.QUARANTINE, [claim.claim_id], "untrusted source: hidden until promoted"
        )
        return PutResult(fact, written=True)

    state = load_slot(session, key)
    if command is not None:
        claim = _after_earlier_claims(claim, state)
    log = _Log(session, claim, command)
    if command is not None:
        problem = _refusal(state, claim, command)
        if problem is not None:
            log.event(refusal_decision(problem), [], str(problem))
            return problem

    writes.insert_rows(session, ClaimRow, [claim_columns(claim)])
    state.add(claim)
    changes = reproject(session, key, claim.recorded_at, state)
    written = next((change for change in changes if change.fact_id == claim.claim_id), None)
    if written is not None:
        holder = written.after
        log.event(Decision.WRITE, [claim.claim_id])
    else:
        # The claim joined a fact that already holds its value: provenance, or (when its
        # end differs) a new version of that fact.
        holder = _holding(state, changes, claim.valid_from)
        reason = "the claim joins the fact that holds its value"
        log.event(Decision.WRITE if changes else Decision.RESTATE, [holder["fact_id"]], reason)
    for change in changes:
        if change.fact_id != holder["fact_id"]:
            log.derived(Decision.SUPERSEDE, change, claim.claim_id)
    return PutResult(to_fact(holder), written=bool(changes))


def _holding(state: SlotState, changes: list[Change], moment: datetime) -> Mapping[str, Any]:
    """The fact version holding at `moment` once `changes` are applied to the slot."""
    versions: dict[str, Mapping[str, Any]] = {
        fact_id: row_values(row) for fact_id, row in state.current.items()
    }
    versions |= {change.fact_id: change.after for change in changes}
    holding = [
        Interval(v["fact_id"], v["value_hash"], v["valid_from"], v["valid_to"])
        for v in versions.values()
        if v["status"] in HOLDING
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
    return trust_refusal(state, claim)


def trust_refusal(state: SlotState, claim: ClaimRecord) -> ConflictError | None:
    """FactConflict or TrustRejected when another value already holds from the same instant."""
    rows = state.claims
    verdict, rival = judge((as_claim(row) for row in rows.values()), as_claim(claim))
    if verdict is Verdict.ACCEPT or rival is None:
        return None
    existing = f"fact {rival.claim_id} (trust {rows[rival.claim_id].trust})"
    start = format_utc(claim.valid_from)
    if verdict is Verdict.CONFLICT:
        return FactConflict(
            f"{claim.attribute} already has a different value from {start} with equal trust "
            f"in {existing}; confirm one of them with a higher trust level",
            existing_fact_id=rival.claim_id,
        )
    return TrustRejected(
        f"{claim.attribute} has a different value from {start} with higher trust in {existing}",
        existing_fact_id=rival.claim_id,
    )


def refusal_decision(problem: ConflictError) -> Decision:
    return Decision.REJECT if isinstance(problem, TrustRejected) else Decision.CONFLICT


def _quarantine(session: Session, claim: ClaimRecord) -> Fact:
    writes.insert_rows(session, ClaimRow, [claim_columns(claim) | {"quarantined": True}])
    row = new_version(
        claim,
        version=1,
        status=FactStatus.QUARANTINED,
        valid_to=claim.valid_to,
        supersedes=None,
        now=claim.recorded_at,
    )
    writes.insert_rows(session, FactRow, [row])
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

    def __init__(self, session: Session, claim: ClaimRecord, command: PutFact | None) -> None:
        self.session = session
        self.claim = claim
        self.command = command

    def event(self, decision: Decision, fact_ids: list[str], reason: str | None = None) -> None:
        self._record(
            decision, fact_ids, reason, {"op": "put", "claim": self.claim.model_dump(mode="json")}
        )

    def derived(self, decision: Decision, change: Change, by: str) -> None:
        self._record(decision, [change.fact_id], decisions.change_reason(change, by), None)

    def _record(
        self,
        decision: Decision,
        fact_ids: list[str],
        reason: str | None,
        command: dict[str, Any] | None,
    ) -> None:
        if self.command is None:
            return
        decisions.record(
            self.session,
            decision,
            occurred_at=self.claim.recorded_at,
            actor=self.command.actor,
            tenant_id=self.claim.tenant_id,
            subject=self.claim.subject,
            fact_ids=fact_ids,
            command=command,
            idempotency_key=self.command.idempotency_key,
            reason=reason,
        )
