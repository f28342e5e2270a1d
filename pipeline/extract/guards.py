"""Guards after the model: pure functions that decide which proposed updates survive.

Each proposed `MemoryUpdate` either becomes a `Candidate` (subject resolved, value normalised
by the catalogue, valid_from resolved, provenance copied from the episode) or a `Rejection`
with a reason code. Nothing the model says can set the tenant, scope, source episode or trust.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipeline.extract.dates import resolve_instant
from schemas.catalog import AttributeSpec, Catalog, ValueType
from schemas.episodes import Episode
from schemas.extraction import MAX_UPDATES, Candidate, MemoryUpdate, Rejection, RejectReason
from schemas.facts import Cardinality, Fact, JsonValue
from schemas.fields import canonical_json, to_utc

CurrentValues = Mapping[str, Sequence[JsonValue]]
"""What holds now for the episode's subject: attribute -> its current value(s)."""

HeldSince = Mapping[tuple[str, str], datetime]
"""Since when each current value holds: (attribute, its canonical JSON) -> its valid_from."""


class StoredValues(dict[str, list[JsonValue]]):
    """`CurrentValues` read from the ledger, with since when each holds (`since`): a value
    that holds only from after an episode's time is no restatement of it."""

    def __init__(self, values: CurrentValues = {}, since: HeldSince | None = None) -> None:  # noqa: B006
        super().__init__({attribute: list(items) for attribute, items in values.items()})
        self.since: dict[tuple[str, str], datetime] = dict(since or {})


def held_since(current: CurrentValues) -> HeldSince:
    """The `since` of stored values (a lazy mapping's too); nothing for plain values."""
    since = getattr(current, "since", None)
    return since if isinstance(since, Mapping) else {}


FUTURE_TOLERANCE = timedelta(minutes=5)
"""Clock skew allowed between the sender's clock and the episode's timestamp."""

# How a model or a user names the person an episode is about.
USER_ALIASES = frozenset({"i", "me", "my", "myself", "mine", "user", "the user", "customer"})

_QUOTES = str.maketrans({"‘": "'", "’": "'", "‚": "'", "`": "'", "“": '"', "”": '"', "„": '"'})
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class GuardContext:
    """Everything the guards may consult; none of it comes from the model."""

    episode: Episode
    catalog: Catalog
    current: CurrentValues = field(default_factory=dict)
    known_subjects: frozenset[str] = frozenset()
    day_first: bool = False
    judged_by: str = "model"  # the extractor whose proposals these are, named in a refusal


def current_values(facts: Iterable[Fact]) -> StoredValues:
    """The `CurrentValues` of facts read from the ledger (`pipeline.get`), with since when
    each holds."""
    values = StoredValues()
    for fact in facts:
        values.setdefault(fact.attribute, []).append(fact.value)
        values.since[(fact.attribute, canonical_json(fact.value))] = fact.valid_from
    return values


def _restatement(update: MemoryUpdate, context: GuardContext) -> Rejection:
    """The refusal of a restatement, naming who judged it: the rules, or the model."""
    who = "the rules say" if context.judged_by == "rules" else "the model says"
    return _reject(update, RejectReason.RESTATEMENT, f"{who} the stored value holds")


def normalise_text(text: str) -> str:
    """NFC, straight quotes, one space, casefold: how evidence is compared with the episode."""
    folded = unicodedata.normalize("NFC", text).translate(_QUOTES)
    return _SPACE.sub(" ", folded).strip().casefold()


def evidence_quoted(update: MemoryUpdate, episode: Episode) -> Rejection | None:
    quote = normalise_text(update.evidence).strip(" \"'")
    if not quote:
        return _reject(update, RejectReason.EVIDENCE_NOT_QUOTED, "the evidence is empty")
    if quote not in normalise_text(episode.text):
        return _reject(
            update, RejectReason.EVIDENCE_NOT_QUOTED, "the evidence does not occur in the episode"
        )
    return None


def catalogued(update: MemoryUpdate, catalog: Catalog) -> AttributeSpec | Rejection:
    spec = catalog.attributes.get(update.attribute)
    if spec is None:
        return _reject(
            update,
            RejectReason.UNKNOWN_ATTRIBUTE,
            f"{update.attribute!r} is not in catalogue {catalog.version}",
        )
    return spec


def resolved_subject(update: MemoryUpdate, spec: AttributeSpec, context: GuardContext) -> str:
    """The subject id the update is about, or '' when it names someone else."""
    episode = context.episode
    named = normalise_text(update.subject)
    own_names = {episode.subject.casefold(), *(name.casefold() for name in episode.subject_names)}
    if named in USER_ALIASES or named in own_names:
        return episode.subject
    if spec.other_subjects and update.subject in context.known_subjects:
        return update.subject
    return ""


