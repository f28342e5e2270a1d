"""How the CLI prints: JSON for programs and pipes, one readable line per fact for people.

Imports only the standard library at start-up; the models are imported when something prints.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schemas.facts import Fact


def wants_json(flag: bool) -> bool:
    return flag or not sys.stdout.isatty()


def emit_json(payload: Any) -> None:
    """One JSON document: an object for one result, an array for a list (every command)."""
    sys.stdout.write(json.dumps(plain(payload), ensure_ascii=False, indent=2) + "\n")


@contextmanager
def json_array() -> Iterator[Callable[[Any], None]]:
    """The same array `emit_json` prints for a list, written an item at a time (`sgam import`
    prints each chunk's receipts as it commits). Closed even when the command fails part-way,
    so what was printed still parses: the items done before the failure."""
    count = 0

    def add(item: Any) -> None:
        nonlocal count
        text = json.dumps(plain(item), ensure_ascii=False, indent=2)
        # Indented by two more spaces, as textwrap.indent would (JSON has no blank lines).
        sys.stdout.write(("[\n  " if count == 0 else ",\n  ") + text.replace("\n", "\n  "))
        sys.stdout.flush()
        count += 1

    try:
        yield add
    finally:
        sys.stdout.write("\n]\n" if count else "[]\n")


def facts(found: Fact | Sequence[Fact] | None, as_json: bool) -> None:
    if wants_json(as_json):
        emit_json(found)
        return
    if found is None:
        sys.stdout.write("nothing holds\n")
        return
    for fact in [found] if not isinstance(found, Sequence) else found:
        sys.stdout.write(describe(fact) + "\n")


def describe(fact: Fact) -> str:
    from schemas.fields import format_utc

    end = format_utc(fact.valid_to) or "open"
    links = f" supersedes={fact.supersedes_fact_id}" if fact.supersedes_fact_id else ""
    return (
        f"{fact.subject}.{fact.attribute} = {json.dumps(fact.value, ensure_ascii=False)}"
        f"  [{format_utc(fact.valid_from)} .. {end})  source={fact.source_episode_id}"
        f"  trust={fact.trust.value}  status={fact.status.value}  fact={fact.fact_id}"
        f" v{fact.version}{links}"
    )


def plain(found: Any) -> Any:
    """JSON-ready form of models, lists of them and plain values."""
    model_dump = getattr(found, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    if isinstance(found, list | tuple):
        return [plain(item) for item in found]
    return found


def plural(count: int, noun: str) -> str:
    return noun if count == 1 else noun + "s"
