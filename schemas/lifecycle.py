"""The lifecycles of SGAM's records, one `StrEnum` each: the database CHECK constraints, the
query validators, the command line's `--status` choices and the OpenAPI enums are built from
these. Plain enums, no pydantic: the command line reads them for its help."""

from __future__ import annotations

from enum import StrEnum


class EpisodeStatus(StrEnum):
    """An episode's processing state: `pending → processing → done | failed`."""

    PENDING = "pending"  # stored, waiting for a worker (or for the sweeper to queue it again)
    PROCESSING = "processing"  # claimed by a worker, under a lease
    DONE = "done"
    FAILED = "failed"  # for good, or until a retry or consolidation's re-drive


# What a worker may still claim (a processing one once its lease ran out).
UNFINISHED = (EpisodeStatus.PENDING, EpisodeStatus.PROCESSING)


class EpisodeError(StrEnum):
    """Why a failed episode failed, which says whether consolidation may re-drive it."""

    RETRYABLE = "retryable"  # the endpoint or the store was down, or crashes took every attempt
    PERMANENT = "permanent"  # invalid answers, a purged text, failed attempts used up


class CandidateStatus(StrEnum):
    """A candidate waits (`buffered`) until it leaves the buffer for good, one way or another."""

    BUFFERED = "buffered"
    PROMOTED = "promoted"  # recurrence (or a strong statement) made it a fact
    CONFIRMED = "confirmed"  # the user confirmed it: a fact with the user's trust
    REJECTED = "rejected"  # the user dropped it
    EXPIRED = "expired"  # no support inside its window
    RESET = "reset"  # a later session stated another value of a single-valued attribute


class DecisionAction(StrEnum):
    """What the policy did with one candidate."""

    WRITTEN = "written"  # a strong signal, written to the ledger
    QUARANTINED = "quarantined"  # written hidden: an untrusted source or a sensitive attribute
    BUFFERED = "buffered"  # a weak signal, waiting in the recurrence buffer
    PROMOTED = "promoted"  # it made a buffered candidate a fact
    CONFIRMED = "confirmed"  # a hot-path statement confirmed a buffered candidate
    REJECTED = "rejected"  # the ledger refused the write (a conflict or a higher trust)


class ReceiptStatus(StrEnum):
    """What became of one episode handed in (`sgam ingest`, POST /v1/episodes, a retry)."""

    QUEUED = "queued"  # stored; a worker will process it
    STORED = "stored"  # stored, but the broker could not be reached: the sweeper queues it
    DUPLICATE = "duplicate"  # seen before (its id or idempotency key): not stored again
    # Processed in the caller's process (inline mode, no broker configured):
    DONE = "done"
    FAILED = "failed"
    PENDING = "pending"  # a retryable failure, within its attempts: the sweeper re-queues it
    SKIPPED = "skipped"  # another claim held it: that claim finishes it


class EventKind(StrEnum):
    # The ledger's own decisions.
    WRITE = "write"  # a claim was stored and changed the current belief
    SUPERSEDE = "supersede"  # another fact got a new version (re-derived on replay)
    RESTATE = "restate"  # a claim agreed with what holds: provenance only
    REJECT = "reject"  # lower trust lost; nothing changed (the claim is kept for the audit)
    CONFLICT = "conflict"  # an equal-trust disagreement; nothing changed
    QUARANTINE = "quarantine"  # an untrusted claim was stored hidden until promoted
    PROMOTE = "promote"  # a quarantined fact was released as verified
    DISMISS = "dismiss"  # a reviewer refused a quarantined fact: hidden for good
    EXPIRE = "expire"  # facts past their retention got expired versions
    FORGET = "forget"  # every fact of a subject was hidden
    PURGE = "purge"  # every fact of a subject was hidden and its content erased
    # The recurrence buffer's.
    CANDIDATE_BUFFERED = "candidate_buffered"  # a weak signal was buffered
    CANDIDATE_SUPPORTED = "candidate_supported"  # another episode supports it
    CANDIDATE_PROMOTED = "candidate_promoted"
    CANDIDATE_CONFIRMED = "candidate_confirmed"
    CANDIDATE_REJECTED = "candidate_rejected"
    CANDIDATE_EXPIRED = "candidate_expired"
    CANDIDATE_RESET = "candidate_reset"
    # The pipeline's audit records (replay copies them and re-derives nothing).
    EPISODE_PROCESSED = "episode_processed"  # an episode's candidates were decided
    CONSOLIDATION = "consolidation"  # a consolidation run's report


LEDGER_KINDS = (
    EventKind.WRITE,
    EventKind.SUPERSEDE,
    EventKind.RESTATE,
    EventKind.REJECT,
    EventKind.CONFLICT,
    EventKind.QUARANTINE,
    EventKind.PROMOTE,
    EventKind.DISMISS,
    EventKind.EXPIRE,
    EventKind.FORGET,
    EventKind.PURGE,
)


def candidate_kind(status: CandidateStatus) -> EventKind:
    """The event of a candidate leaving the buffer with `status` (never `buffered`)."""
    return {
        CandidateStatus.PROMOTED: EventKind.CANDIDATE_PROMOTED,
        CandidateStatus.CONFIRMED: EventKind.CANDIDATE_CONFIRMED,
        CandidateStatus.REJECTED: EventKind.CANDIDATE_REJECTED,
        CandidateStatus.EXPIRED: EventKind.CANDIDATE_EXPIRED,
        CandidateStatus.RESET: EventKind.CANDIDATE_RESET,
    }[status]
