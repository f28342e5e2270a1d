"""The span and attribute names SGAM's traces use — the only ones.

The `gen_ai.*` names are OpenTelemetry's GenAI semantic conventions (semantic-conventions-genai,
docs/gen-ai/gen-ai-spans.md: "Inference", span type `gen_ai.inference.client`, and "Memory",
span type `gen_ai.memory.client`; both of Development status). `error.type` and the `http.*`
and `server.*` names are the general conventions'. SGAM's own attributes are under `sgam.*`.

Never recorded, by design: episode text, fact values, evidence, prompts and answers (the
conventions' opt-in `gen_ai.input.messages`, `gen_ai.output.messages`,
`gen_ai.memory.query.text` and `gen_ai.memory.records` are left out), subjects, and exception
messages. The tests hold every exported span to the names listed here.
"""

from __future__ import annotations

# GenAI inference (an LLM call): span name `{gen_ai.operation.name} {gen_ai.request.model}`,
# kind CLIENT.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
CHAT = "chat"
# The endpoint speaks OpenAI's API through OpenAI's client, whatever serves it: the
# conventions' provider is "the instrumentation's best knowledge", the telemetry flavour.
OPENAI = "openai"

# GenAI memory operations: span name `{gen_ai.operation.name}`, kind INTERNAL (the memory
# store is this process's own). `gen_ai.memory.store.id` is the scope a fact lives in:
# `{tenant}/{agent}/{purpose}`.
GEN_AI_MEMORY_STORE_ID = "gen_ai.memory.store.id"
GEN_AI_MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
GEN_AI_MEMORY_RECORD_ID = "gen_ai.memory.record.id"
SEARCH_MEMORY = "search_memory"  # reads: current facts, history, the context block
UPSERT_MEMORY = "upsert_memory"  # an episode's candidates: the policy creates or supersedes
UPDATE_MEMORY = "update_memory"  # a known record: confirm/reject a candidate, dismiss a fact
DELETE_MEMORY = "delete_memory"  # forgetting a subject

ERROR_TYPE = "error.type"

# HTTP server spans: `{method} {route}`, the route's template, never the path or the query.
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"

# Messaging (the broker): the producer's `send {task}`, the worker's `process {task}`.
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"

# SGAM's own.
# GenAI tool execution (an MCP tool call): span name `execute_tool {gen_ai.tool.name}`.
EXECUTE_TOOL = "execute_tool"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
SGAM_TENANT = "sgam.tenant.id"
SGAM_EPISODE = "sgam.episode.id"
SGAM_EPISODE_COUNT = "sgam.episode.count"
SGAM_CLAIMED_COUNT = "sgam.episode.claimed_count"  # of those asked for, the ones still waiting
SGAM_INVALID_COUNT = "sgam.episode.invalid_count"  # lines refused by validation
SGAM_LANE = "sgam.lane"
SGAM_EXTRACTOR = "sgam.extractor"
SGAM_PROMPT_VERSION = "sgam.prompt.version"
SGAM_OUTCOME = "sgam.outcome"
SGAM_CANDIDATES_KEPT = "sgam.candidates.kept"
SGAM_CANDIDATES_REFUSED = "sgam.candidates.refused"
SGAM_DECISIONS = "sgam.decisions"  # sgam.decisions.<action>: how many candidates got it
SGAM_COMMAND = "sgam.command"
SGAM_ATTEMPT = "sgam.attempt"
SGAM_LLM_ATTEMPTS = "sgam.llm.attempts"  # HTTP requests of one model call, retries included
SGAM_LLM_INVALID_ANSWERS = "sgam.llm.invalid_answers"  # answers re-asked after validation


def decisions_attribute(action: str) -> str:
    """`sgam.decisions.written`: the count of one decision action on an episode."""
    return f"{SGAM_DECISIONS}.{action}"


def store_id(tenant_id: str, agent_id: str, purpose: str) -> str:
    return f"{tenant_id}/{agent_id}/{purpose}"


# Every attribute a span may carry, besides `sgam.decisions.<action>`.
ATTRIBUTES = frozenset(
    {
        GEN_AI_OPERATION_NAME,
        GEN_AI_PROVIDER_NAME,
        GEN_AI_REQUEST_MODEL,
        GEN_AI_REQUEST_MAX_TOKENS,
        GEN_AI_REQUEST_TEMPERATURE,
        GEN_AI_RESPONSE_MODEL,
        GEN_AI_RESPONSE_FINISH_REASONS,
        GEN_AI_USAGE_INPUT_TOKENS,
        GEN_AI_USAGE_OUTPUT_TOKENS,
        GEN_AI_OUTPUT_TYPE,
        SERVER_ADDRESS,
        SERVER_PORT,
        GEN_AI_MEMORY_STORE_ID,
        GEN_AI_MEMORY_RECORD_COUNT,
        GEN_AI_MEMORY_RECORD_ID,
        ERROR_TYPE,
        HTTP_REQUEST_METHOD,
        HTTP_ROUTE,
        HTTP_RESPONSE_STATUS_CODE,
        MESSAGING_SYSTEM,
        MESSAGING_OPERATION_TYPE,
        MESSAGING_DESTINATION_NAME,
        SGAM_TENANT,
        SGAM_EPISODE,
        SGAM_EPISODE_COUNT,
        SGAM_CLAIMED_COUNT,
        SGAM_INVALID_COUNT,
        SGAM_LANE,
        SGAM_EXTRACTOR,
        SGAM_PROMPT_VERSION,
        SGAM_OUTCOME,
        SGAM_CANDIDATES_KEPT,
        SGAM_CANDIDATES_REFUSED,
        SGAM_COMMAND,
        SGAM_ATTEMPT,
        SGAM_LLM_ATTEMPTS,
        SGAM_LLM_INVALID_ANSWERS,
    }
)
