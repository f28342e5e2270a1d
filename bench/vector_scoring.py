"""What the embedding arm's scoring of a scope costs in the process: `search_vectors._best`
(the scope's vectors as one matrix) against a dot product a row in Python (the arm's code
before), on the same random unit vectors, in the same run.

    .venv/bin/python bench/vector_scoring.py [--repeats 50]

No database and no model: the rows are what the scope's read returns (key, float32 bytes).
"""

from __future__ import annotations

import argparse
import operator
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from environment import machine_load
from figures import percentile, print_table

from pipeline.embedding.vectors import decode, encode
from pipeline.read.search_vectors import _best


def _unit(dimensions: int, generator: random.Random) -> list[float]:
    vector = [generator.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


def _row_by_row(rows: Sequence[Any], vector: Sequence[float], limit: int) -> list[Any]:
    scored = [(key, sum(map(operator.mul, decode(blob), vector))) for key, blob in rows]
    scored = [(key, cosine) for key, cosine in scored if cosine > 0]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:limit]


def _median_ms(work: Callable[[], object], repeats: int) -> float:
    laps = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        laps.append((time.perf_counter() - started) * 1000)
    return percentile(laps, 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    options = parser.parse_args()
    generator = random.Random(7)
    print(f"({machine_load()} before)")
    table = []
    for dimensions in (384, 768):
        for count in (600, 6000):
            rows = [(f"e{n}", encode(_unit(dimensions, generator))) for n in range(count)]
            query = _unit(dimensions, generator)
            same = [key for key, _ in _best(rows, query, 10)]
            assert same == [key for key, _ in _row_by_row(rows, query, 10)], "rankings differ"
            matrix = _median_ms(
                lambda rows=rows, query=query: _best(rows, query, 10), options.repeats
            )
            python = _median_ms(
                lambda rows=rows, query=query: _row_by_row(rows, query, 10), options.repeats
            )
            table.append(
                [
                    f"{count} x {dimensions}",
                    f"{matrix:.2f}",
                    f"{python:.2f}",
                    f"{python / matrix:.1f}x",
                ]
            )
    print_table(["rows x dimensions", "matrix ms", "row by row ms", "speed-up"], table)
    print(f"({machine_load()} after)")


if __name__ == "__main__":
    main()
