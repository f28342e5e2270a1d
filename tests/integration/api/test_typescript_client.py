"""The TypeScript client, @sgam/client (clients/typescript): its OpenAPI document and types are
what the server and the generator make now, and its own tests (node's test runner) pass
against a real `sgam serve` on PostgreSQL, one server as configured and one that allows a key
a single request a second (the 429 the client must wait out)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api.typescript_helpers import PACKAGE, installed_and_built, npm, run
from tests.integration.server_helpers import SGAM, Keys, Server, start_server, stop_server


@pytest.fixture(scope="module")
def built() -> None:
    installed_and_built()


@pytest.mark.slow
def test_the_checked_in_document_is_what_sgam_openapi_prints(tmp_path: Path) -> None:
    # The default settings: none of the SGAM_* environment the suite runs with.
    env = {name: value for name, value in os.environ.items() if not name.startswith("SGAM_")}
    printed = subprocess.run(
        [SGAM, "openapi"], env=env, cwd=tmp_path, capture_output=True, check=False
    )
    assert printed.returncode == 0, printed.stderr.decode()
    checked_in = (PACKAGE / "openapi.json").read_bytes()
    assert printed.stdout == checked_in, (
        "clients/typescript/openapi.json is stale: run `sgam openapi > "
        "clients/typescript/openapi.json` and `npm run generate` in clients/typescript"
    )
    assert list(tmp_path.iterdir()) == [], "sgam openapi wrote a file (it opens no database)"


@pytest.mark.slow
def test_the_checked_in_types_are_what_npm_run_generate_makes(built: None, tmp_path: Path) -> None:
    fresh = tmp_path / "schema.ts"
    run("node", "scripts/generate.mjs", str(fresh))
    assert fresh.read_text() == (PACKAGE / "src" / "schema.ts").read_text(), (
        "clients/typescript/src/schema.ts is stale: run `npm run generate` in clients/typescript"
    )


@pytest.fixture(scope="module")
def limited(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that allows a key one request a second, in bursts of one (started after the
    module's `server`, not beside it: on a busy machine two at once may not be up in 60 s)."""
    limits = {"SGAM_API_RATE_PER_S": "1", "SGAM_API_RATE_BURST": "1"}
    started = start_server(api_database, tmp_path_factory.mktemp("limited"), **limits)
    yield started
    stop_server(started)


@pytest.mark.postgres
def test_the_clients_own_tests_and_example_pass_against_a_real_server(
    built: None, server: Server, limited: Server, keys: Keys
) -> None:
    env = {
        "SGAM_TS_BASE_URL": server.url,
        "SGAM_TS_ADMIN_KEY": keys("admin"),
        "SGAM_TS_LIMITED_URL": limited.url,
        "SGAM_TS_LIMITED_KEY": keys("admin"),
    }
    output = run(npm(), "test", env=env)
    # node's runner ends with its counts: none failed, none skipped.
    counts = {name: int(n) for name, n in re.findall(r"^# (\w+) (\d+)$", output, re.MULTILINE)}
    assert counts["fail"] == 0, output[-4000:]
    assert counts["skipped"] == 0, output[-4000:]
    assert counts["pass"] == counts["tests"] >= 12, output[-4000:]

    example = {"SGAM_BASE_URL": server.url, "SGAM_API_KEY": keys("writer")}
    said = run("node", "build/examples/chat-backend.js", env=example)
    # The third turn's context holds what the first ingested and the second remembered.
    third = said[said.index("Noted (employer)") :]
    known = third[third.index("(knowing:") :]
    assert "Utrecht" in known, said
    assert "Globex" in known, said


@pytest.mark.slow
def test_sgam_openapi_prints_the_configured_catalogue(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SGAM_")}
    printed = subprocess.run(
        [SGAM, "openapi"],
        env=env | {"SGAM_CATALOG": "support"},
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr.decode()
    document = json.loads(printed.stdout)
    default = json.loads((PACKAGE / "openapi.json").read_bytes())
    facts = "/v1/subjects/{subject}/facts"

    def attributes(of: dict[str, Any]) -> set[str]:
        (named,) = [p for p in of["paths"][facts]["get"]["parameters"] if p["name"] == "attribute"]
        return set(named["schema"]["enum"])

    assert "passport_deadline" in attributes(document)  # the support catalogue's
    assert "passport_deadline" not in attributes(default)
    assert "home_city" in attributes(default)  # the personal one's, the default

    refused = subprocess.run(
        [SGAM, "openapi"],
        env=env | {"SGAM_CATALOG": "nonesuch"},
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert refused.returncode == 2
    assert refused.stdout == b""
    assert refused.stderr.decode().startswith("sgam: SGAM_CATALOG"), refused.stderr
