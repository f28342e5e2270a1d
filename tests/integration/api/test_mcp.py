"""The MCP server through the SDK's own client, over both doors: stdio (a spawned `sgam mcp`)
and streamable HTTP (`/mcp` of the running `sgam serve`), on PostgreSQL. Each tool must answer
what the matching REST call answers, the key must fix the tenant and scope of every tool, and
a refused call must be a tool error carrying the problem type, with nothing written."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError

from pipeline.access.keys import revoke_key
from tests.integration.api.mcp_helpers import (
    DOORS,
    answer,
    calls,
    flat,
    normalised,
    problem_type,
    session,
    stdio_env,
    tool_names,
)
from tests.integration.server_helpers import SGAM, Keys, Server, episode_body, rows_of

pytestmark = pytest.mark.postgres

READS = ["get_facts", "get_history", "get_context", "search_memory"]
WRITES = ["remember", "ingest_episodes"]
REVIEW = ["list_candidates", "confirm_candidate", "reject_candidate"]
ROLE_TOOLS = {
    "reader": READS,
    "writer": WRITES + READS,
    "reviewer": WRITES + READS + REVIEW,
    "admin": WRITES + READS + REVIEW + ["forget_subject"],
}
REMEMBERED = {
    "subject": "mira",
    "text": "Remember that my passport deadline is June 30, 2026.",
    "session_id": "s1",
}
EPISODES = [
    episode_body("please contact me by email", session_id="a"),
    episode_body("I prefer concise answers", session_id="b"),
    episode_body("my home city is Utrecht", session_id="c"),
]


@pytest.mark.parametrize("door", DOORS)
def test_each_role_is_shown_only_its_tools(door: str, server: Server, keys: Keys) -> None:
    listed = {role: tool_names(door, server, keys(role)) for role in ROLE_TOOLS}

    async def described(client: Client) -> tuple[str, dict[str, Any]]:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return client.protocol_version, tools

    version, tools = session(door, server, keys("admin"), described)

    assert listed == ROLE_TOOLS
    assert version == "2026-07-28"  # what the SDK's client negotiates with this server
    if door == "http":  # counted in the service's metrics under its own route
        metrics = httpx2.get(server.url + "/metrics", timeout=30).text
        assert 'route="/mcp",status="200"' in metrics
    assert all(tool.output_schema and tool.input_schema for tool in tools.values())
    assert tools["get_facts"].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["forget_subject"].annotations.destructive_hint is True
    assert "occurred_at" in tools["remember"].input_schema["properties"]
    assert (
        "text"
        in tools["ingest_episodes"].input_schema["properties"]["episodes"]["items"]["properties"]
    )


@pytest.mark.parametrize("door", DOORS)
def test_the_handshake_era_protocol_is_served_too(door: str, server: Server, keys: Keys) -> None:
    secret = keys("writer")

    async def steps(client: Client) -> tuple[str, list[str], Any, Any]:
        names = [tool.name for tool in (await client.list_tools()).tools]
        remembered = answer(await client.call_tool("remember", REMEMBERED))
        facts = answer(await client.call_tool("get_facts", {"subject": "mira"}))
        return client.protocol_version, names, remembered, facts

    version, names, remembered, facts = session(door, server, secret, steps, mode="legacy")
    with server.client(secret) as api:
        rest = api.get("/v1/subjects/mira/facts").json()

    assert version < "2026"  # the initialize handshake, not the 2026-07-28 envelope
    assert names == ROLE_TOOLS["writer"]
    assert remembered["facts"][0]["attribute"] == "passport_deadline"
    assert facts == rest


@pytest.mark.parametrize("door", DOORS)
def test_a_tool_the_role_lacks_is_refused_and_writes_nothing(
    door: str, server: Server, keys: Keys, tenant: str
) -> None:
    refused = calls(
        door,
        server,
        keys("reader"),
        ("remember", REMEMBERED),
        ("ingest_episodes", {"episodes": EPISODES[:1]}),
        ("forget_subject", {"subject": "mira"}),
        ("list_candidates", {}),
        ("no_such_tool", {}),
    )

    assert [problem_type(result) for result in refused] == ["forbidden"] * 4 + ["not-found"]
    assert set(rows_of(server.database_url, tenant).values()) == {0}


@pytest.mark.parametrize("door", DOORS)
def test_every_tool_answers_what_rest_answers(
    door: str, server: Server, keys: Keys, tenant: str
) -> None:
    """Tenant A goes through MCP, tenant B through REST, with the same calls: the answers are
    equal but for the tenant, generated ids and the clock; each read is also made over REST in
    tenant A, where the answer must be equal byte for byte (as JSON)."""
    other = f"{tenant}-rest"
    mcp_key, rest_key = keys("admin"), keys("admin", tenant_id=other)
    at = "2026-06-01T10:00:00Z"
    reads: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
        ("get_facts", {"subject": "mira"}, "/v1/subjects/mira/facts", {}),
        (
            "get_facts",
            {"subject": "mira", "attribute": "home_city", "at": at, "known_at": "2030-01-01"},
            "/v1/subjects/mira/facts",
            {"attribute": "home_city", "at": at, "known_at": "2030-01-01"},
        ),
        (
            "get_history",
            {"subject": "mira", "attribute": "home_city"},
            "/v1/subjects/mira/attributes/home_city/history",
            {},
        ),
        (
            "get_context",
            {"subject": "mira", "query": "where do I live?", "budget_tokens": 300},
            "/v1/subjects/mira/context",
            {"query": "where do I live?", "budget_tokens": 300},
        ),
        (
            "search_memory",
            {"subject": "mira", "query": "where do I live?", "kinds": ["facts", "episodes"]},
            "/v1/subjects/mira/search",
            {"query": "where do I live?", "kinds": "facts,episodes"},
        ),
        ("list_candidates", {"subject": "mira"}, "/v1/candidates", {"subject": "mira"}),
    ]

    async def through_mcp(client: Client) -> dict[str, Any]:
        done: dict[str, Any] = {
            "remember": answer(
                await client.call_tool("remember", REMEMBERED | {"occurred_at": at})
            ),
            "ingest": answer(await client.call_tool("ingest_episodes", {"episodes": EPISODES})),
        }
        done["reads"] = [answer(await client.call_tool(name, args)) for name, args, *_ in reads]
        with server.client(mcp_key) as api:  # the same reads over REST, on the same state
            done["same_tenant"] = [api.get(path, params=query).json() for *_, path, query in reads]
        by_attribute = {c["attribute"]: c["candidate_id"] for c in done["reads"][-1]}
        done["confirm"] = answer(
            await client.call_tool(
                "confirm_candidate", {"candidate_id": by_attribute["contact_channel"]}
            )
        )
        done["reject"] = answer(
            await client.call_tool(
                "reject_candidate", {"candidate_id": by_attribute["answer_style"]}
            )
        )
        done["after_review"] = answer(await client.call_tool("get_facts", {"subject": "mira"}))
        done["forget"] = answer(await client.call_tool("forget_subject", {"subject": "mira"}))
        done["after_forget"] = answer(await client.call_tool("get_facts", {"subject": "mira"}))
        return done

    mcp = session(door, server, mcp_key, through_mcp)
    with server.client(mcp_key) as api:
        log = api.get("/v1/log", params={"limit": 100}).json()
    with server.client(rest_key) as api:
        rest: dict[str, Any] = {
            "remember": api.post("/v1/remember", json=REMEMBERED | {"occurred_at": at}).json(),
            "ingest": api.post("/v1/episodes", json=EPISODES).json(),
        }
        rest["reads"] = [api.get(path, params=query).json() for _, _, path, query in reads]
        by_attribute = {c["attribute"]: c["candidate_id"] for c in rest["reads"][-1]}
        rest["confirm"] = api.post(
            f"/v1/candidates/{by_attribute['contact_channel']}/confirm"
        ).json()
        rest["reject"] = api.post(f"/v1/candidates/{by_attribute['answer_style']}/reject").json()
        rest["after_review"] = api.get("/v1/subjects/mira/facts").json()
        rest["forget"] = api.delete("/v1/subjects/mira").json()
        rest["after_forget"] = api.get("/v1/subjects/mira/facts").json()

    assert mcp["remember"]["facts"][0]["attribute"] == "passport_deadline"
    assert [r["status"] for r in mcp["ingest"]["receipts"]] == ["done"] * 3
    assert mcp["reads"][0], "facts held"
    assert mcp["reads"][3]["items"], "the context cited them"
    assert mcp["confirm"]["fact"]["value"] == "email"
    assert mcp["forget"]["hidden"] > 0
    assert mcp["after_forget"] == []
    assert mcp.pop("same_tenant") == mcp["reads"]
    assert flat(normalised(mcp, tenant)) == flat(normalised(rest, other))
    key_id = mcp_key.split("_")[1]
    assert log, "decisions were logged"
    assert {event["actor"] for event in log} == {key_id}


def _tenant_a(door: str, server: Server, keys: Keys) -> dict[str, Any]:
    """Tenant A's memory, written over MCP: facts, buffered candidates, an episode id."""

    async def steps(client: Client) -> dict[str, Any]:
        remembered = answer(await client.call_tool("remember", REMEMBERED))
        ingested = answer(await client.call_tool("ingest_episodes", {"episodes": EPISODES}))
        buffered = answer(await client.call_tool("list_candidates", {}))
        facts = answer(await client.call_tool("get_facts", {"subject": "mira"}))
        return {
            "remembered": remembered,
            "episode_id": ingested["receipts"][0]["episode_id"],
            "candidates": [c["candidate_id"] for c in buffered],
            "facts": facts,
        }

    return session(door, server, keys("admin"), steps)


