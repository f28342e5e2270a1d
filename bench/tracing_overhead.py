"""What traces cost: the pipeline's episodes/s and the HTTP API's latency with tracing off, on
with every trace sampled, and on with one in ten (OTEL_TRACES_SAMPLER=parentbased_traceidratio,
OTEL_TRACES_SAMPLER_ARG=0.1), as ratios against off measured in the same run.

    .venv/bin/python bench/tracing_overhead.py [--rounds 3] [--episodes 400] [--requests 300]

The spans go over OTLP (http/protobuf, the exporter SGAM ships, batched) to a sink in this
process that reads each request and answers 200: the exporter's whole cost is in the measured
processes, a collector's is not.

*Pipeline*: LoCoMo turns (read where the data lies) through `pipeline.ingest` in inline mode —
the worker's processing stage (claim, rules, policy, ledger, decision log) in the ingesting
process — on PostgreSQL, in calls of `--batch` episodes, each call the root of one trace (as
one request or one wake-up is). Each mode runs in a fresh process of its own (a process sets
its tracing up once), `--rounds` times, the modes' order rotated each round so a drift in the
machine's load spreads over all three; the figure is the median round.

*API*: three `sgam serve` processes, one per mode, on the same database; one client sends each
request to the three in turn (remember, a read of facts, one episode ingested inline), so the
three see the same machine at the same moments; p50/p99 per mode and operation.

The database named by --url (must contain "bench") is dropped and recreated.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from environment import describe, machine_load, ready, use_support_catalog
from figures import percentile, print_table
from pipeline_flow import LOCOMO, locomo_lines
from scratch_databases import recreate

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_tracing"
DEFAULT_REDIS = "redis://127.0.0.1:6379/9"
MODES = ("off", "on 100%", "on 10%")
OPERATIONS = ("POST /v1/remember", "GET facts", "POST /v1/episodes")


def mode_env(mode: str, endpoint: str) -> dict[str, str]:
    """The environment of a process in `mode`; `off` has no OTEL_* or SGAM_OTEL at all."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SGAM_OTEL"))}
    if mode == "off":
        return base
    sampler = {"OTEL_TRACES_SAMPLER": "parentbased_always_on"}
    if mode == "on 10%":
        sampler = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}
        sampler["OTEL_TRACES_SAMPLER_ARG"] = "0.1"
    return base | {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint} | sampler


