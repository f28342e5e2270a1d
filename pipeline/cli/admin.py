"""`sgam db`, `catalog`, `replay` and `demo`: operating the store."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import click

from pipeline.cli import output
from pipeline.cli.options import json_output, opened_store
from pipeline.errors import InvalidInput


@click.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the database named by SGAM_DATABASE_URL."""
    from pipeline.db.store import Store
    from pipeline.settings import load_settings

    store = Store(load_settings())
    try:
        before, after = store.upgrade()
    finally:
        store.dispose()
    if before == after:
        click.echo(f"database already at revision {after}; nothing to do", err=True)
    else:
        click.echo(f"database migrated from {before or 'empty'} to revision {after}", err=True)


@click.command()
@click.option("--to", "target_url", required=True, help="URL of an empty database to rebuild.")
def replay(target_url: str) -> None:
    """Rebuild the ledger into another database from the decision log alone."""
    from pipeline.db.store import Store
    from pipeline.embedding import after_commit
    from pipeline.rebuild import replay as replay_log
    from pipeline.settings import load_settings

    with opened_store() as source:
        try:
            # The rebuilt facts and episodes get their vectors as the replay commits.
            target = Store(
                load_settings(database_url=target_url),
                catalog=source.catalog,
                after_commit=[after_commit],
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


@click.command("purge-vacuum")
@click.option(
    "--wait",
    type=click.FloatRange(0, 86_400),
    default=60.0,
    show_default=True,
    help="Seconds to wait for transactions older than this run to end.",
)
def purge_vacuum(wait: float) -> None:
    """Rewrite every table so that nothing a purge erased is left in the database files.

    PostgreSQL keeps old row versions in its table files until VACUUM FULL, which this runs
    (it locks each table while rewriting it: run it in a quiet hour, e.g. nightly after
    purges). A transaction open anywhere in the cluster when it starts may still see the
    purged rows: it waits --wait seconds for them, then exits 5 naming them (pid, age,
    database) without rewriting anything. SQLite is rewritten by VACUUM and its WAL
    truncated."""
    with opened_store() as store:
        store.vacuum(wait_s=wait)
    click.echo("database files rewritten; purged content is gone from them", err=True)


@click.group()
def catalog() -> None:
    """The memory-schema catalogue (SGAM_CATALOG_PATH, else the bundled one SGAM_CATALOG names)."""


@catalog.command("check")
@json_output
def catalog_check(as_json: bool) -> None:
    """Report stored facts the catalogue would orphan or mis-type; exit 3 if there are any."""
    from pipeline.read.catalog_check import check_catalog

    with opened_store() as store:
        problems = check_catalog(store)
        version = store.catalog.version
    if output.wants_json(as_json):
        output.emit_json({"catalog_version": version, "problems": output.plain(problems)})
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
@click.option(
    "--bundled",
    type=click.Choice(["personal", "support"]),
    help="Print this bundled catalogue instead of the one in effect (no store is opened).",
)
@click.option(
    "--forms",
    "forms",
    is_flag=True,
    help="Print, per attribute, the statement forms the rules read it with (declared, or "
    "derived from its name, synonyms and type when it declares none).",
)
def catalog_show(bundled: str | None, forms: bool) -> None:
    """Print the catalogue in effect (or a bundled one), validated, as JSON."""
    from pipeline.extract.derived import forms_in_effect

    if bundled is not None:
        from pipeline.catalog.loader import bundled_catalog

        shown = bundled_catalog(bundled)
        output.emit_json(forms_in_effect(shown) if forms else shown)
        return
    with opened_store() as store:
        output.emit_json(forms_in_effect(store.catalog) if forms else store.catalog)


@click.command()
@click.option(
    "--database-url",
    help="Run on this store instead, in a tenant of its own (default: a fresh SQLite file).",
)
@click.option(
    "--file",
    "path",
    default="sgam-demo.sqlite3",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The SQLite file the demo creates afresh on every run.",
)
def demo(database_url: str | None, path: Path) -> None:
    """Run the example on a store of its own and print the answers; re-runnable.

    It never writes into the store SGAM_DATABASE_URL names."""
    from pipeline import open_store
    from pipeline.demo import run_demo
    from pipeline.settings import load_settings

    if database_url is None:
        for stale in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm"))):
            stale.unlink(missing_ok=True)
        database_url = f"sqlite:///{path.absolute()}"  # the hint below works from anywhere
        tenant = "acme"
    else:
        tenant = f"demo-{uuid.uuid4().hex[:8]}"  # a new tenant on every run: nothing collides
    # The demo's episodes speak of the support catalogue's attributes, whatever is configured.
    store = open_store(
        load_settings(database_url=database_url, catalog="support", catalog_path=None)
    )
    try:
        run_demo(store, click.echo, tenant=tenant)
    finally:
        store.dispose()
    # How to go on from here: the store stays, and sgam lives in the virtualenv.
    sgam = sys.argv[0] if sys.argv[0].endswith("sgam") else "sgam"
    click.echo("")
    click.echo("Explore the demo's store yourself:")
    click.echo(f"  export SGAM_DATABASE_URL={database_url} SGAM_CATALOG=support")
    click.echo(f"  {sgam} get --tenant {tenant} --subject mira")
    click.echo(f"  {sgam} history --tenant {tenant} --subject mira --attribute passport_deadline")
    click.echo(f"  {sgam} log --tenant {tenant} --limit 10")
