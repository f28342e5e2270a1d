"""What the llm_lane benchmark prints: each run's row as it ends, then every run against the
rules lane of the same session."""

from __future__ import annotations

from typing import Any


class Table(list[dict[str, Any]]):
    """The rows, each printed as soon as its run ends."""

    HEADER = ["episodes", "done", "failed", "episodes/s", "peak in flight", "cpu ms/ep"]
    HEADER += ["pg ms/ep", "stub ms/ep", "redis ms/ep", "bench ms/ep"]
    HEADER += ["p50 s", "p99 s", "429s", "stub req/s", "re-queued"]

    def append(self, row: dict[str, Any]) -> None:
        if not self:
            print(f"{'run':<26}" + "".join(f"{h:>12}" for h in self.HEADER), flush=True)
        super().append(row)
        cells = [
            f"{row[h]:>12.2f}" if isinstance(row[h], float) else f"{row[h]:>12}"
            for h in self.HEADER
        ]
        print(f"{row['run']:<26}" + "".join(cells), flush=True)


def against_rules(rows: list[dict[str, Any]]) -> None:
    rules = next((row for row in rows if row["run"].endswith("rules")), None)
    if rules is None:
        return
    print("against the rules lane of this run (episodes/s, worker CPU per episode):")
    for row in rows:
        if row is not rules:
            speed = row["episodes/s"] / rules["episodes/s"]
            cost = row["cpu ms/ep"] / max(rules["cpu ms/ep"], 1e-9)
            print(f"  {row['run']:<26} {speed:6.2f}x the rate, {cost:6.2f}x the CPU")
