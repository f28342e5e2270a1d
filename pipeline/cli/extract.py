"""`sgam extract`: what would be extracted from an episode and why, writing nothing."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.cli import output
from pipeline.cli.options import json_output
from pipeline.errors import InvalidInput

if TYPE_CHECKING:
    from pipeline.extract.guards import CurrentValues
    from pipeline.extract.protocol import Turn
    from pipeline.extract.result import ExtractionResult
    from pipeline.extract.rules import ClauseReading
    from pipeline.settings import Settings
    from schemas.catalog import Catalog


@click.command()
@click.option("--tenant", required=True, help="Tenant that owns the memory.")
@click.option("--subject", required=True, help="The user or entity the episode is about.")
@click.option("--text", required=True, help="The episode's text ('-' reads stdin).")
@click.option(
    "--occurred-at", "--at", "at", help="When the episode happened (RFC 3339; default: now)."
)
@click.option("--session", help="Session the episode belongs to.")
@click.option(
    "--source", default="message", show_default=True, help="message|tool_result|business_event"
)
@click.option(
    "--extractor",
    default="auto",
    show_default=True,
    help="rules|llm|auto (auto: the LLM when SGAM_LLM_BASE_URL is set, else rules).",
)
@click.option("--agent", default="default", show_default=True, help="Agent scope.")
@click.option("--purpose", default="default", show_default=True, help="Purpose scope.")
@click.option("--episode", default="cli", show_default=True, help="Id of the episode.")
@click.option(
    "--context/--no-context",
    default=True,
    show_default=True,
    help="Show a model the session's stored turns before the episode (with --session), "
    "as the worker does.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Also show, clause by clause, the rules' forms tried, matched and refused, and why.",
)
@json_output
def extract(
    tenant: str,
    subject: str,
    text: str,
    at: str | None,
    session: str | None,
    source: str,
    extractor: str,
    agent: str,
    purpose: str,
    episode: str,
    context: bool,
    explain: bool,
    as_json: bool,
) -> None:
    """Show the memory updates an episode would yield, kept and rejected; writes nothing."""
    from pipeline.extract import extract as run_extraction
    from pipeline.policy.decide import Lane, episode_trust
    from pipeline.settings import load_settings
    from pipeline.validation import parse
    from schemas.episodes import Episode

    settings = load_settings()
    fields = {
        "episode_id": episode,
        "tenant_id": tenant,
        "agent_id": agent,
        "purpose": purpose,
        "subject": subject,
        "session_id": session,
        "source": source,
        "occurred_at": at if at is not None else datetime.now(UTC),
        "text": _read_text(text),
    }
    parsed = parse(Episode, {name: value for name, value in fields.items() if value is not None})
    # The preview shows the trust the background lane would give this source (a chat message
    # is `inferred`), not the model's default for a caller who vouches for the episode.
    trust = episode_trust(parsed.source, None, Lane.BACKGROUND)
    parsed = parsed.model_copy(update={"trust": trust})
    catalog, current, earlier = _stored(settings, parsed, context=context)
    result = run_extraction(
        parsed,
        catalog=catalog,
        settings=settings,
        current=current,
        extractor=extractor,  # type: ignore[arg-type]  # validated by extract()
        earlier=earlier,
    )
    shown_turns = len(earlier) if result.usage.model is not None else 0  # only a model reads them
    readings = _readings(catalog, settings, parsed) if explain else None
    if output.wants_json(as_json):
        shown = report(result) | {"context_turns": shown_turns}
        if readings is not None:
            from pipeline.cli.explain import explain_json

            shown["explain"] = explain_json(readings)
        output.emit_json(shown)
    else:
        sys.stdout.write(table(result))
        if shown_turns:
            sys.stdout.write(f"context   {shown_turns} earlier turn(s) of session {session}\n")
        if readings is not None:
            from pipeline.cli.explain import explain_table

            sys.stdout.write(explain_table(readings, result))


def _readings(catalog: Catalog, settings: Settings, episode: Any) -> list[ClauseReading]:
    from pipeline.extract import rules_for

    return rules_for(catalog, settings.dates_day_first).explain(episode)


def _read_text(text: str) -> str:
    if text != "-":
        return text
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("text", "stdin is not valid UTF-8") from None


def _stored(
    settings: Settings, episode: Any, *, context: bool
) -> tuple[Catalog, CurrentValues, list[Turn]]:
    """The catalogue, what holds now for the subject and (with `context`) the session's turns
    before the episode. A SQLite file that does not exist yet holds nothing and is not
    created: extract never writes, not even an empty database."""
    from pipeline.catalog.loader import load_catalog
    from pipeline.cli.options import opened_store
    from pipeline.episodes.conversation import earlier_turns
    from pipeline.extract.guards import current_values
    from pipeline.read.facts import get

    url = settings.database_url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return load_catalog(settings.catalog_path, settings.catalog), {}, []
    with opened_store() as store:
        earlier = earlier_turns(store, episode) if context else []
        facts = get(
            store,
            {
                "tenant_id": episode.tenant_id,
                "agent_id": episode.agent_id,
                "purpose": episode.purpose,
                "subject": episode.subject,
            },
        )
        return store.catalog, current_values(facts), earlier


def report(result: ExtractionResult) -> dict[str, Any]:
    """The one JSON object `sgam extract --json` prints."""
    usage = result.usage
    return {
        "extractor": usage.extractor,
        "prompt_version": usage.prompt_version,
        "kept": [candidate.model_dump(mode="json") for candidate in result.kept],
        "rejected": [rejection.model_dump(mode="json") for rejection in result.rejected],
        "usage": usage.model_dump(mode="json", exclude={"extractor", "prompt_version"}),
    }


def table(result: ExtractionResult) -> str:
    usage = result.usage
    lines = [
        f"extractor {usage.extractor}: {len(result.kept)} kept, {len(result.rejected)} rejected,"
        f" {usage.attempts} request(s), {usage.prompt_tokens}+{usage.completion_tokens} tokens,"
        f" {usage.latency_ms:g} ms"
    ]
    for candidate in result.kept:
        value = json.dumps(candidate.value, ensure_ascii=False)
        since = candidate.valid_from.isoformat().replace("+00:00", "Z")
        lines.append(
            f"kept      {candidate.attribute} = {value} from {since} ({candidate.change})"
            f"  evidence: {candidate.evidence!r}"
        )
    for rejection in result.rejected:
        update = rejection.update
        lines.append(
            f"rejected  {update.attribute} = {json.dumps(update.value, ensure_ascii=False)}"
            f"  {rejection.reason.value}: {rejection.message}"
        )
    return "\n".join(lines) + "\n"
