"""The notice a page shows after a form: one of a fixed set of codes, never text from the
address (a crafted link cannot make the page say anything). The thing it names is looked up
again by its id, in the signed-in key's scope, so the notice reads `home_city = Utrecht`, not a
UUID, and names nothing the key may not read — the address carries ids, never a value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from sqlalchemy import select

from pipeline.access.keys import ApiKey
from pipeline.db.models import CandidateRow, EventRow, FactRow
from pipeline.db.store import Store
from schemas.lifecycle import EventKind

# code: (what it names, the words before it)
CODES = {
    "candidate-confirmed": ("candidate", "Confirmed"),
    "candidate-rejected": ("candidate", "Rejected"),
    "fact-promoted": ("fact", "Promoted"),
    "fact-rejected": ("fact", "Rejected"),
    "subject-forgotten": ("subject", "Forgotten"),
}


@dataclass(frozen=True)
class Notice:
    verb: str
    attribute: str | None = None
    value: Any = None
    subject: str | None = None
    hidden: int | None = None  # after a forget: how many facts it hid


def query(code: str, what: str, **more: str) -> dict[str, str]:
    """The address's query for the page the form sends the browser back to."""
    assert code in CODES
    return {"notice": code, "what": what} | more


def notice_of(request: Request, store: Store, key: ApiKey) -> Notice | None:
    """The notice the address asks for, or None for an unknown code or a thing the key does
    not see (any more)."""
    code, what = request.query_params.get("notice"), request.query_params.get("what")
    if code not in CODES or not what:
        return None
    kind, verb = CODES[code]
    if kind == "subject":
        hidden = request.query_params.get("hidden", "")
        count = int(hidden) if hidden.isascii() and hidden.isdecimal() else None
        return Notice(verb, subject=what, hidden=count)
    table: Any = CandidateRow if kind == "candidate" else FactRow
    named = table.candidate_id if kind == "candidate" else table.fact_id
    statement = select(table.attribute, table.value, table.subject).where(
        named == what, table.tenant_id == key.tenant_id
    )
    if code == "fact-rejected":  # a dismissal tombstones the fact: named unless forgotten since
        statement = statement.where(~_forgotten_since(table.forgotten_at))
    else:
        statement = statement.where(table.forgotten_at.is_(None))
    if key.agent_id is not None:
        statement = statement.where(table.agent_id == key.agent_id)
    if key.purpose is not None:
        statement = statement.where(table.purpose == key.purpose)
    if kind == "fact":
        statement = statement.order_by(FactRow.version.desc())
    with store.begin() as unit:
        found = unit.session.execute(statement.limit(1)).first()
    if found is None:
        return None
    return Notice(verb, attribute=found.attribute, value=found.value, subject=found.subject)


def _forgotten_since(dismissed_at: Any) -> Any:
    """The fact's subject was forgotten (or purged) at or after its dismissal."""
    return (
        select(EventRow.event_id)
        .where(
            EventRow.tenant_id == FactRow.tenant_id,
            EventRow.subject == FactRow.subject,
            EventRow.kind.in_([EventKind.FORGET, EventKind.PURGE]),
            EventRow.occurred_at >= dismissed_at,
        )
        .exists()
    )
