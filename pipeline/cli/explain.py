"""`sgam extract --explain`: clause by clause, what the rules extractor read and refused.

For a catalogue author: which clauses were skipped as questions, which forms each clause was
searched with, which matched and what value they read, which check refused a match (a hedge,
a negation, a value that is not of the attribute's type), and which guard refused a proposal.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from pipeline.extract.result import ExtractionResult
from pipeline.extract.rules import ClauseReading


def explain_json(readings: list[ClauseReading]) -> list[dict[str, Any]]:
    return [asdict(reading) for reading in readings]


def explain_table(readings: list[ClauseReading], result: ExtractionResult) -> str:
    lines = ["explain (the rules extractor, clause by clause):"]
    for number, reading in enumerate(readings, start=1):
        lines.append(f"clause {number}: {reading.clause!r}")
        if reading.skipped:
            lines.append(f"  skipped: {reading.skipped}")
            continue
        if reading.statement:
            lines.append(f"  built-in form: {reading.statement}")
        lines.append(f"  tried {len(reading.tried)} catalogue form(s)")
        for hit in reading.hits:
            form = f"{hit.form!r}" + (
                " (derived from its name and synonyms)" if hit.derived else ""
            )
            if hit.refused:
                lines.append(f"  refused  {hit.attribute}  {form}: {hit.refused}")
            else:
                values = ", ".join(json.dumps(value, ensure_ascii=False) for value in hit.values)
                lines.append(f"  matched  {hit.attribute}  {form} -> {values}")
        if not reading.hits and not reading.statement:
            lines.append("  no form matched")
    for rejection in result.rejected:
        update = rejection.update
        lines.append(
            f"guard refused {update.attribute} = {json.dumps(update.value, ensure_ascii=False)}:"
            f" {rejection.reason.value} ({rejection.message})"
        )
    return "\n".join(lines) + "\n"
