"""The `sgam` command line.

Exit codes: 0 ok, 1 nothing found, 2 invalid input, 3 conflict, 4 internal error,
5 store busy (retry later). Every failure is one line on stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from pipeline import output
from pipeline.catalog_check import check_catalog
from pipeline.context import assemble
from pipeline.decisions import decision_log
from pipeline.errors import CatalogError, InvalidInput, SgamError
from pipeline.forget import forget as forget_subject
from pipeline.ledger import put as put_fact
from pipeline.lifecycle import expire as expire_facts
from pipeline.lifecycle import promote as promote_fact
from pipeline.read import get as get_facts
from pipeline.read import history as fact_history
from pipeline.replay import replay as replay_log
from pipeline.settings import Settings
from pipeline.store import Store, open_store
from schemas.facts import Cardinality

F = TypeVar("F", bound=Callable[..., Any])

# CLI spelling of the API's field names, so errors name the option the user typed.
OPTION_NAMES = {"tenant_id": "--tenant", "agent_id": "--agent", "source_episode_id": "--source"}


@click.group(help=__doc__)
def app() -> None:
    pass


@app.group()
def db() -> None:
    """Database schema."""


json_output = click.option(
    "--json", "as_json", is_flag=True, help="JSON output (default: on a pipe)."
)


def scoped(command: F) -> F:
    """The scope and subject options every tenant-bound command takes."""
    for option in reversed(
        [
            click.option("--tenant", required=True, help="Tenant that owns the memory."),
            click.option("--subject", required=True, help="Entity the facts are about."),
            click.option("--agent", default="default", show_default=True, help="Agent scope."),
            click.option("--purpose", default="default", show_default=True, help="Purpose scope."),
            json_output,
        ]
    ):
        command = option(command)
    return command


def reviewer(command: F) -> F:
    return click.option(
        "--include-quarantined", is_flag=True, help="Reviewer view: show quarantined facts."
    )(command)


@contextmanager
def _store() -> Iterator[Store]:
    store = open_store(Settings())
    try:
        yield store
    finally:
        store.dispose()


def _fields(tenant: str, agent: str, purpose: str, **given: Any) -> dict[str, Any]:
    """API fields from CLI options; options not given are left to the API's defaults."""
    return {"tenant_id": tenant, "agent_id": agent, "purpose": purpose} | _given(given)


def _given(options: dict[str, Any], **renamed: str) -> dict[str, Any]:
    return {renamed.get(name, name): value for name, value in options.items() if value is not None}


