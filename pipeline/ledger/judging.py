"""Whether a claim may join its slot: the trust rules of the SPEC applied to stored claims."""

from __future__ import annotations

from pipeline.errors import ConflictError, FactConflict, TrustRejected
from pipeline.ledger.intervals import Verdict, judge
from pipeline.ledger.slots import SlotState
from pipeline.ledger.versions import as_claim
from schemas.facts import ClaimRecord
from schemas.fields import format_utc


def trust_refusal(state: SlotState, claim: ClaimRecord) -> ConflictError | None:
    """FactConflict or TrustRejected when another value already holds from the same instant."""
    rows, now = state.claims, claim.recorded_at
    verdict, rival = judge((as_claim(row, now) for row in rows.values()), as_claim(claim, now))
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
