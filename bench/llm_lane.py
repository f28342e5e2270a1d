"""The model lane at scale: LoCoMo turns as episodes through intake, Celery with one worker of
two processes (`--concurrency 2`), the model extractor against the stub OpenAI-compatible
server (bench/stub_llm.py, its own process, answering a valid empty extraction after a set
latency), the policy stage and PostgreSQL.

    .venv/bin/python bench/llm_lane.py [--episodes 5000] [--latencies 0 0.4 2]
        [--slow 400] [--rpm-episodes 900] [--no-analyze] [--baseline REV]

Per run: episodes/s end to end (first intake to last episode settled), the stub's peak of
requests in flight, the worker's CPU per episode (every process of the worker, from
/proc, between the first intake and the end) and that of the PostgreSQL backends of the run's
database, the stub, the Redis server (shared: everything it served meanwhile) and this
process (the intake, the polling), enqueue→done p50/p99 (`finished_at - received_at`), failed
episodes and 429s. The database is analysed once the first 500 episodes are in, as
autovacuum would within its first minute (`--no-analyze`: not, and the planner guesses: on a
table never analysed it picked indexes that read ~800 entries per update by key). Then a run
with a model answering after 20 s (`--slow` episodes, default settings: nothing may fail), and
one with `SGAM_LLM_RPM=600`
against a stub that refuses past 600 a minute (the rate measured at the stub, and no 429 may
reach an episode). `--baseline REV` measures the same runs for an older commit (a worktree of
it under /tmp, its workers started from it) in the same session, for the figure beside
today's. The database named by --url (must contain "bench") is dropped and recreated for each
run; Redis database 12 is the broker and the budget's store.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from environment import describe, machine_load, use_support_catalog
from figures import percentile
from pipeline_flow import LOCOMO, latencies_ms, locomo_lines, open_store_migrated
from scratch_databases import recreate
from sqlalchemy import Engine, create_engine, func, select, text

import pipeline
from pipeline.db.models import EpisodeRow
from pipeline.db.store import open_store
from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_llm"
DEFAULT_BROKER = "redis://127.0.0.1:6379/12"
TICK = os.sysconf("SC_CLK_TCK")
FIRST_CHUNK = 500  # episodes ingested before the database is analysed
_GRACE = timedelta(seconds=120)  # past SGAM_SWEEP_GRACE_S and any lease of a stalled claim


class Stub:
    """bench/stub_llm.py in a process of its own."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        script = str(ROOT / "bench" / "stub_llm.py")
        self.process = subprocess.Popen([sys.executable, script, "--port", str(self.port)])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 20
        while True:
            try:
                self.stats()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data)
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    def configure(self, latency_s: float, rpm: float | None = None) -> None:
        self._call("/stub/config", {"latency_s": latency_s, "rpm": rpm})

    def stats(self) -> dict[str, Any]:
        return self._call("/stub/stats")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def process_cpu_s(pid: int) -> float:
    """User + system CPU of process `pid` (its threads included), 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def named_pids(name: str) -> list[int]:
    """The processes whose command is `name` (e.g. redis-server)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def backend_cpu_s(engine: Engine) -> float:
    """CPU of the PostgreSQL backends connected to the run's database (the worker's, the
    intake's, the poller's: all opened during the run, so their whole CPU is the run's);
    readable when the server runs on this machine, else 0."""
    with engine.connect() as connection:
        pids = connection.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        ).scalars()
        return sum(process_cpu_s(int(pid)) for pid in pids)


def group_cpu_s(pgid: int) -> float:
    """User + system CPU of every live process in process group `pgid`."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:  # fields[0] is the state; pgrp is the fifth field
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def start_worker(
    url: str, broker: str, stub: Stub | None, code: Path, settings: dict[str, str]
) -> subprocess.Popen[bytes]:
    """One worker of two pool processes; without `stub`, the rules read the episodes."""
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "SGAM_DATABASE_URL": url,
        "SGAM_BROKER_URL": broker,
        "SGAM_REDIS_URL": broker,
        **settings,
    }
    env.pop("SGAM_LLM_BASE_URL", None)
    if stub is not None:
        env |= {"SGAM_LLM_BASE_URL": stub.base_url, "SGAM_LLM_MODEL": "stub"}
    command = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--queues"]
    command += ["extract", "--concurrency", "2", "--loglevel", "warning"]
    command += ["--without-mingle", "--without-gossip"]
    worker = subprocess.Popen(command, env=env, cwd=code, start_new_session=True)
    time.sleep(5)  # the worker's start-up is not part of the lane's figures
    return worker


def settled_counts(engine: Engine) -> tuple[int, int]:
    """(done, failed) episodes, in one query over the poller's one connection."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(EpisodeRow.status, func.count())
            .where(EpisodeRow.status.in_(["done", "failed"]))
            .group_by(EpisodeRow.status)
        ).all()
    counts = {str(status): int(count) for status, count in rows}
    return counts.get("done", 0), counts.get("failed", 0)


