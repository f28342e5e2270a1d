"""The roster of event kinds is complete: every kind has a payload entry and fits the
`events.kind` column, and replay either re-applies a kind (with a function that takes that
kind's payload) or copies it on purpose."""

from __future__ import annotations

import inspect
import typing

import pytest

from pipeline.db.models import EventRow
from pipeline.rebuild import APPLY, COPIED, replayed
from schemas.event_kinds import PAYLOADS, parse_payload, payload_model
from schemas.lifecycle import LEDGER_KINDS, CandidateStatus, EventKind, candidate_kind


def test_every_kind_has_a_payload_entry_and_fits_the_column() -> None:
    assert set(PAYLOADS) == set(EventKind)
    width = EventRow.__table__.c.kind.type.length  # type: ignore[attr-defined]
    assert [kind for kind in EventKind if len(kind) > width] == []


def test_replay_applies_or_copies_every_kind() -> None:
    assert set(APPLY) | COPIED == set(EventKind)
    assert set(APPLY) & COPIED == set()
    assert {
        EventKind.SUPERSEDE,
        EventKind.REJECT,
        EventKind.CONFLICT,
        EventKind.EPISODE_PROCESSED,
        EventKind.CONSOLIDATION,
    } == COPIED
    assert replayed("write")
    assert not replayed("supersede")


@pytest.mark.parametrize("kind", sorted(APPLY))
def test_each_replayed_kind_is_applied_with_its_own_payload(kind: EventKind) -> None:
    apply = APPLY[kind]
    hints = typing.get_type_hints(apply)
    payload_parameter = list(inspect.signature(apply).parameters)[1]
    assert hints[payload_parameter] is PAYLOADS[kind]


def test_a_candidate_leaves_the_buffer_with_the_kind_of_its_status() -> None:
    left = [status for status in CandidateStatus if status is not CandidateStatus.BUFFERED]
    assert {candidate_kind(status).value for status in left} == {
        f"candidate_{status.value}" for status in left
    }
    with pytest.raises(KeyError):
        candidate_kind(CandidateStatus.BUFFERED)


def test_the_ledger_kinds_are_the_ledger_s_own() -> None:
    assert [kind for kind in LEDGER_KINDS if kind.startswith(("candidate_", "episode_"))] == []
    assert len(LEDGER_KINDS) == 11


def test_an_unknown_or_mismatched_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown event kind 'teleport'"):
        payload_model("teleport")
    with pytest.raises(ValueError, match="carries no payload"):
        parse_payload("supersede", {"op": "put"})
    assert parse_payload("supersede", None) is None
