"""What a key may do, one function per operation, shared by every door that takes API keys:
the HTTP routes and the MCP tools call these, so both authorise, bind the scope, record the
key as the actor and answer alike. Each takes the store, the caller's key and the inputs
already parsed from its transport, and returns the pipeline's result model (the same the
Python API returns and the command line prints; its JSON form is the answer). Role checks
stay with each door (a route's dependency, a tool's listing); what follows from the key's
binding is checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal

from pydantic import ValidationError

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api.access import bind
from pipeline.api.bodies import EpisodeBody
from pipeline.api.conventions import given, idempotency_key, identifier
from pipeline.api.problems import Forbidden
from pipeline.api.routes.owned import require_owned
from pipeline.db.store import Store
from pipeline.episodes.intake import first_receipts
from pipeline.errors import InvalidInput, InvalidLines
from pipeline.hot_path import Remembered
from pipeline.ledger.forget import ForgetResult
from pipeline.ledger.results import PutResult
from pipeline.ledger.slots import SlotKey
from pipeline.ledger.state_tag import read_state_tag
from pipeline.observe import conventions as names
from pipeline.observe.memory import count, memory_span
from pipeline.read.context import Context
from pipeline.validation import invalid_field
from schemas.facts import Fact
from schemas.lifecycle import CandidateStatus, ReceiptStatus
from schemas.results import (
    Decided,
    EpisodeDetail,
    IngestReport,
    Retried,
    SearchResult,
    SupportedCandidate,
)

Json = dict[str, Any]
CandidateFilter = CandidateStatus | Literal["all"]


def _read_scope(key: ApiKey, subject: str, named: Mapping[str, Any]) -> dict[str, Any]:
    """The scope of a read: the key's, the subject, the tenant/agent/purpose the caller named
    (each checked like an identifier)."""
    checked = {name: identifier(name, value) for name, value in given(**named).items()}
    return bind(key, checked) | {"subject": identifier("subject", subject, subject=True)}


def _memory(operation: str, scope: Mapping[str, Any]) -> AbstractContextManager[Any]:
    """A GenAI memory operation span on the scope a read or write names."""
    return memory_span(
        operation,
        tenant_id=scope["tenant_id"],
        agent_id=scope.get("agent_id", "default"),
        purpose=scope.get("purpose", "default"),
    )


def remember(
    store: Store, key: ApiKey, body: Mapping[str, Any], idempotency: str | None = None
) -> Remembered:
    """The hot path; `body` holds the fields the caller set (a RememberBody's)."""
    fields = bind(key, body) | {"actor": key.key_id}
    return pipeline.remember(store, idempotency_key(idempotency, fields))


def ingest(
    store: Store, key: ApiKey, sent: Any, idempotency: str | None = None
) -> tuple[IngestReport, bool, bool]:
    """One episode object or a list of them; all are checked first and one invalid episode
    stores nothing. With `idempotency`, a batch's episodes get the keys KEY:1, KEY:2, ...
    and a repeat of the request answers its first receipts. Returns the answer, whether the
    workers have episodes to process, and whether it was a repeat."""
    single = isinstance(sent, dict)
    items = [sent] if single else sent
    if not isinstance(items, list) or not items:
        raise InvalidInput("body", "must be an episode object or a non-empty list of them")
    limit = store.settings.api_max_batch
    if len(items) > limit:
        raise InvalidInput("body", f"has {len(items)} episodes; at most {limit} per request")
    episodes: list[Json] = []
    bad: list[tuple[int, str, str]] = []
    for line, item in enumerate(items, 1):
        episode = _episode(key, item, idempotency, None if single else line)
        if isinstance(episode, tuple):
            bad.append((line, *episode))
        else:
            episodes.append(episode)
    if bad:
        raise InvalidLines(bad)
    report = pipeline.ingest(store, episodes)
    replayed = False
    if idempotency is not None and all(
        receipt.status is ReceiptStatus.DUPLICATE for receipt in report.receipts
    ):  # the request again, or a fresh key meeting episodes stored before: its keys say
        first = first_receipts(store, key.tenant_id, [e["idempotency_key"] for e in episodes])
        if first is not None:  # the request again: its first answer again
            stored = any(receipt.status is ReceiptStatus.STORED for receipt in first)
            report = IngestReport(receipts=first, broker_down=stored)
            replayed = True
    waiting = (ReceiptStatus.QUEUED, ReceiptStatus.STORED)  # the workers have them to process
    return report, any(receipt.status in waiting for receipt in report.receipts), replayed


def _episode(
    key: ApiKey, item: Any, header: str | None, line: int | None
) -> Json | tuple[str, str]:
    """The episode as the pipeline takes it, or (field, problem). A tenant, agent or purpose
    other than the key's is refused at once (403)."""
    try:
        body = EpisodeBody.model_validate(item)
    except ValidationError as exc:
        error = invalid_field(exc.errors()[0])
        return error.field, error.problem
    fields = bind(key, body.model_dump(exclude_unset=True)) | {"actor": key.key_id}
    if header is not None and line is not None:
        if body.model_dump().get("idempotency_key") is not None:
            return "idempotency_key", "give it per episode or in the Idempotency-Key header"
        header = f"{header}:{line}"
    try:
        return idempotency_key(header, fields)
    except InvalidInput as error:
        return error.field, error.problem


def facts(
    store: Store,
    key: ApiKey,
    subject: str,
    named: Mapping[str, Any],
    *,
    attribute: str | None = None,
    at: str | None = None,
    known_at: str | None = None,
    include_quarantined: bool = False,
) -> list[Fact]:
    """What holds for `subject` at valid time `at`, as believed at `known_at`."""
    if include_quarantined and not key.allows("reviewer"):
        raise Forbidden("include_quarantined needs the reviewer role")
    query = _read_scope(key, subject, named) | given(attribute=attribute, at=at, known_at=known_at)
    with _memory(names.SEARCH_MEMORY, query) as opened:
        found = pipeline.get(store, query | {"include_quarantined": include_quarantined})
        count(opened, len(found))
    return found


def search(
    store: Store,
    key: ApiKey,
    subject: str,
    named: Mapping[str, Any],
    **asked: Any,
) -> SearchResult:
    """The subject's facts and episodes that match `query`, best first; `kinds` a list or
    a comma-separated string."""
    if asked.get("include_quarantined") and not key.allows("reviewer"):
        raise Forbidden("include_quarantined needs the reviewer role")
    kinds = asked.get("kinds")
    if isinstance(kinds, str):
        asked["kinds"] = [kind.strip() for kind in kinds.split(",")]
    query = _read_scope(key, subject, named) | given(**asked)
    with _memory(names.SEARCH_MEMORY, query) as opened:
        found = pipeline.search(store, query)
        count(opened, len(found.facts) + len(found.episodes))
    return found


def read_tag(
    store: Store, key: ApiKey, subject: str, attribute: str, named: Mapping[str, Any]
) -> str:
    """The state tag of a single-valued attribute in the read's scope (its ETag)."""
    return pipeline.state_tag(store, _read_scope(key, subject, named) | {"attribute": attribute})


def state_tag(store: Store, fact: Fact) -> str:
    """The state tag of the single-valued key `fact` belongs to, as stored now."""
    slot = SlotKey(fact.tenant_id, fact.agent_id, fact.purpose, fact.subject, fact.attribute, "")
    with store.begin() as unit:
        return read_state_tag(unit.session, slot)


def history(
    store: Store,
    key: ApiKey,
    subject: str,
    attribute: str,
    named: Mapping[str, Any],
    *,
    known_at: str | None = None,
    versions: bool = False,
) -> list[Fact]:
    query = _read_scope(key, subject, named) | {"attribute": identifier("attribute", attribute)}
    query |= given(known_at=known_at)
    if versions:  # the audit trail: quarantined versions too, for the roles that may see them
        query["include_quarantined"] = key.allows("reviewer")
    with _memory(names.SEARCH_MEMORY, query) as opened:
        found = pipeline.history(store, query, versions=versions)
        count(opened, len(found))
    return found


def context(
    store: Store,
    key: ApiKey,
    subject: str,
    named: Mapping[str, Any],
    *,
    query: str | None = None,
    budget_tokens: int | str | None = None,
    episodes: bool = False,
) -> Context:
    """The cited context block; `text` joins the items as a model would be given them."""
    asked = _read_scope(key, subject, named) | given(query=query, budget_tokens=budget_tokens)
    asked["episodes"] = episodes
    with _memory(names.SEARCH_MEMORY, asked) as opened:
        assembled = pipeline.assemble(store, asked)
        count(opened, len(assembled.items))
    return assembled


def candidates(
    store: Store,
    key: ApiKey,
    *,
    subject: str | None = None,
    status: CandidateFilter = CandidateStatus.BUFFERED,
    limit: int = 100,
) -> list[SupportedCandidate]:
    """The recurrence buffer; `status` "all" lists every state."""
    query = bind(key, {}) | {"status": None if status == "all" else status, "limit": limit}
    if subject is not None:
        query["subject"] = identifier("subject", subject)
    return pipeline.list_candidates(store, query)


def decide(
    store: Store,
    key: ApiKey,
    verb: Literal["confirm", "reject"],
    candidate_id: str,
    *,
    reason: str | None = None,
    idempotency: str | None = None,
) -> Decided:
    """Confirm or reject a buffered candidate of the key's scope; a rejection's reason goes to
    the log."""
    candidate_id = identifier("candidate_id", candidate_id)
    require_owned(store, key, "candidate", candidate_id)
    command = {"tenant_id": key.tenant_id, "candidate_id": candidate_id, "actor": key.key_id}
    command["by"] = "reviewer"  # a reviewer's key decides, not the user the fact is about
    if reason is not None:
        command["reason"] = reason
    with memory_span(
        names.UPDATE_MEMORY, tenant_id=key.tenant_id, record_id=candidate_id
    ) as opened:
        decided: Decided = getattr(pipeline, verb)(store, idempotency_key(idempotency, command))
        count(opened, 1)
    return decided


def retry(store: Store, key: ApiKey, episode_id: str, idempotency: str | None = None) -> Retried:
    """A failed episode of the key's scope back to work."""
    episode_id = identifier("episode_id", episode_id)
    require_owned(store, key, "episode", episode_id)
    command = {"tenant_id": key.tenant_id, "episode_id": episode_id}
    return pipeline.retry_episode(store, idempotency_key(idempotency, command))


def forget(
    store: Store,
    key: ApiKey,
    subject: str,
    *,
    purge: bool = False,
    idempotency: str | None = None,
) -> ForgetResult:
    """Forgetting spans every agent and purpose of the tenant, so a key bound to one may not."""
    if key.agent_id is not None or key.purpose is not None:
        raise Forbidden("forgetting spans every agent and purpose; this key is bound to one")
    command = {
        "tenant_id": key.tenant_id,
        "subject": identifier("subject", subject, subject=True),
        "purge": purge,
        "actor": key.key_id,
    }
    with memory_span(names.DELETE_MEMORY, tenant_id=key.tenant_id) as opened:
        forgotten = pipeline.forget(store, idempotency_key(idempotency, command))
        count(opened, forgotten.hidden)
    return forgotten


def dismiss(
    store: Store,
    key: ApiKey,
    fact_id: str,
    *,
    reason: str | None = None,
    idempotency: str | None = None,
) -> PutResult:
    """Refuse a quarantined fact of the key's scope: hidden for good, never promoted."""
    fact_id = identifier("fact_id", fact_id)
    require_owned(store, key, "fact", fact_id)
    command = {"tenant_id": key.tenant_id, "fact_id": fact_id, "actor": key.key_id}
    with memory_span(names.UPDATE_MEMORY, tenant_id=key.tenant_id, record_id=fact_id) as opened:
        dismissed = pipeline.dismiss(
            store, idempotency_key(idempotency, command | given(reason=reason))
        )
        count(opened, 1)
    return dismissed


def episode(store: Store, key: ApiKey, episode_id: str) -> EpisodeDetail:
    """An episode as the key may read it elsewhere: its scope's facts; quarantined facts, the
    buffer's candidates and the decisions' payloads for reviewers; the model's usage (what it
    cost) for admins, as `/v1/usage`."""
    episode_id = identifier("episode_id", episode_id)
    require_owned(store, key, "episode", episode_id)
    shown = pipeline.show_episode(
        store,
        key.tenant_id,
        episode_id,
        agent_id=key.agent_id,
        purpose=key.purpose,
        reviewer=key.allows("reviewer"),
    )
    return shown if key.allows("admin") else shown.model_copy(update={"usage": None})
