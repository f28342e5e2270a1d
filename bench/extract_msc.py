"""The rules extractor and the default (personal) catalogue against MSC's human labels.

    .venv/bin/python bench/extract_msc.py [--msc ../shared/data/msc] [--sample FILE]

MSC (Multi-Session Chat, test split, sessions 1-2) labels every turn with the persona fact it
reveals (`persona_text`, free text) or none. Each turn is one episode whose subject is its
speaker. The data is read in place, never copied.

A candidate **matches** its turn's gold fact when both hold:
- its value shares a content word with the gold sentence: both are lower-cased, split into
  words (letters, digits, apostrophes), words of STOPWORDS dropped, and each word reduced by
  `stem` (words of four letters or more lose a trailing 'ing', 'ed' or 's', 'ies' becomes
  'y' and 'ches', 'shes', 'sses', 'xes', 'zes' lose their 'es');
- its attribute fits the gold sentence: the sentence holds one of the attribute's CUES (stemmed
  the same way), the words a sentence about that attribute uses.
Numbers match as digits or words ("4 kids" ~ "four kids").

An unlabelled turn (no new persona fact, says the gold) with a candidate is the false-positive
proxy; the same share is also given counting only candidates that restate none of the
speaker's facts labelled on earlier turns (`agg_persona_list`, by the same matching rule):
"I'm a vegan, remember." is unlabelled because the fact was labelled before.

Every count is also given per attribute and per form (`forms`: which catalogue form read the
candidate, as `attribute: form`), so that a form whose family of sentences is weak shows.

Splits: **dev** is session 1 and the first 250 episodes of session 2 (what the forms were tuned
on); **held-out** is session 2's episodes 250-500, which were never read while tuning.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pipeline.catalog.loader import bundled_catalog
from pipeline.extract import extract
from pipeline.extract.clause_values import clause_problem
from pipeline.extract.rules import RulesExtractor
from pipeline.extract.value_words import NUMBER_WORDS, word_set
from pipeline.settings import Settings
from schemas.episodes import Episode
from schemas.extraction import Candidate

DEFAULT_MSC = Path(__file__).resolve().parents[2] / "shared" / "data" / "msc"
DEV_SESSION_2_EPISODES = 250
STOPWORDS = word_set(
    "a an the i i'm im my me mine we our you your he she it its they them their this that "
    "is am are was were be been being have has had do does did to of in on at for with and "
    "or but so as by from about very really just also too not no like love enjoy am"
)
CUES: dict[str, tuple[str, ...]] = {
    "preferred_name": ("name", "call", "called"),
    "age": ("old", "age", "year", "turn", "born"),
    "birthday": ("birthday", "born"),
    "home_city": ("live", "living", "move", "moved", "from", "reside", "city", "town", "state"),
    "home_country": ("live", "living", "move", "moved", "from", "country"),
    "hometown": ("from", "grew", "born", "raised", "hometown", "originally"),
    "employer": ("work", "job", "employ", "company", "store", "shop", "restaurant"),
    "job_title": ("work", "job", "am", "i'm", "career", "profession", "retired", "student"),
    "education": ("study", "student", "major", "degree", "college", "school", "graduat", "univers"),
    "partner": ("husband", "wife", "partner", "boyfriend", "girlfriend", "married", "fianc"),
    "marital_status": ("married", "single", "divorced", "widow", "engaged", "separated"),
    "number_of_children": ("kid", "child", "children", "son", "daughter", "boy", "girl"),
    "family_members": (
        "brother",
        "sister",
        "sibling",
        "son",
        "daughter",
        "twin",
        "grand",
        "niece",
        "nephew",
        "baby",
        "family",
    ),
    "pets": (
        "dog",
        "cat",
        "pet",
        "fish",
        "bird",
        "horse",
        "puppy",
        "kitten",
        "animal",
        "hamster",
        "rabbit",
        "snake",
        "turtle",
        "parrot",
        "lizard",
    ),
    "pet_names": ("name", "named", "dog", "cat", "pet"),
    "diet": ("vegan", "vegetarian", "diet", "eat", "meat", "keto", "gluten", "pescatarian"),
    "allergies": ("allerg",),
    "health_conditions": ("have", "diagnos", "suffer", "condition", "disease"),
    "languages": ("speak", "language", "fluent"),
    "hobbies": (
        "like",
        "love",
        "enjoy",
        "hobby",
        "hobbies",
        "play",
        "practice",
        "fun",
        "fan",
        "into",
        "passion",
        "free",
        "spare",
        "interest",
    ),
    "likes": (
        "like",
        "love",
        "enjoy",
        "fan",
        "favorite",
        "favourite",
        "into",
        "adore",
        "interest",
        "prefer",
        "passion",
        "obsess",
    ),
    "dislikes": ("hate", "dislike", "stand", "not like", "don't like", "despise"),
    "vehicle": ("drive", "car", "truck"),
    "work_field": ("work", "job", "field", "industry", "career"),
    "favorite_food": ("favorite", "favourite", "food", "like", "love", "eat"),
    "favorite_drink": ("favorite", "favourite", "drink", "like", "love"),
    "favorite_music": ("favorite", "favourite", "music", "band", "singer", "like", "love"),
    "favorite_film": ("favorite", "favourite", "movie", "film", "show", "like", "love"),
    "favorite_book": ("favorite", "favourite", "book", "author", "read", "like", "love"),
    "favorite_sport": ("favorite", "favourite", "sport", "like", "love", "play"),
    "favorite_team": ("favorite", "favourite", "team", "fan", "root", "cheer", "like", "love"),
    "favorite_color": ("favorite", "favourite", "color", "colour", "like", "love"),
}
_WORD = re.compile(r"[a-z0-9']+")


def stem(word: str) -> str:
    if len(word) <= 3:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes", "zes")):
        return word[:-2]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    words = {w.strip("'") for w in _WORD.findall(text.casefold().replace("’", "'"))}
    out = {stem(w) for w in words if w and w not in STOPWORDS}
    return out | {str(NUMBER_WORDS[w]) for w in words if w in NUMBER_WORDS}


def matches(candidate: Candidate, gold: str) -> bool:
    value = candidate.value if isinstance(candidate.value, str) else json.dumps(candidate.value)
    if not content_words(value) & content_words(gold):
        return False
    return attribute_fits(candidate.attribute, gold)


def attribute_fits(attribute: str, gold: str) -> bool:
    """A cue of the attribute occurs in the gold sentence: as a phrase (cues with a space), as
    a whole word (cues under four letters) or as the start of a word ('allerg', 'graduat')."""
    folded = gold.casefold().replace("’", "'")
    words = _WORD.findall(folded)
    for cue in CUES.get(attribute, ()):
        if " " in cue:
            if cue in folded:
                return True
        elif any(
            word in (cue, cue + "s") if len(cue) < 4 else word.startswith(cue) for word in words
        ):
            return True
    return False


def turns(msc: Path) -> list[dict[str, Any]]:
    """Every turn of sessions 1-2, with its split, speaker and gold label."""
    out = []
    for session in (1, 2):
        path = msc / "msc_personasummary" / f"session_{session}" / "test.txt"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            record = json.loads(line)
            split = "dev" if session == 1 or number < DEV_SESSION_2_EPISODES else "held-out"
            for index, turn in enumerate(record["dialog"]):
                out.append(
                    {
                        "id": f"s{session}-{number}-{index}",
                        "split": split,
                        "speaker": turn["id"],
                        "text": turn["text"],
                        "gold": (turn.get("persona_text") or "").strip(),
                        # the speaker's facts labelled so far, on earlier turns
                        "known": turn.get("agg_persona_list") or [],
                    }
                )
    return out


def run(msc: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    catalog = bundled_catalog("personal")
    settings = Settings(_env_file=None, catalog="personal")  # type: ignore[call-arg]
    per_split: dict[str, Counter[str]] = defaultdict(Counter)
    per_attribute: dict[str, Counter[str]] = defaultdict(Counter)
    per_form: dict[str, Counter[str]] = defaultdict(Counter)
    rules = RulesExtractor(catalog)
    found: list[dict[str, Any]] = []
    clauses: list[dict[str, Any]] = []
    for turn in turns(msc):
        episode = Episode(
            episode_id=turn["id"],
            tenant_id="msc",
            subject=turn["speaker"],
            occurred_at="2026-01-01T12:00:00Z",
            text=turn["text"],
        )
        kept = extract(episode, catalog=catalog, settings=settings, extractor="rules").kept
        for split in (turn["split"], "all", f"session {turn['id'][1]}"):
            tally = per_split[split]
            tally["turns"] += 1
            if turn["gold"]:
                tally["labelled"] += 1
                tally["candidates_on_labelled"] += len(kept)
                hits = [c for c in kept if matches(c, turn["gold"])]
                tally["matching_candidates"] += len(hits)
                tally["labelled_with_match"] += bool(hits)
                tally["labelled_with_any"] += bool(kept)
            else:
                tally["unlabelled"] += 1
                tally["unlabelled_with_any"] += bool(kept)
                tally["unlabelled_with_unknown"] += any(
                    not any(matches(c, fact) for fact in turn["known"]) for c in kept
                )
                tally["candidates_on_unlabelled"] += len(kept)
        forms = _forms(rules, episode) if kept else {}
        clauses += stored_clauses(turn["id"], kept)
        for candidate in kept:
            ok = bool(turn["gold"]) and matches(candidate, turn["gold"])
            form = forms.get((candidate.attribute, str(candidate.value).casefold()), BUILT_IN)
            for counts in (per_attribute[candidate.attribute], per_form[form]):
                counts["candidates"] += 1
                counts["on_labelled" if turn["gold"] else "on_unlabelled"] += 1
                counts["matching"] += ok
                counts[f"matching_{turn['split']}"] += ok
            found.append(
                {
                    "turn": turn["id"],
                    "split": turn["split"],
                    "text": turn["text"],
                    "gold": turn["gold"],
                    "attribute": candidate.attribute,
                    "value": candidate.value,
                    "form": form,
                    "auto_match": ok,
                }
            )
    figures = {
        "splits": _ratios(per_split),
        "attributes": _attribute_table(per_attribute),
        "forms": _attribute_table(per_form),
        "values_that_are_clauses": clauses,
    }
    return figures, found


def stored_clauses(turn: str, kept: list[Candidate]) -> list[dict[str, Any]]:
    """The candidates whose string value is a clause, not a value (none may be), with their
    turn: the same check the rules apply (`pipeline/extract/clause_values.py`)."""
    return [
        {"turn": turn, "attribute": c.attribute, "value": c.value, "problem": problem}
        for c in kept
        if isinstance(c.value, str)
        for problem in [clause_problem(c.value)]
        if problem
    ]


BUILT_IN = "(built-in: my X is Y, X: Y, a correction)"


def _forms(rules: RulesExtractor, episode: Episode) -> dict[tuple[str, str], str]:
    """Which catalogue form read each value of the episode, as `attribute: form`."""
    out: dict[tuple[str, str], str] = {}
    for reading in rules.explain(episode):
        for hit in reading.hits:
            for value in hit.values:
                key = (hit.attribute, value.casefold())
                out.setdefault(key, f"{hit.attribute}: {hit.form}")
    return out


def _ratios(per_split: dict[str, Counter[str]]) -> dict[str, dict[str, Any]]:
    out = {}
    for split, t in per_split.items():
        out[split] = dict(t) | {
            "share_labelled_with_match": round(t["labelled_with_match"] / t["labelled"], 4),
            "candidates_per_labelled_turn": round(t["candidates_on_labelled"] / t["labelled"], 4),
            "precision_on_labelled": round(
                t["matching_candidates"] / max(1, t["candidates_on_labelled"]), 4
            ),
            "share_unlabelled_with_any": round(t["unlabelled_with_any"] / t["unlabelled"], 4),
            "share_unlabelled_with_unknown": round(
                t["unlabelled_with_unknown"] / t["unlabelled"], 4
            ),
        }
    return out


def _attribute_table(per_attribute: dict[str, Counter[str]]) -> dict[str, dict[str, Any]]:
    return {
        name: dict(c) | {"precision": round(c["matching"] / max(1, c["on_labelled"]), 3)}
        for name, c in sorted(per_attribute.items(), key=lambda item: -item[1]["candidates"])
    }


def _draw(item: dict[str, Any], seed: int) -> str:
    key = f"{seed}:{item['turn']}:{item['attribute']}:{item['value']}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--msc", type=Path, default=DEFAULT_MSC)
    parser.add_argument("--sample", type=Path, help="write 100 random candidates here to judge")
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    figures, found = run(args.msc.resolve())
    print(json.dumps(figures, indent=2))
    if args.sample:
        # Stable under small changes of the rules: a candidate's place in the order depends on
        # itself only, so a re-run re-draws only the candidates that changed.
        picked = sorted(found, key=lambda item: _draw(item, args.seed))[:100]
        args.sample.write_text(
            "\n".join(json.dumps(item, ensure_ascii=False) for item in picked) + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
