"""How the command line reports failures: one table from error class to exit code, one line.
What each code means is `EXIT_MEANINGS`, which `sgam --help` prints.
"""

from __future__ import annotations

import os
import sys
import traceback

from pipeline.errors import (
    CatalogError,
    ConflictError,
    IdempotencyConflict,
    InvalidInput,
    InvalidLines,
    LlmAnswerInvalid,
    LlmRequestRejected,
    NotFound,
    RetryableError,
    SgamError,
)

# First match wins: subclasses before their bases.
EXIT_CODES: list[tuple[type[BaseException], int]] = [
    (NotFound, 1),
    (InvalidInput, 2),
    (LlmRequestRejected, 2),  # a key, model, URL or mode the endpoint refuses: a setting
    (LlmAnswerInvalid, 6),
    # A key reused for another request is the caller's mistake, as HTTP's 409 says: the
    # ledger's state has nothing to do with it, and retrying the same call cannot succeed.
    (IdempotencyConflict, 2),
    (ConflictError, 3),
    (RetryableError, 5),
    (SgamError, 4),
]
INTERNAL_ERROR = 4
USAGE_ERROR = 2
UNAVAILABLE = 5

EXIT_MEANINGS = {
    0: "success",
    1: "nothing found (or nothing to do)",
    2: "invalid input, option, setting or file, or an idempotency key reused for another "
    "request (a write that meets it writes nothing)",
    3: "conflict with the ledger's state (the refusal is logged)",
    4: "internal error (a bug: the traceback with --debug or SGAM_DEBUG=1)",
    5: "unavailable: store busy or unreachable, broker or LLM endpoint unreachable, port in "
    "use, a repeat while the first request is in progress; safe to retry",
    6: "the model's answers failed validation through the bounded re-asks",
}


# CLI spelling of the API's field names, so errors name the option the user typed.
OPTION_NAMES = {
    "tenant_id": "--tenant",
    "agent_id": "--agent",
    "source_episode_id": "--source",
    "occurred_at": "--occurred-at",
    "session_id": "--session",
    "episode_id": "--episode",
    "expected_state": "--if-match",
}


def exit_code(error: BaseException) -> int:
    return next((code for kind, code in EXIT_CODES if isinstance(error, kind)), INTERNAL_ERROR)


def describe(error: SgamError) -> str:
    """The one line that names the problem; never a stored value or another tenant's data."""
    if isinstance(error, CatalogError):  # names a file and line, not an option
        return f"catalogue {error.location}: {error.problem}"
    if isinstance(error, InvalidLines):
        count = len(error.lines)
        return f"{count} invalid line{'s' if count > 1 else ''}, the first: {error}"
    if isinstance(error, InvalidInput):
        return f"{option_name(error.field)}: {error.problem}"
    return f"{type(error).__name__}: {error}"


def option_name(field: str) -> str:
    if field.isupper():  # an environment variable, not an option
        return field
    head, _, rest = field.partition(".")
    name = OPTION_NAMES.get(head, "--" + head.replace("_", "-"))
    return f"{name}.{rest}" if rest else name


def fail(code: int, message: str) -> int:
    sys.stderr.write(f"sgam: {message}\n")
    return code


def internal(error: BaseException, debug: bool) -> int:
    """An exception no one expected: one line, the traceback only when asked for."""
    if debug or os.environ.get("SGAM_DEBUG", "") not in ("", "0"):
        traceback.print_exception(error, file=sys.stderr)
    return fail(
        INTERNAL_ERROR,
        f"internal error ({type(error).__name__}); run with --debug or SGAM_DEBUG=1 "
        "for the traceback",
    )
