"""The shell examples of the README and of every page of the site (`docs/**/*.md`), curl
included, run as written: each `sh` block in a fresh bash (`set -euo pipefail`, so the first
command that fails fails the block), with `sgam` on the PATH as after `source
.venv/bin/activate`, the default settings (a page whose examples need another, such as the
support catalogue, says so in its text and in a `readme-test: env` marker), and a real
PostgreSQL, Redis and `sgam serve` where a block starts one. Every curl fails on an
HTTP error (`fail-with-body` in the test's curlrc), so a refused request fails the block.

What the test changes in a block is only what is this machine's (`Machine.substitute`): the
README's PostgreSQL URL becomes a fresh test database, its model endpoint a stub
OpenAI-compatible server, and port 8080 a free one. A block that runs `make` runs in the
project's directory, as a reader in the clone would; the others in an empty one. A block that cannot
run here carries `<!-- readme-test: skip: REASON -->` in the README and is reported skipped
with that reason; a command synopsis carries `<!-- readme-test: synopsis -->` and is checked
to be one. A transcript (a block whose first line is `$ command`) is run and must print the
lines it shows, in order (`...` stands for lines left out, or within a line for what was
shortened), on a terminal as shown; a transcript whose output is JSON must print the same JSON,
timings (`*_ms`) aside. A `json` block must be JSON (or JSON Lines).
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.databases import new_database
from tests.integration.readme_blocks import PROJECT, Block, all_blocks, page_env
from tests.integration.server_helpers import REDIS_URL, free_port
from tests.integration.stub_llm import StubServer

SHELL = {"sh", "bash", "shell"}
KNOWN = SHELL | {"python", "json", "yaml", "text", ""}
VENV_BIN = Path(sys.executable).parent
README_LLM = "http://127.0.0.1:8080/v1"
README_URLS = (
    "postgresql+psycopg://sgam:sgam@127.0.0.1:5432/sgam",
    "postgresql://sgam:sgam@127.0.0.1:5432/sgam",
)
TIMEOUT_S = 120
ALL = all_blocks()


@dataclass
class Machine:
    """This machine's stand-ins for what the README's examples name."""

    database_url: str
    port: int
    llm_url: str

    def substitute(self, script: str) -> str:
        for url in README_URLS:
            script = script.replace(url, self.database_url)
        script = script.replace(README_LLM, self.llm_url)
        return re.sub(r"\b8080\b", str(self.port), script)


def fresh_database() -> str:
    """`<test database>_readme`, dropped and created empty: the blocks migrate it themselves."""
    return new_database("readme")


@cache
def _page_env(page: str) -> dict[str, str]:
    return page_env(PROJECT / page)


def environment(home: Path, page: str = "README.md") -> dict[str, str]:
    """A new user's shell: their PATH with the venv's bin first, none of the developer's
    SGAM_* or OTEL_* settings, and only what the page tells a reader to set."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SGAM_", "OTEL_", "CURL_")) and name not in {"HOME", "PWD"}
    }
    (home / ".curlrc").write_text("fail-with-body\n")
    return (
        kept
        | {
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(home),
            "CURL_HOME": str(home),
            "SGAM_REDIS_URL": REDIS_URL,  # the test's own Redis db, for the API's rate limits
            "PS4": "+ ",
        }
        | _page_env(page)
    )


