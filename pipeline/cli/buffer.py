"""`sgam candidates`, `confirm`, `reject` and `consolidate`: the recurrence buffer and the
nightly run."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from pipeline.cli import output
from pipeline.cli.options import REPEAT, given_fields, json_output, opened_store
from schemas.lifecycle import CandidateStatus

STATUSES = [status.value for status in CandidateStatus] + ["all"]


@click.command()
@click.option("--tenant", required=True, help="Tenant whose buffer to list.")
@click.option("--subject", help="Only this subject.")
@click.option(
    "--status",
    type=click.Choice(STATUSES),
    default=CandidateStatus.BUFFERED.value,
    show_default=True,
    help="Only candidates in this state.",
)
@json_output
def candidates(tenant: str, status: str, as_json: bool, **options: Any) -> None:
    """Candidates in the recurrence buffer, with their support; exit 1 when there are none."""
    from pipeline.buffer.review import list_candidates
    from schemas.fields import format_utc

    query = {"tenant_id": tenant, "status": None if status == "all" else status}
    with opened_store() as store:
        found = list_candidates(store, query | given_fields(options))
    if output.wants_json(as_json):
        output.emit_json(found)
    else:
        for candidate in found:
            click.echo(
                f"{candidate.candidate_id}  {candidate.subject}.{candidate.attribute} = "
                f"{json.dumps(candidate.value, ensure_ascii=False)}  {candidate.status}  "
                f"support={candidate.support}  last seen {format_utc(candidate.last_seen_at)}"
            )
    if not found:
        raise click.exceptions.Exit(1)


def _decide(verb: str) -> Any:
    @click.command(verb)
    @click.argument("candidate_id")
    @click.option("--tenant", required=True, help="Tenant that owns the candidate.")
    @click.option("--actor", default="cli", show_default=True, help="Who decides (audit).")
    @click.option(
        "--by",
        type=click.Choice(["user", "reviewer"]),
        default="user",
        show_default=True,
        help="The user the fact is about (user_confirmed trust) or a reviewer (verified).",
    )
    @click.option("--idempotency-key", help="Repeat-safe request key.")
    @json_output
    def command(
        candidate_id: str,
        tenant: str,
        actor: str,
        by: str,
        as_json: bool,
        **options: Any,
    ) -> None:
        from pipeline.buffer import review

        fields = {"tenant_id": tenant, "candidate_id": candidate_id, "actor": actor, "by": by}
        with opened_store() as store:
            result = getattr(review, verb)(store, fields | given_fields(options))
        if result.replayed:
            click.echo(REPEAT, err=True)
        if output.wants_json(as_json):
            output.emit_json(result)
        else:
            click.echo(f"candidate {result.candidate_id}: {result.status}")
            if result.fact is not None:
                click.echo(output.describe(result.fact))

    command.help = {
        "confirm": "The user (or, with --by reviewer, a reviewer) confirms a buffered "
        "candidate: it becomes a fact, valid from its first support.",
        "reject": "Drop a buffered candidate for good.",
    }[verb]
    if verb == "reject":
        command.params.append(click.Option(["--reason"], help="Why: it goes to the log."))
    return command


confirm = _decide("confirm")
reject = _decide("reject")


@click.command()
@click.option("--tenant", help="Only this tenant (default: all).")
@click.option("--now", help="Consolidate as of this instant (default: the clock).")
@click.option("--force", is_flag=True, default=None, help="Allow --now after the clock.")
@json_output
def consolidate(as_json: bool, **options: Any) -> None:
    """The nightly run: promote eligible candidates, expire stale ones and facts past their
    retention, re-drive failed episodes, re-queue stuck ones; prints and logs a report.
    Running it twice at the same --now changes nothing the second time."""
    from pipeline.consolidation import STEPS
    from pipeline.consolidation import consolidate as run

    with opened_store() as store:
        if sys.stderr.isatty():
            with click.progressbar(
                length=len(STEPS), label="consolidating", file=sys.stderr
            ) as bar:
                report = run(
                    store, given_fields(options, tenant="tenant_id"), step=lambda _: bar.update(1)
                )
        else:
            report = run(store, given_fields(options, tenant="tenant_id"))
    if output.wants_json(as_json):
        output.emit_json(report)
    else:
        click.echo(
            ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in report.counts.items())
        )
