"""Where one `sgam serve` process spends its CPU on GET facts, and what each request costs in
round trips: the profile behind bench/README.md's API table.

    .venv/bin/python bench/api_profile.py [--seconds 15] [--clients 8] [--url URL]
                                          [--redis URL] [--port 18481] [--raw FILE]

The server of bench/api.py (same database, seed, key and rate limit on) answers GET facts from
`--clients` closed-loop clients while py-spy (`pip install py-spy`, not a dependency) samples
every thread of the server process for `--seconds`. Each sample is charged to the innermost
frame that belongs to a known part (the ORM, psycopg, pydantic, FastAPI's dependencies...), so
the table is self time by part, as a share of the samples on a CPU (idle threads are not
sampled). Then, in this process, the same requests through the same application (Starlette's
TestClient) count the SQL statements per request (SQLAlchemy's cursor events) and the Redis
commands per request (INFO commandstats before and after).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402
from api import DEFAULT_URL, REDIS, SUBJECTS, HttpClient, seeded, start_server  # noqa: E402
from environment import describe, machine_load, use_support_catalog  # noqa: E402
from sqlalchemy import event  # noqa: E402

from pipeline.db.store import open_store  # noqa: E402
from pipeline.settings import Settings  # noqa: E402

# (part, pattern on "function (file)"), innermost match wins; first pattern that matches.
PARTS = [
    ("psycopg (driver, wire)", r"\(psycopg"),
    ("SQLAlchemy (Core execute, result rows, pool)", r"\(sqlalchemy/"),
    ("pydantic (validation, serialisation)", r"\(pydantic"),
    ("JSON encoding (json module)", r"\(json/"),
    ("rate limit (redis client)", r"\(redis/"),
    ("metrics (prometheus_client)", r"\(prometheus_client/"),
    ("tracing/memory spans (opentelemetry, observe)", r"\(opentelemetry/|\(pipeline/observe/"),
    (
        "SGAM read path (pipeline/read, schemas, validation)",
        r"\(pipeline/read/|\(pipeline/validation|\(schemas/",
    ),
    ("SGAM API (middleware, handlers)", r"\(pipeline/api/"),
    ("FastAPI (dependencies, routing, serialize_response)", r"\(fastapi/"),
    ("Starlette (routing, middleware, responses)", r"\(starlette/"),
    (
        "thread pool hand-off (anyio, threading, queue)",
        r"\(anyio/|\(threading\.py|\(concurrent/|\(queue\.py",
    ),
    ("uvicorn + httptools (HTTP/1.1)", r"\(uvicorn/|httptools"),
    ("asyncio/uvloop event loop", r"\(asyncio/|uvloop"),
]
# Functions whose time is also shown inclusive (callees counted): where a request's CPU goes.
INCLUSIVE = [
    ("authentication + rate limit middleware", r"^Authenticate\.__call__ \(pipeline/api/access"),
    ("  of which the token bucket (Redis EVALSHA)", r"^RateLimiter\._spend "),
    ("metrics middleware (own work)", r"^Metrics\.observe |^template "),
    ("FastAPI dependencies (auth role, scope, query checks)", r"^solve_dependencies "),
    ("the handler in the thread pool (get_facts)", r"^get_facts \(pipeline/api/routes"),
    ("  of which pipeline.get: parse + SELECT + rows to Fact", r"^get \(pipeline/read/facts"),
    ("  of which the SELECT (SQLAlchemy + psycopg)", r"^Connection\.execute \(sqlalchemy"),
    ("FastAPI serialize_response (validate + dump the answer)", r"^serialize_response "),
    ("the JSON answer written (dump_json, Response.render)", r"^dump_json |Response\.render "),
]
FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>.*?)(?::\d+)?\)$")


def classify(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for part, pattern in PARTS:
            if re.search(pattern, frame):
                return part
    return "other (interpreter, stdlib)"


def sample_server(pid: int, seconds: float, raw: Path) -> collections.Counter[str]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    command = [spy, "record", "--pid", str(pid), "--duration", str(int(seconds))]
    # --gil: only the thread holding the GIL is sampled, so a sample is Python at work, never
    # a thread waiting for the database, Redis or a request.
    command += ["--rate", "200", "--format", "raw", "--output", str(raw), "--gil"]
    subprocess.run(command, check=True, capture_output=True)
    parts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            parts[classify(stack)] += int(count)
            frames = stack.split(";")
            for name, pattern in INCLUSIVE:
                if any(re.search(pattern, frame) for frame in frames):
                    parts["inclusive: " + name] += int(count)
    return parts


def statements_and_commands(url: str, redis_url: str, secret: str, requests: int) -> str:
    """SQL statements and Redis commands per GET facts, through the application in-process."""
    from starlette.testclient import TestClient

    from pipeline.api.app import create_app

    settings = Settings(
        database_url=url, redis_url=redis_url, api_rate_per_s=1e6, api_rate_burst=1_000_000
    )
    store = open_store(settings)
    statements: list[str] = []
    event.listen(
        store.engine,
        "before_cursor_execute",
        lambda *args: statements.append(args[2].split()[0]),
    )
    client_redis = redis.Redis.from_url(redis_url)
    headers = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_app(settings, store)) as client:
        client.get(f"/v1/subjects/{SUBJECTS[0]}/facts", headers=headers)  # the key looked up
        statements.clear()
        before = client_redis.info("commandstats")
        for index in range(requests):
            answer = client.get(f"/v1/subjects/{SUBJECTS[index % 50]}/facts", headers=headers)
            assert answer.status_code == 200, answer.text
        after = client_redis.info("commandstats")
    calls = {
        name: after[name]["calls"] - before.get(name, {"calls": 0})["calls"]
        for name in after
        if name != "cmdstat_info"
    }
    made = {name.removeprefix("cmdstat_"): n / requests for name, n in calls.items() if n}
    kinds = collections.Counter(statements)
    return (
        f"SQL statements per request: {len(statements) / requests:.2f} "
        f"({', '.join(f'{k} {v / requests:.2f}' for k, v in kinds.items())}); "
        f"Redis commands per request: {', '.join(f'{k} {v:.2f}' for k, v in made.items())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--redis", default=REDIS)
    parser.add_argument("--port", type=int, default=18481)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    args = parser.parse_args()
    use_support_catalog()
    store, secret = seeded(args.url, args.redis)
    store.dispose()
    print("\n".join([*describe(args.url), f"{machine_load()} before"]))
    server = start_server(args.url, args.port, 1, args.redis)
    stop = threading.Event()
    served = [0]

    def client(index: int) -> None:
        http = HttpClient(args.port, secret)
        while not stop.is_set():
            http.send("GET", f"/v1/subjects/{SUBJECTS[(index * 37 + served[0]) % 500]}/facts")
            served[0] += 1
        http.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(1)  # warm
        raw = args.raw or Path(tempfile.mkstemp(suffix=".txt")[1])
        began, before = time.perf_counter(), served[0]
        parts = sample_server(server.pid, args.seconds, raw)
        rate = (served[0] - before) / (time.perf_counter() - began)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        server.terminate()
        server.wait(timeout=30)
    total = sum(n for part, n in parts.items() if not part.startswith("inclusive: "))
    print(f"GET facts, {args.clients} clients, {rate:.0f} requests/s while sampled")
    print(f"{total} samples holding the GIL at 200/s over {args.seconds:g} s")
    print("| part (self time, innermost frame) | share of the server's Python CPU |\n|---|---|")
    for part, samples in parts.most_common():
        if not part.startswith("inclusive: "):
            print(f"| {part} | {100 * samples / total:.1f} % |")
    print("| function (inclusive) | share |\n|---|---|")
    for name, _ in INCLUSIVE:
        print(f"| {name} | {100 * parts['inclusive: ' + name] / total:.1f} % |")
    print(statements_and_commands(args.url, args.redis, secret, 200))
    print(f"{machine_load()} after")
    if args.raw is None:
        os.unlink(raw)


if __name__ == "__main__":
    main()
