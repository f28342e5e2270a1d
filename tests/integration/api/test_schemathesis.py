"""The OpenAPI document describes what the server accepts, refuses and answers: schemathesis
generates requests from `/openapi.json` of a real `sgam serve` on PostgreSQL and checks every
answer, in four bounded runs with a fixed seed:

- valid requests (positive): examples at the edges of each schema (its coverage phase) and
  random ones (fuzzing). Checks (CHECKS): no 5xx; every status, content type, header and body
  one the document declares for the operation; a request valid by the document not refused
  (only the statuses schemathesis.toml allows: 404, 409, 412 and a revoked run key's 401
  depend on state no schema knows); a request without a key refused; a method the path lacks
  is 405 with `Allow`.
- invalid requests (negative): each breaks the document in one place (a type, a bound, a
  pattern, a missing field, an unknown one) and must be refused as bad input (400, 413, 415,
  422; 401 when the broken part is the key; 404 and 405 when the path itself no longer names
  an operation): never a 2xx, 403, 409 or 5xx.
- chains of calls (stateful), along the document's links (pipeline/api/openapi.py: LINKS):
  the tenant is seeded with buffered candidates and quarantined facts, so that confirm,
  reject, promote and dismiss reach real ids; writes and forgets are followed by the reads
  the links name. Two runs, because schemathesis starts its chains only from the operations
  it deems likeliest to succeed (GET lists and POSTs): one from the review lists, one without
  them, where the writes, the episodes and forget start the chains. Besides the checks above,
  `ensure_resource_availability` (what a write answered can be read) and SGAM's own
  `forgotten_subject_reads_nothing` (schemathesis_hooks.py) in place of `use_after_free`: a
  forgotten subject's facts are an empty list, not a 404, by design.

Not run: `object_level_authorization` (one key per run; tenants and scopes are tested in
test_isolation.py).

SGAM_TEST_SCHEMATHESIS_EXAMPLES (default 5) bounds the examples per operation and phase, and
SGAM_TEST_SCHEMATHESIS_CHAINS (default 25) the chains per stateful run;
SGAM_TEST_SCHEMATHESIS_SEED (default 1) picks the run, so a failure in CI replays here
(schemathesis draws whether a chain uses a link's value with its own randomness, so chains
vary a little from run to run; the checks do not).
"""

from __future__ import annotations

import collections
import os
import resource
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.access.keys import create_key
from pipeline.db.store import Store
from pipeline.settings import Settings
from tests.integration.server_helpers import (
    Server,
    episode_body,
    fact_body,
    start_server,
    stop_server,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
ST = str(Path(sys.executable).with_name("st"))
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
    "missing_required_header",
    "ignored_auth",
    "unsupported_method",
    "allow_header_conformance",
)
NEGATIVE_CHECKS = (
    "not_a_server_error",
    "negative_data_rejection",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
)
CHAIN_CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
    "ensure_resource_availability",
    "forgotten_subject_reads_nothing",
)
# The operations schemathesis starts chains from when they are there (GET lists, POSTs whose
# inputs it believes come from nowhere else): without them, the writes start the chains.
REVIEW_ROOTS = ("list_candidates", "list_quarantine", "confirm", "promote_fact")
EXAMPLES = os.environ.get("SGAM_TEST_SCHEMATHESIS_EXAMPLES", "5")
CHAINS = os.environ.get("SGAM_TEST_SCHEMATHESIS_CHAINS", "25")
SEED = os.environ.get("SGAM_TEST_SCHEMATHESIS_SEED", "1")


