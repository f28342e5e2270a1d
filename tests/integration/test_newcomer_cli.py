"""The first hour on the command line: what a newcomer meets when something is missing, taken
or mistyped — one line on stderr naming it, the exit code the table gives, and help that says
what to type."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest

from pipeline.cli import app
from pipeline.cli.errors import EXIT_MEANINGS
from schemas.intake import EpisodeIn
from tests.integration.pipeline_helpers import episode

SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")
NOTHING_MATCHES = "Hello there."  # no attribute of a bundled catalogue
# The suite reads with the support catalogue (tests/conftest.py).
CATALOGUE = f"the bundled {os.environ['SGAM_CATALOG']!r} catalogue (SGAM_CATALOG)"


def _sgam(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_")}
    env |= {"SGAM_DATABASE_URL": f"sqlite:///{tmp_path / 'sgam.sqlite3'}"} | settings
    return subprocess.run(
        [SGAM, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


# -- remember and ingest that match nothing ------------------------------------------------------


def test_remember_that_matches_nothing_names_the_catalogue(
    sgam: Callable[..., tuple[int, str, str]],
) -> None:
    code, out, err = sgam(
        "remember", "--tenant", "acme", "--subject", "mira", "--text", NOTHING_MATCHES, "--json"
    )

    answer = json.loads(out)
    assert code == 1
    assert answer["facts"] == []
    assert answer["rejected"] == []
    assert CATALOGUE in answer["note"]
    assert "sgam extract --explain" in answer["note"]
    assert err.count("\n") == 1, err
    assert err == f"sgam: nothing remembered: {answer['note']}\n"


def test_remember_that_stores_a_fact_has_no_note(
    sgam: Callable[..., tuple[int, str, str]],
) -> None:
    code, out, err = sgam(
        "remember",
        "--tenant",
        "acme",
        "--subject",
        "mira",
        "--text",
        "My home city is Lisbon.",
        "--json",
    )

    answer = json.loads(out)
    assert code == 0, err
    assert [fact["value"] for fact in answer["facts"]] == ["Lisbon"]
    assert "note" not in answer


def test_an_ingested_episode_that_matches_nothing_says_so(
    sgam: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    path = tmp_path / "episodes.jsonl"
    lines = [
        episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1"),
        episode(NOTHING_MATCHES, "2026-06-01T09:01:00Z", "s1", episode_id="quiet"),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    code, out, err = sgam("ingest", str(path), "--json")
    receipts = json.loads(out)
    shown = sgam("episodes", "show", "quiet", "--tenant", "acme", "--json")

    assert code == 0
    assert [receipt["status"] for receipt in receipts] == ["done", "done"]
    assert "note" not in receipts[0]  # its statement was recognised
    assert CATALOGUE in receipts[1]["note"]
    assert err == f"sgam: note: line 2: {receipts[1]['note']}\n"
    assert shown[0] == 0
    assert json.loads(shown[1])["note"] == receipts[1]["note"]


# -- the service, the broker and the sweeper ----------------------------------------------------


def test_serve_on_a_port_in_use_is_one_line_and_exit_5(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _sgam(tmp_path, "serve", "--port", str(port))

    assert done.returncode == 5, done.stderr[-2000:]
    assert done.stderr == (
        f"sgam: port {port} on 127.0.0.1 is in use by another process; stop it or choose "
        "another --port\n"
    )


def test_serve_on_a_host_that_cannot_be_resolved_is_a_bad_option(tmp_path: Path) -> None:
    done = _sgam(tmp_path, "serve", "--host", "no-such-host.invalid", "--port", "0")

    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("sgam: --host: no-such-host.invalid cannot be resolved (")


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["redis://127.0.0.1:1/0", "redis://no-such-host.invalid:6379/0"])
@pytest.mark.parametrize("command", ["worker", "beat"])
def test_worker_and_beat_refuse_a_broker_that_does_not_answer(
    tmp_path: Path, broker: str, command: str
) -> None:
    done = _sgam(tmp_path, command, SGAM_BROKER_URL=broker)

    assert done.returncode == 5, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("sgam: StoreUnavailable: the broker is unavailable (")


@pytest.mark.parametrize("broker", ["redis://127.0.0.1:1/0", "redis://no-such-host.invalid:1/0"])
def test_ingest_with_a_broker_that_cannot_be_reached_stores_and_exits_5(
    sgam: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    broker: str,
) -> None:
    monkeypatch.setenv("SGAM_BROKER_URL", broker)
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1")))

    code, out, err = sgam("ingest", str(path), "--json")
    monkeypatch.delenv("SGAM_BROKER_URL")
    listed = sgam("episodes", "--tenant", "acme", "--json")

    assert code == 5
    assert [receipt["status"] for receipt in json.loads(out)] == ["stored"]
    assert err.count("\n") == 1, err
    assert "the episodes are stored and the sweeper will queue them" in err
    assert [stored["status"] for stored in json.loads(listed[1])] == ["pending"]  # nothing lost


def test_sweep_says_how_many_wait_within_the_grace_period_and_until_when(
    sgam: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SGAM_BROKER_URL", "redis://127.0.0.1:1/0")
    path = tmp_path / "episodes.jsonl"
    lines = [episode(f"My home city is Lisbon {n}.", "2026-06-01T09:00:00Z", "s1") for n in (1, 2)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert sgam("ingest", str(path))[0] == 5
    monkeypatch.setenv("SGAM_SWEEP_GRACE_S", "3600")

    code, out, _ = sgam("sweep", "--json")
    with monkeypatch.context() as terminal:
        terminal.setattr(sys.stdout, "isatty", lambda: True)
        human = sgam("sweep")

    report = json.loads(out)
    assert code == 0
    assert (report["pending"], report["stuck"], report["waiting"]) == (0, 0, 2)
    assert report["next_sweep_at"].endswith("Z")
    assert human[1].splitlines() == [
        "re-queued 0 pending and 0 stuck episodes",
        "2 pending episodes wait within the grace period (SGAM_SWEEP_GRACE_S=3600); the first "
        f"is sent again at {report['next_sweep_at']} or after",
    ]


# -- help --------------------------------------------------------------------------------------


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append((prefix + name, command))
        if isinstance(command, click.Group):
            found += _commands(command, prefix + name + " ")
    return found


def test_help_names_every_exit_code(sgam: Callable[..., tuple[int, str, str]]) -> None:
    code, out, _ = sgam("--help")

    table = " ".join(out[out.index("Exit codes:") :].split())  # as click wraps it
    assert code == 0
    for exit_code, meaning in EXIT_MEANINGS.items():
        assert f"{exit_code} {meaning}" in table, exit_code
    assert "pipeline.cli.errors" not in out


def test_every_option_of_every_command_has_a_description() -> None:
    missing = [
        f"{name} {parameter.opts[0]}"
        for name, command in _commands(app)
        for parameter in command.params
        if isinstance(parameter, click.Option) and not parameter.help
    ]
    assert missing == []


def test_ingest_help_lists_every_episode_field(sgam: Callable[..., tuple[int, str, str]]) -> None:
    code, out, _ = sgam("ingest", "--help")

    fields = " ".join(out[out.index("Episode fields") :].split())
    assert code == 0
    for name, field in EpisodeIn.model_fields.items():
        required = "required: " if field.is_required() else ""
        assert f" {name} {required}{field.description}" in fields, name


def test_a_mistyped_option_suggests_the_closest_first(
    sgam: Callable[..., tuple[int, str, str]],
) -> None:
    code, _, err = sgam("put", "--tenant", "acme", "--suject", "mira")

    assert code == 2
    # click names them by name (--source, --subject); the closest is the one meant
    assert err == "sgam: No such option: --suject. Did you mean --subject, --source?\n"


# -- lifecycle and input -----------------------------------------------------------------------


def test_dismiss_prints_the_fact_as_it_is_after_the_dismissal(
    sgam: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    put = ["put", "--tenant", "acme", "--subject", "mira", "--attribute", "contact_channel"]
    code, out, _ = sgam(
        *put,
        "--value",
        "email",
        "--valid-from",
        "2026-02-01T00:00:00Z",
        "--source",
        "ep-1",
        "--trust",
        "untrusted",
        "--json",
    )
    fact_id = json.loads(out)["fact_id"]
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)

    code, out, _ = sgam("dismiss", fact_id, "--tenant", "acme")

    assert code == 0
    assert out == (
        f'dismissed mira.contact_channel = "email"  fact={fact_id} v1: hidden from every read '
        "for good, it can never be promoted\n"
    )
    assert "status=quarantined" not in out


def test_dismiss_json_shows_the_fact_dismissed_not_quarantined(
    sgam: Callable[..., tuple[int, str, str]],
) -> None:
    put = ["put", "--tenant", "acme", "--subject", "mira", "--attribute", "contact_channel"]
    code, out, _ = sgam(
        *put, "--value", "email", "--valid-from", "2026-02-01T00:00:00Z", "--source", "ep-1",
        "--trust", "untrusted", "--json",
    )  # fmt: skip
    quarantined = json.loads(out)
    assert (code, quarantined["status"]) == (0, "quarantined")

    code, out, _ = sgam("dismiss", quarantined["fact_id"], "--tenant", "acme", "--json")

    assert code == 0
    dismissed = json.loads(out)
    assert dismissed == quarantined | {"status": "dismissed"}  # only its state changed


def test_forget_of_a_subject_with_nothing_stored_is_exit_1(
    sgam: Callable[..., tuple[int, str, str]],
) -> None:
    code, out, err = sgam("forget", "--tenant", "acme", "--subject", "nobody")

    assert code == 1
    assert json.loads(out)["hidden"] == 0  # the answer still goes to a program
    assert err == "sgam: nothing stored about nobody in tenant acme\n"


def test_empty_stdin_to_ingest_is_exit_1_in_one_line(
    sgam: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n\n")))

    code, out, err = sgam("ingest", "-")

    assert (code, out) == (1, "")
    assert err == "sgam: no episodes: stdin holds no JSON line\n"


def test_a_json_line_with_a_key_twice_is_refused(
    sgam: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    line = json.dumps(episode("My home city is Lisbon.", "2026-06-01T09:00:00Z", "s1"))
    path = tmp_path / "episodes.jsonl"
    path.write_text(line[:-1] + ', "text": "My home city is Oslo."}\n')

    code, out, err = sgam("ingest", str(path))

    assert (code, out) == (2, "")
    assert err == 'sgam: line 1: is refused: the key "text" appears twice\n'


def test_a_relative_sqlite_path_in_a_missing_directory_suggests_the_absolute_one(
    tmp_path: Path,
) -> None:
    done = _sgam(
        tmp_path,
        "get",
        "--tenant",
        "acme",
        "--subject",
        "mira",
        SGAM_DATABASE_URL="sqlite:///data/sgam.sqlite3",
    )

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "the directory of data/sgam.sqlite3 does not exist" in done.stderr
    assert f"sqlite:///{tmp_path / 'data' / 'sgam.sqlite3'}" in done.stderr


# -- keys --------------------------------------------------------------------------------------


def test_keys_revoke_given_the_whole_key_revokes_it(
    sgam: Callable[..., tuple[int, str, str]],
) -> None:
    code, out, _ = sgam("keys", "create", "--tenant", "acme", "--role", "reader", "--json")
    issued: dict[str, Any] = json.loads(out)

    code, out, err = sgam("keys", "revoke", issued["secret"], "--json")

    assert code == 0, err
    assert json.loads(out)["key_id"] == issued["key"]["key_id"]
    assert json.loads(out)["revoked_at"] is not None
    assert issued["secret"] not in out + err


@pytest.mark.parametrize("given", ["wrong-secret", "prefix"])
def test_keys_revoke_of_a_key_that_does_not_match_never_repeats_it(
    sgam: Callable[..., tuple[int, str, str]], given: str
) -> None:
    code, out, _ = sgam("keys", "create", "--tenant", "acme", "--role", "reader", "--json")
    secret = json.loads(out)["secret"]
    presented = secret[:-4] + "AAAA" if given == "wrong-secret" else secret[:30]

    code, out, err = sgam("keys", "revoke", presented)
    listed = json.loads(sgam("keys", "list", "--tenant", "acme", "--json")[1])

    assert code == 1
    assert err == "sgam: NotFound: no API key matching what was given\n"
    assert presented not in out + err
    assert listed[0]["revoked_at"] is None


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the warning is a root's")
def test_the_workers_first_line_as_root_is_ours_and_says_what_it_means(tmp_path: Path) -> None:
    broker = os.environ.get("SGAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/10")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGAM_")}
    env |= {"SGAM_DATABASE_URL": f"sqlite:///{tmp_path / 'sgam.sqlite3'}"}
    env |= {"SGAM_BROKER_URL": broker, "SGAM_CATALOG": "support"}
    worker = subprocess.Popen(
        [SGAM, "worker", "--concurrency", "1", "--queues", f"none-{tmp_path.name}"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    try:
        assert worker.stdout is not None
        for line in worker.stdout:
            seen.append(line)
            if "ready" in line or len(seen) > 200:
                break
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        if worker.stdout is not None:
            worker.stdout.close()

    said = "".join(seen)
    assert "ready" in said, said[-2000:]
    assert "superuser privileges" not in said  # Celery's own, naming a --uid we do not take
    assert "the worker runs as root: its tasks accept JSON only" in said
