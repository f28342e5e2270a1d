"""`sgam search`: a subject's facts and episodes that speak of a query, best first."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from pipeline.cli import output
from pipeline.cli.options import opened_store, reviewer, scope_fields, scoped


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