def normalised_value(update: MemoryUpdate, spec: AttributeSpec) -> JsonValue | Rejection:
    if update.value is None or not update.value.strip():
        return _reject(update, RejectReason.BAD_VALUE, "the value is empty")
    try:
        value = spec.normalise(update.value.strip())
    except ValueError as exc:
        return _reject(update, RejectReason.BAD_VALUE, f"not a {spec.type.value}: {exc}")
    if spec.type is ValueType.JSON and not isinstance(value, dict | list):
        return _reject(update, RejectReason.BAD_VALUE, "a json attribute needs an object or list")
    return value


def resolved_valid_from(update: MemoryUpdate, context: GuardContext) -> datetime | Rejection:
    occurred = context.episode.occurred_at
    if update.valid_from is None or not update.valid_from.strip():
        return to_utc(occurred)
    try:
        moment = resolve_instant(update.valid_from, occurred, day_first=context.day_first)
    except ValueError as exc:
        return _reject(update, RejectReason.BAD_VALID_FROM, str(exc))
    if moment > occurred + FUTURE_TOLERANCE:
        return _reject(
            update,
            RejectReason.FUTURE_VALID_FROM,
            "valid_from lies after the episode; an announced change needs an explicit write",
        )
    return moment


def judge(update: MemoryUpdate, context: GuardContext) -> Candidate | Rejection:
    """One proposed update through every guard, in order; the first refusal wins."""
    refused = evidence_quoted(update, context.episode)
    if refused is not None:
        return refused
    spec = catalogued(update, context.catalog)
    if isinstance(spec, Rejection):
        return spec
    subject = resolved_subject(update, spec, context)
    if not subject:
        return _reject(
            update,
            RejectReason.FOREIGN_SUBJECT,
            f"{update.subject!r} is not the episode's subject",
        )
    value = normalised_value(update, spec)
    valid_from = resolved_valid_from(update, context)
    if update.change == "no_change" and (
        isinstance(value, Rejection) or isinstance(valid_from, Rejection)
    ):
        return _restatement(update, context)
    if isinstance(value, Rejection):
        return value
    if isinstance(valid_from, Rejection):
        return valid_from
    own = subject == context.episode.subject
    stored = list(context.current.get(update.attribute, ())) if own else []
    # A value held now is restated only by an episode from the time it held: one that says
    # it earlier extends its history (the ledger joins it to the interval, as for a late put).
    since = held_since(context.current) if own else {}
    held_from = since.get((update.attribute, canonical_json(value)))
    earlier = held_from is not None and valid_from < held_from
    if update.change == "no_change" and not earlier:
        return _restatement(update, context)
    if canonical_json(value) in {canonical_json(item) for item in stored} and not earlier:
        return _reject(update, RejectReason.RESTATEMENT, "the ledger already holds this value")
    episode = context.episode
    return Candidate(
        evidence=update.evidence,
        subject=subject,
        attribute=update.attribute,
        current_value=_shown(stored, spec),
        change="update" if stored and spec.cardinality is Cardinality.ONE else "new",
        value=value,
        valid_from=valid_from,
        tenant_id=episode.tenant_id,
        agent_id=episode.agent_id,
        purpose=episode.purpose,
        source_episode_id=episode.episode_id,
        trust=episode.trust,
    )


def guard_all(
    updates: Sequence[MemoryUpdate], context: GuardContext
) -> tuple[list[Candidate], list[Rejection]]:
    """Judge every update, merge duplicates (the first one stays) and keep at most
    MAX_UPDATES. Returns (kept, rejected), each in the order the updates were proposed."""
    kept: list[Candidate] = []
    rejected: list[Rejection] = []
    seen: set[tuple[str, str, str, datetime]] = set()
    for update in updates:
        verdict = judge(update, context)
        if isinstance(verdict, Rejection):
            rejected.append(verdict)
            continue
        key = (
            verdict.subject,
            verdict.attribute,
            canonical_json(verdict.value),
            verdict.valid_from,
        )
        if key in seen:
            rejected.append(
                _reject(update, RejectReason.DUPLICATE, "the same update appears earlier")
            )
        elif len(kept) >= MAX_UPDATES:
            rejected.append(
                _reject(update, RejectReason.OVER_LIMIT, f"more than {MAX_UPDATES} updates")
            )
        else:
            seen.add(key)
            kept.append(verdict)
    return kept, rejected


def _shown(stored: list[JsonValue], spec: AttributeSpec) -> Any:
    if not stored:
        return None
    return stored[0] if spec.cardinality is Cardinality.ONE else stored


def _reject(update: MemoryUpdate, reason: RejectReason, message: str) -> Rejection:
    return Rejection(update=update, reason=reason, message=message)
