"""`sgam promote`, `dismiss`, `forget`, `expire`, `context` and `log`: the lifecycle of what is
stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from pipeline.cli import output
from pipeline.cli.options import (
    F,
    given_fields,
    json_output,
    opened_store,
    scope_fields,
    scoped,
)
from pipeline.cli.output import plural

if TYPE_CHECKING:
    from pipeline.db.store import Store
    from pipeline.ledger.results import PutResult
    from schemas.results import LoggedDecision


def _a_quarantined_fact(verb: str) -> Callable[[F], F]:
    """The options of a reviewer's decision on one quarantined fact (promote, dismiss)."""

    def decorate(command: F) -> F:
        for option in reversed(
            [
                click.argument("fact_id"),
                click.option("--tenant", required=True, help="Tenant that owns the fact."),
                click.option(
                    "--expected-version",
                    help="The fact's current version; a mismatch changes nothing.",
                ),
                click.option("--idempotency-key", help="Repeat-safe request key."),
                click.option("--actor", default="cli", show_default=True, help=f"Who {verb}."),
                json_output,
            ]
        ):
            command = option(command)
        return command

    return decorate


def _decide(
    decision: Callable[[Store, dict[str, Any]], PutResult],
    fact_id: str,
    tenant: str,
    as_json: bool,
    options: dict[str, Any],
) -> None:
    fields = {"tenant_id": tenant, "fact_id": fact_id} | given_fields(options)
    with opened_store() as store:
        result = decision(store, fields)
    output.facts(result.fact, as_json)


@click.command()
@_a_quarantined_fact("promotes (audit)")
def promote(fact_id: str, tenant: str, as_json: bool, **options: Any) -> None:
    """Release a quarantined fact: it becomes verified and may supersede others."""
    from pipeline.ledger.promote import promote as promote_fact

    _decide(promote_fact, fact_id, tenant, as_json, options)


@click.command()
@_a_quarantined_fact("dismisses (audit)")
@click.option("--reason", help="Why, for the decision log (at most 500 characters).")
def dismiss(fact_id: str, tenant: str, as_json: bool, **options: Any) -> None:
    """Refuse a quarantined fact: hidden for good, it can never be promoted."""
    from pipeline.ledger.dismiss import dismiss as dismiss_fact

    fields = {"tenant_id": tenant, "fact_id": fact_id} | given_fields(options)
    with opened_store() as store:
        result = dismiss_fact(store, fields)
    fact = result.fact
    if output.wants_json(as_json):
        output.emit_json(fact)  # status "dismissed", as on every door
        return
    value = json.dumps(fact.value, ensure_ascii=False)
    click.echo(
        f"dismissed {fact.subject}.{fact.attribute} = {value}  fact={fact.fact_id} "
        f"v{fact.version}: hidden from every read for good, it can never be promoted"
    )


@click.command()
@click.option("--tenant", required=True, help="Tenant that owns the subject.")
@click.option("--subject", required=True, help="Entity to forget.")
@click.option("--purge", is_flag=True, help="Also erase values, evidence and logged content.")
@click.option("--idempotency-key", help="Repeat-safe request key.")
@click.option("--actor", default="cli", show_default=True, help="Who forgets (audit).")
@json_output
def forget(tenant: str, subject: str, purge: bool, as_json: bool, **options: Any) -> None:
    """Hide every fact about a subject from every read; prints how many facts it hid."""
    from pipeline.ledger.forget import forget as forget_subject

    fields = {"tenant_id": tenant, "subject": subject, "purge": purge} | given_fields(options)
    with opened_store() as store:
        result = forget_subject(store, fields)
    if output.wants_json(as_json):
        output.emit_json(result)
    if not result.hidden and not result.purged:  # nothing to hide: nothing found (1)
        click.echo(f"sgam: nothing stored about {subject} in tenant {tenant}", err=True)
        raise click.exceptions.Exit(1)
    if not output.wants_json(as_json):
        verb = "hid and purged" if result.purged else "hid"
        click.echo(f"{verb} {result.hidden} {plural(result.hidden, 'fact')} about {subject}")
    if result.files_scrubbed is False:
        click.echo(
            "note: erased content may remain in old row versions in the database files "
            "until `sgam purge-vacuum` runs",
            err=True,
        )


@click.command()
@click.option("--tenant", help="Only this tenant (default: all).")
@click.option(
    "--now",
    help="Expire as of this instant (default: the clock). A later one needs --force.",
)
@click.option(
    "--force",
    is_flag=True,
    default=None,
    help="Allow --now after the clock: facts whose retention has not passed yet expire for good.",
)
@click.option("--actor", default="cli", show_default=True, help="Who expires (audit).")
@json_output
def expire(as_json: bool, **options: Any) -> None:
    """Write explicit expired versions and events for facts past their retention.

    Run it nightly; reads already hide facts past their retention, expire records it."""
    from pipeline.ledger.expire import expire as expire_facts

    with opened_store() as store:
        result = expire_facts(store, given_fields(options, tenant="tenant_id"))
    if output.wants_json(as_json):
        output.emit_json(
            {"expired": len(result.expired_fact_ids), "fact_ids": result.expired_fact_ids}
        )
    else:
        click.echo(f"expired {len(result.expired_fact_ids)} facts")


@click.command()
@scoped
@click.option("--query", help="What the model is about to answer; ranks matching facts first.")
@click.option("--budget-tokens", default="500", show_default=True, help="Token budget.")
@click.option(
    "--episodes",
    is_flag=True,
    default=None,
    help="Also the episodes matching --query, after the facts, labelled with when said.",
)
def context(tenant: str, agent: str, purpose: str, as_json: bool, **options: Any) -> None:
    """The smallest cited context about a subject that fits the token budget."""
    from pipeline.read.context import assemble

    with opened_store() as store:
        assembled = assemble(store, scope_fields(tenant, agent, purpose, **options))
    if output.wants_json(as_json):
        output.emit_json(assembled)
    else:
        click.echo(assembled.text or "(no facts)")
    if not assembled.items:
        raise click.exceptions.Exit(1)


@click.command("log")
@click.option("--tenant", required=True, help="Tenant whose decisions to show.")
@click.option("--subject", help="Only decisions about this subject.")
@click.option("--since", help="Only decisions at or after this instant.")
@click.option("--until", help="Only decisions before this instant.")
@click.option("--limit", default="100", show_default=True, help="At most this many.")
@click.option("--oldest-first", is_flag=True, default=None, help="Oldest first (default: newest).")
@json_output
def show_log(tenant: str, as_json: bool, **options: Any) -> None:
    """The decision log of a tenant, newest first; exit 1 when nothing matches."""
    from pipeline.ledger.log import decision_log

    with opened_store() as store:
        events = decision_log(store, {"tenant_id": tenant} | given_fields(options))
    if output.wants_json(as_json):
        output.emit_json(events)
    else:
        for event in events:
            click.echo(_log_line(event))
    if not events:
        raise click.exceptions.Exit(1)


def _log_line(event: LoggedDecision) -> str:
    from schemas.fields import format_utc

    facts = ",".join(event.fact_ids) or "-"
    reason = f"  {event.reason}" if event.reason else ""
    return (
        f"{format_utc(event.occurred_at)}  #{event.event_id}  {event.kind:<10}  "
        f"{event.subject or '-'}  facts={facts}  by={event.actor}{reason}"
    )
