"""The HTTP service under bounded load from N concurrent loopback clients, and the same
operations through the Python API in the same run: the HTTP overhead.

    .venv/bin/python bench/api.py [--clients 1 8 32] [--seconds 5] [--server-workers 1]
                                  [--rate R] [--operations ...] [--url URL] [--json FILE]

GET facts is also measured against two references in the same run, and the ratios printed at
the end: the same reads in-process (mode `python`) and a bare Starlette endpoint on the same
uvicorn serving the bytes of a real answer (mode `starlette`, bench/bare_starlette.py, started
on --reference-port). Targets: HTTP ≥ 0.6× in-process, ≥ 0.5× the bare endpoint.

The MCP endpoint (`/mcp`, streamable HTTP) is measured beside REST for GET facts and POST
remember: each request is the JSON-RPC `tools/call` of `get_facts` or `remember` that an MCP
client sends to the stateless endpoint (one POST, JSON answer), on the same kind of
connection, so the two figures differ only by the door.

Operations: GET facts (a subject's current facts), GET context (with a query), POST remember
(an explicit statement through the rules extractor, a new fact each time) and POST episodes
(batches of 100, stored and queued for the workers: a broker on Redis (--redis, database 11) that no
worker drains). Each client is a thread with one keep-alive connection (http.client, which
costs the client less than httpx) that sends its next request as soon as the last one is
answered (closed loop: the service's capacity), or with --rate offers R requests a second
(bounded load: the latency a backend sees below capacity), for --seconds per operation and
client count. Reported: requests/s, p50/p99 of the
latency seen by the client, and errors (any status but 2xx). The Python API runs the same
operations in the same way (threads calling `pipeline.get` etc. on one Store).

Targets on a 2-core machine: GET facts p99 <= 10 ms at 8 clients, GET context p99 <= 15 ms,
POST remember p99 <= 40 ms, zero errors. The database named by --url (its name must contain
"bench") is dropped and recreated.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script, this folder is first on sys.path; `bench.pipeline_flow` needs the root too.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402
from api_load import cpu_seconds, load  # noqa: E402
from bare_starlette import ratios, start_reference  # noqa: E402
from environment import describe, machine_load, ready, use_support_catalog  # noqa: E402

import pipeline  # noqa: E402
from bench.pipeline_flow import fresh_database  # noqa: E402
from pipeline.db.store import Store, open_store  # noqa: E402
from pipeline.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_api"
REDIS = "redis://127.0.0.1:6379/11"
TENANT = "bench"
SUBJECTS = [f"user{i:04d}" for i in range(500)]
ATTRIBUTES = {
    "home_city": "Utrecht",
    "employer": "Globex",
    "account_plan": "pro",
    "passport_deadline": "2026-06-30",
    "answer_style": "concise",
    "shipping_address": "9 Harbour Road, Leith",
}
OPERATIONS = ["GET facts", "GET context", "POST remember", "POST episodes"]
MCP_VERSIONS = {"mcp": "2026-07-28", "mcp-2025": "2025-06-18"}
MODES = ["http", *MCP_VERSIONS, "python", "starlette"]
Call = Callable[[int, random.Random], tuple[bool, int]]  # (ok, items) for one request


def seed(store: Store) -> None:
    """Every subject with the facts a chat backend would read back."""
    with store.begin() as unit:
        for subject in SUBJECTS:
            for attribute, value in ATTRIBUTES.items():
                pipeline.write_fact(
                    unit,
                    {
                        "tenant_id": TENANT,
                        "subject": subject,
                        "attribute": attribute,
                        "value": value,
                        "valid_from": "2026-01-01T00:00:00Z",
                        "source_episode_id": "seed",
                    },
                )
    store.analyze()


def seeded(url: str, redis_url: str) -> tuple[Store, str]:
    """A fresh benchmark database with every subject's facts, an empty Redis db for the rate
    limits, and a writer key: the store (open) and the key's secret."""
    fresh_database(url)
    redis.Redis.from_url(redis_url).flushdb()
    store = open_store(Settings(database_url=url, broker_url=redis_url))
    seed(store)
    return store, pipeline.create_key(store, {"tenant_id": TENANT, "role": "writer"})[1]


def episodes(rng: random.Random, count: int) -> list[dict[str, Any]]:
    return [
        {
            "subject": rng.choice(SUBJECTS),
            "session_id": f"s{rng.randrange(10**9)}",
            "occurred_at": "2026-06-01T10:00:00Z",
            "text": f"thanks, my budget this month is {rng.randrange(10**6)} dollars",
        }
        for _ in range(count)
    ]