@pytest.mark.parametrize("door", DOORS)
def test_another_tenant_sees_and_touches_nothing(
    door: str, server: Server, keys: Keys, tenant: str
) -> None:
    mine = _tenant_a(door, server, keys)
    other = f"{tenant}-b"
    before = rows_of(server.database_url, tenant)
    candidate = mine["candidates"][0]

    async def steps(client: Client) -> dict[str, Any]:
        return {
            "facts": answer(await client.call_tool("get_facts", {"subject": "mira"})),
            "history": answer(
                await client.call_tool(
                    "get_history", {"subject": "mira", "attribute": "passport_deadline"}
                )
            ),
            "context": answer(await client.call_tool("get_context", {"subject": "mira"})),
            "candidates": answer(await client.call_tool("list_candidates", {})),
            "confirm": problem_type(
                await client.call_tool("confirm_candidate", {"candidate_id": candidate})
            ),
            "reject": problem_type(
                await client.call_tool("reject_candidate", {"candidate_id": candidate})
            ),
            # A's episode id and idempotency key mean nothing in B: B's own writes happen.
            "ingest": answer(
                await client.call_tool(
                    "ingest_episodes",
                    {"episodes": [EPISODES[2] | {"episode_id": mine["episode_id"]}]},
                )
            ),
            "forget": answer(await client.call_tool("forget_subject", {"subject": "mira"})),
        }

    seen = session(door, server, keys("admin", tenant_id=other), steps)

    assert (seen["facts"], seen["history"], seen["candidates"]) == ([], [], [])
    assert seen["context"]["items"] == []
    assert (seen["confirm"], seen["reject"]) == ("not-found", "not-found")
    assert seen["ingest"]["receipts"][0]["status"] == "done"
    assert seen["forget"]["hidden"] == 1  # B's own fact about mira, none of A's
    assert rows_of(server.database_url, tenant) == before
    assert calls(door, server, keys("reader"), ("get_facts", {"subject": "mira"}))[
        0
    ].structured_content == {"result": mine["facts"]}


