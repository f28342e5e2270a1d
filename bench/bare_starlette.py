"""The physical reference of bench/api.py: a bare Starlette endpoint on the same uvicorn (one
process, the same event loop and HTTP parser `sgam serve` uses) that answers
`GET /v1/subjects/{subject}/facts` with the bytes of a real GET facts answer, read once from
`--answer`: what the service would cost with no authentication, rate limit, metrics, query
checks or database.

    .venv/bin/python bench/bare_starlette.py --port 18482 --answer answer.json
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
from environment import ready
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# The targets of the ratios (issue #30): GET facts over one server process against the same
# reads in-process, and against this bare endpoint serving the same bytes.
RATIO_TARGETS = {"python": 0.6, "starlette": 0.5}


def create(answer: bytes) -> Starlette:
    async def facts(_: Request) -> Response:
        return Response(answer, media_type="application/json")

    async def health(_: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    routes = [Route("/v1/subjects/{subject}/facts", facts), Route("/healthz", health)]
    routes.append(Route("/readyz", health))
    return Starlette(routes=routes)


def start_reference(port: int, answer: bytes) -> subprocess.Popen[bytes]:
    """bench/bare_starlette.py on `port`, answering GET facts with `answer`'s bytes."""
    path = Path(tempfile.mkstemp(prefix="sgam-bench-answer-", suffix=".json")[1])
    path.write_bytes(answer)
    script = str(Path(__file__).with_name("bare_starlette.py"))
    command = [sys.executable, script, "--port", str(port), "--answer", str(path)]
    root = Path(__file__).resolve().parents[1]
    return ready(subprocess.Popen(command, cwd=root), port, timeout_s=180)


def ratios(runs: list[dict[str, Any]]) -> list[str]:
    """GET facts over HTTP against each reference of the same run, per client count."""
    lines = []
    rates = {(r["mode"], r["clients"]): r for r in runs if r["operation"] == "GET facts"}
    for (mode, clients), run in sorted(rates.items()):
        if mode != "http":
            continue
        for reference, target in RATIO_TARGETS.items():
            other = rates.get((reference, clients))
            if other is None or not other["requests_per_s"]:
                continue
            ratio = run["requests_per_s"] / other["requests_per_s"]
            verdict = "met" if ratio >= target else "NOT met"
            lines.append(
                f"GET facts, {clients} clients: http {run['requests_per_s']:g}/s ÷ {reference} "
                f"{other['requests_per_s']:g}/s = {ratio:.2f} (target ≥ {target}: {verdict})"
            )
            mine, theirs = run.get("cpu_ms_per_request"), other.get("cpu_ms_per_request")
            if mine and theirs:  # the same ratio by CPU per request, which load moves less
                lines.append(
                    f"GET facts, {clients} clients, by CPU per request: {reference} {theirs:g} ms"
                    f" ÷ http {mine:g} ms = {theirs / mine:.2f} (target ≥ {target})"
                )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=18482)
    parser.add_argument("--answer", type=Path, required=True, help="the JSON bytes to serve")
    args = parser.parse_args()
    app = create(args.answer.read_bytes())
    uvicorn.run(app, port=args.port, log_level="warning", access_log=False, server_header=False)


if __name__ == "__main__":
    main()
