"""uvicorn's HTTP protocol with the one answer it writes itself — the 400 for a request its
parser cannot read (an unknown method such as BREW, a malformed request line or header) — as a
problem document like every other refusal of the service, not a line of text/plain."""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from pipeline.api.problems import PROBLEM_JSON, TYPE_PREFIX

BODY = json.dumps(
    {
        "type": TYPE_PREFIX + "malformed-request",
        "title": "The request cannot be read",
        "status": 400,
        "detail": "not an HTTP/1.1 request the service reads: an unknown method, or a "
        "malformed request line or header",
    }
).encode("ascii")

# What `sgam serve` hands uvicorn (by name: each worker process imports it).
PROTOCOL = "pipeline.api.protocol:ProblemHttpTools"


class ProblemHttpTools(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:  # msg: uvicorn's text, logged already
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                f"content-type: {PROBLEM_JSON}\r\n".encode("ascii"),
                b"content-length: " + str(len(BODY)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                BODY,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()