@pytest.mark.parametrize("door", DOORS)
def test_naming_another_tenant_agent_or_purpose_is_refused_by_every_tool(
    door: str, server: Server, keys: Keys, tenant: str
) -> None:
    mine = _tenant_a(door, server, keys)
    before = rows_of(server.database_url, tenant)
    candidate = {"candidate_id": mine["candidates"][0]}
    arguments = {
        "remember": REMEMBERED,
        "ingest_episodes": {"episodes": EPISODES[:1]},
        "get_facts": {"subject": "mira"},
        "get_history": {"subject": "mira", "attribute": "passport_deadline"},
        "get_context": {"subject": "mira"},
        "search_memory": {"subject": "mira", "query": "passport"},
        "list_candidates": {},
        "confirm_candidate": candidate,
        "reject_candidate": candidate,
        "forget_subject": {"subject": "mira"},
    }
    elsewhere = [(name, args | {"tenant_id": "someone-else"}) for name, args in arguments.items()]
    bound = keys("admin", agent_id="bot-1", purpose="support")
    other_agent = [(name, args | {"agent_id": "bot-2"}) for name, args in arguments.items()]
    other_purpose = [(name, args | {"purpose": "sales"}) for name, args in arguments.items()]

    by_tenant = calls(door, server, keys("admin"), *elsewhere)
    by_scope = calls(door, server, bound, *other_agent, *other_purpose)
    # Within its own scope the bound key sees nothing of the default agent's memory.
    own = calls(
        door,
        server,
        bound,
        ("get_facts", {"subject": "mira"}),
        ("list_candidates", {}),
        ("confirm_candidate", candidate),
        ("forget_subject", {"subject": "mira"}),
    )

    assert [problem_type(result) for result in by_tenant] == ["scope-mismatch"] * 10
    assert [r.structured_content["field"] for r in by_tenant] == ["tenant_id"] * 10  # type: ignore[index]
    assert [problem_type(result) for result in by_scope] == ["scope-mismatch"] * 20
    assert [answer(result) for result in own[:2]] == [[], []]
    assert [problem_type(result) for result in own[2:]] == ["not-found", "forbidden"]
    assert rows_of(server.database_url, tenant) == before


