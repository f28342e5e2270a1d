"""Why the model lane runs its calls on threads: CPU per model call and calls per second with a
pool of 32 threads over the one sync client the lane uses (`LlmClient.ask`), against asyncio
over one async OpenAI client (32 in flight, the same Instructor response model), both against
bench/stub_llm.py in its own process.

    .venv/bin/python bench/llm_threads_vs_asyncio.py [CALLS=600] [LATENCY_S=0.05]
"""

import asyncio
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, "bench")
import httpx2
import instructor
import openai

from pipeline.catalog.loader import load_catalog
from pipeline.extract.llm import prepared, shared_client
from pipeline.extract.prompting import render_messages
from pipeline.settings import Settings
from schemas.episodes import Episode
from schemas.extraction import response_model

N = int(sys.argv[1]) if len(sys.argv) > 1 else 600
LAT = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
p = subprocess.Popen([sys.executable, "bench/stub_llm.py", "--port", "8394", "--latency", str(LAT)])
time.sleep(2)
cat = load_catalog(None)
ep = Episode(
    tenant_id="t",
    subject="mira",
    session_id="s",
    episode_id="e",
    occurred_at="2026-06-01T09:00:00Z",
    text="I like tea and I went to the park yesterday.",
)


def report(name: str, cpu_started: float, started: float) -> None:
    cpu_ms = (time.process_time() - cpu_started) / N * 1000
    print(f"{name}: {cpu_ms:.2f} ms CPU/call, {N / (time.perf_counter() - started):.0f} calls/s")


messages = render_messages(ep, cat, {})
model = response_model(cat)
try:
    s = Settings(_env_file=None, llm_base_url="http://127.0.0.1:8394/v1", llm_model="m")
    client = shared_client(s)
    pool = ThreadPoolExecutor(32)
    list(pool.map(lambda _: client.ask(messages, model, prompt_version="x"), range(64)))
    t, w = time.process_time(), time.perf_counter()
    list(pool.map(lambda _: client.ask(messages, model, prompt_version="x"), range(N)))
    report("threads", t, w)

    async def main():
        http = httpx2.AsyncClient(
            limits=httpx2.Limits(max_connections=32, max_keepalive_connections=32)
        )
        aclient = instructor.from_openai(
            openai.AsyncOpenAI(
                base_url="http://127.0.0.1:8394/v1", api_key="x", http_client=http, max_retries=0
            ),
            mode=instructor.Mode.TOOLS,
        )
        sem = asyncio.Semaphore(32)
        wrapped = prepared(model)

        async def one():
            async with sem:
                return await aclient.chat.completions.create(
                    model="m",
                    messages=messages,
                    response_model=wrapped,
                    max_retries=2,
                    temperature=0.0,
                    max_tokens=1024,
                )

        await asyncio.gather(*(one() for _ in range(64)))
        t, w = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(N)))
        report("asyncio", t, w)

    asyncio.run(main())
finally:
    p.terminate()
