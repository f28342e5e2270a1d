"""bench/api.py's load generator: each call in a thread of its own, closed loop or at a rate."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from figures import percentile

Call = Callable[[int, random.Random], tuple[bool, int]]  # (ok, items) for one request
# Untimed calls per client before the clock starts: a process's first requests import and
# compile what the later ones reuse (a first remember about 0.6 s), which is start-up
# (bench/cold_start.py), not the steady state the latency targets are about.
WARMUP_CALLS = 5


def load(calls: list[Call], seconds: float, rate: float = 0) -> dict[str, Any]:
    """Each call in a thread of its own for `seconds`: closed loop (the next request as soon
    as the last is answered), or with `rate`, each client offering that many requests a
    second; a late request's latency then counts from when it was due, so a stall is not
    hidden by the requests it held back."""
    samples: list[list[float]] = [[] for _ in calls]
    errors = [0] * len(calls)
    items = [0] * len(calls)
    began, stop_at = [0.0], [0.0]

    def clock_starts() -> None:  # run once, when every client has warmed up
        began[0] = time.perf_counter()
        stop_at[0] = began[0] + seconds

    start = threading.Barrier(len(calls) + 1, action=clock_starts)

    def run(index: int) -> None:
        rng = random.Random(index)
        for _ in range(WARMUP_CALLS):
            with contextlib.suppress(Exception):  # a failure counts when timed, below
                calls[index](index, rng)
        start.wait()
        due = time.perf_counter() + (rng.random() / rate if rate else 0)
        while time.perf_counter() < stop_at[0]:
            if rate:
                # Late (the last answer came after this one was due): count from when it
                # was due. Early: wait, and count from when it is sent, not the sleep's slack.
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                began = time.perf_counter() if wait > 0 else due
                due += 1 / rate
            else:
                began = time.perf_counter()
            try:
                ok, count = calls[index](index, rng)
            except Exception:  # a refused connection, a timeout: counted, never hidden
                ok, count = False, 0
            samples[index].append((time.perf_counter() - began) * 1000)
            errors[index] += not ok
            items[index] += count

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began[0]
    latencies = [sample for per_client in samples for sample in per_client]
    return {
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "items_per_s": round(sum(items) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "errors": sum(errors),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` and every process below it so far (a
    server's worker processes), from /proc: the cost of a run whatever else the machine does.
    0.0 where there is no /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The fields after the command's closing parenthesis (which may hold spaces).
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, waiting = 0.0, [pid]
    while waiting:
        current = waiting.pop()
        fields = stats.get(current)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        waiting.extend(children.get(current, []))
    return total