def run(
    script: str, workdir: Path, env: dict[str, str], log: Path, *, terminal: bool = False
) -> tuple[int, str]:
    """Run `script` in bash in its own process group and end whatever it left running (a
    `sgam serve &`) when it is done; the exit code and everything it printed, trace included.
    With `terminal`, its output goes to a pseudo-terminal, as a transcript was taken."""
    primary, secondary = pty.openpty() if terminal else (-1, -1)
    with open(log, "wb") as out:
        shell = subprocess.Popen(
            ["bash", "-euxo", "pipefail", "-c", script],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=secondary if terminal else out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            if terminal:
                os.close(secondary)
                out.write(_read_all(primary))
            code = shell.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = -1
        finally:
            _end_group(shell.pid)
            shell.wait()
            if terminal:
                os.close(primary)
    printed = log.read_text(errors="replace").replace("\r\n", "\n")
    if code == -1:
        printed += f"\n[the block did not finish within {TIMEOUT_S} s]"
    return code, printed


def _read_all(primary: int) -> bytes:
    chunks = []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _end_group(group: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def failure(block: Block, script: str, code: int, printed: str) -> str:
    return (
        f"{block.name}, a {block.info or 'plain'} block, failed with exit {code}; the last "
        "command traced ('+ ...') before the end of its output is the one that failed.\n"
        f"--- the block as run (the page's text with this machine's database URL and port) ---\n"
        f"{script}--- its output (the end) ---\n{printed[-4000:]}"
    )


def transcript(block: Block) -> tuple[str, list[str]] | None:
    """A block shown as a session, `$ command` then what it prints: (command, shown lines)."""
    lines = block.text.splitlines()
    if block.info not in {"", "text"} or not lines or not lines[0].startswith("$ "):
        return None
    command = [lines[0][2:]]
    rest = lines[1:]
    while command[-1].endswith("\\") and rest:
        command.append(rest.pop(0))
    return "\n".join(command) + "\n", [line for line in rest if line.strip() != "..."]


RUNNABLE = [b for b in ALL if b.info in SHELL or transcript(b) is not None]


@pytest.fixture
def machine(block: Block) -> Iterator[Machine]:
    runs = block.marker is None
    database = fresh_database() if runs and "postgresql" in block.text else "sqlite:///unused"
    if not runs or README_LLM not in block.text:
        yield Machine(database, free_port(), README_LLM)
        return
    with StubServer() as stub:  # answers every extraction with no update
        yield Machine(database, free_port(), stub.base_url)


def _params() -> list[object]:
    params: list[object] = []
    for block in RUNNABLE:
        needs_postgres = block.marker is None and "postgresql" in block.text
        marks = [pytest.mark.postgres] if needs_postgres else []
        params.append(pytest.param(block, id=block.slug, marks=marks))
    return params


@pytest.mark.slow
@pytest.mark.parametrize("block", _params())
def test_the_readme_shell_block_runs_as_written(
    block: Block, machine: Machine, tmp_path: Path
) -> None:
    if block.marker == "skip":
        pytest.skip(f"{block.name} is marked on its page: {block.reason}")
    if block.marker == "synopsis":
        _is_a_synopsis(block)
        return
    home = tmp_path / "home"
    home.mkdir()
    env = environment(home, block.page)
    shown = transcript(block)
    script = machine.substitute(shown[0] if shown else block.text)
    workdir = PROJECT if re.search(r"^make ", script, re.MULTILINE) else tmp_path

    code, printed = run(script, workdir, env, tmp_path / "output.log", terminal=shown is not None)

    assert code == 0, failure(block, script, code, printed)
    if shown and _as_json("\n".join(shown[1])) is not None:
        _prints_the_json(block, printed, shown[1])
    elif shown:
        _prints_in_order(block, printed, shown[1])


def _is_a_synopsis(block: Block) -> None:
    """Each command of a synopsis is `sgam ...` with a placeholder or an optional part, so a
    runnable example cannot hide behind the marker."""
    commands = re.split(r"(?<!\\)\n", block.text.strip())
    for command in commands:
        assert command.startswith("sgam "), f"{block.name}: a synopsis line is not `sgam ...`"
    placeholders = [c for c in commands if re.search(r"\[--|\b[A-Z][A-Z_]{1,}\b", c)]
    assert placeholders, f"{block.name} is marked a synopsis but has no placeholder"


def _as_json(text: str) -> object | None:
    try:
        return _untimed(json.loads(text))
    except ValueError:
        return None


def _untimed(value: object) -> object:
    """`value` without its timings, which differ from run to run."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not k.endswith("_ms")}
    if isinstance(value, list):
        return [_untimed(item) for item in value]
    return value


def _prints_the_json(block: Block, printed: str, shown: list[str]) -> None:
    output = "\n".join(line for line in printed.splitlines() if not line.startswith("+ "))
    assert _as_json(output) == _as_json("\n".join(shown)), (
        f"{block.name}: the command printed other JSON than the transcript shows:\n{output}"
    )


def _prints_in_order(block: Block, printed: str, shown: list[str]) -> None:
    output = [line.strip() for line in printed.splitlines() if not line.startswith("+ ")]
    at = 0
    for line in shown:
        wanted = line.strip()
        # `...` inside a line stands for what the transcript shortened there.
        pattern = re.compile(".*".join(map(re.escape, wanted.split("..."))))
        while at < len(output) and not pattern.fullmatch(output[at]):
            at += 1
        assert at < len(output), (
            f"{block.name}: the transcript shows {wanted!r}, which the command did not print "
            f"(after the lines before it). It printed:\n{printed[-4000:]}"
        )
        at += 1


def test_every_code_block_is_of_a_kind_the_tests_know() -> None:
    """A `bash` or `console` block would otherwise escape the shell test unnoticed."""
    unknown = [f"{b.name}: ```{b.info}" for b in ALL if b.info not in KNOWN]
    assert not unknown, f"code blocks of kinds the README tests do not run: {unknown}"


def test_only_the_marked_blocks_are_left_out_and_each_says_why() -> None:
    marked = [b for b in ALL if b.marker is not None]
    assert all(b in RUNNABLE for b in marked), [
        b.name for b in marked if b not in RUNNABLE
    ]  # a marker on a block the shell test does not run means nothing
    ran = [b for b in RUNNABLE if b.marker is None]
    assert len(ran) >= 4, f"the README's runnable shell blocks were found: {ran}"
    assert any("curl " in b.text for b in ran), "the curl examples are among those run"


def test_every_json_example_is_json() -> None:
    """A `json` block is one JSON value or JSON Lines, as a reader would paste it into a
    config or compare it with an answer (`…` may shorten a string, not the syntax)."""
    broken = []
    for block in (b for b in ALL if b.info == "json"):
        try:
            json.loads(block.text)
        except ValueError:
            try:
                [json.loads(line) for line in block.text.splitlines() if line.strip()]
            except ValueError as error:
                broken.append(f"{block.name}: {error}")
    assert not broken, f"json blocks that are not JSON: {broken}"
