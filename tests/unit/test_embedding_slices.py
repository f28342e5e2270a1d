"""How the embedding thread cuts what it took from its queue: a part per tenant, about a
request's worth of rows each, every row once (`pipeline/embedding/background.py`)."""

from __future__ import annotations

from pipeline.db.unit import Written
from pipeline.embedding.background import _slices


def test_a_round_is_cut_per_tenant_into_parts_of_a_requests_size() -> None:
    written = Written()
    for n in range(5):
        written.fact("acme", f"f{n}")
    written.episode("acme", "e1")
    written.fact("globex", "g1")
    other = Written()
    other.fact("acme", "f0")  # queued twice: embedded once
    other.episode("globex", "e9")
    written.add(other)
    assert len(written) == 8

    parts = _slices(written, 2)

    assert [(sorted(p.facts), sorted(p.episodes), len(p)) for p in parts] == [
        (["acme"], [], 2),
        (["acme"], [], 2),
        (["acme"], ["acme"], 2),
        (["globex"], ["globex"], 2),
    ]
    rows = [(t, f) for p in parts for t, ids in p.facts.items() for f in ids]
    rows += [(t, e) for p in parts for t, ids in p.episodes.items() for e in ids]
    assert sorted(rows) == sorted(
        [("acme", f"f{n}") for n in range(5)] + [("acme", "e1"), ("globex", "g1"), ("globex", "e9")]
    )
    assert not Written()  # nothing written: nothing queued
