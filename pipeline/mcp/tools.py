"""The MCP tools: each one names the role it needs, the arguments it takes (a Pydantic model,
whose JSON schema the client sees), the answer model it returns (the pipeline's result
model, the same the HTTP API sends) and the shared operation it runs
(`pipeline.api.operations`), so a tool answers exactly what the matching REST call answers.

Every tool takes optional `tenant_id`, `agent_id` and `purpose`, as REST does: a value other
than the key's binding is refused (scope-mismatch); for a key left open, naming an agent or a
purpose narrows the call to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.access.keys import ApiKey, Role
from pipeline.api import operations
from pipeline.api.access import bind
from pipeline.api.bodies import EpisodeBody, RememberBody, Subject
from pipeline.db.store import Store
from pipeline.hot_path import Remembered
from pipeline.ledger.forget import ForgetResult
from pipeline.read.context import Context
from schemas.facts import Fact
from schemas.fields import Identifier
from schemas.results import Decided, IngestReport, SearchKind, SearchResult, SupportedCandidate

Answer = BaseModel  # a result model; the server sends its JSON form
SCOPE = ("tenant_id", "agent_id", "purpose")


class Scoped(BaseModel):
    """Arguments every tool takes: the scope, which the key fixes where it is bound."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: Identifier | None = Field(
        default=None, description="leave out: the key's tenant (any other is refused)"
    )
    agent_id: Identifier | None = Field(
        default=None, description="the agent whose memory this is (default: the key's, or any)"
    )
    purpose: Identifier | None = Field(
        default=None, description="the purpose the memory serves (default: the key's, or any)"
    )


def _like(model: type[BaseModel], name: str, description: str | None = None) -> Any:
    """Field `name` of `model` (type, limits, default), for a tool's arguments model."""
    info = model.model_fields[name]
    annotation: Any = info.annotation
    if info.metadata:
        annotation = Annotated[annotation, *info.metadata]
    default: Any = ... if info.is_required() else info.default
    return annotation, Field(default=default, description=description or info.description)


def _arguments(name: str, doc: str, **fields: Any) -> type[Scoped]:
    return create_model(name, __base__=Scoped, __doc__=doc, **fields)


class IngestArguments(Scoped):
    """Episodes to store and hand to the workers."""

    episodes: list[dict[str, Any]] = Field(
        min_length=1, description="the episodes: one object per message or event"
    )
    idempotency_key: Identifier | None = Field(
        default=None, description="retry-safe: the episodes get KEY:1, KEY:2, ..."
    )

    @classmethod
    def model_json_schema(cls, *args: Any, **options: Any) -> dict[str, Any]:
        """The episodes are checked one by one (like a REST batch, naming each invalid one
        by index), so they are taken as objects; the schema still shows a model their form."""
        schema = super().model_json_schema(*args, **options)
        episode = EpisodeBody.model_json_schema(ref_template="#/$defs/{model}")
        schema.setdefault("$defs", {}).update(episode.pop("$defs", {}))
        schema["properties"]["episodes"]["items"] = episode
        return schema


_CANDIDATE_ID = (Identifier, Field(description="the candidate_id from list_candidates"))

if TYPE_CHECKING:  # generated classes: to the type checker, models like any other
    RememberArguments = Scoped
    FactsArguments = Scoped
    HistoryArguments = Scoped
    ContextArguments = Scoped
    SearchArguments = Scoped
    CandidatesArguments = Scoped
    DecideArguments = Scoped
    ForgetArguments = Scoped
