"""The roster of the decision log's kinds of event (`lifecycle.EventKind`), each with the
payload model it carries.

Every kind is declared in schemas: the ledger records against this
roster and replay (`pipeline/rebuild.py`) dispatches through it, so neither has to import the
stages that log events. A new kind is one member and one roster entry (a test checks that every
member has one).
"""

from __future__ import annotations

from schemas.buffer import BufferedPayload, DecidedPayload, SupportedPayload
from schemas.events import (
    ClaimPayload,
    DismissPayload,
    ExpirePayload,
    ForgetPayload,
    Payload,
    PromotePayload,
)
from schemas.lifecycle import EventKind
from schemas.pipeline_events import ConsolidationPayload, EpisodeProcessedPayload

# What each kind's event carries in its `command` column (None: nothing). A refused put keeps
# its claim for the audit; a refused promotion has no payload.
PAYLOADS: dict[EventKind, type[Payload] | None] = {
    EventKind.WRITE: ClaimPayload,
    EventKind.SUPERSEDE: None,
    EventKind.RESTATE: ClaimPayload,
    EventKind.REJECT: ClaimPayload,
    EventKind.CONFLICT: ClaimPayload,
    EventKind.QUARANTINE: ClaimPayload,
    EventKind.PROMOTE: PromotePayload,
    EventKind.DISMISS: DismissPayload,
    EventKind.EXPIRE: ExpirePayload,
    EventKind.FORGET: ForgetPayload,
    EventKind.PURGE: ForgetPayload,
    EventKind.CANDIDATE_BUFFERED: BufferedPayload,
    EventKind.CANDIDATE_SUPPORTED: SupportedPayload,
    EventKind.CANDIDATE_PROMOTED: DecidedPayload,
    EventKind.CANDIDATE_CONFIRMED: DecidedPayload,
    EventKind.CANDIDATE_REJECTED: DecidedPayload,
    EventKind.CANDIDATE_EXPIRED: DecidedPayload,
    EventKind.CANDIDATE_RESET: DecidedPayload,
    EventKind.EPISODE_PROCESSED: EpisodeProcessedPayload,
    EventKind.CONSOLIDATION: ConsolidationPayload,
}


def payload_model(kind: str) -> type[Payload] | None:
    """The payload model of a stored kind; ValueError for a kind the roster does not know."""
    try:
        return PAYLOADS[EventKind(kind)]
    except ValueError:
        raise ValueError(f"unknown event kind {kind!r} in the decision log") from None


def parse_payload(kind: str, stored: dict[str, object] | None) -> Payload | None:
    """A stored event's command as its kind's model (None when it carries none)."""
    model = payload_model(kind)
    if stored is None:
        return None
    if model is None:
        raise ValueError(f"event kind {kind!r} carries no payload, but one is stored")
    return model.model_validate(stored)
