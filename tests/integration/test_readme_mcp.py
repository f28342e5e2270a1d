"""The documentation's MCP session (the `text` block that starts `protocol ...`, in the README or
a page of the site) replayed as written, with the settings its page names:
the SDK's client starts `sgam mcp` with a writer key of the session's tenant, sends each
`>>> tool {arguments}` and must get what the block shows after it.

How the block shortens an answer: `…` in a string stands for any text there (`"…"`: any
string, such as a generated id); `{…}` for any object; `, …}` closes an object that has
more keys than shown. Every other key and value must be as shown.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from pipeline.access.keys import create_key
from pipeline.db.store import open_store
from tests.factories import isolated_settings
from tests.integration.api.mcp_helpers import stdio_env
from tests.integration.readme_blocks import PROJECT, Block, all_blocks, page_env
from tests.integration.server_helpers import SGAM

MORE = "…"  # the key of an object the README shows only in part


@dataclass
class Step:
    tool: str
    arguments: dict[str, Any]
    shown: str  # the answer as the README shows it


def session_block() -> Block:
    (block,) = [b for b in all_blocks() if b.info == "text" and b.text.startswith("protocol ")]
    return block


def parse(block: Block) -> tuple[str, list[Step]]:
    """The protocol the block names and its steps, `tools/list` among them."""
    lines = block.text.splitlines()
    protocol = lines[0].removeprefix("protocol ").strip()
    steps: list[Step] = []
    for chunk in "\n".join(lines[1:]).split(">>> ")[1:]:
        tool, _, rest = (
            chunk.partition(" ")
            if not chunk.startswith("tools/list")
            else (
                "tools/list",
                "",
                chunk.removeprefix("tools/list"),
            )
        )
        arguments: dict[str, Any] = {}
        if tool != "tools/list":
            decoder = json.JSONDecoder()
            arguments, end = decoder.raw_decode(rest)
            rest = rest[end:]
        steps.append(Step(tool.strip(), arguments, rest.strip()))
    return protocol, steps


def shown_value(text: str) -> Any:
    """The README's shortened JSON as a value, `{…}` and `, …}` made objects with a MORE key."""
    marked = text.replace("{…}", '{"…": true}').replace(", …}", ', "…": true}')
    return json.loads(marked)


def matches(shown: Any, actual: Any, where: str = "answer") -> list[str]:
    """Where `actual` differs from what the README shows (empty when it is as shown)."""
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{where}: an object is shown, the answer has {actual!r}"]
        keys = set(shown) - {MORE}
        wrong = [] if MORE in shown or keys == set(actual) else [f"{where}: keys {sorted(actual)}"]
        for key in sorted(keys):
            if key not in actual:
                wrong.append(f"{where}.{key}: shown, not in the answer")
            else:
                wrong += matches(shown[key], actual[key], f"{where}.{key}")
        return wrong
    if isinstance(shown, list):
        if not isinstance(actual, list) or len(shown) != len(actual):
            return [f"{where}: {len(shown)} items shown, the answer has {actual!r}"]
        return [
            w
            for i, (s, a) in enumerate(zip(shown, actual, strict=True))
            for w in matches(s, a, f"{where}[{i}]")
        ]
    if isinstance(shown, str) and MORE in shown:
        pattern = ".*".join(map(re.escape, shown.split(MORE)))
        ok = isinstance(actual, str) and re.fullmatch(pattern, actual, re.DOTALL) is not None
        return [] if ok else [f"{where}: shown {shown!r}, the answer has {actual!r}"]
    return [] if shown == actual else [f"{where}: shown {shown!r}, the answer has {actual!r}"]


def replay(steps: list[Step], env: dict[str, str], workdir: Path) -> tuple[str, list[Any]]:
    params = StdioServerParameters(command=SGAM, args=["mcp"], env=env, cwd=str(workdir))

    async def main() -> tuple[str, list[Any]]:
        answers: list[Any] = []
        async with Client(params, read_timeout_seconds=60) as client:
            for step in steps:
                if step.tool == "tools/list":
                    answers.append([tool.name for tool in (await client.list_tools()).tools])
                    continue
                result = await client.call_tool(step.tool, step.arguments)
                content = result.structured_content or {}
                if set(content) == {"result"}:
                    content = content["result"]
                answers.append(("error", content) if result.is_error else content)
            return client.protocol_version, answers

    return anyio.run(main)


@pytest.mark.slow
def test_the_readme_mcp_session_answers_as_shown(tmp_path: Path) -> None:
    block = session_block()
    protocol, steps = parse(block)
    database = f"sqlite:///{tmp_path / 'mcp.sqlite3'}"
    store = open_store(isolated_settings(database_url=database))
    tenant = "acme-demo"  # "a writer key of tenant `acme-demo`"
    secret = create_key(store, {"tenant_id": tenant, "role": "writer"})[1]
    store.dispose()

    env = stdio_env(database, secret, **page_env(PROJECT / block.page))
    negotiated, answers = replay(steps, env, tmp_path)

    assert negotiated == protocol, f"{block.name}: the client negotiated {negotiated}"
    assert len(steps) >= 4, f"{block.name}: the session's steps were found"
    for step, answer in zip(steps, answers, strict=True):
        call = f"{block.name}: >>> {step.tool} {json.dumps(step.arguments)}"
        if step.tool == "tools/list":
            assert answer == ast.literal_eval(step.shown), f"{call}: the tools are {answer}"
        elif step.shown.startswith("error "):
            assert isinstance(answer, tuple), f"{call}: answered {answer}, not an error"
            wrong = matches(shown_value(step.shown.removeprefix("error ")), answer[1])
            assert not wrong, f"{call}: {wrong}"
        else:
            assert not isinstance(answer, tuple), f"{call}: refused with {answer[1]}"
            wrong = matches(shown_value(step.shown), answer)
            assert not wrong, f"{call}: {wrong}"