@pytest.fixture(scope="module")
def server(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The shared server's settings, with batches of at most 20 episodes (the document says
    so): the edge case of a full batch is processed inline within the request timeout."""
    started = start_server(api_database, tmp_path_factory.mktemp("st"), SGAM_API_MAX_BATCH="20")
    yield started
    stop_server(started)


@dataclass
class Run:
    returncode: int
    report: str
    calls: list[tuple[str, str, float]]  # operation, status, seconds

    def statuses(self, operation: str | None = None) -> collections.Counter[str]:
        return collections.Counter(
            status for called, status, _ in self.calls if operation in (None, called)
        )


def _document(server: Server, tmp_path: Path) -> Path:
    """The server's OpenAPI document as a file: fetched here with a long timeout, since
    schemathesis gives a document's URL 10 seconds, and the server builds the document on its
    first request (a CI run on a loaded machine once took longer)."""
    document = tmp_path / "openapi.json"
    with urllib.request.urlopen(f"{server.url}/openapi.json", timeout=120) as answer:
        document.write_bytes(answer.read())
    return document


def schemathesis(server: Server, tenant: str, tmp_path: Path, *options: str, **hooks: str) -> Run:
    """`st run` against the server as the tenant's admin, with `options` (and `hooks`'
    settings in its environment); its figures are printed (in the test's output with -s or
    on failure)."""
    tmp_path.mkdir(exist_ok=True)
    calls = tmp_path / "calls.tsv"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.integration.api.schemathesis_hooks",
        "SGAM_DATABASE_URL": server.database_url,
        "SGAM_SCHEMATHESIS_TENANT": tenant,
        "SGAM_SCHEMATHESIS_CALLS": str(calls),
        "PYTHONPATH": str(ROOT),
        **hooks,
    }
    command = [
        ST,
        "--no-color",
        "--config-file",
        str(HERE / "schemathesis.toml"),
        "run",
        str(_document(server, tmp_path)),
        "--url",
        server.url,
        *options,
        "--seed",
        SEED,
        "--workers",
        "2",
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
    ]
    started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
    seconds = time.monotonic() - started
    spent = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = spent.ru_utime + spent.ru_stime - cpu.ru_utime - cpu.ru_stime
    lines = calls.read_text().splitlines() if calls.exists() else []
    answered = [
        (operation, status, float(waited))
        for operation, status, waited in (line.split("\t") for line in lines)
    ]
    done = Run(run.returncode, run.stdout[-12000:] + run.stderr[-3000:] + server.logs(), answered)
    print(
        f"schemathesis {' '.join(options[:4])}: "
        f"{len({operation for operation, _, _ in done.calls})} operations, "
        f"{len(done.calls)} requests in {seconds:.0f} s ({cpu_seconds:.0f} s of the "
        f"generator's CPU, {sum(s for _, _, s in done.calls):.0f} s waiting for answers, "
        f"load {os.getloadavg()[0]:.1f}); statuses {dict(sorted(done.statuses().items()))}"
    )
    return done


def test_the_server_keeps_to_its_openapi_document(
    server: Server, tenant: str, tmp_path: Path
) -> None:
    run = schemathesis(
        server,
        tenant,
        tmp_path,
        "--mode",
        "positive",
        "--phases",
        "examples,coverage,fuzzing",
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        EXAMPLES,
    )
    by_operation = collections.Counter(operation for operation, _, _ in run.calls)
    ok = {operation for operation, status, _ in run.calls if status.startswith("2")}

    assert run.returncode == 0, run.report
    assert len(by_operation) >= 24  # every operation of the document was called
    assert run.statuses()["401"] < len(run.calls) / 4, run.statuses()  # the run's key worked
    # Answers that are not refusals, from most operations: the run reached the pipeline.
    assert len(ok) >= 18, sorted(set(by_operation) - ok)


def test_the_server_refuses_what_its_document_forbids(
    server: Server, tenant: str, tmp_path: Path
) -> None:
    """Before, the server also read forms the document leaves out ("yes" for a flag, " 5" or
    "+5" for an integer, a timestamp without seconds or with a space for `T`, "42" for a
    number, "Dog" for the enum value "dog", JSON text for a JSON value) and ignored query
    parameters it does not list; now it refuses them, and a document-breaking request is
    never taken."""
    run = schemathesis(
        server,
        tenant,
        tmp_path,
        "--mode",
        "negative",
        "--phases",
        "coverage,fuzzing",
        "--checks",
        ",".join(NEGATIVE_CHECKS),
        "--max-examples",
        EXAMPLES,
    )
    refused = {operation for operation, status, _ in run.calls if status in ("400", "422")}

    assert run.returncode == 0, run.report
    assert len(refused) >= 18, refused  # the broken inputs reached the validators


def seed(server: Server, tenant: str, subjects: int = 6) -> None:
    """Buffered candidates (a contact channel and an answer style each) and a quarantined
    fact per subject, for the review chains to act on."""
    store = Store(Settings(database_url=server.database_url))
    try:
        secret = create_key(store, {"tenant_id": tenant, "role": "admin"})[1]
    finally:
        store.dispose()
    with server.client(secret) as api:
        for n in range(subjects):
            subject = f"seeded-{n}"
            batch = [
                episode_body("please contact me by email", subject=subject, session_id="a"),
                episode_body("I prefer concise answers", subject=subject, session_id="b"),
            ]
            assert api.post("/v1/episodes", json=batch).status_code in (200, 202)
            held_back = fact_body(subject=subject, trust="untrusted", source_episode_id="tool-1")
            assert api.put("/v1/facts", json=held_back).status_code == 201
        assert len(api.get("/v1/candidates").json()) == 2 * subjects
        assert len(api.get("/v1/quarantine").json()) == subjects


def test_chains_of_calls_reach_real_ids_and_reads_follow_writes(
    server: Server, tenant: str, tmp_path: Path
) -> None:
    """Before, confirm, reject, promote, dismiss and retry mostly answered 404 (no link led to
    a real id), and no read followed a write or a forget."""
    seed(server, tenant)
    chain = ("--mode", "positive", "--phases", "stateful", "--checks", ",".join(CHAIN_CHECKS))
    whole = {"SGAM_SCHEMATHESIS_WHOLE_LISTS": "1"}  # list every subject's (the seeded ones)
    review = schemathesis(
        server, tenant, tmp_path / "review", *chain, "--max-examples", CHAINS, **whole
    )
    excluded = [option for root in REVIEW_ROOTS for option in ("--exclude-operation-id", root)]
    writes = schemathesis(
        server, tenant, tmp_path / "writes", *chain, "--max-examples", CHAINS, *excluded
    )

    assert review.returncode == 0, review.report
    assert writes.returncode == 0, writes.report
    # A real id: taken (200), already taken (409) or held at another version (412), not 404.
    taken = collections.Counter[str]()
    for operation, path in (
        ("confirm", "/v1/candidates/{candidate_id}/confirm"),
        ("reject", "/v1/candidates/{candidate_id}/reject"),
        ("promote", "/v1/facts/{fact_id}/promote"),
        ("dismiss", "/v1/facts/{fact_id}/dismiss"),
    ):
        answered = review.statuses(f"POST {path}")
        assert answered["200"] + answered["409"] + answered["412"], (operation, answered)
        taken[operation] = answered["200"]
    assert taken["confirm"] + taken["reject"], taken
    assert taken["promote"] + taken["dismiss"], taken
    retried = writes.statuses("POST /v1/episodes/{episode_id}/retry")
    assert retried["409"], retried  # a real episode that had not failed (not-failed)
    shown = writes.statuses("GET /v1/episodes/{episode_id}")
    assert shown["200"], shown
    assert writes.statuses("DELETE /v1/subjects/{subject}")["200"], writes.statuses()
    assert writes.statuses("GET /v1/subjects/{subject}/facts")["200"], writes.statuses()
