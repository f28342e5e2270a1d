"""The `sgam` command line: thin commands over the Python API.

Output is JSON with --json or on a pipe: one object for a result, one array for a list. Every
failure is one line on stderr; the exit code says what kind (the table below). Commands import
what they need when they run, so start-up stays cheap.
"""

from __future__ import annotations

import difflib
import os
import sys

import click

from pipeline import embedding
from pipeline.cli import (
    admin,
    agents,
    buffer,
    extract,
    facts,
    imports,
    intake,
    lifecycle,
    search,
    serve,
    workers,
)
from pipeline.cli.errors import (
    EXIT_MEANINGS,
    USAGE_ERROR,
    describe,
    exit_code,
    fail,
    internal,
)
from pipeline.cli.traces import command_span
from pipeline.errors import SgamError
from pipeline.observe import tracing


class _WithExitCodes(click.Group):
    """`sgam --help` ends with what each exit code means."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Exit codes"):
            formatter.write_dl([(str(code), meaning) for code, meaning in EXIT_MEANINGS.items()])


@click.group(cls=_WithExitCodes, help=__doc__)
@click.option("--debug", is_flag=True, help="Print the traceback of an internal error.")
@click.pass_context
def app(context: click.Context, debug: bool) -> None:
    context.obj = {"debug": debug}


for command in (
    facts.put,
    facts.get,
    facts.history,
    search.search,
    search.embed,
    imports.import_facts,
    lifecycle.promote,
    lifecycle.dismiss,
    lifecycle.forget,
    lifecycle.expire,
    lifecycle.context,
    lifecycle.show_log,
    admin.db,
    admin.replay,
    admin.purge_vacuum,
    admin.catalog,
    admin.demo,
    intake.ingest,
    intake.remember,
    intake.episodes,
    intake.usage,
    buffer.candidates,
    buffer.confirm,
    buffer.reject,
    buffer.consolidate,
    workers.worker,
    workers.beat,
    workers.sweep,
    extract.extract,
    serve.serve,
    serve.openapi,
    serve.keys,
    agents.mcp_stdio,
):
    app.add_command(command)


def run(args: list[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    for stream in (sys.stdout, sys.stderr):
        # Arguments with undecodable bytes must not crash the error report that names them.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    argv = sys.argv[1:] if args is None else args
    try:
        with command_span(_command(argv)):
            code = app.main(args=argv, prog_name="sgam", standalone_mode=False)
    except click.exceptions.Abort:
        return fail(130, "aborted")
    except click.exceptions.NoSuchOption as unknown:
        return fail(USAGE_ERROR, _no_such_option(unknown))
    except click.ClickException as usage:
        return fail(USAGE_ERROR, usage.format_message().replace("\n", " "))
    except SgamError as error:
        return fail(exit_code(error), describe(error))
    except Exception as error:  # a bug: one line, the traceback only on request
        return internal(error, debug="--debug" in argv[: _first_command(argv)])
    return code if isinstance(code, int) else 0


def _no_such_option(unknown: click.exceptions.NoSuchOption) -> str:
    """Click's message with its suggestions closest first (click sorts them by name)."""
    message = f"No such option: {unknown.option_name}"
    closest = difflib.get_close_matches(unknown.option_name, unknown.possibilities or [], n=5)
    return f"{message}. Did you mean {', '.join(closest)}?" if closest else message


def _first_command(argv: list[str]) -> int:
    return next((index for index, arg in enumerate(argv) if not arg.startswith("-")), len(argv))


def _command(argv: list[str]) -> str | None:
    """The command's name if it is one of ours (a mistyped one names nothing)."""
    index = _first_command(argv)
    name = argv[index] if index < len(argv) else None
    return name if name in app.commands else None


def main() -> None:
    code = run()
    embedding.settle()  # the vectors of what the command wrote, made in the background
    tracing.shutdown()  # the batched spans go out before the process leaves
    # Leave without the interpreter's teardown of every loaded module (a fifth of a short
    # command's wall time): the store is closed and nothing else is pending but the output.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
