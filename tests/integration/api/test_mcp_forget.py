"""Forget and purge win over MCP as over REST: a reviewer's `confirm_candidate` or
`reject_candidate` of a candidate whose subject was forgotten or purged is a clean tool error
(`not-found`, never a JSON-RPC error such as -32602 or an internal error) and writes nothing,
over both doors; and MCP confirms and rejects racing a REST forget or purge, through the real
`/mcp` of a running `sgam serve`, leave nothing of the subject readable afterwards
(the checker of tests/integration/forget_race_helpers.py)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from mcp import Client

from tests.integration.api.mcp_helpers import DOORS, answer, problem_type, session
from tests.integration.forget_race_helpers import Doors, Round, check, set_up
from tests.integration.forget_race_helpers import Keys as RoleKeys
from tests.integration.server_helpers import Keys, Server, rows_of

pytestmark = pytest.mark.postgres
DECISIONS = ("candidate_confirmed", "candidate_rejected")


def _decisions(doors: Doors, subject: str) -> list[str]:
    log = doors("admin").get("/v1/log", params={"subject": subject, "limit": 1000}).json()
    return [e["kind"] for e in log if e["kind"] in DECISIONS]


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("purge", [False, True], ids=["forget", "purge"])
def test_deciding_a_forgotten_subjects_candidate_is_a_clean_tool_error(
    door: str, purge: bool, server: Server, keys: Keys, tenant: str
) -> None:
    role_keys = RoleKeys(keys("writer"), keys("reviewer"), keys("admin"))
    with Doors(server, role_keys) as doors:
        state = set_up(doors, "mira")
        params = {"purge": "true"} if purge else {}
        assert doors("admin").delete("/v1/subjects/mira", params=params).status_code == 200
        written = rows_of(server.database_url, tenant)

        async def steps(client: Client) -> list[Any]:
            listed = answer(await client.call_tool("list_candidates", {"subject": "mira"}))
            given = {"candidate_id": state.candidate_id}
            confirmed = await client.call_tool("confirm_candidate", given)
            rejected = await client.call_tool("reject_candidate", given)
            return [listed, confirmed, rejected]

        listed, confirmed, rejected = session(door, server, role_keys.reviewer, steps)

        assert listed == []
        assert problem_type(confirmed) == "not-found"
        assert problem_type(rejected) == "not-found"
        assert confirmed.structured_content["status"] == 404  # type: ignore[index]
        assert rows_of(server.database_url, tenant) == written  # nothing written
        assert _decisions(doors, "mira") == []
        assert doors("writer").get("/v1/subjects/mira/facts").json() == []


def test_mcps_own_forget_wins_over_a_later_confirm_in_the_same_session(
    server: Server, keys: Keys, tenant: str
) -> None:
    role_keys = RoleKeys(keys("writer"), keys("reviewer"), keys("admin"))
    with Doors(server, role_keys) as doors:
        state = set_up(doors, "mira")

        async def steps(client: Client) -> list[Any]:
            forgot = answer(await client.call_tool("forget_subject", {"subject": "mira"}))
            given = {"candidate_id": state.candidate_id}
            return [forgot, await client.call_tool("confirm_candidate", given)]

        forgot, confirmed = session("http", server, role_keys.admin, steps)

        # the set-up fact and the quarantined one
        assert forgot == {"hidden": 2, "purged": False, "files_scrubbed": None}
        assert problem_type(confirmed) == "not-found"
        assert _decisions(doors, "mira") == []


def _tool_call(doors: Doors, role: str, name: str, arguments: dict[str, Any]) -> int:
    """One raw JSON-RPC `tools/call` on `/mcp`; the status it amounts to (a tool error's
    problem status, 200 for an answer). A JSON-RPC error or a non-200 reply fails the test."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    message["params"] = {"name": name, "arguments": arguments}  # type: ignore[assignment]
    reply = doors(role).post(
        "/mcp", json=message, headers={"Accept": "application/json, text/event-stream"}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "error" not in body, body  # a protocol error (-32602, -32603) is not a refusal
    result = body["result"]
    if not result.get("isError"):
        return 200
    status: int = result["structuredContent"]["status"]
    return status


def test_mcp_decisions_racing_a_forget_or_purge_leave_nothing_readable(
    server: Server, keys: Keys
) -> None:
    """Each round: a REST purge (every fourth a forget) and four MCP confirms and two
    rejects at once."""
    role_keys = RoleKeys(keys("writer"), keys("reviewer"), keys("admin"))
    with Doors(server, role_keys) as doors, ThreadPoolExecutor(max_workers=7) as pool:
        for index in range(16):
            purge = index % 4 != 3  # mostly purges: a confirm racing a purge was an error
            state: Round = set_up(doors, f"mcp-race-{index}")
            chosen = ["purge" if purge else "forget"] + ["confirm"] * 4 + ["reject"] * 2
            start = threading.Barrier(len(chosen))

            def run(name: str, state: Round = state, start: threading.Barrier = start) -> Any:
                start.wait(timeout=30)
                if name in ("forget", "purge"):
                    params = {"purge": "true"} if name == "purge" else {}
                    forgot = doors("admin").delete(f"/v1/subjects/{state.subject}", params=params)
                    return name, forgot.status_code
                tool = f"{name}_candidate"
                given = {"candidate_id": state.candidate_id}
                return name, _tool_call(doors, "reviewer", tool, given)

            state.answers = list(pool.map(run, chosen))

            assert state.answers[0][1] == 200, state.answers
            assert {code for _, code in state.answers[1:]} <= {200, 404, 409}, state.answers
            assert check(doors, state) == [], (index, state.answers)
