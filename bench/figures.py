"""The figures every benchmark reports the same way."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of unsorted samples."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print rows under headers, the first column left-aligned and the rest right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join(
        f"{{:<{width}}}" if i == 0 else f"{{:>{width}}}" for i, width in enumerate(widths)
    )
    print(line.format(*headers))
    print("  ".join("-" * width for width in widths))
    for row in rows:
        print(line.format(*row))


def rfc3339(moment: datetime) -> str:
    """`moment` as an RFC 3339 UTC string with a Z, as a caller would send it."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
