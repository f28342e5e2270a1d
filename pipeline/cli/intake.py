"""`sgam ingest`, `remember` and `episodes`: episodes into the pipeline, and their states."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from pipeline.cli import output
from pipeline.cli.lines import read_objects, report_lines
from pipeline.cli.options import REPEAT, given_fields, json_output, opened_store, reviewer
from pipeline.cli.progress import progress
from pipeline.errors import InvalidInput, StoreUnavailable
from schemas.lifecycle import EpisodeStatus, ReceiptStatus


class _EpisodeFieldsHelp(click.Command):
    """`ingest --help` ends with the fields of an episode, read from the model itself (and only
    when help is asked for: the model's import is not a cost of every command)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from schemas.intake import EpisodeIn

        rows = [
            (name, ("required: " if field.is_required() else "") + (field.description or ""))
            for name, field in EpisodeIn.model_fields.items()
        ]
        with formatter.section("Episode fields (one JSON object per line)"):
            formatter.write_dl(rows)


@click.command(cls=_EpisodeFieldsHelp)
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--skip-invalid", is_flag=True, help="Store the valid lines, name the others.")
@json_output
def ingest(file: Path, skip_invalid: bool, as_json: bool) -> None:
    """Store episodes, one JSON object per line ('-' for stdin), and process them.

    With a broker (SGAM_BROKER_URL) the workers process them; without, this command does,
    and each episode ends done or failed before it returns. Prints a receipt per episode."""
    from pipeline.episodes.intake import ingest as ingest_episodes
    from pipeline.episodes.intake import parse_episodes
    from pipeline.settings import load_settings

    load_settings()  # a bad setting is named before the input is judged
    objects, numbers, bad = read_objects(file)
    if not objects and not bad:
        where = "stdin" if str(file) == "-" else str(file)
        click.echo(f"sgam: no episodes: {where} holds no JSON line", err=True)
        raise click.exceptions.Exit(1)
    valid, invalid = parse_episodes(objects, numbers)
    bad += invalid
    if bad and not skip_invalid:
        report_lines(bad)  # every bad line, and nothing stored
        raise click.exceptions.Exit(2)
    with opened_store() as store, progress(len(valid), "episodes") as bar:
        report = ingest_episodes(
            store,
            [episode for _, episode in valid],
            line_numbers=[line for line, _ in valid],
            progress=bar.update,
        )
    if output.wants_json(as_json):
        output.emit_json(report.receipts)
    else:
        for receipt in report.receipts:
            error = f"  {receipt.error}" if receipt.error else ""
            click.echo(f"line {receipt.line}: {receipt.status}  {receipt.episode_id}{error}")
    noted = [receipt for receipt in report.receipts if receipt.note]
    if noted:  # one line for them all: they were read with the same catalogue
        lines = ", ".join(str(receipt.line) for receipt in noted[:10])
        more = ", ..." if len(noted) > 10 else ""
        click.echo(f"sgam: note: line {lines}{more}: {noted[0].note}", err=True)
    if bad:
        report_lines(bad)
        raise click.exceptions.Exit(2)
    if report.broker_down:
        # Nothing is lost, but nothing is under way either: a retryable failure (5).
        raise StoreUnavailable(
            "the broker is unreachable: the episodes are stored and the sweeper will queue "
            "them once it answers (SGAM_BROKER_URL)"
        )


@click.command()
@click.option("--tenant", required=True, help="Tenant that owns the memory.")
@click.option("--subject", required=True, help="Whom the statement is about.")
@click.option("--text", required=True, help="What the user said ('-' for stdin).")
@click.option("--session", help="The conversation it was said in.")
@click.option(
    "--occurred-at", "--at", "occurred_at", help="When it was said (default: now); RFC 3339."
)
@click.option("--agent", default="default", show_default=True, help="Agent scope.")
@click.option("--purpose", default="default", show_default=True, help="Purpose scope.")
@click.option("--episode-id", help="The caller's id for the episode.")
@click.option("--idempotency-key", help="Repeat-safe request key.")
@json_output
def remember(
    tenant: str, subject: str, text: str, agent: str, purpose: str, as_json: bool, **options: Any
) -> None:
    """Remember an explicit statement now (the hot path); prints what was written.

    Exit 0 when something was written (or deferred to the workers), 1 when nothing was found
    to remember, 3 when the ledger refused a write (the facts involved are named)."""
    from pipeline.hot_path import remember as remember_now

    fields = {
        "tenant_id": tenant,
        "subject": subject,
        "text": sys.stdin.read() if text == "-" else text,
        "agent_id": agent,
        "purpose": purpose,
    } | given_fields(options, session="session_id")
    with opened_store() as store:
        result = remember_now(store, fields)
    if output.wants_json(as_json):
        output.emit_json(result)
    else:
        for fact in result.facts:
            click.echo(output.describe(fact))
        if result.deferred:
            click.echo(f"deferred: episode {result.episode_id} waits for a worker")
        for refusal in result.rejected:
            click.echo(f"not remembered: {refusal.reason}: {refusal.message}")
    for conflict in result.conflicts:
        click.echo(f"sgam: {type(conflict).__name__}: {conflict}", err=True)
    if result.conflicts:
        raise click.exceptions.Exit(3)
    if not result.facts and not result.deferred:
        why = "; ".join(f"{r.reason}: {r.message}" for r in result.rejected)
        click.echo(f"sgam: nothing remembered: {why or result.note}", err=True)
        raise click.exceptions.Exit(1)


@click.group(invoke_without_command=True)
@click.option("--tenant", help="Tenant whose episodes to list.")
@click.option(
    "--status",
    type=click.Choice([status.value for status in EpisodeStatus]),
    help="Only episodes in this state.",
)
@click.option("--session", help="Only this session.")
@click.option("--subject", help="Only this subject.")
@json_output
@click.pass_context
def episodes(context: click.Context, /, tenant: str | None, as_json: bool, **options: Any) -> None:
    """List a tenant's episodes with their states (or: show, retry)."""
    if context.invoked_subcommand is not None:
        return
    from pipeline.episodes.states import list_episodes
    from pipeline.errors import InvalidInput
    from schemas.fields import format_utc

    if tenant is None:
        raise InvalidInput("tenant", "is required to list episodes")
    with opened_store() as store:
        found = list_episodes(
            store, {"tenant_id": tenant} | given_fields(options, session="session_id")
        )
    if output.wants_json(as_json):
        output.emit_json(found)
    else:
        for episode in found:
            click.echo(
                f"{format_utc(episode.occurred_at)}  {episode.status:<10}  {episode.episode_id}  "
                f"session={episode.session_id}  attempts={episode.attempts}"
                + (f"  error={episode.last_error}" if episode.last_error else "")
            )
    if not found:
        raise click.exceptions.Exit(1)


@episodes.command("show")
@click.argument("episode_id")
@click.option("--tenant", required=True, help="Tenant that owns the episode.")
@click.option("--agent", help="Only an episode of this agent (as a bound key sees it).")
@click.option("--purpose", help="Only an episode of this purpose.")
@reviewer
@json_output
def episodes_show(
    episode_id: str,
    tenant: str,
    agent: str | None,
    purpose: str | None,
    include_quarantined: bool,
    as_json: bool,
) -> None:
    """The episode, its candidates, the decisions taken and the facts written (quarantined
    facts, candidates and the decisions' payloads with --include-quarantined)."""
    from pipeline.episodes.states import show_episode
    from schemas.fields import format_utc

    with opened_store() as store:
        shown = show_episode(
            store,
            tenant,
            episode_id,
            agent_id=agent,
            purpose=purpose,
            reviewer=include_quarantined,
        )
    if output.wants_json(as_json):
        output.emit_json(shown)
        return
    click.echo(f"episode {shown.episode_id} ({shown.status}, {shown.lane} lane)")
    click.echo(
        f"  {format_utc(shown.occurred_at)}  session={shown.session_id}  source={shown.source}"
    )
    click.echo(f"  text: {shown.text}")
    extracted = [f"extractor={shown.extractor or 'not yet'}"]
    if shown.prompt_version is not None:
        extracted.append(f"prompt={shown.prompt_version}")
    click.echo("  " + "  ".join(extracted))
    for candidate in shown.candidates:
        click.echo(
            f"  candidate {candidate.candidate_id}: {candidate.attribute} = "
            f"{json.dumps(candidate.value)}  {candidate.status}"
            f" (support {candidate.support})"
        )
    for decision in shown.decisions:
        facts = ", ".join(decision.fact_ids) or "no fact"
        reason = f": {decision.reason}" if decision.reason else ""
        click.echo(f"  decision {decision.kind} ({facts}){reason}")
    for fact in shown.facts:
        click.echo(f"  fact {fact.fact_id}: {fact.attribute} = {json.dumps(fact.value)}")
    if shown.note is not None:
        click.echo(f"sgam: note: {shown.note}", err=True)


@episodes.command("retry")
@click.argument("episode_ids", nargs=-1)
@click.option("--tenant", help="Only this tenant's failed episodes.")
@click.option("--idempotency-key", help="Repeat-safe request key (one episode, with --tenant).")
@json_output
def episodes_retry(
    episode_ids: tuple[str, ...], tenant: str | None, idempotency_key: str | None, as_json: bool
) -> None:
    """Re-drive failed episodes (all of them, a tenant's, or the named ones)."""
    from pipeline.episodes.drive import retry, retry_episode

    if idempotency_key is not None and (tenant is None or len(episode_ids) != 1):
        raise InvalidInput("idempotency_key", "retries one EPISODE_ID, with --tenant")
    with opened_store() as store:
        if idempotency_key is None:
            keys, driven = retry(store, tenant_id=tenant, episode_ids=episode_ids)
            statuses = {
                key[1]: driven.outcomes[key].status
                if key in driven.outcomes
                else ReceiptStatus.QUEUED
                for key in keys
            }
        else:  # a key names one request: one episode's retry, NotFailed when it is not failed
            command = {"tenant_id": tenant, "episode_id": episode_ids[0]}
            retried = retry_episode(store, command | {"idempotency_key": idempotency_key})
            statuses = {retried.episode_id: retried.status}
            if retried.replayed:
                click.echo(REPEAT, err=True)
    if output.wants_json(as_json):
        output.emit_json({"retried": len(statuses), "episodes": statuses})
    else:
        click.echo(
            f"retried {len(statuses)} episodes"
            + "".join(f"\n  {e}: {s}" for e, s in statuses.items())
        )
    if not statuses:
        raise click.exceptions.Exit(1)


@click.command()
@click.option("--tenant", help="Only this tenant (default: all).")
@click.option("--since", help="Only extractions that ended at or after this instant.")
@json_output
def usage(tenant: str | None, since: str | None, as_json: bool) -> None:
    """What the model lane spent per tenant, model and UTC day: requests, attempts, tokens,
    latency p50/p99, and cost when SGAM_LLM_PRICE_IN/OUT are set; then the embedding arm's
    calls, texts and tokens (cost with SGAM_EMBEDDING_PRICE); exit 1 when nothing."""
    from pipeline.episodes.usage import llm_usage

    query = {key: value for key, value in (("tenant_id", tenant), ("since", since)) if value}
    with opened_store() as store:
        report = llm_usage(store, query)
    if output.wants_json(as_json):
        output.emit_json(report.model_dump(mode="json"))
    else:
        for row in report.rows:
            spent = f"{row.prompt_tokens}+{row.completion_tokens} tokens"
            cost = "" if row.cost is None else f"  cost {row.cost:.4f}"
            click.echo(
                f"{row.day}  {row.tenant_id}  {row.model}  {row.requests} requests, "
                f"{row.attempts} attempts, {spent}, p50 {row.latency_p50_ms:.0f} ms, "
                f"p99 {row.latency_p99_ms:.0f} ms{cost}"
            )
        for calls in report.embeddings:
            cost = "" if calls.cost is None else f"  cost {calls.cost:.4f}"
            click.echo(
                f"{calls.day}  {calls.tenant_id}  {calls.model}  embeddings: {calls.calls} calls "
                f"({calls.query_calls} for queries, {calls.failed} failed), {calls.attempts} "
                f"attempts, {calls.texts} texts, {calls.tokens} tokens{cost}"
            )
    if not report.rows and not report.embeddings:
        raise click.exceptions.Exit(1)