BAD_ARGUMENTS = [
    ("remember", {"text": "hello"}, "invalid-input", "subject"),
    ("remember", {"subject": "mira", "text": "x" * 20_001}, "invalid-input", "text"),
    ("remember", REMEMBERED | {"occurred_at": "soon"}, "invalid-input", "occurred_at"),
    ("remember", REMEMBERED | {"trust": "verified"}, "invalid-input", "trust"),
    ("get_facts", {"subject": "a/b"}, "invalid-input", "subject"),
    ("get_facts", {"subject": "mira", "at": "yesterday"}, "invalid-input", "at"),
    ("get_facts", {"subject": 7}, "invalid-input", "subject"),
    ("get_context", {"subject": "mira", "budget_tokens": "lots"}, "invalid-input", "budget_tokens"),
    ("ingest_episodes", {"episodes": []}, "invalid-input", "episodes"),
    ("ingest_episodes", {"episodes": "hello"}, "invalid-input", "episodes"),
    ("confirm_candidate", {}, "invalid-input", "candidate_id"),
    ("forget_subject", {"subject": ""}, "invalid-input", "subject"),
]


@pytest.mark.parametrize("door", DOORS)
def test_bad_arguments_are_tool_errors_that_write_nothing(
    door: str, server: Server, keys: Keys, tenant: str
) -> None:
    batch = {"episodes": [EPISODES[0], {"subject": "mira", "text": "no session"}]}
    wanted = [(name, args) for name, args, *_ in BAD_ARGUMENTS] + [("ingest_episodes", batch)]

    results = calls(door, server, keys("admin"), *wanted)

    problems = [
        (problem_type(result), result.structured_content.get("field"))  # type: ignore[union-attr]
        for result in results[:-1]
    ]
    assert problems == [(kind, field) for _, _, kind, field in BAD_ARGUMENTS]
    assert problem_type(results[-1]) == "invalid-episodes"
    assert [e["index"] for e in results[-1].structured_content["errors"]] == [1]  # type: ignore[index]
    assert set(rows_of(server.database_url, tenant).values()) == {0}


@pytest.mark.parametrize("door", DOORS)
def test_a_revoked_key_is_refused_on_its_next_call(
    door: str, server: Server, keys: Keys, store: Any, tenant: str
) -> None:
    secret = keys("writer")

    async def steps(client: Client) -> tuple[Any, Any]:
        before = answer(await client.call_tool("get_facts", {"subject": "mira"}))
        revoke_key(store, secret.split("_")[1])
        time.sleep(1.2)  # SGAM_API_KEY_CACHE_S: how long a process trusts a checked key
        try:
            after: Any = await client.call_tool("remember", REMEMBERED)
        except Exception as error:  # over HTTP the request itself is refused (401)
            after = error
        return before, after

    before, after = session(door, server, secret, steps)

    assert before == []
    if door == "stdio":
        assert problem_type(after) == "unauthorized"
        assert after.structured_content["detail"] == "the key was revoked"
        started = subprocess.run(
            [SGAM, "mcp"],
            env=stdio_env(server.database_url, secret),
            input=b"",
            capture_output=True,
            timeout=60,
        )
        assert started.returncode == 2
        assert started.stderr.decode().strip().endswith("SGAM_API_KEY: the key was revoked")
    else:
        assert isinstance(after, MCPError)  # the SDK's client reports the refused request
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        with server.client(secret) as raw:  # what the server answered: 401 and its problem
            refused = raw.post("/mcp", json=call, headers={"Accept": "application/json"})
        assert refused.status_code == 401
        assert refused.json()["type"] == "urn:sgam:problem:unauthorized"
        assert refused.json()["detail"] == "the key was revoked"
    assert set(rows_of(server.database_url, tenant).values()) == {0}


def test_sgam_mcp_without_a_key_exits_2_at_once(server: Server) -> None:
    started = subprocess.run(
        [SGAM, "mcp"],
        env=stdio_env(server.database_url, ""),
        input=b"",
        capture_output=True,
        timeout=60,
    )

    assert started.returncode == 2
    assert "SGAM_API_KEY" in started.stderr.decode()
    assert started.stdout == b""  # stdout is the protocol's: nothing else is written there
