"""Schemathesis hooks for `test_schemathesis.py`, loaded by the `st` process it runs
(SCHEMATHESIS_HOOKS): the API key every generated request carries, and the rules the document
states in words but JSON Schema cannot say, so that no generated request breaks them.

The key is an admin key of the run's own tenant, made in the server's database. A generated
`DELETE /v1/keys/{key_id}` may revoke it (the run lists the tenant's keys): the first 401
makes schemathesis ask for the key again, and a new one is made.

One check of SGAM's own, for the chains of calls (the stateful phase follows the document's
links): a subject forgotten by `DELETE /v1/subjects/{subject}` reads as nothing held — its
facts and history list no fact recorded before the forget, its context answers 200 — not 404,
as the document says; so
schemathesis' `use_after_free` (which wants 404) is replaced by this one.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import schemathesis

from pipeline.access.keys import create_key
from pipeline.db.store import Store
from pipeline.settings import Settings
from schemas.fields import MAX_ID_LENGTH, to_utc

_STORE = Store(Settings(database_url=os.environ["SGAM_DATABASE_URL"]))
_TENANT = os.environ["SGAM_SCHEMATHESIS_TENANT"]
# The review chains start from the whole lists of the seeded tenant (the subject filter is
# generated in the other runs): set by the stateful run of test_schemathesis.py.
_WHOLE_LISTS = os.environ.get("SGAM_SCHEMATHESIS_WHOLE_LISTS") == "1"
_REVIEW_LISTS = {"/v1/candidates", "/v1/quarantine"}


@schemathesis.auth(refresh_interval=600)
class AdminKey:
    def get(self, case: Any, context: Any) -> str:
        return create_key(_STORE, {"tenant_id": _TENANT, "role": "admin"})[1]

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def _instant(value: Any) -> datetime | None:
    try:
        return to_utc(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _expiry_allowed(path: str, body: dict[str, Any]) -> bool:
    """A key's `expires_at` is in the future; a fact's also within its attribute's retention
    (it may only shorten it). Both depend on the clock, which no schema can say."""
    expires = _instant(body.get("expires_at"))
    if expires is None:
        return True
    now = datetime.now(UTC) + timedelta(seconds=60)  # the request is sent a little later
    if path == "/v1/facts" and body.get("attribute") in _STORE.catalog.attributes:
        latest = datetime.now(UTC) + _STORE.catalog.retention(body["attribute"])
        return now < expires < latest - timedelta(seconds=60)
    return now < expires


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    """A tenant named in a body or query is the run's: any other is refused by design (403,
    "the key's tenant"), and generated names would never reach the pipeline. In the review
    chains, the candidates and quarantine are listed for every subject."""
    bodies = case.body if isinstance(case.body, list) else [case.body]
    for body in bodies:
        if isinstance(body, dict) and body.get("tenant_id") is not None:
            body["tenant_id"] = _TENANT
    if case.query and case.query.get("tenant_id") is not None:
        case.query["tenant_id"] = _TENANT
    if _WHOLE_LISTS and case.operation.path in _REVIEW_LISTS and case.query:
        case.query.pop("subject", None)  # a generated subject names nothing seeded
    _own_idempotency_keys(case, bodies)
    return case


def _own_idempotency_keys(case: Any, bodies: list[Any]) -> None:
    """A generated idempotency key ("00" more often than not) names its payload too, so that
    it is not the same key for another request, a 409 by design (idempotency-conflict):
    before, most generated puts, remembers and episodes stopped there. The same payload keeps
    its key, so repeats are still sent and answered as replays. Valid requests only: a key
    broken on purpose is left as generated."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    payload = [
        {k: v for k, v in body.items() if k != "idempotency_key"}
        if isinstance(body, dict)
        else body
        for body in bodies
    ]
    digest = hashlib.sha256(
        json.dumps([case.operation.label, payload], sort_keys=True, default=str).encode()
    ).hexdigest()[:8]

    def own(key: str) -> str:  # (idempotent: a case may be mapped more than once)
        if key.endswith(f"~{digest}"):
            return key
        return f"{key[: MAX_ID_LENGTH - 9]}~{digest}"

    header = (case.headers or {}).get("Idempotency-Key")
    if isinstance(header, str):
        case.headers["Idempotency-Key"] = own(header)
    for body in bodies:
        if isinstance(body, dict) and isinstance(body.get("idempotency_key"), str):
            # With the header, the body's own key is the header's (filter_case: equal).
            body["idempotency_key"] = own(
                header if isinstance(header, str) else body["idempotency_key"]
            )


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    """The rules the document states in words, between fields or against the clock: a put's
    `valid_to` after its `valid_from`; a key's or a fact's expiry ahead; a body's own
    idempotency key equal to the Idempotency-Key header, and none per episode in a batch
    sent with the header."""
    bodies = case.body if isinstance(case.body, list) else [case.body]
    header = (case.headers or {}).get("Idempotency-Key")
    for body in bodies:
        if not isinstance(body, dict):
            continue
        start, end = _instant(body.get("valid_from")), _instant(body.get("valid_to"))
        if start is not None and end is not None and end <= start:
            return False
        if not _expiry_allowed(case.operation.path, body):
            return False
        own = body.get("idempotency_key")
        if None not in (header, own) and (isinstance(case.body, list) or own != header):
            return False
    return True


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Each answer's operation, status and seconds, one line each, for the test's figures."""
    with open(os.environ["SGAM_SCHEMATHESIS_CALLS"], "a", encoding="utf-8") as calls:
        calls.write(f"{case.operation.label}\t{response.status_code}\t{response.elapsed:.3f}\n")


_READS = {
    "/v1/subjects/{subject}/facts",
    "/v1/subjects/{subject}/attributes/{attribute}/history",
    "/v1/subjects/{subject}/context",
}


@schemathesis.check
def forgotten_subject_reads_nothing(ctx: Any, response: Any, case: Any) -> bool | None:
    """A read linked from a 2xx forget of the same subject answers 200 and shows no fact
    recorded before the forget was sent (another worker may write the subject since). The
    link's source comes from schemathesis' scenario record (`ctx.internals`, not a stable
    API: pinned with the version in pyproject.toml)."""
    if case.operation.path not in _READS or case.method.upper() != "GET":
        return None
    parent = ctx.internals.find_parent(case_id=case.id)
    if parent is None or parent.operation.path != "/v1/subjects/{subject}":
        return None
    forget = ctx.internals.find_response(case_id=parent.id)
    same = (parent.path_parameters or {}).get("subject") == (case.path_parameters or {}).get(
        "subject"
    )
    if forget is None or not 200 <= forget.status_code < 300 or not same:
        return None
    if response.status_code != 200:
        raise AssertionError(f"a forgotten subject's read answered {response.status_code}")
    facts = response.json()
    if isinstance(facts, dict):  # a context's items carry no time: its answer is checked
        return True
    # The forget's answer, less its time in flight, less the Date header's second.
    sent = parsedate_to_datetime(forget.headers["date"][0]) - timedelta(seconds=forget.elapsed + 2)
    for fact in facts:
        if to_utc(fact["recorded_at"]) < sent:
            raise AssertionError(f"a forgotten subject's read shows {fact}")
    return True
