"""The OpenAPI document: FastAPI's, plus the problem answers every /v1 operation may give,
the models that only a hand-written request body names, and what the server's catalogue and
settings allow (`catalog_schema`, the batch size): a document that says what the server
accepts, checked by tests/integration/api/test_schemathesis.py."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from pipeline.api import catalog_schema
from pipeline.api.answers import Problem
from pipeline.api.bodies import EpisodeBody
from pipeline.api.problems import PROBLEM_JSON, PROBLEMS, TYPE_PREFIX

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
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    _absent_not_null(document)
    schemas["JsonValue"] = catalog_schema.JSON_VALUE
    schemas["EpisodeBody"]["properties"]["metadata"]["additionalProperties"] = {
        "$ref": "#/components/schemas/JsonValue"
    }
    catalog_schema.describe(document, app.state.store.catalog)
    batch = document["paths"]["/v1/episodes"]["post"]["requestBody"]["content"]
    batch["application/json"]["schema"]["oneOf"][1]["maxItems"] = (
        app.state.store.settings.api_max_batch
    )
    app.openapi_schema = document
    return document
