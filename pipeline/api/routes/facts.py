"""Facts: write one (PUT /v1/facts), read what holds, a timeline, and the context for a model.

A GET of a single-valued attribute sends the key's state tag as its ETag
(pipeline/ledger/state_tag.py; `"0"`: nothing held); PUT sends it back in If-Match, and any
write to the key since then makes it 412. Promote's If-Match is the quarantined fact's version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from annotated_types import Interval
from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import StringConstraints

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api import catalog_schema, operations
from pipeline.api.access import Reader, Reviewer, Writer, bind
from pipeline.api.bodies import PutBody, Subject
from pipeline.api.conventions import (
    DIGITS,
    Flag,
    IdempotencyHeader,
    IdQuery,
    IfMatchHeader,
    IfMatchVersion,
    Opened,
    TextQuery,
    TimeQuery,
    etag,
    expected_state,
    expected_version,
    given,
    idempotency_key,
    identifier,
    mark_replayed,
)
from pipeline.api.hot_reads import HotRead
from pipeline.api.json_answers import facts_answer
from pipeline.api.routes.owned import require_owned
from pipeline.db.store import Store
from pipeline.ledger.results import PutResult
from pipeline.read.context import Context
from pipeline.read.search import KINDS_PATTERN, MAX_LIMIT, MAX_QUERY_CHARS
from schemas.facts import Cardinality, Fact
from schemas.fields import Identifier, Text
from schemas.results import SearchResult

router = APIRouter(prefix="/v1", tags=["facts"])
# The context's budget, as pipeline.read.context.ContextQuery bounds it.
Budget = Annotated[Annotated[Annotated[int, Interval(ge=1, le=1_000_000)], DIGITS] | None, Query()]
# The search's parameters, as pipeline.read.search.SearchQuery bounds them.
SearchText = Annotated[
    Annotated[Text, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)], Query()
]
SearchLimit = Annotated[
    Annotated[Annotated[int, Interval(ge=1, le=MAX_LIMIT)], DIGITS] | None, Query()
]
Kinds = Annotated[
    Annotated[str, StringConstraints(pattern=KINDS_PATTERN)] | None,
    Query(description="facts, episodes or both, comma-separated (default: both)"),
]


async def scope_query(
    tenant_id: IdQuery = None, agent_id: IdQuery = None, purpose: IdQuery = None
) -> dict[str, str]:
    """The scope a read's query names (each checked like an identifier)."""
    return named_scope(tenant_id=tenant_id, agent_id=agent_id, purpose=purpose)


def named_scope(**named: str | None) -> dict[str, str]:
    return {name: identifier(name, value) for name, value in given(**named).items()}


Scope = Annotated[dict[str, str], Depends(scope_query)]


@router.put(
    "/facts",
    summary="Write a fact (the ledger's put)",
    response_model=PutResult,
    responses={200: {"model": PutResult, "description": "the ledger already held it"}},
    status_code=201,
)
def put_fact(
    body: PutBody,
    response: Response,
    key: Writer,
    store: Opened,
    idempotency: IdempotencyHeader = None,
    if_match: IfMatchHeader = None,
) -> PutResult:
    """201 with the new fact; 200 when the ledger already held the value (a restatement). A
        retry with the same Idempotency-Key answers the first request's status and body again,
        with `Idempotent-Replayed: true`; the key used for another request is 409. If-Match: the
        key's ETag as read; the answer's ETag is the key's state after the write. The value is read
    only in its type's JSON form, as the document states it (a number, not "42")."""
    sent = body.model_dump(exclude_unset=True)
    catalog_schema.check_sent_value(store.catalog, sent["attribute"], sent["value"])
    fields = bind(key, sent) | {"actor": key.key_id}
    fields = idempotency_key(idempotency, fields)
    fields["expected_state"] = expected_state(if_match)
    result = pipeline.put(store, fields).as_first_answered()
    response.status_code = 201 if result.written else 200
    mark_replayed(response, result.replayed)
    if result.state is not None:
        response.headers["ETag"] = etag(result.state)
    elif result.fact.cardinality is Cardinality.ONE:  # a repeated key: read the state now
        response.headers["ETag"] = etag(operations.state_tag(store, result.fact))
    return result


@router.get(
    "/subjects/{subject}/facts",
    summary="What holds for a subject at a valid time, as believed at a known time",
    response_model=list[Fact],
)
def get_facts(
    subject: Subject,
    key: Reader,
    store: Opened,
    named: Scope,
    attribute: IdQuery = None,
    at: TimeQuery = None,
    known_at: TimeQuery = None,
    include_quarantined: Flag = False,
) -> Response:
    """With a single-valued `attribute` (and no `known_at`), the ETag names the key's state
    (`"0"`: nothing held), to send in If-Match. `include_quarantined` needs the reviewer
    role."""
    return facts_response(
        store,
        key,
        subject,
        named,
        attribute=attribute,
        at=at,
        known_at=known_at,
        include_quarantined=include_quarantined,
    )


