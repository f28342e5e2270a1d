"""BEAM knowledge-update probes end to end with the rules extractor: episodes -> pipeline ->
`get` now and as of the midpoint between the old and the new message.

    .venv/bin/python bench/extract_beam.py [--beam ../shared/data/beam] [--no-forms]

Chats 1-10 (BEAM 128K, CC BY-SA 4.0) are read in place. Each user message is an episode of
its chat's tenant, dated by its session's time anchor plus one minute per message (BEAM dates
sessions, not messages). The episodes go through `ingest` in inline mode on a scratch SQLite
store with `bench/beam_catalog.yaml`. A probe is **right now** when `get` of its attribute
holds the new value, and **right as of** when `get` at the midpoint between the two messages
holds the old value (or holds nothing when the old message states no value). Values are
compared as numbers, dates or substrings of the expected text, as PROBES states them.

With `--no-forms` the catalogue is the same attributes as names, types, synonyms and
descriptions only (its `forms` left out), as a user writes one: the rules read it with the
forms derived from those (`pipeline/extract/derived.py`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from pipeline.db.store import open_store
from pipeline.episodes.intake import ingest
from pipeline.read.facts import get
from pipeline.settings import Settings

DEFAULT_BEAM = Path(__file__).resolve().parents[2] / "shared" / "data" / "beam"
CATALOG = Path(__file__).with_name("beam_catalog.yaml")
SUBJECT = "user"
# (chat, first words of the question) -> attribute, new value, old value (None: not stated in
# the original message). Values are the rubric's (new) and the original message's (old).
PROBES: dict[tuple[int, str], tuple[str | None, Any, Any]] = {
    (1, "What is the average response time"): ("api_response_time_ms", 250, None),
    (1, "How many commits"): ("commits_merged", 165, 150),
    (2, "What is the daily call quota"): ("daily_call_quota", 1200, None),
    (2, "What is the test coverage"): ("test_coverage_percent", 78, 65),
    (3, "What is the deadline for completing the first sprint"): (
        "sprint_deadline",
        "2024-04-05",
        "2024-04-01",
    ),
    (3, "How many project cards"): ("gallery_cards", 10, 8),
    (4, "What is my accuracy percentage"): ("area_accuracy_percent", 95, 90),
    (4, "How many classification problems"): ("classification_problems_done", 15, 10),
    (5, "How many total hours"): ("probability_study_hours", 4, 3),
    (5, "How many conditional probability problems"): ("conditional_problems_done", 12, 8),
    (6, "How many interviews"): ("interviews_secured", 5, 3),
    (6, "How many women"): ("mentees_highlighted", 7, 5),
    (7, "How many sources"): ("zotero_sources", 52, 45),
    (7, "How many words"): ("essay_words", 4700, 4500),
    (8, "When is my Zoom call"): (None, "April 22 at 11 AM", "April 21 at 3 PM"),
    (8, "How many days a week"): (None, "three days", "three days"),
    (9, "What time should I plan"): ("danielle_meeting", "4:30 PM", "3 PM"),
    (9, "When is my session with the immigration"): (None, "May 22", "May 20"),
    (10, "What is my weekly word count"): ("weekly_word_target", 1350, 1200),
    (10, "What deadline should I aim for"): (None, "April 25", "April 20"),
}


def chat_file(beam: Path, chat: int) -> Path:
    folder = beam / "chats" / "100K" / str(chat)
    truncated = folder / "chat_trunecated.json"  # the official code reads this one first
    return truncated if truncated.exists() else folder / "chat.json"


def messages(beam: Path, chat: int) -> list[dict[str, Any]]:
    """User messages in order, each with its `at` (the session anchor plus its order)."""
    anchor = None
    out = []
    for number, message in enumerate(_all_messages(chat_file(beam, chat))):
        if message.get("time_anchor"):
            anchor = datetime.strptime(message["time_anchor"], "%B-%d-%Y").replace(tzinfo=UTC)
        if message["role"] != "user" or anchor is None:
            continue
        out.append(message | {"at": anchor + timedelta(minutes=number)})
    return out


def _all_messages(path: Path) -> list[dict[str, Any]]:
    batches = json.loads(path.read_text(encoding="utf-8"))
    return [message for batch in batches for pair in batch["turns"] for message in pair]


def forms_free(catalog: Path, folder: Path) -> Path:
    """A copy of `catalog` without its attributes' `forms`, written in `folder`."""
    data = yaml.safe_load(catalog.read_text(encoding="utf-8"))
    for spec in data["attributes"].values():
        spec.pop("forms", None)
    path = folder / "beam_catalog_no_forms.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run(beam: Path, *, no_forms: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sgam-bench-rules-beam-") as folder:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            database_url=f"sqlite:///{Path(folder) / 'bench_rules_beam.sqlite3'}",
            catalog_path=forms_free(CATALOG, Path(folder)) if no_forms else CATALOG,
        )
        store = open_store(settings)
        try:
            return _probe_all(store, beam)
        finally:
            store.dispose()


