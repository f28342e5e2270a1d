"""How the embedding arm cuts the rows it read into requests, the one cut between the rows a
write committed and the endpoint: a request per tenant, up to SGAM_EMBEDDING_BATCH texts each,
every row once and in order (`pipeline/embedding/vectors.py: requests`)."""

from __future__ import annotations

from pipeline.db.unit import Written
from pipeline.embedding.vectors import _Pending, requests


def _row(tenant_id: str, key: str) -> _Pending:
    return _Pending("fact", tenant_id, "mira", key, f"text of {key}")


def test_the_rows_read_are_cut_once_per_tenant_into_requests_of_a_batch() -> None:
    rows = [_row("globex", "g1"), *(_row("acme", f"f{n}") for n in range(5)), _row("globex", "g2")]

    cut = requests(rows, 2)

    assert [[(item.tenant_id, item.key) for item in request] for request in cut] == [
        [("acme", "f0"), ("acme", "f1")],
        [("acme", "f2"), ("acme", "f3")],
        [("acme", "f4")],
        [("globex", "g1"), ("globex", "g2")],
    ]
    assert requests(rows, 64) == [rows[1:6], [rows[0], rows[6]]]
    assert requests([], 2) == []


def test_what_a_unit_wrote_is_merged_once_per_row() -> None:
    written = Written()
    for n in range(3):
        written.fact("acme", f"f{n}")
    written.episode("acme", "e1")
    other = Written()
    other.fact("acme", "f0")  # queued twice: embedded once
    other.inserted([{"tenant_id": "globex", "fact_id": "g1"}])
    written.add(other)

    assert written.facts == {"acme": {"f0", "f1", "f2"}, "globex": {"g1"}}
    assert written.episodes == {"acme": {"e1"}}
    assert len(written) == 5
    assert not Written()  # nothing written: nothing queued
