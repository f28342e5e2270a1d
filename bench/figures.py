"""The figures every benchmark reports the same way."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of unsorted samples."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
