"""`sgam catalog check`: stored facts that the current catalogue would orphan or mis-type."""

from __future__ import annotations

from sqlalchemy import select

from pipeline.db.models import FactRow
from pipeline.db.store import Store
from schemas.catalog import AttributeSpec
from schemas.facts import FactStatus
from schemas.results import CatalogProblem


def check_catalog(store: Store) -> list[CatalogProblem]:
    """Every current, visible fact (active, quarantined or expired but not forgotten) that the
    catalogue no longer declares, declares with another cardinality, or whose value no longer
    has the declared type. Purged values are not checked: nothing is left to check."""
    catalog = store.catalog
    problems: list[CatalogProblem] = []
    query = (
        select(FactRow)
        .where(
            FactRow.superseded_at.is_(None),
            FactRow.forgotten_at.is_(None),
            FactRow.status != FactStatus.SUPERSEDED.value,
        )
        .order_by(FactRow.tenant_id, FactRow.subject, FactRow.attribute, FactRow.valid_from)
        .execution_options(yield_per=1000)
    )
    with store.begin() as unit:
        for row in unit.session.scalars(query):
            problem = _problem(catalog.attributes.get(row.attribute), row)
            if problem is not None:
                problems.append(
                    CatalogProblem(
                        fact_id=row.fact_id,
                        tenant_id=row.tenant_id,
                        subject=row.subject,
                        attribute=row.attribute,
                        schema_version=row.schema_version,
                        problem=problem,
                    )
                )
    return problems


def _problem(spec: AttributeSpec | None, row: FactRow) -> str | None:
    if spec is None:
        return "orphaned: the attribute is not in the catalogue"
    if spec.cardinality.value != row.cardinality:
        return f"cardinality: stored {row.cardinality}, declared {spec.cardinality.value}"
    try:
        normalised = spec.normalise(row.value)
    except ValueError as exc:
        return f"mis-typed: {exc} (declared {spec.type})"
    if normalised != row.value:
        return f"mis-typed: would now be stored as {normalised!r} (declared {spec.type})"
    return None