else:
    RememberArguments = _arguments(
        "RememberArguments",
        "An explicit statement to remember now.",
        subject=_like(RememberBody, "subject", "who or what the statement is about"),
        text=_like(RememberBody, "text", "the statement, as the user said it"),
        session_id=_like(RememberBody, "session_id"),
        occurred_at=_like(RememberBody, "occurred_at"),
        idempotency_key=_like(RememberBody, "idempotency_key", "retry-safe: same key, one write"),
    )
    FactsArguments = _arguments(
        "FactsArguments",
        "Which facts to read.",
        subject=(Subject, Field(description="who or what the facts are about")),
        attribute=(Identifier | None, Field(default=None, description="one attribute only")),
        at=(str | None, Field(default=None, description="valid time (RFC 3339); default now")),
        known_at=(
            str | None,
            Field(default=None, description="as believed at this time (RFC 3339); default now"),
        ),
    )
    HistoryArguments = _arguments(
        "HistoryArguments",
        "Which timeline to read.",
        subject=(Subject, Field(description="who or what the attribute belongs to")),
        attribute=(Identifier, Field(description="the attribute, e.g. home_city")),
        known_at=(
            str | None,
            Field(default=None, description="as believed at this time (RFC 3339); default now"),
        ),
    )
    ContextArguments = _arguments(
        "ContextArguments",
        "What the context is for.",
        subject=(Subject, Field(description="who or what the context is about")),
        query=(str | None, Field(default=None, description="what the prompt asks, to rank by")),
        budget_tokens=(
            int | None,
            Field(default=None, description="the most tokens the context may take"),
        ),
    )
    SearchArguments = _arguments(
        "SearchArguments",
        "What to look for in a subject's memory.",
        subject=(Subject, Field(description="who or what the memory is about")),
        query=(str, Field(description="what to look for, in English words")),
        kinds=(
            list[SearchKind] | None,
            Field(default=None, description="facts, episodes or both (the default)"),
        ),
        limit=(int | None, Field(default=None, description="at most this many of each kind")),
        at=(str | None, Field(default=None, description="valid time (RFC 3339); default now")),
        known_at=(
            str | None,
            Field(default=None, description="as believed at this time (RFC 3339); default now"),
        ),
    )
    CandidatesArguments = _arguments(
        "CandidatesArguments",
        "Whose candidates to list.",
        subject=(Identifier | None, Field(default=None, description="one subject only")),
    )
    DecideArguments = _arguments(
        "DecideArguments",
        "The candidate to decide.",
        candidate_id=_CANDIDATE_ID,
        idempotency_key=(
            Identifier | None,
            Field(default=None, description="retry-safe: same key, one decision"),
        ),
    )
    ForgetArguments = _arguments(
        "ForgetArguments",
        "The subject to forget.",
        subject=(Subject, Field(description="who or what to forget")),
        idempotency_key=(
            Identifier | None,
            Field(default=None, description="retry-safe: same key, one forget"),
        ),
    )


@dataclass(frozen=True)
class Tool:
    name: str
    role: Role
    description: str
    arguments: type[Scoped]
    answer: Any  # the answer's type; a list is sent as {"result": [...]}
    run: Callable[[Store, ApiKey, Any], Answer | list[Fact] | list[SupportedCandidate]]
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True


def acting(key: ApiKey, arguments: Scoped) -> ApiKey:
    """The key as this call uses it: a tenant, agent or purpose other than its binding is
    refused; an agent or purpose named for an open key narrows the call to it."""
    bound = bind(key, arguments.model_dump(include=set(SCOPE), exclude_none=True))
    narrowed = {"agent_id": bound.get("agent_id"), "purpose": bound.get("purpose")}
    return key.model_copy(update=narrowed)


def _body(arguments: Scoped, *names: str) -> dict[str, Any]:
    """The arguments among `names` the caller gave."""
    return arguments.model_dump(include=set(names), exclude_none=True)


def _remember(store: Store, key: ApiKey, given: Any) -> Answer:
    body = _body(given, "subject", "text", "session_id", "occurred_at")
    return operations.remember(store, key, body, given.idempotency_key)


def _ingest(store: Store, key: ApiKey, given: IngestArguments) -> Answer:
    return operations.ingest(store, key, given.episodes, given.idempotency_key)[0]


def _facts(store: Store, key: ApiKey, given: Any) -> list[Fact]:
    options = _body(given, "attribute", "at", "known_at")
    return operations.facts(store, key, given.subject, {}, **options)


