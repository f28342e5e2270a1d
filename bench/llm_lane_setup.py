"""The llm_lane benchmark's parts that stand outside the lane: the stub model in a process of
its own, a Celery worker started from a checkout, the baseline's worktree, and the CPU of
processes read from /proc."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BROKER = "redis://127.0.0.1:6379/12"
TICK = os.sysconf("SC_CLK_TCK")


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
