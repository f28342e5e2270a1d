"""When traces are on, and what tracing costs when they are off: nothing is opened, nothing is
carried, and the SDK's tracing and exporters are not even imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.observe.memory import memory_span
from schemas.lifecycle import DecisionAction

ROOT = Path(__file__).parents[2]
SGAM = str(Path(sys.executable).with_name("sgam"))


@pytest.mark.parametrize(
    ("environ", "sgam_otel", "mode"),
    [
        ({}, None, "off"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, None, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, None, "otlp"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, None, "off"),
        ({}, "console", "console"),
        ({}, "otlp", "otlp"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "off", "off"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"},
            None,
            "off",
        ),
        ({"OTEL_SDK_DISABLED": "TRUE"}, "console", "off"),
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_asked_for(
    environ: dict[str, str], sgam_otel: tracing.Mode | None, mode: str
) -> None:
    assert tracing.mode_from(environ, sgam_otel) == mode


def test_off_every_span_is_one_shared_object_that_records_nothing() -> None:
    assert not tracing.enabled()
    with tracing.span("anything", attributes={"a": 1}) as opened:
        assert opened is tracing.QUIET
        opened.set_attribute("b", 2)
        assert not opened.is_recording()
    assert tracing.start_span("other") is tracing.QUIET
    with memory_span(names.SEARCH_MEMORY, tenant_id="t") as memory:
        assert memory is tracing.QUIET
    assert tracing.current_traceparent() is None
    assert tracing.context_from("00-" + "1" * 32 + "-" + "2" * 16 + "-01") is None
    assert tracing.current_ids() is None


def test_an_exception_passes_through_an_unrecorded_span() -> None:
    with pytest.raises(KeyError, match="kept"), tracing.span("failing"):
        raise KeyError("kept")


@pytest.mark.slow
def test_the_pipeline_does_not_load_the_tracing_sdk_when_off(tmp_path: Path) -> None:
    """An episode ingested and one remembered, tracing off: neither the SDK's tracing nor an
    exporter was loaded (redis-py loads the SDK's metrics, and with them the tracing API, for
    its own instrumentation, whenever the SDK is installed)."""
    script = f"""
import sys, pipeline
from pipeline.db.store import open_store
from pipeline.settings import Settings
store = open_store(Settings(database_url="sqlite:///{tmp_path / "off.sqlite3"}"))
episode = {{"tenant_id": "t", "subject": "m", "session_id": "s",
            "occurred_at": "2026-06-01T09:00:00Z", "text": "my home city is Utrecht"}}
assert pipeline.ingest(store, episode).receipts[0].status == "done"
pipeline.remember(store, {{"tenant_id": "t", "subject": "m", "text": "my home city is Oslo"}})
tracing = ("opentelemetry.sdk.trace", "opentelemetry.exporter")
print([m for m in sys.modules if m.startswith(tracing)])
"""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "SGAM_OTEL"))
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_console_traces_go_to_stderr_and_leave_the_answer_alone(tmp_path: Path) -> None:
    environ = os.environ | {
        "SGAM_OTEL": "console",
        "SGAM_DATABASE_URL": f"sqlite:///{tmp_path / 'console.sqlite3'}",
    }
    environ.pop("SGAM_BROKER_URL", None)
    done = subprocess.run(
        [
            SGAM,
            "remember",
            "--tenant",
            "t",
            "--subject",
            "m",
            "--json",
            "--text",
            "my home city is Oslo",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # the answer, and only the answer
    assert '"name": "sgam remember"' in done.stderr
    assert '"name": "upsert_memory"' in done.stderr
    assert "Oslo" not in done.stderr


def test_every_attribute_sgam_names_is_a_convention_name_or_its_own() -> None:
    """The `gen_ai.*` names against the GenAI conventions' registry (semantic-conventions-genai,
    docs/registry/attributes/gen-ai.md), the others against the general registry's or SGAM's
    own `sgam.*` namespace; the opt-in content attributes are never among them."""
    registry = {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.request.max_tokens",
        "gen_ai.request.temperature",
        "gen_ai.response.model",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.output.type",
        "gen_ai.memory.store.id",
        "gen_ai.memory.record.id",
        "gen_ai.memory.record.count",
    }
    general = {
        "error.type",
        "server.address",
        "server.port",
        "http.request.method",
        "http.route",
        "http.response.status_code",
        "messaging.system",
        "messaging.operation.type",
        "messaging.destination.name",
    }
    ours = {name for name in names.ATTRIBUTES if name.startswith("sgam.")}
    assert registry | general | ours == names.ATTRIBUTES
    content = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.memory.query.text",
        "gen_ai.memory.records",
    }
    assert not names.ATTRIBUTES & content
    assert {names.SEARCH_MEMORY, names.UPSERT_MEMORY, names.UPDATE_MEMORY} <= {
        "create_memory_store",
        "search_memory",
        "create_memory",
        "update_memory",
        "upsert_memory",
        "delete_memory",
        "delete_memory_store",
    }
    assert names.decisions_attribute(DecisionAction.WRITTEN.value) == "sgam.decisions.written"
