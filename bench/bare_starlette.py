"""The physical reference of bench/api.py: a bare Starlette endpoint on the same uvicorn (one
process, the same event loop and HTTP parser `sgam serve` uses) that answers
`GET /v1/subjects/{subject}/facts` with the bytes of a real GET facts answer, read once from
`--answer`: what the service would cost with no authentication, rate limit, metrics, query
checks or database.

    .venv/bin/python bench/bare_starlette.py --port 18482 --answer answer.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def create(answer: bytes) -> Starlette:
    async def facts(_: Request) -> Response:
        return Response(answer, media_type="application/json")

    async def health(_: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    routes = [Route("/v1/subjects/{subject}/facts", facts), Route("/healthz", health)]
    routes.append(Route("/readyz", health))
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=18482)
    parser.add_argument("--answer", type=Path, required=True, help="the JSON bytes to serve")
    args = parser.parse_args()
    app = create(args.answer.read_bytes())
    uvicorn.run(app, port=args.port, log_level="warning", access_log=False, server_header=False)


if __name__ == "__main__":
    main()
