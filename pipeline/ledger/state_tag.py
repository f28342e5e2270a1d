"""The tag of a key's state, which HTTP sends as the ETag and takes back in If-Match.

A fact's version alone cannot be the tag: every new fact starts again at version 1, so a stale
"1" also matched the newer fact of the same key and two writers holding it both won. The tag
names every current fact version of the key (ids and versions), so any write that changed the
key — a new fact, a closed or expired version, a quarantined one — changes it, and of writers
holding the same tag exactly one wins: they are serialised by the key's lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from sqlalchemy.orm import Session

from pipeline.ledger.slots import AnyVersion, SlotKey, SlotState, load_slot

EMPTY = "0"  # nothing current in the key: the tag HTTP has always sent for "none held"


def tag_of(versions: Iterable[AnyVersion]) -> str:
    parts = sorted(f"{row.fact_id}:{row.version}" for row in versions)
    if not parts:
        return EMPTY
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:20]


def state_tag(state: SlotState) -> str:
    return tag_of(state.current.values())


def read_state_tag(session: Session, key: SlotKey) -> str:
    """The tag of a key as stored now (a single-valued attribute: its one slot)."""
    return state_tag(load_slot(session, key))