def _history(store: Store, key: ApiKey, given: Any) -> list[Fact]:
    return operations.history(
        store, key, given.subject, given.attribute, {}, known_at=given.known_at
    )


def _context(store: Store, key: ApiKey, given: Any) -> Answer:
    options = _body(given, "query", "budget_tokens")
    return operations.context(store, key, given.subject, {}, **options)


def _search(store: Store, key: ApiKey, given: Any) -> SearchResult:
    options = _body(given, "query", "kinds", "limit", "at", "known_at")
    return operations.search(store, key, given.subject, {}, **options)


def _candidates(store: Store, key: ApiKey, given: Any) -> list[SupportedCandidate]:
    return operations.candidates(store, key, subject=given.subject)


def _decide(verb: Literal["confirm", "reject"]) -> Callable[[Store, ApiKey, Any], Answer]:
    def run(store: Store, key: ApiKey, given: Any) -> Answer:
        return operations.decide(
            store, key, verb, given.candidate_id, idempotency=given.idempotency_key
        )

    return run


def _forget(store: Store, key: ApiKey, given: Any) -> Answer:
    return operations.forget(store, key, given.subject, idempotency=given.idempotency_key)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "remember",
            "writer",
            "Remember an explicit statement now, before you answer: use it when the user "
            "tells you something to keep (a preference, a date, a correction). Returns the "
            "facts written and the statements the ledger refused, with the reason.",
            RememberArguments,
            Remembered,
            _remember,
            read_only=False,
            idempotent=False,
        ),
        Tool(
            "ingest_episodes",
            "writer",
            "Store conversation turns or events for background extraction (nothing is "
            "decided now). Each episode needs subject, session_id, occurred_at and text. "
            "Returns a receipt per episode: queued, duplicate, done or failed.",
            IngestArguments,
            IngestReport,
            _ingest,
            read_only=False,
            idempotent=False,
        ),
        Tool(
            "get_facts",
            "reader",
            "What is true about a subject now; with `at`, what was true at that moment; "
            "with `known_at`, what was believed at that moment. Each fact cites its source "
            "episode and the fact it superseded.",
            FactsArguments,
            list[Fact],
            _facts,
        ),
        Tool(
            "get_history",
            "reader",
            "Every value an attribute of a subject has had, oldest first, with the interval "
            "each held; with `known_at`, the timeline as believed at that moment.",
            HistoryArguments,
            list[Fact],
            _history,
        ),
        Tool(
            "get_context",
            "reader",
            "The cited memory to put in a prompt about a subject: the most relevant facts "
            "that fit `budget_tokens`, ranked for `query`; `text` is ready to paste.",
            ContextArguments,
            Context,
            _context,
        ),
        Tool(
            "search_memory",
            "reader",
            "Search a subject's memory for what matters to a message: the facts that hold "
            "(never a superseded, expired or forgotten one) and the episodes said, best "
            "first, each with its score; with `at`/`known_at`, as of that moment.",
            SearchArguments,
            SearchResult,
            _search,
        ),
        Tool(
            "list_candidates",
            "reviewer",
            "Statements waiting in the recurrence buffer (heard, not yet believed), with how "
            "often each was heard; confirm or reject them by candidate_id.",
            CandidatesArguments,
            list[SupportedCandidate],
            _candidates,
        ),
        Tool(
            "confirm_candidate",
            "reviewer",
            "Confirm a buffered candidate: it becomes a fact, valid from when it was first "
            "heard. Returns the fact written.",
            DecideArguments,
            Decided,
            _decide("confirm"),
            read_only=False,
        ),
        Tool(
            "reject_candidate",
            "reviewer",
            "Reject a buffered candidate for good: it will never become a fact.",
            DecideArguments,
            Decided,
            _decide("reject"),
            read_only=False,
        ),
        Tool(
            "forget_subject",
            "admin",
            "Forget everything about a subject in this tenant (facts, candidates, episodes "
            "are hidden at once; the decision is logged). Use only when asked to forget.",
            ForgetArguments,
            ForgetResult,
            _forget,
            read_only=False,
            destructive=True,
        ),
    )
}
