"""docs/troubleshooting.md quotes what SGAM prints: each failure a newcomer meets is caused
here for real, and the line `sgam` prints must hold the words the page quotes (the parts a
reader's setup changes — a port, a path, a catalogue version — are left out of `words`)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.databases import drop_database, new_database

PAGE = (Path(__file__).parents[2] / "docs" / "troubleshooting.md").read_text()
SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")


@dataclass(frozen=True)
class Failure:
    name: str
    args: tuple[str, ...]
    code: int
    words: tuple[str, ...]  # each on the page and in what sgam printed
    settings: dict[str, str] = field(default_factory=dict)
    stdin: str = ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


GET = ("get", "--tenant", "acme", "--subject", "mira")
PUT = (
    "put", "--tenant", "acme", "--subject", "mira", "--attribute", "home_city",
    "--value", "Porto", "--valid-from", "2026-02-01T00:00:00Z", "--source", "e2",
)  # fmt: skip
EPISODE = {
    "tenant_id": "acme", "subject": "mira", "session_id": "s1",
    "occurred_at": "2026-03-01T10:00:00Z", "text": "I live in Lisbon.",
}  # fmt: skip
EXTRACT_LLM = ("extract", "--tenant", "acme", "--subject", "mira", "--text", "I live in Lisbon.")
EXTRACT_LLM += ("--extractor", "llm")

FAILURES = [
    Failure(
        "database-not-running",
        GET,
        5,
        (
            "sgam: StoreUnavailable: the database is unavailable: connection to server at "
            '"127.0.0.1", port ',
            " failed: Connection refused",
        ),
        {"SGAM_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{_free_port()}/sgam"},
    ),
    Failure(
        "not-a-database-url",
        GET,
        2,
        ("sgam: SGAM_DATABASE_URL: use sqlite:///PATH or postgresql://USER@HOST/DATABASE",),
        {"SGAM_DATABASE_URL": "mysql://localhost/sgam"},
    ),
    Failure(
        "relative-sqlite-path",
        GET,
        2,
        (
            "sgam: SGAM_DATABASE_URL: the directory of data/sgam.sqlite3 does not exist; create "
            "it first (a relative path is read from the current directory; for one database "
            "wherever sgam runs, give the absolute path: sqlite:////",
        ),
        {"SGAM_DATABASE_URL": "sqlite:///data/sgam.sqlite3"},
    ),
    Failure(
        "broker-not-set",
        ("worker",),
        2,
        ("sgam: SGAM_BROKER_URL: is not set: workers need a broker (redis://...)",),
    ),
    Failure(
        "broker-not-running",
        ("worker",),
        5,
        ("sgam: StoreUnavailable: the broker is unavailable (Error 111 connecting to 127.0.0.1:",),
        {"SGAM_BROKER_URL": f"redis://127.0.0.1:{_free_port()}/0"},
    ),
    Failure(
        "ingest-broker-down",
        ("ingest", "-"),
        5,
        (
            "sgam: StoreUnavailable: the broker is unreachable: the episodes are stored and the "
            "sweeper will queue them once it answers (SGAM_BROKER_URL)",
        ),
        {"SGAM_BROKER_URL": f"redis://127.0.0.1:{_free_port()}/0"},
        json.dumps(EPISODE) + "\n",
    ),
    Failure(
        "model-not-configured",
        EXTRACT_LLM,
        2,
        ("sgam: SGAM_LLM_BASE_URL: is not set: configure an endpoint for --extractor llm",),
    ),
    Failure(
        "attribute-not-in-catalogue",
        (*PUT[:6], "passport_deadline", *PUT[7:]),
        2,
        ("sgam: --attribute: 'passport_deadline' is not in catalogue ", "; declare it there first"),
        {"SGAM_CATALOG": "personal"},
    ),
    Failure(
        "no-such-bundled-catalogue",
        GET,
        2,
        ("sgam: SGAM_CATALOG: Input should be 'personal' or 'support'",),
        {"SGAM_CATALOG": "crm"},
    ),
    Failure(
        "catalogue-file-missing",
        GET,
        2,
        ("sgam: catalogue /", ": cannot read the catalogue: No such file or directory"),
        {"SGAM_CATALOG_PATH": "/nonexistent/catalog.yaml"},
    ),
    Failure(
        "catalogue-file-not-yaml",
        GET,
        2,
        ("sgam: catalogue /", ":2: not valid YAML: did not find expected node content"),
        {"SGAM_CATALOG_PATH": "{tmp}/catalog.yaml"},
    ),
    Failure(
        "mcp-without-key",
        ("mcp",),
        2,
        ("sgam: SGAM_API_KEY: set it to an API key (sgam keys create)",),
    ),
    Failure(
        "mcp-malformed-key",
        ("mcp",),
        2,
        ("sgam: SGAM_API_KEY: the key is not an SGAM API key (sgam_<key id>_<secret>)",),
        {"SGAM_API_KEY": "sk-not-ours"},
    ),
    Failure(
        "mistyped-option",
        ("get", "--tenant", "acme", "--subjet", "mira"),
        2,
        ("sgam: No such option: --subjet. Did you mean --subject?",),
    ),
    Failure(
        "relative-date-option",
        (*GET, "--at", "yesterday"),
        2,
        ("sgam: --at: 'yesterday' is not an ISO 8601 timestamp (e.g. 2026-06-03T10:00:00Z)",),
    ),
    Failure(
        "malformed-setting",
        GET,
        2,
        (
            "sgam: SGAM_LLM_TIMEOUT_S: Input should be a valid number, unable to parse string "
            "as a number",
        ),
        {"SGAM_LLM_TIMEOUT_S": "soon"},
    ),
    Failure(
        "forget-nothing",
        ("forget", "--tenant", "acme", "--subject", "nobody"),
        1,
        ("sgam: nothing stored about nobody in tenant acme",),
    ),
    Failure(
        "ingest-empty-stdin", ("ingest", "-"), 1, ("sgam: no episodes: stdin holds no JSON line",)
    ),
]


def _sgam(tmp_path: Path, failure: Failure, **more: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_")}
    env["SGAM_DATABASE_URL"] = f"sqlite:///{tmp_path / 'sgam.sqlite3'}"
    env |= {name: value.format(tmp=tmp_path) for name, value in failure.settings.items()} | more
    return subprocess.run(
        [SGAM, *failure.args],
        env=env,
        cwd=tmp_path,
        input=failure.stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _check(done: subprocess.CompletedProcess[str], failure: Failure) -> None:
    (line,) = done.stderr.splitlines()  # one line, as the page promises
    assert done.returncode == failure.code, done.stderr
    for words in failure.words:
        assert words in line, f"sgam now prints: {line}"
        assert words in PAGE, f"docs/troubleshooting.md does not quote: {words}"


@pytest.mark.slow
@pytest.mark.parametrize("failure", FAILURES, ids=[f.name for f in FAILURES])
def test_the_page_quotes_what_sgam_prints(failure: Failure, tmp_path: Path) -> None:
    (tmp_path / "catalog.yaml").write_text("attributes: [\n")
    _check(_sgam(tmp_path, failure), failure)


def test_a_port_in_use(tmp_path: Path) -> None:
    failure = Failure(
        "port-in-use",
        ("serve", "--port", "PORT"),
        5,
        (" on 127.0.0.1 is in use by another process; stop it or choose another --port",),
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        failure = Failure(failure.name, ("serve", "--port", port), failure.code, failure.words)
        _check(_sgam(tmp_path, failure), failure)


@pytest.mark.slow
def test_a_locked_sqlite_file(tmp_path: Path) -> None:
    failure = Failure(
        "sqlite-locked",
        PUT,
        5,
        (
            "sgam: StoreBusy: the database stayed busy (locks held by others) through 5 "
            "attempts; retry later",
        ),
    )
    assert _sgam(tmp_path, Failure("migrate", ("db", "upgrade"), 0, ())).returncode == 0
    holder = sqlite3.connect(tmp_path / "sgam.sqlite3", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock, as an open sqlite3 shell holds it
        _check(_sgam(tmp_path, failure, SGAM_LOCK_TIMEOUT_MS="200"), failure)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    """An OpenAI-protocol endpoint that refuses every key, as a real one does a wrong key."""

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = json.dumps({"error": {"message": "Incorrect API key provided"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_a_wrong_model_api_key(tmp_path: Path, refusing_endpoint: str) -> None:
    failure = Failure(
        "llm-key-refused",
        EXTRACT_LLM,
        2,
        (
            "sgam: LlmRequestRejected: HTTP 401 from the endpoint after 1 attempt(s): "
            "AuthenticationError: ",
        ),
        {"SGAM_LLM_BASE_URL": refusing_endpoint, "SGAM_LLM_API_KEY": "sk-wrong"},
    )
    _check(_sgam(tmp_path, failure), failure)


@pytest.mark.postgres
def test_a_database_not_migrated(tmp_path: Path) -> None:
    unmigrated = new_database("unmigrated")
    try:
        failure = Failure(
            "schema-not-current",
            GET,
            2,
            ("sgam: SGAM_DATABASE_URL: the database schema is not current: run `sgam db upgrade`",),
            {"SGAM_DATABASE_URL": unmigrated},
        )
        _check(_sgam(tmp_path, failure), failure)
    finally:
        drop_database(unmigrated)
