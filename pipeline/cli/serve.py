"""`sgam serve` (the HTTP service), `sgam openapi` (its OpenAPI document) and
`sgam keys create|list|revoke` (its API keys)."""

from __future__ import annotations

import errno
import os
import secrets
import socket
import tempfile
from typing import Any

import click

from pipeline.cli import output
from pipeline.cli.errors import UNAVAILABLE, fail
from pipeline.cli.options import given_fields, json_output, opened_store
from pipeline.errors import InvalidInput

# The HTTP app, named as uvicorn imports it: `pipeline.api.app` stands beside the command line
# (both are composition roots), so the command line names it rather than importing it.
APP_FACTORY = "pipeline.api.app:create_app"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="TCP port."
)
@click.option(
    "--workers", type=click.IntRange(1, 64), default=1, show_default=True, help="Processes."
)
@click.option("--access-log", is_flag=True, help="Log every request (costs latency).")
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="The server's log level.",
)
def serve(host: str, port: int, workers: int, access_log: bool, log_level: str) -> None:
    """Serve the HTTP API for chat backends (OpenAPI at /openapi.json, docs at /docs).

    Requests carry `Authorization: Bearer KEY` (see `sgam keys create`)."""
    import uvicorn

    from pipeline.api.protocol import PROTOCOL
    from pipeline.logs import uvicorn_config

    with opened_store() as store:
        pass  # the store is reachable and migrated, or this exits 2 or 5 saying why
    _check_address(host, port)
    if workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # Request metrics are counted per process; this directory lets /metrics sum them.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="sgam-metrics-")
    # The review pages sign their session cookies; every worker process must share the secret.
    os.environ.setdefault("SGAM_UI_SESSION_SECRET", secrets.token_hex(32))
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=access_log,
        log_level=log_level,
        # Every server process logs through SGAM's handler, in SGAM_LOG_FORMAT.
        log_config=uvicorn_config(store.settings.log_format, log_level),
        server_header=False,
        # X-Forwarded-* only from the proxies SGAM_FORWARDED_ALLOW_IPS names (default none):
        # anyone else could pick the address its rate limits count and pass for HTTPS.
        proxy_headers=bool(store.settings.forwarded_allow_ips),
        forwarded_allow_ips=store.settings.forwarded_allow_ips or "",
        http=PROTOCOL,  # a request uvicorn cannot parse is refused with a problem document
    )


def _check_address(host: str, port: int) -> None:
    """One line and exit 5 when the port is taken (2 when the host is no address of ours),
    rather than uvicorn's traceback of a failed bind. uvicorn binds again right after: a
    process that takes the port in between still meets uvicorn's own refusal."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise InvalidInput("host", f"{host} cannot be resolved ({error.strerror})") from error
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:  # unavailable now, maybe not later: 5
                fail(
                    UNAVAILABLE,
                    f"port {port} on {host} is in use by another process; stop it or choose "
                    "another --port",
                )
                raise click.exceptions.Exit(UNAVAILABLE) from error
            raise InvalidInput(
                "host", f"cannot listen on {host}:{port} ({error.strerror})"
            ) from error


@click.command()
def openapi() -> None:
    """Print the HTTP service's OpenAPI document (what `sgam serve` answers at /openapi.json).

    It is the document for the configured catalogue and limits (the bundled default catalogue
    when none is set); the database is never opened, as the document depends only on them."""
    import json

    from uvicorn.importer import import_from_string

    from pipeline.db.store import Store
    from pipeline.settings import load_settings

    store = Store(load_settings())  # not open_store: no schema check, no connection
    try:
        create_app = import_from_string(APP_FACTORY)
        document = create_app(store.settings, store).openapi()
    finally:
        store.dispose()
    # FastAPI's order, the server's own: the same settings print the same bytes, so a
    # checked-in copy can be compared byte for byte.
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


@click.group()
def keys() -> None:
    """API keys of the HTTP service: create (the key is printed once), list, revoke."""


@keys.command("create")
@click.option("--tenant", required=True, help="The tenant every request of the key acts in.")
@click.option(
    "--role",
    required=True,
    type=click.Choice(["reader", "writer", "reviewer", "admin"]),
    help="reader: reads, context; writer: + ingest, remember, put; reviewer: + candidates, "
    "quarantine, promote; admin: + forget, purge, keys.",
)
@click.option("--agent", help="Bind the key to this agent (default: any).")
@click.option("--purpose", help="Bind the key to this purpose (default: any).")
@click.option("--name", help="A name to recognise the key by.")
@click.option("--expires-at", help="When the key stops working (RFC 3339).")
@json_output
def create(tenant: str, role: str, as_json: bool, **options: Any) -> None:
    """Create a key and print it once: only its hash is stored."""
    from pipeline.access.keys import IssuedKey, create_key

    fields = {"tenant_id": tenant, "role": role} | given_fields(
        options, agent="agent_id", purpose="purpose"
    )
    with opened_store() as store:
        key, secret = create_key(store, fields)
    if output.wants_json(as_json):
        output.emit_json(IssuedKey(key=key, secret=secret))
        return
    click.echo(secret)
    click.echo(f"key {key.key_id}: {key.role} in tenant {key.tenant_id}; shown only now", err=True)


@keys.command("list")
@click.option("--tenant", required=True, help="Tenant whose keys to list.")
@json_output
def list_(tenant: str, as_json: bool) -> None:
    """The tenant's keys (never their secrets); exit 1 when it has none."""
    from pipeline.access.keys import list_keys
    from schemas.fields import format_utc

    with opened_store() as store:
        found = list_keys(store, tenant)
    if output.wants_json(as_json):
        output.emit_json(found)
    else:
        for key in found:
            expires = format_utc(key.expires_at) or "never"
            state = "revoked" if key.revoked_at else f"expires {expires}"
            scope = f"agent={key.agent_id or '*'} purpose={key.purpose or '*'}"
            click.echo(
                f"{key.key_id}  {key.prefix}…  {key.role:<8}  {scope}  {state}  {key.name or ''}"
            )
    if not found:
        raise click.exceptions.Exit(1)


@keys.command("revoke")
@click.argument("key_id")
@json_output
def revoke(key_id: str, as_json: bool) -> None:
    """Revoke a key for good: its next request is refused (401). KEY_ID is the id that
    `sgam keys list` shows, or the whole key."""
    from pipeline.access.keys import revoke_key

    with opened_store() as store:
        key = revoke_key(store, key_id)
    if output.wants_json(as_json):
        output.emit_json(key)
    else:
        click.echo(f"revoked {key.key_id} ({key.role} in tenant {key.tenant_id})")
