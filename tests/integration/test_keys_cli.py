"""`sgam keys create|list|revoke`: the key is printed once, only its hash is stored, and a
revoked key no longer authenticates."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import create_engine, text

from pipeline.access.keys import authenticate
from pipeline.db.store import open_store
from pipeline.settings import Settings
from tests.integration.ledger_helpers import cli


def test_create_list_revoke(
    cli_env: object, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(
        capsys,
        "keys",
        "create",
        "--tenant",
        "acme",
        "--role",
        "writer",
        "--agent",
        "bot",
        "--name",
        "chat",
        "--json",
    )
    created = json.loads(out)
    secret, key = created["secret"], created["key"]
    store = open_store(Settings(database_url=database_url))
    try:
        found = authenticate(store, secret)
        listed = json.loads(cli(capsys, "keys", "list", "--tenant", "acme", "--json")[1])
        revoked = cli(capsys, "keys", "revoke", key["key_id"], "--json")
        after = authenticate(store, secret)
    finally:
        store.dispose()
    engine = create_engine(database_url)
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT * FROM api_keys")).mappings().one()
    engine.dispose()

    assert code == 0
    assert secret.startswith(key["prefix"])
    assert (key["tenant_id"], key["role"], key["agent_id"], key["purpose"]) == (
        "acme",
        "writer",
        "bot",
        None,
    )
    assert not isinstance(found, str)
    assert found.key_id == key["key_id"]
    assert [k["key_id"] for k in listed] == [key["key_id"]]
    assert "secret" not in json.dumps(listed)
    assert secret not in json.dumps(dict(stored), default=str)
    assert stored["secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert revoked[0] == 0
    assert json.loads(revoked[1])["revoked_at"] is not None
    assert after == "revoked"


def test_bad_options_and_unknown_keys(cli_env: object, capsys: pytest.CaptureFixture[str]) -> None:
    past = cli(
        capsys,
        "keys",
        "create",
        "--tenant",
        "acme",
        "--role",
        "reader",
        "--expires-at",
        "2000-01-01T00:00:00Z",
    )
    blank = cli(capsys, "keys", "create", "--tenant", " ", "--role", "reader")
    role = cli(capsys, "keys", "create", "--tenant", "acme", "--role", "root")
    missing = cli(capsys, "keys", "revoke", "0123456789abcdef")
    none = cli(capsys, "keys", "list", "--tenant", "acme")

    assert (past[0], past[2]) == (2, "sgam: --expires-at: must be in the future\n")
    assert blank[0] == 2
    assert blank[2].startswith("sgam: --tenant:")
    assert role[0] == 2
    assert (missing[0], missing[2]) == (1, "sgam: NotFound: no API key 0123456789abcdef\n")
    assert none[0] == 1
