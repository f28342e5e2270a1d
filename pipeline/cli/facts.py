"""`sgam put`, `get` and `history`: writing and reading facts."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from pipeline.cli import output
from pipeline.cli.options import REPEAT, opened_store, reviewer, scope_fields, scoped
from pipeline.errors import InvalidInput

# The key a state tag names (pipeline/read/state.py), out of a fact's or a query's fields.
_KEY = {"tenant_id", "agent_id", "purpose", "subject", "attribute"}
_ETAG = click.option(
    "--etag",
    "show_etag",
    is_flag=True,
    help='Also print the key\'s state tag on stderr (etag: "..."), for put --if-match.',
)
_DEPRECATED = (
    "note: --expected-version is deprecated: it names a fact version, which a newer fact of "
    "the key can share; pass the tag `get --etag` prints as --if-match"
)
_TAG = re.compile(r'"?([0-9a-f]{1,64})"?')


@click.command()
@scoped
@click.option("--attribute", required=True, help="Catalogue attribute.")
@click.option("--value", help="The value, typed by the catalogue.")
@click.option(
    "--value-file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Read the value from a file ('-' for stdin).",
)
@click.option("--valid-from", required=True, help="When the value starts to hold (RFC 3339).")
@click.option("--valid-to", help="When the value stops holding.")
@click.option("--source", required=True, help="Id of the episode that states the fact.")
@click.option("--evidence", help="Quote from the episode.")
@click.option("--trust", help="user_confirmed | verified (default) | inferred | untrusted")
@click.option("--confidence", help="0..1, default 1.")
@click.option("--cardinality", help="one | many; must match the catalogue.")
@click.option("--expires-at", help="An expiry earlier than the kind's retention.")
@click.option(
    "--if-match",
    help="The key's state tag as `get --etag` printed it; refused if the key was written since.",
)
@click.option(
    "--expected-version",
    help="Deprecated (a newer fact can have the same version): use --if-match.",
)
@click.option("--idempotency-key", help="Repeat-safe request key.")
@click.option("--actor", default="cli", show_default=True, help="Who issues the write (audit).")
@_ETAG
def put(
    tenant: str,
    agent: str,
    purpose: str,
    as_json: bool,
    value: str | None,
    value_file: Path | None,
    source: str,
    if_match: str | None,
    show_etag: bool,
    **options: Any,
) -> None:
    """Write a fact; prints the fact that now holds the value (with --etag, and a
    single-valued attribute, the key's state tag after the write on stderr)."""
    from pipeline.ledger.batch import put as put_fact
    from pipeline.read.state import state_tag
    from schemas.facts import Cardinality

    if options.get("expected_version") is not None:
        click.echo(_DEPRECATED, err=True)
    fields = scope_fields(
        tenant,
        agent,
        purpose,
        value=_read_value(value, value_file),
        source_episode_id=source,
        expected_state=_tag(if_match),
        **options,
    )
    with opened_store() as store:
        result = put_fact(store, fields)
        tag = result.state if show_etag else None
        if show_etag and tag is None and result.fact.cardinality is Cardinality.ONE:
            tag = state_tag(store, result.fact.model_dump(include=_KEY))  # a repeat: as now
    if result.replayed:
        click.echo(REPEAT, err=True)
    elif not result.written:
        click.echo("unchanged: the ledger already holds this value", err=True)
    output.facts(result.fact, as_json)
    if tag is not None:
        click.echo(f'etag: "{tag}"', err=True)


def _tag(given: str | None) -> str | None:
    """The tag as printed (`"3f9a..."`) or bare; None when not given."""
    if given is None:
        return None
    found = _TAG.fullmatch(given.strip())
    if found is None:
        raise InvalidInput(
            "if_match", 'must be one tag as `sgam get` or `put` printed it, e.g. "0"'
        )
    return found.group(1)


def _read_value(value: str | None, value_file: Path | None) -> str:
    if (value is None) == (value_file is None):
        raise InvalidInput("value", "give exactly one of --value and --value-file")
    if value is not None:
        return value
    assert value_file is not None
    try:
        data = sys.stdin.buffer.read() if str(value_file) == "-" else value_file.read_bytes()
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("value_file", "is not valid UTF-8") from None
    except OSError as exc:
        raise InvalidInput("value_file", f"cannot be read: {exc.strerror}") from None


@click.command()
@scoped
@reviewer
@click.option("--attribute", help="One attribute; all of the subject's when omitted.")
@click.option("--at", help="Valid time to ask about (default: now).")
@click.option("--known-at", help="Answer as the ledger believed at this time.")
@_ETAG
def get(
    tenant: str, agent: str, purpose: str, as_json: bool, show_etag: bool, **options: Any
) -> None:
    """What holds for a subject at an instant; exit 1 when nothing does. With --etag, a
    single-valued --attribute and no --known-at, the key's state tag on stderr (read before
    the facts: a write in between makes the tag stale, never the facts)."""
    from pipeline.read.facts import get as get_facts
    from pipeline.read.state import state_tag
    from schemas.facts import Cardinality

    tag = None
    with opened_store() as store:
        query = scope_fields(tenant, agent, purpose, **options)
        attribute = options.get("attribute")
        spec = store.catalog.attributes.get(attribute) if attribute else None
        single = spec is not None and spec.cardinality is Cardinality.ONE
        if show_etag and single and options.get("known_at") is None:
            tag = state_tag(store, {name: query[name] for name in _KEY})
        found = get_facts(store, query)
    if single:
        output.facts(found[0] if found else None, as_json)
    else:
        output.facts(found, as_json)
    if tag is not None:
        click.echo(f'etag: "{tag}"', err=True)
    if not found:
        raise click.exceptions.Exit(1)


@click.command()
@scoped
@reviewer
@click.option("--attribute", required=True, help="The attribute whose timeline to show.")
@click.option("--known-at", help="The timeline as the ledger believed it at this time.")
@click.option(
    "--versions", is_flag=True, help="Every row version ever recorded, quarantined too (audit)."
)
def history(
    tenant: str, agent: str, purpose: str, as_json: bool, versions: bool, **options: Any
) -> None:
    """Every interval of the belief in valid-time order, with supersession links."""
    from pipeline.read.facts import history as fact_history

    if versions:  # the audit trail leaves nothing out
        options["include_quarantined"] = True
    with opened_store() as store:
        found = fact_history(
            store, scope_fields(tenant, agent, purpose, **options), versions=versions
        )
    output.facts(found, as_json)
    if not found:
        raise click.exceptions.Exit(1)
