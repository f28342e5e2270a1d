"""`sgam search` on the command line: the JSON answer, exit 0 / 1 / 2."""

from __future__ import annotations

import json
from collections.abc import Callable

SCOPE = ["--tenant", "acme", "--subject", "mira"]


def test_found_nothing_and_bad_input(sgam: Callable[..., tuple[int, str, str]]) -> None:
    put = ["put", *SCOPE, "--attribute", "home_city", "--value", "Utrecht"]
    assert sgam(*put, "--valid-from", "2026-01-01T00:00:00Z", "--source", "e1")[0] == 0

    code, out, _ = sgam("search", *SCOPE, "--query", "Utrecht", "--kinds", "facts", "--json")
    answer = json.loads(out)
    assert code == 0
    assert [fact["value"] for fact in answer["facts"]] == ["Utrecht"]
    assert answer["facts"][0]["score"] > 0
    assert answer["episodes"] == []

    code, out, _ = sgam("search", *SCOPE, "--query", "Lisbon")  # on a pipe: JSON
    assert (code, json.loads(out)) == (1, {"query": "Lisbon", "facts": [], "episodes": []})

    code, _, err = sgam("search", *SCOPE, "--query", "Utrecht", "--limit", "0")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "limit" in err
    code, _, err = sgam("search", *SCOPE, "--query", "Utrecht", "--kinds", "notes")
    assert code == 2
    assert "kinds" in err
