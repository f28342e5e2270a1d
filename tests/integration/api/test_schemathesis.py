"""The OpenAPI document describes what the server accepts and answers: schemathesis generates
requests from `/openapi.json` of a real `sgam serve` on PostgreSQL — examples at the edges of
each schema (its coverage phase), random ones (fuzzing) and chains of calls (stateful) — a
bounded number per operation, and checks every answer.

The checks (CHECKS): no 5xx; every status, content type, header and body is one the document
declares for the operation; a request valid by the document is not refused (only the statuses
schemathesis.toml allows: 404, 409, 412 and a revoked run key's 401 depend on state no schema
knows); a request without a key is refused; a method the path lacks is 405 with `Allow`.
Not run: `negative_data_rejection` (the server also reads a few forms the document leaves
out, e.g. "yes" for true or a date alone for a timestamp), the stateful resource checks
(`use_after_free`, `ensure_resource_availability`: a forgotten subject's facts are an empty
list, not a 404, by design) and `object_level_authorization` (one key per run; tenants and
scopes are tested in test_isolation.py).

SGAM_TEST_SCHEMATHESIS_EXAMPLES (default 5) bounds the examples per operation and phase;
SGAM_TEST_SCHEMATHESIS_SEED (default 1) picks the run, so a failure in CI replays here.
"""

from __future__ import annotations

import collections
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server_helpers import Server, start_server, stop_server

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
EXAMPLES = os.environ.get("SGAM_TEST_SCHEMATHESIS_EXAMPLES", "5")
SEED = os.environ.get("SGAM_TEST_SCHEMATHESIS_SEED", "1")


@pytest.fixture(scope="module")
def server(api_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The shared server's settings, with batches of at most 20 episodes (the document says
    so): the edge case of a full batch is processed inline within the request timeout."""
    started = start_server(api_database, tmp_path_factory.mktemp("st"), SGAM_API_MAX_BATCH="20")
    yield started
    stop_server(started)


def test_the_server_keeps_to_its_openapi_document(
    server: Server, tenant: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.tsv"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.integration.api.schemathesis_hooks",
        "SGAM_DATABASE_URL": server.database_url,
        "SGAM_SCHEMATHESIS_TENANT": tenant,
        "SGAM_SCHEMATHESIS_CALLS": str(calls),
        "PYTHONPATH": str(ROOT),
    }
    command = [
        ST,
        "--no-color",
        "--config-file",
        str(HERE / "schemathesis.toml"),
        "run",
        f"{server.url}/openapi.json",
        "--checks",
        ",".join(CHECKS),
        "--mode",
        "positive",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        EXAMPLES,
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
    report = run.stdout[-12000:] + run.stderr[-3000:]
    lines = calls.read_text().splitlines() if calls.exists() else []
    answered = [line.split("\t") for line in lines]
    by_operation = collections.Counter(operation for operation, _, _ in answered)
    ok = {operation for operation, status, _ in answered if status.startswith("2")}
    statuses = collections.Counter(status for _, status, _ in answered)
    print(  # the figures, in the test's output (-s or on failure)
        f"schemathesis: {len(by_operation)} operations, {len(answered)} requests in "
        f"{seconds:.0f} s ({cpu_seconds:.0f} s of the generator's CPU, "
        f"{sum(float(s) for _, _, s in answered):.0f} s waiting for answers); "
        f"statuses {dict(sorted(statuses.items()))}"
    )

    assert run.returncode == 0, report + server.logs()
    assert len(by_operation) >= 24  # every operation of the document was called
    assert statuses["401"] < len(answered) / 4, statuses  # the run's key worked
    # Answers that are not refusals, from most operations: the run reached the pipeline.
    assert len(ok) >= 18, sorted(set(by_operation) - ok)
