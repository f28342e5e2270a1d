"""The OpenAPI document: FastAPI's, plus the problem answers every /v1 operation may give,
the models that only a hand-written request body names, and what the server's catalogue and
settings allow (`catalog_schema`, the batch size): a document that says what the server
accepts, checked by tests/integration/api/test_schemathesis.py."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi

from pipeline.api import catalog_schema
from pipeline.api.answers import Problem
from pipeline.api.bodies import EpisodeBody
from pipeline.api.problems import PROBLEM_JSON, PROBLEMS, TYPE_PREFIX
from pipeline.errors import InvalidInput
from schemas.fields import MAX_JSON_DEPTH
from schemas.intake import MAX_METADATA_BYTES

# The problems any /v1 operation may answer, besides its own success.
COMMON = {
    "400": "The body or a header cannot be read (malformed-request)",
    "401": "No valid API key (unauthorized)",
    "403": "The key's role or scope does not allow it (forbidden, scope-mismatch)",
    "404": "Not found, or another tenant's (not-found)",
    "409": "The ledger's state forbids the change (conflicts)",
    "412": "If-Match names a stale version (version-conflict)",
    "413": "The body is too large (payload-too-large)",
    "415": "The body is not JSON (unsupported-media-type)",
    "422": "Invalid input, naming the field (invalid-input, invalid-episodes)",
    "429": "The key's rate limit is used up; see Retry-After (rate-limited)",
    "503": "A store is busy or unavailable; see Retry-After",
}


def problem_table() -> str:
    """The error table, as Markdown for the document's description."""
    rows = ["| type | status | error class | title |", "|---|---|---|---|"]
    for cls, status, kind, title in PROBLEMS:
        rows.append(f"| `{TYPE_PREFIX}{kind}` | {status} | {cls.__name__} | {title} |")
    return "\n".join(rows)


REPLAYED = "Idempotent-Replayed"
_REPLAYED_HEADER = {
    "description": "`true` on the answer to a repeated Idempotency-Key: the first request's "
    "status and body again (less what was forgotten since); nothing was written now",
    "schema": {"type": "string", "enum": ["true"]},
}
_CONFLICT = (
    "The ledger's state forbids the change (conflicts); idempotency-conflict: the "
    "Idempotency-Key was used before for another request (another payload, endpoint or scope)"
)


def _takes_idempotency_key(operation: dict[str, Any]) -> bool:
    return any(
        parameter.get("in") == "header" and parameter.get("name") == "Idempotency-Key"
        for parameter in operation.get("parameters", [])
    )


def _document_replays(responses: dict[str, Any], problem: dict[str, Any]) -> None:
    """An operation that takes Idempotency-Key: its successes may be replays, and a key used
    for another request is 409."""
    for status, response in responses.items():
        if status.startswith("2"):
            response.setdefault("headers", {})[REPLAYED] = _REPLAYED_HEADER
    responses["409"] = {"description": _CONFLICT, "content": problem}


def _absent_not_null(document: dict[str, Any]) -> None:
    """An optional parameter is left out, never sent as null: FastAPI's `anyOf [X, null]`
    would let a client send the text "null" where X is refused."""
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                choices = parameter["schema"].get("anyOf", [])
                kept = [choice for choice in choices if choice != {"type": "null"}]
                if len(choices) == 2 and len(kept) == 1:
                    parameter["schema"] = kept[0] | {
                        k: v for k, v in parameter["schema"].items() if k != "anyOf"
                    }


# OpenAPI links: where an answer names something another operation takes (a fact's id, an
# episode's, a candidate's, a subject just written or forgotten), so that a client, or a
# generator chaining calls, reaches real ids. (source operation, statuses, link name, target
# operation, parameters.) A list's link names its first item.
_FACTS, _HISTORY, _CONTEXT = "get_facts", "get_history", "get_context"
LINKS: tuple[tuple[str, tuple[str, ...], str, str, dict[str, str]], ...] = (
    (
        "put_fact",
        ("200", "201"),
        "ReadFacts",
        _FACTS,
        {"path.subject": "$request.body#/subject", "query.attribute": "$request.body#/attribute"},
    ),
    (
        "put_fact",
        ("200", "201"),
        "ReadHistory",
        _HISTORY,
        {"path.subject": "$request.body#/subject", "path.attribute": "$request.body#/attribute"},
    ),
    (
        "put_fact",
        ("200", "201"),
        "Promote",
        "promote_fact",
        {"path.fact_id": "$response.body#/fact/fact_id"},
    ),
    (
        "put_fact",
        ("200", "201"),
        "Dismiss",
        "dismiss_fact",
        {"path.fact_id": "$response.body#/fact/fact_id"},
    ),
    ("remember", ("200",), "ReadFacts", _FACTS, {"path.subject": "$request.body#/subject"}),
    (
        "remember",
        ("200",),
        "ShowEpisode",
        "get_episode",
        {"path.episode_id": "$response.body#/episode_id"},
    ),
    (
        "post_episodes",
        ("200", "202"),
        "ShowEpisode",
        "get_episode",
        {"path.episode_id": "$response.body#/receipts/0/episode_id"},
    ),
    (
        "post_episodes",
        ("200", "202"),
        "Retry",
        "retry_episode",
        {"path.episode_id": "$response.body#/receipts/0/episode_id"},
    ),
    (
        "list_episodes",
        ("200",),
        "ShowEpisode",
        "get_episode",
        {"path.episode_id": "$response.body#/0/episode_id"},
    ),
    (
        "list_episodes",
        ("200",),
        "Retry",
        "retry_episode",
        {"path.episode_id": "$response.body#/0/episode_id"},
    ),
    (
        "list_candidates",
        ("200",),
        "Confirm",
        "confirm",
        {"path.candidate_id": "$response.body#/0/candidate_id"},
    ),
    (
        "list_candidates",
        ("200",),
        "Reject",
        "reject",
        {"path.candidate_id": "$response.body#/0/candidate_id"},
    ),
    (
        "list_quarantine",
        ("200",),
        "Promote",
        "promote_fact",
        {"path.fact_id": "$response.body#/0/fact_id"},
    ),
    (
        "list_quarantine",
        ("200",),
        "Dismiss",
        "dismiss_fact",
        {"path.fact_id": "$response.body#/0/fact_id"},
    ),
    (
        "promote_fact",
        ("200",),
        "ReadFacts",
        _FACTS,
        {"path.subject": "$response.body#/fact/subject"},
    ),
    ("confirm", ("200",), "ReadFacts", _FACTS, {"path.subject": "$response.body#/fact/subject"}),
    # A forgotten subject reads as nothing held: 200 with an empty list, not 404.
    ("forget", ("200",), "ReadFacts", _FACTS, {"path.subject": "$request.path.subject"}),
    ("forget", ("200",), "ReadHistory", _HISTORY, {"path.subject": "$request.path.subject"}),
    ("forget", ("200",), "ReadContext", _CONTEXT, {"path.subject": "$request.path.subject"}),
    ("create_key", ("201",), "Revoke", "revoke_key", {"path.key_id": "$response.body#/key/key_id"}),
)


