"""A local OTLP receiver for the trace tests: an HTTP server on a free loopback port that takes
what SGAM's exporter sends (OTLP over HTTP, protobuf, POST /v1/traces), decodes it with the
protocol's own message classes and keeps every span; and the trace as an indented tree.

Processes under test point OTEL_EXPORTER_OTLP_ENDPOINT at `receiver.endpoint`; a test of the
process itself exports through the same exporter class (`provider_for`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS = {0: "unset", 1: "ok", 2: "error"}


@dataclass(frozen=True)
class Received:
    """One exported span, as the receiver decoded it."""

    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status: str
    status_message: str
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str, dict[str, Any]]]
    start: int
    end: int


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[Received]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    Received(
                        service=service,
                        name=span.name,
                        kind=KINDS[span.kind],
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        attributes=_attributes(span.attributes),
                        status=STATUS[span.status.code],
                        status_message=span.status.message,
                        events=[(e.name, _attributes(e.attributes)) for e in span.events],
                        links=[
                            (link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                            for link in span.links
                        ],
                        start=span.start_time_unix_nano,
                        end=span.end_time_unix_nano,
                    )
                )
    return spans


@dataclass
class Receiver:
    """What was received, in arrival order; `raw` keeps each request's bytes as sent."""

    endpoint: str = ""
    spans: list[Received] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes) -> None:
        decoded = decode(body)
        with self.lock:
            self.raw.append(body)
            self.spans.extend(decoded)

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.spans)

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> list[Received]:
        """The spans, once `predicate(spans)` holds (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({span.name for span in spans})
                raise AssertionError(f"timed out waiting for spans; received {names}")
            time.sleep(0.05)

    def trace(self, trace_id: str) -> list[Received]:
        return [span for span in self.snapshot() if span.trace_id == trace_id]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server protocol)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces" or self.headers.get_content_type() != (
                "application/x-protobuf"
            ):
                self.send_response(404)
                self.end_headers()
                return
            receiver.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


class OtlpReceiver:
    """`with OtlpReceiver() as receiver:` serves on a free loopback port until the block ends."""

    def __init__(self) -> None:
        self.receiver = Receiver()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.receiver))
        self.receiver.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self.receiver

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def provider_for(receiver: Receiver, service: str = "sgam-test") -> Any:
    """An SDK tracer provider exporting each span as it ends, through the OTLP exporter SGAM
    uses, to `receiver` (for tests of the pipeline in the test's own process)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    exporter = OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def children(spans: list[Received], parent_id: str) -> list[Received]:
    return sorted((s for s in spans if s.parent_id == parent_id), key=lambda s: s.start)


def tree(
    spans: list[Received], *, attributes: tuple[str, ...] = (), durations: bool = False
) -> str:
    """The trace as text: one line per span, indented under its parent, in start order, with
    the service, its duration if asked, and the named attributes that the span has."""
    ids = {span.span_id for span in spans}
    roots = sorted((s for s in spans if s.parent_id not in ids), key=lambda s: s.start)
    lines: list[str] = []

    def walk(span: Received, depth: int) -> None:
        shown = " ".join(f"{k}={span.attributes[k]}" for k in attributes if k in span.attributes)
        status = " ERROR" if span.status == "error" else ""
        line = f"{'  ' * depth}{span.name} [{span.kind}, {span.service}]{status}"
        if durations:
            line += f" {(span.end - span.start) / 1e6:.0f} ms"
        lines.append(f"{line} {shown}".rstrip())
        for child in children(spans, span.span_id):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return "\n".join(lines)


def every_string(span: Received) -> Iterator[str]:
    """Every text a span carries: its name, attribute keys and values, status message, events'
    and links' attributes."""
    yield span.name
    yield span.status_message
    yield span.service

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, list):
            for item in value:
                yield from strings(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from strings(item)
        else:
            yield str(value)

    yield from strings(span.attributes)
    for name, attributes in span.events:
        yield name
        yield from strings(attributes)
    for _, _, attributes in span.links:
        yield from strings(attributes)
