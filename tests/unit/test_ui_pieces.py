"""The review pages' pure parts: the timeline's geometry and the signed session and CSRF
tokens (no server, no browser)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from pipeline.access.keys import ApiKey
from pipeline.ui.sessions import Signer
from pipeline.ui.timeline import WIDTH, timeline
from schemas.facts import Fact

NOW = datetime(2026, 7, 1, tzinfo=UTC)


def version(value: str, valid_from: str, valid_to: str | None, **times: Any) -> Fact:
    return Fact(
        fact_id=times.pop("fact_id", value),
        version=times.pop("version", 1),
        tenant_id="acme",
        agent_id="default",
        purpose="default",
        subject="mira",
        attribute="home_city",
        value=value,
        cardinality="one",
        kind="fact",
        schema_version="1",
        valid_from=datetime.fromisoformat(valid_from),
        valid_to=datetime.fromisoformat(valid_to) if valid_to else None,
        recorded_at=times.pop("recorded_at", datetime(2026, 3, 1, tzinfo=UTC)),
        superseded_at=times.pop("superseded_at", None),
        supersedes_fact_id=None,
        source_episode_id="e1",
        evidence=None,
        confidence=1.0,
        trust="verified",
        status="superseded" if times.get("superseded") else "active",
        expires_at=None,
    )


def test_one_row_per_version_superseded_ones_marked_and_bars_meeting() -> None:
    first = datetime(2026, 1, 2, tzinfo=UTC)
    replaced = datetime(2026, 3, 1, tzinfo=UTC)
    drawn = timeline(
        [
            version("Lisbon", "2026-03-01T00:00:00+00:00", None, recorded_at=replaced),
            version(
                "Utrecht",
                "2026-01-01T00:00:00+00:00",
                None,
                recorded_at=first,
                superseded_at=replaced,
                superseded=True,
            ),
            version(
                "Utrecht",
                "2026-01-01T00:00:00+00:00",
                "2026-03-01T00:00:00+00:00",
                recorded_at=replaced,
                version=2,
            ),
        ],
        NOW,
    )
    assert [(bar.label, bar.believed, bar.open_ended) for bar in drawn.bars] == [
        ("Utrecht", False, True),  # recorded first, then superseded
        ("Utrecht", True, False),  # its closed successor version, recorded with Lisbon
        ("Lisbon", True, True),
    ]
    closed, successor = drawn.bars[1], drawn.bars[2]
    assert abs(closed.x + closed.width - successor.x) < 0.2  # Lisbon starts where Utrecht ends
    assert drawn.bars[0].x == closed.x  # both Utrecht versions start on 2026-01-01
    assert drawn.bars[0].x + drawn.bars[0].width == WIDTH  # open-ended: to the edge
    assert "superseded 2026-03-01 00:00" in drawn.bars[0].caption
    assert len({bar.y for bar in drawn.bars}) == 3
    assert 0 < drawn.now_x <= WIDTH
    assert [tick.label for tick in drawn.ticks][0] <= "2026-01-01"


def test_an_attribute_never_recorded_draws_nothing() -> None:
    drawn = timeline([], NOW)
    assert drawn.bars == []
    assert drawn.ticks == []


def key(key_id: str = "0123456789abcdef") -> ApiKey:
    return ApiKey(
        key_id=key_id,
        prefix="sgam_01234567",
        tenant_id="acme",
        role="reviewer",
        agent_id=None,
        purpose=None,
        name=None,
        created_at=NOW,
        expires_at=None,
        revoked_at=None,
    )


def test_a_session_names_its_key_and_refuses_tampering_and_expiry() -> None:
    signer = Signer(b"s" * 32, 3600)
    cookie = signer.session_for(key())
    session = signer.session_of(cookie)
    assert session is not None
    assert session.key_id == "0123456789abcdef"
    key_id, session_id, ends, signature = cookie.split(".")
    assert signer.session_of(f"fedcba9876543210.{session_id}.{ends}.{signature}") is None
    assert signer.session_of(f"{key_id}.{session_id}.{int(ends) + 999}.{signature}") is None
    assert signer.session_of(f"{key_id}.other.{ends}.{signature}") is None  # another session
    assert Signer(b"t" * 32, 3600).session_of(cookie) is None  # another server's secret
    assert Signer(b"s" * 32, -1).session_of(Signer(b"s" * 32, -1).session_for(key())) is None
    assert signer.session_of(None) is None
    assert signer.session_of("garbage") is None
    assert int(ends) > time.time()
    # Every sign-in is a session of its own, so signing out ends that one only.
    assert signer.session_of(signer.session_for(key())) != session


def test_rows_run_in_valid_time_order_whatever_order_they_were_recorded_in() -> None:
    drawn = timeline(
        [
            version("Lisbon", "2026-03-01T00:00:00+00:00", None, recorded_at=NOW),
            version(
                "Utrecht",
                "2026-01-01T00:00:00+00:00",
                "2026-03-01T00:00:00+00:00",
                recorded_at=datetime(2026, 6, 1, tzinfo=UTC),  # a late put, recorded after
                fact_id="u",
            ),
        ],
        NOW,
    )
    assert [bar.label for bar in drawn.bars] == ["Utrecht", "Lisbon"]
    assert drawn.bars[0].recorded_x < drawn.bars[1].recorded_x  # each row's recorded mark
    assert drawn.bars[1].recorded_x == drawn.now_x
    assert drawn.bars[0].caption.endswith("recorded 2026-06-01 00:00 UTC")


def test_a_csrf_token_is_bound_to_its_session() -> None:
    signer = Signer(b"s" * 32, 3600)
    mine, theirs = signer.session_for(key()), signer.session_for(key("fedcba9876543210"))
    token = signer.csrf_for(mine)
    assert signer.csrf_ok(mine, token) is True
    assert signer.csrf_ok(theirs, token) is False
    assert signer.csrf_ok(mine, None) is False
    assert signer.csrf_ok(None, token) is False
    assert signer.csrf_ok(mine, "forged") is False