def remember_body(rng: random.Random) -> dict[str, Any]:
    return {"subject": rng.choice(SUBJECTS), "text": f"my monthly budget is {rng.randrange(10**9)}"}


class HttpClient:
    """One keep-alive connection; a thread of its own. A failed request (a refused or dropped
    connection) is an error, and the next request opens a new connection."""

    def __init__(self, port: int, secret: str) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
        self.failures: list[str] = []
        self.answer = b""

    def send(self, method: str, path: str, body: Any = None) -> bool:
        data = json.dumps(body).encode() if body is not None else None
        try:
            self.connection.request(method, path, body=data, headers=self.headers)
            response = self.connection.getresponse()
            self.answer = response.read()
        except (OSError, http.client.HTTPException) as error:
            self.failures.append(f"{type(error).__name__}: {error}")
            self.connection.close()
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            return False
        if not 200 <= response.status < 300:
            self.failures.append(f"HTTP {response.status}")
        return 200 <= response.status < 300

    def close(self) -> None:
        self.connection.close()


def http_calls(client: HttpClient) -> dict[str, Call]:
    def facts(_: int, rng: random.Random) -> tuple[bool, int]:
        return client.send("GET", f"/v1/subjects/{rng.choice(SUBJECTS)}/facts"), 1

    def context(_: int, rng: random.Random) -> tuple[bool, int]:
        path = f"/v1/subjects/{rng.choice(SUBJECTS)}/context?query=where+do+I+live"
        return client.send("GET", path), 1

    def remember(_: int, rng: random.Random) -> tuple[bool, int]:
        return client.send("POST", "/v1/remember", remember_body(rng)), 1

    def ingest(_: int, rng: random.Random) -> tuple[bool, int]:
        return client.send("POST", "/v1/episodes", episodes(rng, 100)), 100

    return {
        "GET facts": facts,
        "GET context": context,
        "POST remember": remember,
        "POST episodes": ingest,
    }


class McpClient(HttpClient):
    """Tool calls as an MCP client sends them to the stateless `/mcp`: one JSON-RPC POST, in
    the protocol of `version` (2026-07-28, which the SDK's client negotiates by default, or a
    handshake-era one such as 2025-06-18, which older clients speak)."""

    def __init__(self, port: int, secret: str, version: str) -> None:
        super().__init__(port, secret)
        self.version = version
        self.headers |= {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": version,
        }
        self.calls = 0

    def call_tool(self, name: str, arguments: dict[str, Any]) -> bool:
        self.calls += 1
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if self.version >= "2026":  # each request carries its envelope and routing headers
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            self.headers |= {"Mcp-Method": "tools/call", "Mcp-Name": name}
        request = {"jsonrpc": "2.0", "id": self.calls, "method": "tools/call", "params": params}
        if not self.send("POST", "/mcp", request):
            return False
        # As for REST (whose answers are not parsed here either), only the outcome is read.
        if (
            not self.answer.startswith(b'{"jsonrpc":"2.0","id":')
            or b'"isError":true' in self.answer
        ):
            self.failures.append(f"tool error: {self.answer[:200]!r}")
            return False
        return True


def mcp_calls(client: McpClient) -> dict[str, Call]:
    def facts(_: int, rng: random.Random) -> tuple[bool, int]:
        return client.call_tool("get_facts", {"subject": rng.choice(SUBJECTS)}), 1

    def remember(_: int, rng: random.Random) -> tuple[bool, int]:
        return client.call_tool("remember", remember_body(rng)), 1

    return {"GET facts": facts, "POST remember": remember}


def python_calls(store: Store) -> dict[str, Call]:
    scope = {"tenant_id": TENANT}

    def facts(_: int, rng: random.Random) -> tuple[bool, int]:
        pipeline.get(store, scope | {"subject": rng.choice(SUBJECTS)})
        return True, 1

    def context(_: int, rng: random.Random) -> tuple[bool, int]:
        pipeline.assemble(
            store, scope | {"subject": rng.choice(SUBJECTS), "query": "where do I live"}
        )
        return True, 1

    def remember(_: int, rng: random.Random) -> tuple[bool, int]:
        pipeline.remember(store, scope | remember_body(rng))
        return True, 1

    def ingest(_: int, rng: random.Random) -> tuple[bool, int]:
        pipeline.ingest(store, [scope | episode for episode in episodes(rng, 100)])
        return True, 100

    return {
        "GET facts": facts,
        "GET context": context,
        "POST remember": remember,
        "POST episodes": ingest,
    }


