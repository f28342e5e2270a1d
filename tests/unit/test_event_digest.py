"""The decision log's content hash is built around the payload's canonical text, made once for
the hash and the row: it must stay `canonical_json` of the digest, byte for byte, or the hashes
of new events would differ from those of the same decisions logged before."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from pipeline.ledger.events import content_hash, digest_text
from schemas.fields import canonical_json
from schemas.lifecycle import EventKind

COMMANDS: list[Any] = [
    None,
    {},
    {"value": "Zürich ☃", "evidence": 'he said "yes"\n', "z": [1, 2.5, None], "a": {"b": True}},
    {"claim": {"subject": "ana", "valid_from": "2026-01-01T00:00:00Z", "confidence": 0.9}},
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("fact_ids", [[], ["f-1", "f-2"]])
def test_digest_text_is_the_canonical_json_of_the_digest(command: Any, fact_ids: list[str]) -> None:
    for kind in (EventKind.WRITE, EventKind.SUPERSEDE):
        digest = {"decision": str(kind), "fact_ids": fact_ids, "command": command}
        spelled = digest_text(kind, fact_ids, canonical_json(command))
        assert spelled == canonical_json(digest)
        assert hashlib.sha256(spelled.encode("utf-8")).hexdigest() == content_hash(digest)