def lane_run(
    name: str,
    url: str,
    lines: list[dict[str, Any]],
    stub: Stub | None,
    *,
    broker: str,
    latency_s: float = 0.0,
    code: Path = ROOT,
    stub_rpm: float | None = None,
    settings: dict[str, str] | None = None,
    timeout_s: float = 1800,
    profile: Path | None = None,
    analyze: bool = True,
) -> dict[str, Any]:
    """One run; `stub` None: the rules lane, the baseline the model lane's figures are read
    against. `profile`: py-spy samples the worker's processes into that file (speedscope)."""
    recreate(url)
    open_store_migrated(url).dispose()
    redis.Redis.from_url(broker).flushdb()
    if stub is not None:
        stub.configure(latency_s, stub_rpm)
    worker = start_worker(url, broker, stub, code, settings or {})
    store = open_store(Settings(database_url=url, broker_url=broker))
    poller = create_engine(url, pool_size=1)
    spy = None
    if profile is not None:
        spy = subprocess.Popen(
            [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(worker.pid)]
            + ["--subprocesses", "--gil", "--rate", "200", "--format", "speedscope"]
            + ["-o", str(profile)],
            stdout=subprocess.DEVNULL,
        )
    redis_pids = named_pids("redis-server")
    try:
        cpu_before = group_cpu_s(worker.pid)
        others_before = (
            process_cpu_s(stub.process.pid) if stub is not None else 0.0,
            sum(process_cpu_s(pid) for pid in redis_pids),
            time.process_time(),
        )
        started = time.perf_counter()
        receipts = pipeline.ingest(store, lines[:FIRST_CHUNK]).receipts
        if analyze:  # what autovacuum does within its first minute of a new table
            with poller.connect() as connection:
                connection.execute(text("ANALYZE"))
                connection.commit()
        receipts += pipeline.ingest(store, lines[FIRST_CHUNK:]).receipts
        assert {r.status for r in receipts} == {"queued"}
        swept, progress = 0, (0, time.perf_counter())
        while True:
            done, failed = settled_counts(poller)
            if done + failed >= len(lines) or time.perf_counter() - started > timeout_s:
                break
            if done + failed > progress[0]:
                progress = (done + failed, time.perf_counter())
            elif time.perf_counter() - progress[1] > 30:
                # Nothing settled for 30 s: wake-ups were lost (another test on this machine
                # may flush every Redis database). The sweeper's own path re-queues them.
                pending, stuck, _ = pipeline.sweep(store, now=datetime.now(UTC) + _GRACE)
                swept += pending + stuck
                progress = (done + failed, time.perf_counter())
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        cpu = group_cpu_s(worker.pid) - cpu_before
        others = (
            (process_cpu_s(stub.process.pid) if stub is not None else 0.0) - others_before[0],
            sum(process_cpu_s(pid) for pid in redis_pids) - others_before[1],
            time.process_time() - others_before[2],
            backend_cpu_s(poller),
        )
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=120)
        poller.dispose()
        store.dispose()
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    latency = latencies_ms(url)
    row = {
        "run": name,
        "episodes": len(lines),
        "done": done,
        "failed": failed,
        "episodes/s": done / elapsed,
        "peak in flight": 0,
        "cpu ms/ep": cpu * 1000 / max(1, done),
        "pg ms/ep": others[3] * 1000 / max(1, done),
        "stub ms/ep": others[0] * 1000 / max(1, done),
        "redis ms/ep": others[1] * 1000 / max(1, done),
        "bench ms/ep": others[2] * 1000 / max(1, done),
        "p50 s": percentile(latency, 0.5) / 1000 if latency else 0.0,
        "p99 s": percentile(latency, 0.99) / 1000 if latency else 0.0,
        "429s": 0,
        "stub req/s": 0.0,
        "re-queued": swept,
    }
    if stub is not None:
        stats = stub.stats()
        first, last = stats["first_answer_at"], stats["last_answer_at"]
        span = last - first if first and last else 0
        row["peak in flight"] = stats["peak_in_flight"]
        row["429s"] = stats["rejected"]
        row["stub req/s"] = (stats["answered"] - 1) / span if span > 0 else 0.0
    return row