def facts_response(
    store: Store,
    key: ApiKey,
    subject: str,
    named: Mapping[str, str],
    *,
    attribute: str | None = None,
    at: str | None = None,
    known_at: str | None = None,
    include_quarantined: bool = False,
) -> Response:
    """GET facts' answer from its parsed parameters: the route's, and the hot read's
    (`pipeline/api/hot_reads.py`), which serves the same parameters without FastAPI."""
    spec = store.catalog.attributes.get(attribute) if attribute is not None else None
    single = spec is not None and spec.cardinality is Cardinality.ONE
    headers: dict[str, str] = {}
    if attribute is not None and single and known_at is None:
        # The tag before the facts: a write in between makes the tag stale (a later PUT is
        # 412), whereas a tag read after the facts could vouch for a write the caller never saw.
        headers["ETag"] = etag(operations.read_tag(store, key, subject, attribute, named))
    found = operations.facts(
        store,
        key,
        subject,
        named,
        attribute=attribute,
        at=at,
        known_at=known_at,
        include_quarantined=include_quarantined,
    )
    return facts_answer(found, headers)  # serialised once, in this thread


@router.get(
    "/subjects/{subject}/search",
    summary="Search a subject's facts and episodes: what holds and what was said, best first",
    response_model=SearchResult,
)
def search(
    subject: Subject,
    key: Reader,
    store: Opened,
    named: Scope,
    query: SearchText,
    kinds: Kinds = None,
    limit: SearchLimit = None,
    at: TimeQuery = None,
    known_at: TimeQuery = None,
    include_quarantined: Flag = False,
) -> SearchResult:
    """BM25 over the scope's visible facts and episodes; never a superseded, expired,
    forgotten or purged one. `include_quarantined` (quarantined facts, untrusted episodes)
    needs the reviewer role. An empty answer is 200 with empty lists."""
    return operations.search(
        store,
        key,
        subject,
        named,
        query=query,
        kinds=kinds,
        limit=limit,
        at=at,
        known_at=known_at,
        include_quarantined=include_quarantined,
    )


@router.get(
    "/subjects/{subject}/attributes/{attribute}/history",
    summary="Every interval of an attribute, or every row version ever recorded",
    response_model=list[Fact],
)
def get_history(
    subject: Subject,
    attribute: Identifier,
    key: Reader,
    store: Opened,
    named: Scope,
    known_at: TimeQuery = None,
    versions: Flag = False,
) -> list[Fact]:
    return operations.history(
        store, key, subject, attribute, named, known_at=known_at, versions=versions
    )


@router.get(
    "/subjects/{subject}/context",
    summary="The smallest cited context about a subject that fits a token budget",
    response_model=Context,
)
def get_context(
    subject: Subject,
    key: Reader,
    store: Opened,
    named: Scope,
    query: TextQuery = None,
    budget_tokens: Budget = None,
    episodes: Flag = False,
) -> Context:
    """`text` joins the items as a model would be given them; with `episodes`, the episodes
    matching `query` follow the facts, each labelled with when it was said."""
    return operations.context(
        store, key, subject, named, query=query, budget_tokens=budget_tokens, episodes=episodes
    )


@router.post(
    "/facts/{fact_id}/promote",
    summary="Release a quarantined fact",
    response_model=PutResult,
)
def promote_fact(
    fact_id: Identifier,
    response: Response,
    key: Reviewer,
    store: Opened,
    idempotency: IdempotencyHeader = None,
    if_match: IfMatchVersion = None,
) -> PutResult:
    """If-Match names the quarantined fact's version (its ETag); a stale one is 412."""
    fact_id = identifier("fact_id", fact_id)
    require_owned(store, key, "fact", fact_id)
    fields = idempotency_key(
        idempotency,
        {"tenant_id": key.tenant_id, "fact_id": fact_id, "actor": key.key_id},
    )
    fields["expected_version"] = expected_version(if_match)
    result = pipeline.promote(store, fields).as_first_answered()
    response.headers["ETag"] = etag(result.fact.version)
    mark_replayed(response, result.replayed)
    return result


def _hot_facts(store: Store, key: ApiKey, values: Mapping[str, Any]) -> Response:
    named = named_scope(**{name: values[name] for name in ("tenant_id", "agent_id", "purpose")})
    return facts_response(
        store,
        key,
        values["subject"],
        named,
        attribute=values["attribute"],
        at=values["at"],
        known_at=values["known_at"],
        include_quarantined=values["include_quarantined"],
    )


def hot_reads() -> list[HotRead]:
    """The reads of this module served without FastAPI's per-request work (hot_reads.py)."""
    routes = {route.name: route for route in router.routes if isinstance(route, APIRoute)}
    return [HotRead(routes["get_facts"], "reader", _hot_facts, replaces=[scope_query])]