def _probe_all(store: Any, beam: Path) -> dict[str, Any]:
    rows = []
    for chat in range(1, 11):
        tenant = f"beam-{chat}"
        said = messages(beam, chat)
        by_id = {message["id"]: message for message in said}
        ingest(
            store,
            [
                {
                    "tenant_id": tenant,
                    "subject": SUBJECT,
                    "session_id": f"chat-{chat}",
                    "episode_id": f"m{message['id']}",
                    "occurred_at": message["at"].isoformat(),
                    "text": message["content"][:20_000],
                }
                for message in said
            ],
        )
        probes = json.loads(
            (
                chat_file(beam, chat).parent / "probing_questions" / "probing_questions.json"
            ).read_text(encoding="utf-8")
        )["knowledge_update"]
        for probe in probes:
            rows.append(_probe(store, tenant, chat, probe, by_id))
    return {
        "probes": rows,
        "right_now": sum(row["right_now"] for row in rows),
        "right_as_of": sum(row["right_as_of"] for row in rows),
        "right_both": sum(row["right_now"] and row["right_as_of"] for row in rows),
        "of": len(rows),
    }


def _probe(
    store: Any, tenant: str, chat: int, probe: dict[str, Any], by_id: dict[int, Any]
) -> dict[str, Any]:
    key = next(k for k in PROBES if k[0] == chat and probe["question"].startswith(k[1]))
    attribute, new, old = PROBES[key]
    ids = probe["source_chat_ids"]
    old_at = by_id[ids["original_info"][-1]]["at"]
    new_at = by_id[ids["updated_info"][0]]["at"]
    midpoint = old_at + (new_at - old_at) / 2
    now = _value(store, tenant, attribute, None)
    then = _value(store, tenant, attribute, midpoint)
    return {
        "chat": chat,
        "question": probe["question"],
        "attribute": attribute,
        "now": now,
        "as_of": then,
        "expected_now": new,
        "expected_as_of": old,
        "right_now": attribute is not None and _same(now, new),
        "right_as_of": attribute is not None and _same(then, old),
    }


def _value(store: Any, tenant: str, attribute: str | None, at: datetime | None) -> Any:
    if attribute is None:
        return None
    query: dict[str, Any] = {"tenant_id": tenant, "subject": SUBJECT, "attribute": attribute}
    if at is not None:
        query["at"] = at.isoformat()
    facts = get(store, query)
    return facts[0].value if facts else None


def _same(found: Any, expected: Any) -> bool:
    if expected is None or found is None:
        return found is None and expected is None
    if isinstance(expected, str) and isinstance(found, str):
        return expected.casefold() in found.casefold()
    return bool(found == expected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beam", type=Path, default=DEFAULT_BEAM)
    parser.add_argument(
        "--no-forms",
        action="store_true",
        help="the catalogue's attributes without their forms (names, types, synonyms only)",
    )
    args = parser.parse_args()
    figures = run(args.beam.resolve(), no_forms=args.no_forms)
    for row in figures["probes"]:
        mark = ("now ok " if row["right_now"] else "now NO ") + (
            "as-of ok" if row["right_as_of"] else "as-of NO"
        )
        print(
            f"{mark}  chat {row['chat']:>2} {row['attribute'] or '(no attribute)':<30}"
            f" now={row['now']!r} (want {row['expected_now']!r})"
            f" as_of={row['as_of']!r} (want {row['expected_as_of']!r})"
        )
    print(
        f"right now {figures['right_now']}/{figures['of']}, as of {figures['right_as_of']}/"
        f"{figures['of']}, both {figures['right_both']}/{figures['of']}"
    )


if __name__ == "__main__":
    main()