class Table(list[dict[str, Any]]):
    """The rows, each printed as soon as its run ends."""

    HEADER = ["episodes", "done", "failed", "episodes/s", "peak in flight", "cpu ms/ep"]
    HEADER += ["pg ms/ep", "stub ms/ep", "redis ms/ep", "bench ms/ep"]
    HEADER += ["p50 s", "p99 s", "429s", "stub req/s", "re-queued"]

    def append(self, row: dict[str, Any]) -> None:
        if not self:
            print(f"{'run':<26}" + "".join(f"{h:>12}" for h in self.HEADER), flush=True)
        super().append(row)
        cells = [
            f"{row[h]:>12.2f}" if isinstance(row[h], float) else f"{row[h]:>12}"
            for h in self.HEADER
        ]
        print(f"{row['run']:<26}" + "".join(cells), flush=True)


def baseline_checkout(revision: str) -> Path:
    """A worktree of `revision` under /tmp (made once), whose workers measure the baseline."""
    path = Path(f"/tmp/sgam-llm-bench-baseline-{revision[:12]}")
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), revision],
            check=True,
            capture_output=True,
        )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_URL", DEFAULT_URL))
    parser.add_argument("--broker", default=DEFAULT_BROKER, help="Redis db: broker and budget")
    parser.add_argument("--episodes", type=int, default=5000, help="LoCoMo turns per run")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.4, 2.0])
    parser.add_argument("--slow", type=int, default=400, help="episodes of the 20 s run (0: skip)")
    parser.add_argument("--rpm-episodes", type=int, default=900, help="of the RPM run (0: skip)")
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="leave the new database unanalysed (the planner then guesses its plans)",
    )
    parser.add_argument("--no-rules", action="store_true", help="skip the rules lane's run")
    parser.add_argument("--baseline", help="a git revision to measure beside this checkout")
    parser.add_argument("--baseline-episodes", type=int, default=200)
    parser.add_argument("--baseline-latencies", type=float, nargs="+", default=[0.0, 0.4])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose workers run")
    parser.add_argument("--label", default="", help="prefix of each run's name")
    parser.add_argument("--profile", type=Path, help="a folder for py-spy profiles of each run")
    args = parser.parse_args()
    use_support_catalog()
    lines = locomo_lines(args.locomo)
    if len(lines) < args.episodes:
        parser.error(f"--episodes {args.episodes}: {args.locomo} has {len(lines)} turns")
    stamp = f"{datetime.now(UTC):%Y-%m-%d %H:%M}"
    described = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    print(f"SGAM LLM lane benchmark, {stamp} UTC, commit {described}, stub model, 2 processes")
    for line in describe():  # the database is made per run: its settings are not read here
        print(line)
    print(f"({machine_load()} before)")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    def run(name: str, count: int, stub: Stub | None, **options: Any) -> None:
        profile = args.profile / f"{name.replace(' ', '_')}.json" if args.profile else None
        rows.append(
            lane_run(
                f"{args.label}{name}",
                args.url,
                lines[:count],
                stub,
                broker=args.broker,
                code=args.code,
                profile=profile,
                analyze=not args.no_analyze,
                **options,
            )
        )
        print(f"  ({machine_load()})", flush=True)

    stub = Stub()
    rows = Table()
    try:
        if args.baseline:  # measured by that commit's own code: its schema, intake and workers
            checkout = baseline_checkout(args.baseline)
            command = [sys.executable, str(checkout / "bench" / "llm_lane.py")]
            if not (checkout / "bench" / "llm_lane.py").exists():
                command = [sys.executable, __file__]
            command += ["--code", str(checkout), "--label", f"baseline {args.baseline[:8]}, "]
            command += ["--episodes", str(args.baseline_episodes), "--slow", "0"]
            command += ["--rpm-episodes", "0", "--locomo", str(args.locomo), "--url", args.url]
            command += ["--latencies", *map(str, args.baseline_latencies)]
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            subprocess.run(command, env=env, check=False)
        if not args.no_rules:
            run("rules", args.episodes, None)
        for latency in args.latencies:
            run(f"{latency:g} s", args.episodes, stub, latency_s=latency)
        if args.slow:
            run("20 s model", args.slow, stub, latency_s=20.0)
        if args.rpm_episodes:
            run(
                "SGAM_LLM_RPM=600, 0.4 s",
                args.rpm_episodes,
                stub,
                latency_s=0.4,
                stub_rpm=600,
                settings={"SGAM_LLM_RPM": "600"},
            )
    finally:
        stub.stop()
    rules = next((row for row in rows if row["run"].endswith("rules")), None)
    if rules is not None:
        print("against the rules lane of this run (episodes/s, worker CPU per episode):")
        for row in rows:
            if row is not rules:
                speed = row["episodes/s"] / rules["episodes/s"]
                cost = row["cpu ms/ep"] / max(rules["cpu ms/ep"], 1e-9)
                print(f"  {row['run']:<26} {speed:6.2f}x the rate, {cost:6.2f}x the CPU")
    print(f"({machine_load()} after)")


if __name__ == "__main__":
    main()
