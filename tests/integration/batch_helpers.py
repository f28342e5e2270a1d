"""Helpers for the put_many tests (imported, not collected): a structural snapshot of a whole
database and of a list of outcomes, so that two databases written by different code paths can
be compared row for row.

Two things legitimately differ between two databases that hold the same ledger:

- generated ids (fact and claim ids are uuid4): every uuid, wherever it occurs (a column, a JSON
  payload, a reason or an error message), becomes `<id N>`, N counting first appearances in a
  fixed walk that starts with the decision log in event order. Equal structure gives equal
  labels, so references (supersedes_fact_id, events.fact_ids, existing_fact_id) are compared.
- clock readings: every transaction-time value (recorded_at, superseded_at, occurred_at,
  created_at, expires_at) becomes its rank among all such values of the database, ties kept.
  So the ORDER of transaction times is compared, not the values: a batched write path may read
  the clock fewer times than one put per command does, but it may not reorder what sequential
  puts record, nor merge two instants that sequential puts keep apart.

Valid times (valid_from, valid_to) come from the commands and are compared as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pipeline.db.store import Store
from pipeline.errors import ConflictError, InvalidInput
from pipeline.ledger.events import content_hash
from pipeline.ledger.results import PutResult
from tests.integration.ledger_helpers import all_rows

Outcome = PutResult | ConflictError | InvalidInput

CLOCK_KEYS = frozenset({"recorded_at", "superseded_at", "occurred_at", "created_at", "expires_at"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def _as_instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value)  # JSON payloads hold RFC 3339 text
    return None


class _Structure:
    """Maps uuids to labels by first appearance and clock values to their ranks."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.instants: set[datetime] = set()
        self.ranks: dict[datetime, int] = {}

    def collect(self, value: Any, key: str | None = None) -> None:
        """First pass: every clock value, so that ranks can be assigned."""
        if isinstance(value, dict):
            for name, item in value.items():
                self.collect(item, name)
        elif isinstance(value, list | tuple):
            for item in value:
                self.collect(item, key)
        elif key in CLOCK_KEYS:
            instant = _as_instant(value)
            if instant is not None:
                self.instants.add(instant)

    def rank(self) -> None:
        self.ranks = {instant: rank for rank, instant in enumerate(sorted(self.instants))}

    def __call__(self, value: Any, key: str | None = None) -> Any:
        """Second pass: the value with ids labelled and clock values ranked."""
        if isinstance(value, dict):
            return {name: self(item, name) for name, item in value.items()}
        if isinstance(value, list | tuple):
            return [self(item, key) for item in value]
        if key in CLOCK_KEYS:
            instant = _as_instant(value)
            if instant is not None:
                return f"<t{self.ranks[instant]:04d}>"
        if isinstance(value, str):
            return _UUID.sub(self._label, value)
        return value

    def _label(self, match: re.Match[str]) -> str:
        return self.ids.setdefault(match.group(0), f"<id {len(self.ids):04d}>")


def describe(outcome: Outcome) -> dict[str, Any]:
    """An outcome as plain data: a PutResult's fact and flag, an error's type, text and
    attributes."""
    if isinstance(outcome, PutResult):
        fact = outcome.fact.model_dump(mode="json")
        return {"type": "PutResult", "fact": fact, "written": outcome.written}
    attributes = {name: value for name, value in vars(outcome).items() if not name.startswith("_")}
    return {"type": type(outcome).__name__, "message": str(outcome), **attributes}


def snapshot(store: Store, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Every table of the store and the outcomes, normalised (see the module docstring).
    Events stay in log order; facts are ordered by (fact label, version), claims by label,
    idempotency keys by (tenant, key), so only the log's order is compared, not the order in
    which rows were inserted."""
    tables = all_rows(store)
    for event in tables["events"]:
        digest = {
            "decision": event["kind"],
            "fact_ids": event["fact_ids"],
            "command": event["command"],
        }
        assert event.pop("content_hash") == content_hash(digest), f"content_hash of {event}"
    tables["events"] = _derived_in_content_order(tables["events"], tables["claims"])
    described = [describe(outcome) for outcome in outcomes]

    structure = _Structure()
    order = ["events", *sorted(name for name in tables if name != "events")]
    for name in order:
        structure.collect(tables[name])
    structure.collect(described)
    structure.rank()
    normalised = {name: structure(tables[name]) for name in order}
    result = structure(described)

    by: dict[str, Callable[[dict[str, Any]], Any]] = {
        "facts": lambda row: (row["fact_id"], row["version"]),
        "claims": lambda row: row["claim_id"],
        "idempotency_keys": lambda row: (row["tenant_id"], row["key"]),
    }
    for name, key in by.items():
        normalised[name].sort(key=key)
    return {"tables": normalised, "outcomes": result}


def _derived_in_content_order(
    events: list[dict[str, Any]], claims: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The log with each run of supersede events of one command (consecutive, one
    occurred_at) ordered by the fact they name. The write path emits the facts that lost their
    interval in the order the database returns the slot's rows, which has no ORDER BY: two
    sequential runs of the same commands may already list them differently."""
    identity = {
        claim["claim_id"]: (claim["slot"], claim["valid_from"], claim["value_hash"])
        for claim in claims
    }

    def named(event: dict[str, Any]) -> Any:
        return [identity.get(fact_id, (fact_id,)) for fact_id in event["fact_ids"]]

    ordered: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for event in [*events, None]:
        if run and (
            event is None
            or event["kind"] != "supersede"
            or event["occurred_at"] != run[0]["occurred_at"]
        ):
            ordered += sorted(run, key=named)
            run = []
        if event is not None:
            (run if event["kind"] == "supersede" else ordered).append(event)
    return ordered


def first_difference(actual: Any, expected: Any, path: str = "") -> str | None:
    """Where two snapshots first differ, as `path: actual != expected`, or None."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            found = first_difference(actual.get(key), expected.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(actual, list) and isinstance(expected, list):
        for index, (one, other) in enumerate(zip(actual, expected, strict=False)):
            found = first_difference(one, other, f"{path}[{index}]")
            if found:
                return found
        if len(actual) != len(expected):
            return f"{path}: {len(actual)} items != {len(expected)} items"
        return None
    return None if actual == expected else f"{path}: {actual!r} != {expected!r}"