@db.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the database named by SGAM_DATABASE_URL."""
    store = Store(Settings())
    try:
        store.upgrade()
    finally:
        store.dispose()
    click.echo("database is at the latest schema", err=True)


@app.command()
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
@click.option("--expected-version", help="Version of the fact holding at valid_from (0: none).")
@click.option("--idempotency-key", help="Repeat-safe request key.")
@click.option("--actor", default="cli", show_default=True, help="Who issues the write (audit).")
def put(
    tenant: str,
    agent: str,
    purpose: str,
    as_json: bool,
    value: str | None,
    value_file: Path | None,
    source: str,
    **options: Any,
) -> None:
    """Write a fact; prints the fact that now holds the value."""
    fields = _fields(
        tenant,
        agent,
        purpose,
        value=_read_value(value, value_file),
        source_episode_id=source,
        **options,
    )
    with _store() as store:
        result = put_fact(store, fields)
    if not result.written:
        click.echo("unchanged: the ledger already holds this value", err=True)
    output.facts(result.fact, as_json)


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


@app.command()
@scoped
@reviewer
@click.option("--attribute", help="One attribute; all of the subject's when omitted.")
@click.option("--at", help="Valid time to ask about (default: now).")
@click.option("--known-at", help="Answer as the ledger believed at this time.")
def get(tenant: str, agent: str, purpose: str, as_json: bool, **options: Any) -> None:
    """What holds for a subject at an instant; exit 1 when nothing does."""
    with _store() as store:
        found = get_facts(store, _fields(tenant, agent, purpose, **options))
        attribute = options.get("attribute")
        spec = store.catalog.attributes.get(attribute) if attribute else None
    if spec is not None and spec.cardinality is Cardinality.ONE:
        output.facts(found[0] if found else None, as_json)
    else:
        output.facts(found, as_json)
    if not found:
        raise click.exceptions.Exit(1)


@app.command()
@scoped
@reviewer
@click.option("--attribute", required=True, help="The attribute whose timeline to show.")
@click.option("--known-at", help="The timeline as the ledger believed it at this time.")
@click.option("--versions", is_flag=True, help="Every row version ever recorded (audit).")
def history(
    tenant: str, agent: str, purpose: str, as_json: bool, versions: bool, **options: Any
) -> None:
    """Every interval of the belief in valid-time order, with supersession links."""
    with _store() as store:
        found = fact_history(store, _fields(tenant, agent, purpose, **options), versions=versions)
    output.facts(found, as_json)
    if not found:
        raise click.exceptions.Exit(1)


@app.command()
@click.argument("fact_id")
@click.option("--tenant", required=True, help="Tenant that owns the fact.")
@click.option("--expected-version", help="The fact's current version; a mismatch changes nothing.")
@click.option("--idempotency-key", help="Repeat-safe request key.")
@click.option("--actor", default="cli", show_default=True, help="Who promotes (audit).")
@json_output
def promote(fact_id: str, tenant: str, as_json: bool, **options: Any) -> None:
    """Release a quarantined fact: it becomes verified and may supersede others."""
    fields = {"tenant_id": tenant, "fact_id": fact_id} | _given(options)
    with _store() as store:
        result = promote_fact(store, fields)
    output.facts(result.fact, as_json)


@app.command()
@click.option("--tenant", required=True, help="Tenant that owns the subject.")
@click.option("--subject", required=True, help="Entity to forget.")
@click.option("--purge", is_flag=True, help="Also erase values, evidence and logged content.")
@click.option("--idempotency-key", help="Repeat-safe request key.")
@click.option("--actor", default="cli", show_default=True, help="Who forgets (audit).")
@json_output
def forget(tenant: str, subject: str, purge: bool, as_json: bool, **options: Any) -> None:
    """Hide every fact about a subject from every read; prints how many facts it hid."""
    fields = {"tenant_id": tenant, "subject": subject, "purge": purge} | _given(options)
    with _store() as store:
        result = forget_subject(store, fields)
    if output.wants_json(as_json):
        output.emit_json(result.to_json())
    else:
        verb = "hid and purged" if result.purged else "hid"
        click.echo(f"{verb} {result.hidden} facts about {subject}")


@app.command()
@click.option("--tenant", help="Only this tenant (default: all).")
@click.option("--now", help="Expire as of this instant (default: the clock).")
@click.option("--actor", default="cli", show_default=True, help="Who expires (audit).")
@json_output
def expire(as_json: bool, **options: Any) -> None:
    """Write explicit expired versions and events for facts past their retention."""
    with _store() as store:
        result = expire_facts(store, _given(options, tenant="tenant_id"))
    if output.wants_json(as_json):
        output.emit_json(
            {"expired": len(result.expired_fact_ids), "fact_ids": result.expired_fact_ids}
        )
    else:
        click.echo(f"expired {len(result.expired_fact_ids)} facts")


@app.command()
@click.option("--to", "target_url", required=True, help="URL of an empty database to rebuild.")
def replay(target_url: str) -> None:
    """Rebuild the ledger into another database from the decision log alone."""
    settings = Settings()
    with _store() as source:
        try:
            target = Store(
                settings.model_copy(update={"database_url": target_url}), catalog=source.catalog
            )
        except InvalidInput as bad:
            raise InvalidInput("to", bad.problem) from None
        try:
            report = replay_log(source, target)
        finally:
            target.dispose()
    click.echo(
        f"replayed {report.events} events ({report.applied} applied) in {report.seconds:.2f} s",
        err=True,
    )


@app.command()
@scoped
@click.option("--query", help="What the model is about to answer; ranks matching facts first.")
@click.option("--budget-tokens", default="500", show_default=True, help="Token budget.")
def context(tenant: str, agent: str, purpose: str, as_json: bool, **options: Any) -> None:
    """The smallest cited context about a subject that fits the token budget."""
    with _store() as store:
        assembled = assemble(store, _fields(tenant, agent, purpose, **options))
    if output.wants_json(as_json):
        output.emit_json(assembled.model_dump(mode="json") | {"text": assembled.text})
    else:
        click.echo(assembled.text or "(no facts)")
    if not assembled.items:
        raise click.exceptions.Exit(1)


@app.command("log")
@click.option("--tenant", required=True, help="Tenant whose decisions to show.")
@click.option("--subject", help="Only decisions about this subject.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100_000))
def show_log(tenant: str, subject: str | None, limit: int) -> None:
    """The decision log of a tenant, oldest first, as JSON lines."""
    with _store() as store:
        for event in decision_log(store, tenant_id=tenant, subject=subject, limit=limit):
            click.echo(json.dumps(event, ensure_ascii=False))


@app.group()
def catalog() -> None:
    """The memory-schema catalogue (SGAM_CATALOG_PATH, else the bundled default)."""


@catalog.command("check")
@json_output
def catalog_check(as_json: bool) -> None:
    """Report stored facts the catalogue would orphan or mis-type; exit 3 if there are any."""
    with _store() as store:
        problems = check_catalog(store)
        version = store.catalog.version
    if output.wants_json(as_json):
        output.emit_json(
            {"catalog_version": version, "problems": [problem.to_json() for problem in problems]}
        )
    else:
        for problem in problems:
            click.echo(
                f"{problem.tenant_id}/{problem.subject}.{problem.attribute} "
                f"fact={problem.fact_id}: {problem.problem}"
            )
        click.echo(f"catalogue {version}: {len(problems)} problems", err=True)
    if problems:
        raise click.exceptions.Exit(3)


@catalog.command("show")
def catalog_show() -> None:
    """Print the catalogue in effect, validated, as JSON."""
    with _store() as store:
        output.emit_json(store.catalog.model_dump(mode="json"))


@app.command()
def demo() -> None:
    """Run the passport-deadline example on the configured store and print the answers."""
    from pipeline.demo import run_demo

    with _store() as store:
        run_demo(store, click.echo)


def _option_name(field: str) -> str:
    if field.isupper():  # an environment variable, not an option
        return field
    head, _, rest = field.partition(".")
    name = OPTION_NAMES.get(head, "--" + head.replace("_", "-"))
    return f"{name}.{rest}" if rest else name


def _fail(code: int, message: str) -> int:
    sys.stderr.write(f"sgam: {message}\n")
    return code


def run(args: list[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    for stream in (sys.stdout, sys.stderr):
        # Arguments with undecodable bytes must not crash the error report that names them.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        code = app.main(args=args, prog_name="sgam", standalone_mode=False)
    except click.exceptions.Abort:
        return _fail(130, "aborted")
    except click.ClickException as usage:
        return _fail(2, usage.format_message().replace("\n", " "))
    except CatalogError as bad:  # names a file and line, not an option
        return _fail(2, f"catalogue {bad.location}: {bad.problem}")
    except InvalidInput as bad:
        return _fail(2, f"{_option_name(bad.field)}: {bad.problem}")
    except SgamError as error:
        return _fail(error.exit_code, f"{type(error).__name__}: {error}")
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run())