def start_server(url: str, port: int, workers: int, redis_url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SGAM_DATABASE_URL": url,
        "SGAM_REDIS_URL": redis_url,
        "SGAM_BROKER_URL": redis_url,
        "SGAM_API_RATE_PER_S": "1000000",  # limited, so the bucket's Redis trip is measured
        "SGAM_API_RATE_BURST": "1000000",
    }
    command = [str(Path(sys.executable).with_name("sgam")), "serve", "--port", str(port)]
    command += ["--workers", str(workers), "--log-level", "warning"]
    server = subprocess.Popen(command, env=env, cwd=ROOT)
    return ready(server, port, timeout_s=180)  # a loaded machine starts it slowly


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--server-workers", type=int, default=1)
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument(
        "--reference-port", type=int, default=18482, help="the bare Starlette reference's port"
    )
    parser.add_argument(
        "--redis", default=REDIS, help="Redis for the rate limit and the broker (flushed)"
    )
    parser.add_argument(
        "--rate", type=float, default=0, help="requests/s each client offers (0: closed loop)"
    )
    parser.add_argument("--operations", nargs="+", default=OPERATIONS, choices=OPERATIONS)
    parser.add_argument(
        "--modes",
        nargs="+",
        default=MODES,
        choices=MODES,
        help="http: REST; mcp*: /mcp",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    use_support_catalog()
    store, secret = seeded(args.url, args.redis)
    # The conditions of the run go to stderr: stdout is one JSON object per run.
    environment = [*describe(args.url), f"{machine_load()} before"]
    print("\n".join(environment), file=sys.stderr)
    report: dict[str, Any] = {
        "environment": environment,
        "load_before": os.getloadavg(),
        "server_workers": args.server_workers,
        "runs": [],
    }
    server = start_server(args.url, args.port, args.server_workers, args.redis)
    reference = None
    try:
        if "starlette" in args.modes:
            probe = HttpClient(args.port, secret)
            probe.send("GET", f"/v1/subjects/{SUBJECTS[0]}/facts")  # every subject's is alike
            reference = start_reference(args.reference_port, probe.answer)
            probe.close()
        for clients in args.clients:
            python = python_calls(store)
            for name in args.operations:
                for mode in args.modes:
                    if mode in MCP_VERSIONS and name not in ("GET facts", "POST remember"):
                        continue  # the tools measured beside REST
                    if mode == "starlette" and name != "GET facts":
                        continue  # the reference serves GET facts' bytes only
                    # New connections for each run: an idle one would have been closed by
                    # the server's keep-alive timeout while the other mode ran.
                    http_clients = [
                        McpClient(args.port, secret, MCP_VERSIONS[mode])
                        if mode in MCP_VERSIONS
                        else HttpClient(
                            args.reference_port if mode == "starlette" else args.port, secret
                        )
                        for _ in range(clients)
                    ]
                    for client in http_clients if mode != "python" else []:
                        client.send("GET", "/healthz")  # connected before the clock starts
                    calls = [
                        python[name]
                        if mode == "python"
                        else mcp_calls(client)[name]
                        if isinstance(client, McpClient)
                        else http_calls(client)[name]
                        for client in http_clients
                    ]
                    # Whose CPU a request costs: the server's, the reference's, or (the
                    # Python API, no client threads running) this process's alone.
                    serving = reference if mode == "starlette" else server
                    clock: Callable[[], float] = (
                        time.process_time
                        if mode == "python" or serving is None
                        else functools.partial(cpu_seconds, serving.pid)
                    )
                    cpu_before = clock()
                    figures = load(calls, args.seconds, args.rate)
                    spent = clock() - cpu_before
                    figures |= {
                        "cpu_ms_per_request": round(1000 * spent / max(1, figures["requests"]), 3),
                        "operation": name,
                        "clients": clients,
                        "mode": mode,
                        "rate_per_client": args.rate or None,
                        "load": os.getloadavg()[0],
                    }
                    failures = [f for client in http_clients for f in client.failures]
                    if failures:
                        figures["first_failures"] = sorted(set(failures))[:3]
                    for client in http_clients:
                        client.close()
                    report["runs"].append(figures)
                    print(json.dumps(figures), flush=True)
    finally:
        for process in (server, reference):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
        store.dispose()
    report["ratios"] = ratios(report["runs"])
    print("\n".join(report["ratios"]), file=sys.stderr)
    report["load_after"] = os.getloadavg()
    print(f"{machine_load()} after", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
