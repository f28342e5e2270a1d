"""Traces through OpenTelemetry: on when an OTLP endpoint is configured (or SGAM_OTEL says so),
and then only; off, no OpenTelemetry code runs at all (`span` hands out one shared do-nothing
object and the SDK is never imported).

Every span is opened through `span` or `start_span`, which never record an exception's message,
stack or `str()` — messages can quote what a user sent — only its class, as `error.type` and
as the status description. Attributes are ids, counts, names and outcomes; what may be recorded
is listed in `pipeline.observe.conventions`.

Sampling is the SDK's own, from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default: every
trace, and a span whose parent was sampled is sampled); the exporter and its batching read the
standard OTEL_EXPORTER_OTLP_* and OTEL_BSP_* variables.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, SpanKind

    from pipeline.settings import Settings

Mode = Literal["off", "console", "otlp"]
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACER_NAME = "sgam"
TRACEPARENT = "traceparent"

Attributes = Mapping[str, str | bool | int | float | Sequence[str] | Sequence[int]]

_lock = threading.Lock()
_enabled = False
_provider: Any = None  # the SDK's TracerProvider, once set up
_tracer: Any = None  # SGAM's tracer from that provider


def mode_from(environ: Mapping[str, str], sgam_otel: Mode | None) -> Mode:
    """`console` or `otlp` when SGAM_OTEL says so; else `otlp` when an OTLP endpoint is set;
    `off` when SGAM_OTEL=off or OTEL_SDK_DISABLED=true, whatever else is set."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "off"
    if sgam_otel is not None:
        return sgam_otel
    if any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES):
        return "otlp"
    return "off"


def setup_tracing(
    settings: Settings, service: str, *, environ: Mapping[str, str] | None = None
) -> bool:
    """Install the process's tracer provider once (later calls change nothing); whether
    tracing is on. `service` names the process (`sgam-api`, `sgam-worker`, `sgam-cli`) unless
    OTEL_SERVICE_NAME does."""
    environ = os.environ if environ is None else environ
    mode = mode_from(environ, settings.otel)
    if mode == "off":
        return _enabled
    with _lock:
        if _provider is not None:
            return True
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

        resource = Resource.create(
            {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service}
        )
        provider = TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER
        exporter: SpanExporter
        if mode == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporter = ConsoleSpanExporter(out=sys.stderr)  # stdout is the commands' answer
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        # Not made the global provider: libraries that trace through that one (FastAPI's
        # built-in telemetry, the MCP SDK) record request paths, queries and arguments, which
        # no span may carry. The current span is still found the usual way
        # (`opentelemetry.trace.get_current_span()`), e.g. for a log line's trace id.
        enable(provider)
    return True


def enable(provider: Any) -> None:
    """Trace through `provider` (an SDK TracerProvider): what `setup_tracing` installs, or one
    an application embedding SGAM (or a test) brings."""
    global _enabled, _provider, _tracer
    _provider, _tracer = provider, provider.get_tracer(TRACER_NAME)
    _enabled = True


def disable() -> None:
    """Stop tracing (the provider is left to its owner)."""
    global _enabled, _provider, _tracer
    _enabled, _provider, _tracer = False, None, None


def enabled() -> bool:
    return _enabled


def flush(timeout_ms: int = 5000) -> None:
    """Send what is batched (before a process exits, or in a test)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def shutdown() -> None:
    if _provider is not None:
        _provider.shutdown()


class _Quiet:
    """What `span` yields when tracing is off: takes everything, records nothing."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Attributes) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass

    def is_recording(self) -> bool:
        return False

    def end(self) -> None:
        pass


QUIET = _Quiet()


def _kind(kind: str) -> SpanKind:
    from opentelemetry.trace import SpanKind

    return SpanKind[kind.upper()]


def start_span(
    name: str,
    *,
    kind: Literal["internal", "client", "server", "producer", "consumer"] = "internal",
    attributes: Attributes | None = None,
    parent: Context | None = None,
    links: Sequence[Link] = (),
) -> Span | _Quiet:
    """A span the caller ends (`.end()`), a child of `parent` or of the current span; it is
    not made current."""
    if not _enabled:
        return QUIET
    return _tracer.start_span(  # type: ignore[no-any-return]
        name, context=parent, kind=_kind(kind), attributes=attributes, links=links
    )


@contextmanager
def span(
    name: str,
    *,
    kind: Literal["internal", "client", "server", "producer", "consumer"] = "internal",
    attributes: Attributes | None = None,
    parent: Context | None = None,
    links: Sequence[Link] = (),
) -> Iterator[Span | _Quiet]:
    """A current span for the `with` block; an exception leaving it marks the span failed
    with the exception's class only, and goes on."""
    if not _enabled:
        yield QUIET
        return
    opened = start_span(name, kind=kind, attributes=attributes, parent=parent, links=links)
    with using(opened):
        yield opened


@contextmanager
def using(opened: Span | _Quiet, *, end: bool = True) -> Iterator[None]:
    """Make `opened` the current span for the block; an exception marks it failed (its class
    only); `end`: end it when the block ends."""
    if isinstance(opened, _Quiet):
        yield
        return
    from opentelemetry import trace

    try:
        with trace.use_span(
            opened, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            yield
    except BaseException as error:
        failed(opened, error)
        raise
    finally:
        if end:
            opened.end()


def failed(opened: Span | _Quiet, error: BaseException | str) -> None:
    """Mark `opened` failed: `error.type` and the status say the class (or the given short
    kind), never the message."""
    if isinstance(opened, _Quiet) or not opened.is_recording():
        return
    from opentelemetry.trace import Status, StatusCode

    kind = error if isinstance(error, str) else type(error).__qualname__
    opened.set_attribute("error.type", kind)
    opened.set_status(Status(StatusCode.ERROR, kind))


def current_traceparent() -> str | None:
    """The current span's W3C traceparent, to carry into another process; None when tracing
    is off or nothing is being traced."""
    if not _enabled:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get(TRACEPARENT)


def context_from(traceparent: str | None) -> Context | None:
    """The remote parent a carried traceparent names (None: none, or tracing is off)."""
    if not _enabled or not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({TRACEPARENT: traceparent})


def context_from_headers(headers: Mapping[str, str]) -> Context | None:
    """The remote parent named by incoming request headers (traceparent, tracestate)."""
    if not _enabled:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(headers)


def link_to(traceparent: str) -> Link | None:
    """A link to the span a carried traceparent names (a batch links to each of its traces)."""
    parent = context_from(traceparent)
    if parent is None:
        return None
    from opentelemetry import trace

    remote = trace.get_current_span(parent).get_span_context()
    return trace.Link(remote) if remote.is_valid else None


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span in hex, for a log line; None when tracing is
    off or no span is current. Costs nothing when off (OpenTelemetry is not imported)."""
    if not _enabled:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
