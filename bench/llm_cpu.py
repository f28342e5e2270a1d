"""CPU per model episode in one process, without Celery: LoCoMo turns stored (a broker is
configured, so intake only queues them; nothing takes the wake-ups), then `process_episodes`
over batches of SGAM_WORKER_BATCH against the stub model (bench/stub_llm.py, its own
process). Prints episodes/s and this process's CPU per episode; `--yappi` also profiles every
thread (the pool's included) by CPU time, which inflates the total several times but shows
where it goes. The quick check of a change to the lane's per-episode cost.

    .venv/bin/python bench/llm_cpu.py [--episodes 1500] [--latency 0] [--yappi [--top 60]]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import redis
from environment import machine_load, use_support_catalog
from llm_lane_setup import DEFAULT_BROKER, Stub
from pipeline_flow import LOCOMO, locomo_lines, open_store_migrated
from scratch_databases import recreate

import pipeline
from pipeline.db.store import open_store
from pipeline.episodes.process import process_episodes
from pipeline.settings import Settings

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_bench_llm_cpu"
WARM_UP = 128  # episodes before the timing: connections, compiled queries, the client


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("SGAM_BENCH_CPU_URL", DEFAULT_URL))
    parser.add_argument("--broker", default=DEFAULT_BROKER)
    parser.add_argument("--episodes", type=int, default=1500)
    parser.add_argument("--latency", type=float, default=0.0, help="the stub's, in seconds")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--yappi", action="store_true", help="profile every thread by CPU")
    parser.add_argument("--top", type=int, default=60, help="functions shown by --yappi")
    args = parser.parse_args()
    use_support_catalog()
    lines = locomo_lines(args.locomo)[: args.episodes]
    recreate(args.url)
    open_store_migrated(args.url).dispose()
    queue = redis.Redis.from_url(args.broker)
    queue.flushdb()
    stub = Stub()
    stub.configure(args.latency)
    settings = Settings(
        database_url=args.url,
        broker_url=args.broker,
        redis_url=args.broker,
        llm_base_url=stub.base_url,
        llm_model="stub",
    )
    store = open_store(settings)
    try:
        pipeline.ingest(store, lines)
        queue.flushdb()  # the wake-ups: this process plays the worker
        keys = [(line["tenant_id"], line["episode_id"]) for line in lines]
        batch = settings.batch_for(model=True)
        for start in range(0, WARM_UP, batch):
            process_episodes(store, keys[start : start + batch])
        timed = keys[WARM_UP:]
        profiler = _start_yappi() if args.yappi else None
        cpu, wall = time.process_time(), time.perf_counter()
        for start in range(0, len(timed), batch):
            process_episodes(store, timed[start : start + batch])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if profiler is not None:
            profiler.stop()
        print(
            f"{len(timed)} episodes at {args.latency:g} s: {len(timed) / wall:.1f}/s, "
            f"{cpu * 1000 / len(timed):.2f} ms of CPU an episode ({machine_load()})"
        )
        if profiler is not None:
            _print_profile(profiler, len(timed), args.top)
    finally:
        store.dispose()
        stub.stop()


def _start_yappi() -> Any:
    import yappi  # a profiler for threads; `pip install yappi`

    yappi.set_clock_type("cpu")
    yappi.start(builtins=False)
    return yappi


def _print_profile(profiler: Any, episodes: int, top: int) -> None:
    stats = profiler.get_func_stats()
    stats.sort("ttot")
    print("ms an episode: total, own; calls an episode; function")
    for entry in list(stats)[:top]:
        where = entry.module.split("site-packages/")[-1]
        print(
            f"{1000 * entry.ttot / episodes:8.3f} {1000 * entry.tsub / episodes:8.3f} "
            f"{entry.ncall / episodes:7.1f}  {entry.name} {where}:{entry.lineno}"
        )


if __name__ == "__main__":
    main()
