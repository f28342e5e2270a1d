"""Each lifecycle is spelled once, as a StrEnum in schemas/lifecycle.py: the database's CHECK
constraints and partial indexes, the query validators and the command line's `--status`
choices are built from it."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import click
import pytest
from pydantic import ValidationError
from sqlalchemy import CheckConstraint

from pipeline.buffer.review import CandidateQuery
from pipeline.cli.buffer import candidates
from pipeline.cli.intake import episodes
from pipeline.db.base import sql_list
from pipeline.db.models import CandidateRow, EpisodeRow, FactRow
from pipeline.episodes.states import EpisodeQuery
from schemas.facts import STORED_FACT_STATUSES, FactStatus
from schemas.lifecycle import CandidateStatus, EpisodeStatus


def _check(table: type, column: str) -> str:
    (found,) = [
        str(constraint.sqltext)
        for constraint in table.__table__.constraints  # type: ignore[attr-defined]
        if isinstance(constraint, CheckConstraint)
        and str(constraint.sqltext).startswith(f"{column} IN ")
    ]
    return found


@pytest.mark.parametrize(
    ("table", "lifecycle"),
    [(EpisodeRow, EpisodeStatus), (CandidateRow, CandidateStatus), (FactRow, STORED_FACT_STATUSES)],
)
def test_the_status_check_is_the_enum(table: type, lifecycle: Iterable[StrEnum]) -> None:
    assert _check(table, "status") == f"status IN {sql_list(lifecycle)}"
    assert sql_list(lifecycle).count("'") == 2 * len(list(lifecycle))


def test_dismissed_is_an_answer_never_a_stored_row_status() -> None:
    assert FactStatus.DISMISSED not in STORED_FACT_STATUSES
    assert set(STORED_FACT_STATUSES) | {FactStatus.DISMISSED} == set(FactStatus)


def test_the_sql_list_keeps_the_enum_order() -> None:
    assert sql_list(EpisodeStatus) == "('pending', 'processing', 'done', 'failed')"


def _choices(command: click.Command, option: str) -> list[str]:
    (param,) = [p for p in command.params if p.name == option]
    assert isinstance(param.type, click.Choice)
    return list(param.type.choices)


def test_the_cli_status_choices_are_the_enums() -> None:
    assert _choices(episodes, "status") == [status.value for status in EpisodeStatus]
    assert _choices(candidates, "status") == [s.value for s in CandidateStatus] + ["all"]


def test_the_queries_take_the_enums_and_refuse_anything_else() -> None:
    assert EpisodeQuery(tenant_id="acme", status="done").status is EpisodeStatus.DONE
    assert CandidateQuery(tenant_id="acme").status is CandidateStatus.BUFFERED
    with pytest.raises(ValidationError):
        EpisodeQuery(tenant_id="acme", status="finished")
    with pytest.raises(ValidationError):
        CandidateQuery(tenant_id="acme", status="waiting")
