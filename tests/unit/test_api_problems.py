"""The HTTP service's one error table: every error class has its status and a stable problem
type, no row hides behind an earlier one, and a problem never carries more than it should."""

from __future__ import annotations

import inspect

from pipeline import errors
from pipeline.api import problems
from pipeline.api.problems import PROBLEMS, classify, problem
from pipeline.errors import InvalidInput, StoreBusy, VersionConflict


def _classes(module: object, base: type) -> set[type]:
    return {
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, base)
        and value.__module__ == module.__name__  # type: ignore[attr-defined]
    }


def test_every_error_class_has_a_row_of_its_own_or_a_bases() -> None:
    rows = {cls for cls, *_ in PROBLEMS}
    # Branches nothing raises itself: their subclasses each have a row.
    mixins = {errors.LlmFailure, errors.PermanentError}
    for cls in _classes(errors, errors.SgamError) | _classes(problems, problems.ApiError):
        assert cls in rows or cls in mixins or problems.ApiError is cls, cls.__name__


def test_no_row_is_shadowed_by_an_earlier_base() -> None:
    for index, (cls, *_) in enumerate(PROBLEMS):
        for earlier, *_ in PROBLEMS[:index]:
            assert not issubclass(cls, earlier), (cls.__name__, earlier.__name__)


def test_types_are_stable_and_one_per_meaning() -> None:
    kinds = [kind for _, _, kind, _ in PROBLEMS]
    shared = {kind for kind in kinds if kinds.count(kind) > 1}
    assert shared == {"not-found"}  # a missing route and a missing resource read the same
    assert all(kind == kind.lower() and " " not in kind for kind in kinds)


def test_statuses_follow_http() -> None:
    assert classify(InvalidInput("subject", "must not be empty"))[0] == 422
    assert classify(VersionConflict("stale", expected=1, actual=2))[0] == 412
    assert classify(errors.FactConflict("x", existing_fact_id="f"))[0] == 409
    assert classify(errors.NotFound("x"))[0] == 404
    assert classify(StoreBusy("x"))[0] == 503
    assert classify(ValueError("a bug"))[0] == 500
    # A setting at fault is the operator's problem, not the caller's input.
    assert classify(errors.SettingError("SGAM_DATABASE_URL", "unreachable"))[0] == 500


def test_a_problem_names_the_field_and_says_when_to_retry() -> None:
    status, body, headers = problem(InvalidInput("valid_from", "has no UTC offset"), "/v1/facts")
    assert status == 422
    assert body == {
        "type": "urn:sgam:problem:invalid-input",
        "title": "Invalid input",
        "status": 422,
        "detail": "valid_from: has no UTC offset",
        "instance": "/v1/facts",
        "field": "valid_from",
    }
    assert headers == {}
    assert problem(StoreBusy("busy"), "/v1/facts")[2] == {"Retry-After": "1"}
    assert problem(errors.StoreUnavailable("down"), "/v1/facts")[2] == {"Retry-After": "5"}


def test_an_unexpected_error_is_answered_without_its_message() -> None:
    status, body, _ = problem(RuntimeError("password=hunter2 in SELECT ..."), "/v1/facts")
    assert status == 500
    assert "detail" not in body
    assert "hunter2" not in str(body)


def test_only_a_setting_error_is_the_operators_fault() -> None:
    setting = errors.SettingError("SGAM_DATABASE_URL", "the schema is not current")
    assert classify(setting) == (500, "setting-error", "The server's settings are invalid")
    assert "detail" not in problem(setting, "/v1/facts")[1]  # the operator's log has it
    # A caller's parameter named like a setting, or upper-case: its own fault, never a 500.
    for name in ("SGAM_DATABASE_URL", "SGAM_ENV_FILE", "Q\u00d7\u00daG", "SGAM_NOT_A_SETTING"):
        assert classify(InvalidInput(name, "is not a query parameter"))[0] == 422
