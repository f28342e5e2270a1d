"""The episode stage's public seam: what the two lanes (the workers', `process.py`, and the hot
path, `pipeline/hot_path.py`) and consolidation use of `pipeline.episodes`, and nothing else.

- **claim** — `claim(unit, keys)`, `claim_waiting(unit, limit)`: take waiting episodes under a
  lease (`Claimed`, whose attempt is the fencing token); the hot lane's own episode is claimed
  as it arrives (`claimed_now`).
- **extract with context** — `run_extraction(store, episode, extractor)`: one episode, its
  context read lazily; `batch_contexts(store, episodes)`: a claimed batch's at once.
- **decide and finish** — `decide_and_finish(store, claimed, extracted)`: the policy applied
  to every candidate, each decision logged, each episode marked done or failed, in one
  transaction only the claim still holding the episodes can commit; a forget of a subject since
  its episode was received wins (`Outcome.forgotten`). `finish_new(unit, row, claimed,
  result)`: an episode received and decided in the caller's unit (the hot lane's common case).
- **record spend** — `record_spend(unit, claimed, extracted)`: what each model call spent, on
  its episode as soon as its answer is in.
- **drive** — `drive(store, keys)`, `sweep(store)`: send episodes to the workers again (what
  consolidation re-drives), and find the ones whose message or lease was lost.

The hot lane's request and answer (`RememberIn`, `Remembered`) and its own steps
(`answer_of`, `earlier`, `defer`, `observe_remembered`) live in `remembering.py`; the shared
types in `claimed.py`.
"""

from __future__ import annotations

from pipeline.episodes.claimed import Claimed, Extracted, Outcome
from pipeline.episodes.claiming import claim, claim_waiting
from pipeline.episodes.contexts import batch_contexts, context_for, run_extraction
from pipeline.episodes.dispatch import EpisodeKey
from pipeline.episodes.drive import drive, sweep
from pipeline.episodes.finishing import decide_and_finish, finish, finish_new, record_spend
from pipeline.episodes.lane_metrics import observe_consolidation
from pipeline.episodes.records import insert_new, read_row
from pipeline.episodes.remembering import (
    Remembered,
    RememberIn,
    answer_of,
    claimed_now,
    defer,
    earlier,
    noted,
    observe_remembered,
    one_time_name,
)

__all__ = [
    "Claimed",
    "EpisodeKey",
    "Extracted",
    "Outcome",
    "RememberIn",
    "Remembered",
    "answer_of",
    "batch_contexts",
    "claim",
    "claim_waiting",
    "claimed_now",
    "context_for",
    "decide_and_finish",
    "defer",
    "drive",
    "earlier",
    "finish",
    "finish_new",
    "insert_new",
    "noted",
    "observe_remembered",
    "observe_consolidation",
    "one_time_name",
    "read_row",
    "record_spend",
    "run_extraction",
    "sweep",
]