class Sink:
    """Takes OTLP export requests and throws them away, counting them."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server protocol)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                sink.requests += 1
                sink.bytes += len(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def pipeline_child(url: str, tenant: str, locomo: Path, count: int, batch: int) -> None:
    """Run in a fresh process: ingest the first `count` LoCoMo turns under `tenant`."""
    import pipeline
    from pipeline.db.store import open_store
    from pipeline.observe import tracing
    from pipeline.settings import load_settings

    settings = load_settings(database_url=url)
    tracing.setup_tracing(settings, "sgam-bench")
    lines = locomo_lines(locomo)[:count]
    for line in lines:
        line["tenant_id"] = f"{tenant}-{line['tenant_id']}"
    store = open_store(settings)
    pipeline.ingest(store, lines[:batch])  # warm: compiled rules, prepared statements
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(batch, len(lines), batch):
        pipeline.ingest(store, lines[start : start + batch])
    tracing.flush()  # what was batched goes out: its encoding is part of the cost
    elapsed, spent = time.perf_counter() - started, time.process_time() - cpu
    tracing.shutdown()
    store.dispose()
    timed = len(lines) - batch
    print(json.dumps({"episodes_per_s": timed / elapsed, "cpu_ms": spent * 1000 / timed}))


def run_pipeline(
    args: argparse.Namespace, sink: Sink
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(args.rounds):
        order = MODES[round_ % 3 :] + MODES[: round_ % 3]
        for mode in order:
            tenant = f"r{round_}-{MODES.index(mode)}"
            command = [sys.executable, __file__, "--pipeline-child", tenant, "--url", args.url]
            command += ["--episodes", str(args.episodes), "--batch", str(args.batch)]
            command += ["--locomo", str(args.locomo)]
            done = subprocess.run(
                command,
                env=mode_env(mode, sink.endpoint),
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            rate, per_episode = figures["episodes_per_s"], figures["cpu_ms"]
            rates[mode].append(rate)
            cpu[mode].append(per_episode)
            print(
                f"  round {round_ + 1} {mode:8} {rate:7.1f} episodes/s, "
                f"{per_episode:.2f} ms CPU an episode  ({machine_load()})"
            )
    return rates, cpu


def start_server(
    url: str, port: int, redis_url: str, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    environ = env | {
        "SGAM_DATABASE_URL": url,
        "SGAM_REDIS_URL": redis_url,
        "SGAM_API_RATE_PER_S": "1000000",
        "SGAM_API_RATE_BURST": "1000000",
    }
    environ.pop("SGAM_BROKER_URL", None)  # inline: an ingested episode is processed in the request
    command = [str(Path(sys.executable).with_name("sgam")), "serve", "--port", str(port)]
    server = subprocess.Popen([*command, "--log-level", "warning"], env=environ, cwd=ROOT)
    return ready(server, port, timeout_s=120)


class Client:
    def __init__(self, port: int, secret: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def send(self, method: str, path: str, body: Any = None) -> float:
        data = json.dumps(body).encode() if body is not None else None
        started = time.perf_counter()
        self.connection.request(method, path, body=data, headers=self.headers)
        response = self.connection.getresponse()
        response.read()
        took = (time.perf_counter() - started) * 1000
        if not 200 <= response.status < 300:
            raise SystemExit(f"{method} {path}: HTTP {response.status}")
        return took


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_api(
    args: argparse.Namespace, sink: Sink
) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    from pipeline.access.keys import create_key
    from pipeline.db.store import open_store
    from pipeline.settings import Settings

    store = open_store(Settings(database_url=args.url))
    secrets = {
        mode: create_key(store, {"tenant_id": f"api-{i}", "role": "writer"})[1]
        for i, mode in enumerate(MODES)
    }
    store.dispose()
    servers = {
        mode: start_server(args.url, args.port + i, args.redis, mode_env(mode, sink.endpoint))
        for i, mode in enumerate(MODES)
    }
    latencies: dict[str, dict[str, list[float]]] = {
        mode: {operation: [] for operation in OPERATIONS} for mode in MODES
    }
    cpu: dict[str, float] = {}
    try:
        clients = {mode: Client(args.port + i, secrets[mode]) for i, mode in enumerate(MODES)}
        for n in range(args.requests + args.warmup):
            if n == args.warmup:
                cpu = {mode: cpu_seconds(servers[mode].pid) for mode in MODES}
            order = MODES[n % 3 :] + MODES[: n % 3]
            for mode in order:
                client = clients[mode]
                subject = f"user-{n % 50}"
                timed = [
                    client.send(
                        "POST",
                        "/v1/remember",
                        {"subject": subject, "text": f"my monthly budget is {n}"},
                    ),
                    client.send("GET", f"/v1/subjects/{subject}/facts"),
                    client.send(
                        "POST",
                        "/v1/episodes",
                        [
                            {
                                "subject": subject,
                                "session_id": f"s{n}",
                                "occurred_at": "2026-06-01T10:00:00Z",
                                "text": f"thanks, my budget this month is {n} dollars",
                            }
                        ],
                    ),
                ]
                if n >= args.warmup:
                    for operation, took in zip(OPERATIONS, timed, strict=True):
                        latencies[mode][operation].append(took)
        time.sleep(6)  # the last batch of spans leaves (OTEL_BSP_SCHEDULE_DELAY is 5 s)
        cpu = {
            mode: (cpu_seconds(servers[mode].pid) - cpu[mode]) * 1000 / args.requests
            for mode in MODES
        }
    finally:
        for server in servers.values():
            server.terminate()
        for server in servers.values():
            server.wait(timeout=30)
    return latencies, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--redis", default=DEFAULT_REDIS, help="the servers' rate-limit Redis")
    parser.add_argument("--rounds", type=int, default=3, help="pipeline runs per mode")
    parser.add_argument("--episodes", type=int, default=400, help="episodes per pipeline run")
    parser.add_argument("--batch", type=int, default=4, help="episodes per ingest call (trace)")
    parser.add_argument("--requests", type=int, default=300, help="timed API rounds per mode")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--port", type=int, default=18560)
    parser.add_argument("--skip-api", action="store_true")
    parser.add_argument("--skip-pipeline", action="store_true")
    parser.add_argument("--pipeline-child", metavar="TENANT", help=argparse.SUPPRESS)
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="locomo10.json")
    args = parser.parse_args()
    use_support_catalog()
    if args.pipeline_child:
        pipeline_child(args.url, args.pipeline_child, args.locomo, args.episodes, args.batch)
        return

    recreate(args.url)
    for line in describe(args.url):
        print(line)
    print(f"before: {machine_load()}")
    from pipeline.db.store import Store
    from pipeline.settings import Settings

    migrated = Store(Settings(database_url=args.url))
    migrated.upgrade()
    migrated.dispose()
    sink = Sink()

    if not args.skip_pipeline:
        print(f"\npipeline, inline, {args.episodes} LoCoMo turns a run, {args.batch} per trace:")
        rates, cpu = run_pipeline(args, sink)
        off, off_cpu = statistics.median(rates["off"]), statistics.median(cpu["off"])
        rows = []
        for mode in MODES:
            median, cost = statistics.median(rates[mode]), statistics.median(cpu[mode])
            spread = f"{min(rates[mode]):.0f}-{max(rates[mode]):.0f}"
            rows.append(
                [
                    mode,
                    f"{median:.1f}",
                    spread,
                    f"{median / off:.3f}",
                    f"{cost:.2f}",
                    f"{cost / off_cpu:.3f}",
                ]
            )
        headers = ["mode", "episodes/s", "range", "vs off", "CPU ms/episode", "vs off"]
        print_table(headers, rows)

    if not args.skip_api:
        print(f"\nAPI, one client, {args.requests} requests per operation and mode, interleaved:")
        latencies, server_cpu = run_api(args, sink)
        rows = []
        for operation in OPERATIONS:
            base = percentile(latencies["off"][operation], 0.99)
            for mode in MODES:
                samples = latencies[mode][operation]
                p50, p99 = percentile(samples, 0.50), percentile(samples, 0.99)
                rows.append(
                    [f"{operation}, {mode}", f"{p50:.2f}", f"{p99:.2f}", f"{p99 / base:.3f}"]
                )
        print_table(["operation, mode", "p50 ms", "p99 ms", "p99 vs off"], rows)
        rows = [
            [mode, f"{server_cpu[mode]:.2f}", f"{server_cpu[mode] / server_cpu['off']:.3f}"]
            for mode in MODES
        ]
        print_table(["server, mode", "CPU ms per 3 requests", "vs off"], rows)
    print(f"\nspans exported: {sink.requests} requests, {sink.bytes / 1e6:.1f} MB")
    print(f"after: {machine_load()}")


if __name__ == "__main__":
    main()
