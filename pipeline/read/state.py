"""The state tag of a single-valued key: what HTTP sends as the ETag, and what a put takes back
to refuse itself if the key was written since (If-Match; `expected_state` in Python, `sgam put
--if-match` on the command line).

A fact's version cannot stand for the state: every new fact of a key starts again at version 1.
The tag names every current fact version of the key (`pipeline/ledger/state_tag.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.catalog.names import unknown_attribute
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from pipeline.ledger.slots import SlotKey
from pipeline.ledger.state_tag import read_state_tag
from pipeline.read.facts import SubjectQuery
from pipeline.validation import parse
from schemas.facts import Cardinality
from schemas.fields import Identifier


class KeyQuery(SubjectQuery):
    """One single-valued key: a subject's attribute within one tenant, agent and purpose."""

    attribute: Identifier


def state_tag(store: Store, query: KeyQuery | Mapping[str, Any]) -> str:
    """The key's state tag as stored now (`"0"`: nothing held). Pass it to `put` as
    `expected_state`: any write to the key since then makes that put a VersionConflict."""
    query = parse(KeyQuery, query)
    spec = store.catalog.attributes.get(query.attribute)
    if spec is None:
        raise unknown_attribute(store.catalog, query.attribute)
    if spec.cardinality is not Cardinality.ONE:
        raise InvalidInput(
            "attribute", f"{query.attribute} is multi-valued: only a single-valued key has a tag"
        )
    key = SlotKey(
        query.tenant_id, query.agent_id, query.purpose, query.subject, query.attribute, ""
    )
    with store.begin() as unit:
        return read_state_tag(unit.session, key)
