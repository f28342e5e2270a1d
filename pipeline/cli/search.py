"""`sgam search`: a subject's facts and episodes that speak of a query, best first; `sgam embed`:
the embedding arm's backfill."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from pipeline.cli import output
from pipeline.cli.options import json_output, opened_store, reviewer, scope_fields, scoped


@click.command()
@scoped
@reviewer
@click.option("--query", required=True, help="What to look for (English words).")
@click.option("--kinds", help="facts, episodes or facts,episodes (the default).")
@click.option("--limit", help="At most this many of each kind (default 10, at most 100).")
@click.option("--at", help="Facts holding, episodes said, at this valid time (default: now).")
@click.option("--known-at", help="As the ledger believed, and the episodes received, then.")
def search(tenant: str, agent: str, purpose: str, as_json: bool, **options: Any) -> None:
    """Search a subject's memory; exit 1 when nothing is found. Never shows what `get` hides
    (superseded, expired, quarantined, forgotten, purged), nor untrusted episodes unless
    --include-quarantined."""
    from pipeline.read.search import search as search_memory
    from schemas.fields import format_utc  # brings pydantic, which `sgam --help` need not load

    kinds = options.pop("kinds")
    if kinds is not None:
        options["kinds"] = [kind.strip() for kind in kinds.split(",")]
    with opened_store() as store:
        found = search_memory(store, scope_fields(tenant, agent, purpose, **options))
    if output.wants_json(as_json):
        output.emit_json(found)
    else:
        for fact in found.facts:
            sys.stdout.write(f"{fact.score:7.3f}  {output.describe(fact)}\n")
        for episode in found.episodes:
            said = format_utc(episode.occurred_at)
            text = json.dumps(episode.snippet, ensure_ascii=False)
            sys.stdout.write(
                f"{episode.score:7.3f}  {said}  episode={episode.episode_id}  {text}\n"
            )
    if not found.found:
        if not output.wants_json(as_json):
            click.echo("nothing found", err=True)
        raise click.exceptions.Exit(1)


@click.command()
@click.option("--tenant", help="Only this tenant's facts and episodes (default: all).")
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=100_000,
    show_default=True,
    help="At most this many facts and this many episodes.",
)
@json_output
def embed(tenant: str | None, limit: int, as_json: bool) -> None:
    """Give vectors to the facts and episodes that lack one (SGAM_EMBEDDING_MODEL's); exit 1
    when none lacked one, 5 when the endpoint failed (what is left waits for the next run)."""
    from pipeline.embedding.vectors import fill_missing
    from pipeline.errors import SettingError

    with opened_store() as store:
        if not store.settings.embedding_configured:
            raise SettingError(
                "SGAM_EMBEDDING_MODEL", "is not set (or no endpoint URL): the embedding arm is off"
            )
        filled = fill_missing(store, tenant_ids=None if tenant is None else [tenant], limit=limit)
    counts = {"facts": filled.facts, "episodes": filled.episodes, "failed": filled.failed}
    if output.wants_json(as_json):
        output.emit_json(counts)
    else:
        click.echo(f"embedded {filled.facts} facts and {filled.episodes} episodes")
    if filled.failed:
        click.echo(
            f"the embedding endpoint failed: {filled.failed} texts left without a vector "
            "(run again later)",
            err=True,
        )
        raise click.exceptions.Exit(5)
    if not filled.facts and not filled.episodes:
        raise click.exceptions.Exit(1)