def _links(document: dict[str, Any]) -> None:
    """LINKS in the responses, naming operations by their ids (the handlers' names)."""
    ids = {
        operation["operationId"]: operation
        for operations in document["paths"].values()
        for operation in operations.values()
    }
    for source, statuses, name, target, parameters in LINKS:
        for status in statuses:
            response = ids[source]["responses"][status]
            response.setdefault("links", {})[name] = {
                "operationId": target,
                "parameters": parameters,
            }


def _body_limit(document: dict[str, Any], limit: int) -> None:
    """Every request body is at most SGAM_API_MAX_BODY_BYTES (413): said on each body, in
    words and in `x-max-bytes` (JSON Schema cannot weigh a body)."""
    for operations in document["paths"].values():
        for operation in operations.values():
            body = operation.get("requestBody")
            if body is None:
                continue
            body["x-max-bytes"] = limit
            said = f"At most {limit} bytes (SGAM_API_MAX_BODY_BYTES; larger is 413)."
            body["description"] = f"{body['description']} {said}" if "description" in body else said


def build(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for model in (Problem, EpisodeBody):
        found = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(found.pop("$defs", {}))
        schemas[model.__name__] = found
    problem = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, operations in document["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, meaning in COMMON.items():
                responses.setdefault(status, {"description": meaning, "content": problem})
            # FastAPI's own 422 shape is never sent: invalid input is a problem too.
            responses["422"] = {"description": COMMON["422"], "content": problem}
            if _takes_idempotency_key(operation):
                _document_replays(responses, problem)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    _absent_not_null(document)
    settings = app.state.store.settings
    schemas["JsonValue"] = catalog_schema.JSON_VALUE
    metadata = schemas["EpisodeBody"]["properties"]["metadata"]
    metadata["additionalProperties"] = {"$ref": "#/components/schemas/JsonValue"}
    metadata["propertyNames"] = catalog_schema.TEXT  # its own keys too: no NUL
    metadata["x-max-bytes"] = MAX_METADATA_BYTES
    metadata["x-max-depth"] = MAX_JSON_DEPTH
    metadata["description"] = (
        f"the caller's own JSON object, kept with the episode: at most {MAX_METADATA_BYTES} "
        f"bytes as canonical JSON in UTF-8, nested at most {MAX_JSON_DEPTH} deep"
    )
    catalog_schema.describe(document, app.state.store.catalog, settings.max_value_bytes)
    batch = document["paths"]["/v1/episodes"]["post"]["requestBody"]["content"]
    batch["application/json"]["schema"]["oneOf"][1]["maxItems"] = settings.api_max_batch
    _body_limit(document, settings.api_max_body_bytes)
    _links(document)
    app.openapi_schema = document
    return document


async def known_query(request: Request) -> None:
    """A query parameter the operation's document does not list is refused (422), not
    ignored: a misspelt `include_quarantine=true` would silently read less, `knwon_at` read
    now. The names come from the document itself, so the two cannot disagree."""
    route = request.scope.get("route")
    if not request.query_params or route is None:
        return
    names: dict[tuple[str, str], set[str]] | None = getattr(request.app.state, "query_names", None)
    if names is None:
        names = {
            (path, method): {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
            for path, operations in build(request.app)["paths"].items()
            for method, op in operations.items()
        }
        request.app.state.query_names = names
    taken = names.get((getattr(route, "path", ""), request.method.lower()))
    for name in request.query_params:
        if taken is not None and name not in taken:
            listed = ", ".join(sorted(taken)) or "none"
            raise InvalidInput(name, f"is not a query parameter of this operation ({listed})")
