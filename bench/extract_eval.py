"""Extraction eval: precision, recall and F1 on the labelled episodes, guard rejections by
reason, prompt tokens; then the rules extractor over every LoCoMo turn.

    .venv/bin/python bench/extract_eval.py                       # rules, estimated tokens
    .venv/bin/python bench/extract_eval.py --extractor llm       # also the SGAM_LLM_* endpoint
    .venv/bin/python bench/extract_eval.py --tokenize-url http://127.0.0.1:8765/v1
    .venv/bin/python bench/extract_eval.py --base-url URL --model M   # MSC and BEAM, your model

A match is (subject, attribute, normalised value, valid_from date in the episode's offset).
"Covered" episodes state their facts in forms the rules extractor reads (and the negatives);
the rest need a model. Figures go to bench/README.md. The rules with the default (personal)
catalogue against human labels are measured by bench/extract_msc.py (MSC),
bench/extract_beam.py (BEAM) and bench/extract_locomo.py (LoCoMo).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import extract_llm_eval as llm_eval
from extract_locomo import DEFAULT_LOCOMO, locomo_episodes, prompt_sizes, rules_run
from extract_tokens import TEMPLATE_TOKENS, token_counter

from pipeline.catalog.loader import load_catalog
from pipeline.errors import LlmFailure
from pipeline.extract import extract
from pipeline.extract.guards import GuardContext, judge
from pipeline.extract.llm import LlmClient
from pipeline.extract.prompting import render_messages
from pipeline.extract.result import ExtractionResult
from pipeline.settings import Settings, load_settings
from schemas.catalog import Catalog, ValueType
from schemas.episodes import Episode
from schemas.extraction import MemoryUpdate, Rejection
from schemas.fields import canonical_json

DATA = Path(__file__).with_name("data") / "extract_eval.jsonl"
SUBJECT = "mira"
Key = tuple[str, str, str, str]


def load_cases(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def episode_of(case: dict[str, Any]) -> Episode:
    return Episode(
        episode_id=case["id"],
        tenant_id="eval",
        subject=SUBJECT,
        subject_names=["Mira"],
        source=case["source"],
        occurred_at=case["occurred_at"],
        text=case["text"],
    )


def expected_keys(case: dict[str, Any], catalog: Catalog) -> set[Key]:
    return {
        (
            SUBJECT,
            item["attribute"],
            canonical_json(catalog.attributes[item["attribute"]].normalise(item["value"])),
            item["valid_from"],
        )
        for item in case["expected"]
    }


def found_keys(result: ExtractionResult) -> set[Key]:
    offset = result.episode.occurred_at.tzinfo
    return {
        (
            c.subject,
            c.attribute,
            canonical_json(c.value),
            c.valid_from.astimezone(offset).date().isoformat(),
        )
        for c in result.kept
    }


def scores(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f1": round(f1, 3),
    }


def evaluate(
    cases: list[dict[str, Any]],
    catalog: Catalog,
    settings: Settings,
    extractor: str,
    llm: LlmClient | None,
) -> dict[str, Any]:
    totals = {"all": [0, 0, 0], "covered": [0, 0, 0]}
    reasons: Counter[str] = Counter()
    misses: list[str] = []
    usage: list[dict[str, Any]] = []
    failures: Counter[str] = Counter()
    for case in cases:
        current = {name: list(values) for name, values in case["current"].items()}
        try:
            result = extract(
                episode_of(case),
                catalog=catalog,
                settings=settings,
                current=current,
                extractor=extractor,
                llm=llm,  # type: ignore[arg-type]
            )
        except LlmFailure as failure:
            failures[type(failure).__name__] += 1
            result = None
            usage.append(failure.usage.model_dump())
        expected = expected_keys(case, catalog)
        found = found_keys(result) if result else set()
        if result:
            reasons.update(r.reason.value for r in result.rejected)
            usage.append(result.usage.model_dump())
        counts = (len(found & expected), len(found - expected), len(expected - found))
        for subset in ("all", "covered") if case["covered"] else ("all",):
            totals[subset] = [a + b for a, b in zip(totals[subset], counts, strict=True)]
        if counts[1] or counts[2]:
            misses.append(f"{case['id']}: +{sorted(found - expected)} -{sorted(expected - found)}")
    report: dict[str, Any] = {
        "episodes": len(cases),
        "all": scores(*totals["all"]),
        "covered": scores(*totals["covered"]),
        "rejected_by_reason": dict(reasons.most_common()),
        "misses": misses,
    }
    if extractor == "llm":
        report["failures"] = dict(failures)
        report["requests_per_episode"] = round(statistics.mean(u["attempts"] for u in usage), 3)
        report["one_request"] = sum(u["attempts"] == 1 for u in usage)
        report["prompt_tokens"] = _spread([u["prompt_tokens"] for u in usage if u["attempts"] == 1])
        report["completion_tokens"] = _spread([u["completion_tokens"] for u in usage])
        report["latency_ms"] = _spread([u["latency_ms"] for u in usage])
    return report


BAD_CLASSES = {
    "evidence_not_quoted": {"evidence": "words the episode never said"},
    "unknown_attribute": {"attribute": "favourite_colour"},
    "bad_value": {"value": "not a value of any type but a string"},
    "future_valid_from": {"valid_from": "2027-01-01"},
    "foreign_subject": {"subject": "her brother"},
}


def guard_stress(cases: list[dict[str, Any]], catalog: Catalog) -> dict[str, str]:
    """Each correct expected update, spoiled once per bad class the guards must refuse: how
    many of each are refused, and with the right reason."""
    refused: Counter[str] = Counter()
    tried: Counter[str] = Counter()
    for case in cases:
        context = GuardContext(episode_of(case), catalog, case["current"])
        for item in case["expected"]:
            spec = catalog.attributes[item["attribute"]]
            good = {
                "evidence": case["text"],
                "subject": "I",
                "attribute": item["attribute"],
                "current_value": None,
                "change": "new",
                "value": str(item["value"]),
                "valid_from": None,
            }
            for reason, spoil in BAD_CLASSES.items():
                if reason == "bad_value" and spec.type is ValueType.STRING:
                    continue  # any text is a string
                tried[reason] += 1
                verdict = judge(MemoryUpdate.model_validate(good | spoil), context)
                refused[reason] += isinstance(verdict, Rejection) and verdict.reason == reason
    return {reason: f"{refused[reason]}/{tried[reason]}" for reason in BAD_CLASSES}


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        "max": ordered[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--extractor", choices=["rules", "llm"], default="rules")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument(
        "--tokenize-url", help="llama.cpp server base URL: count with its tokenizer"
    )
    parser.add_argument("--skip-locomo", action="store_true")
    parser.add_argument("--llm-limit", type=int, help="ask the endpoint about the first N only")
    llm_eval.add_arguments(parser)
    args = parser.parse_args()
    if args.base_url:  # your model on MSC and BEAM (bench/extract_llm_eval.py), nothing else
        llm_eval.run(llm_eval.settings_from(args), msc_dialogs=args.msc_dialogs)
        return
    catalog = load_catalog(None, "support")  # the labelled set speaks of the support attributes
    cases = load_cases(args.data)
    english = [case for case in cases if case["category"] != "non_english"]
    offline = Settings(_env_file=None)  # type: ignore[call-arg]
    print(f"# {len(cases)} episodes ({len(english)} English)")
    print("## rules\n" + json.dumps(evaluate(english, catalog, offline, "rules", None), indent=2))
    print("## guards: spoiled updates refused\n" + json.dumps(guard_stress(english, catalog)))
    count, schema_tokens, counter = token_counter(args.tokenize_url, catalog)
    measured: list[int] = []
    if args.extractor == "llm":
        settings = load_settings()
        llm = LlmClient(settings)
        report = evaluate(english[: args.llm_limit], catalog, settings, "llm", llm)
        print(f"## llm:{settings.llm_model} ({settings.llm_mode})\n" + json.dumps(report, indent=2))
        measured = [int(report["prompt_tokens"]["median"])] if report.get("prompt_tokens") else []
    counted = [
        sum(count(m["content"]) for m in render_messages(episode_of(c), catalog, c["current"]))
        + TEMPLATE_TOKENS
        for c in english
    ]
    print(
        f"## prompt tokens on the eval set ({counter}): messages median "
        f"{statistics.median(counted)} with the template; the schema adds {schema_tokens}"
    )
    if measured:
        print(f"   the endpoint's own prompt_tokens median: {measured[0]}")
    if not args.skip_locomo:
        episodes = locomo_episodes(args.locomo)
        print(
            "## rules over LoCoMo\n" + json.dumps(rules_run(episodes, catalog, offline), indent=2)
        )
        sizes = prompt_sizes(episodes, catalog, count, schema_tokens)
        print(f"## prompt tokens over LoCoMo ({counter})\n" + json.dumps(sizes, indent=2))


if __name__ == "__main__":
    main()
