"""SGAM's public Python API: the same operations as the `sgam` command line.

Names are imported on first use, so that `import pipeline` (and the command line's start-up)
stays cheap; `__all__` lists everything public. Extraction lives in its own namespace:
`from pipeline.extract import extract` (`pipeline.extract` is the subpackage).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any

from pipeline.errors import (
    CatalogError,
    ConflictError,
    FactConflict,
    IdempotencyConflict,
    IdempotencyInProgress,
    InvalidInput,
    InvalidLines,
    LlmAnswerInvalid,
    LlmFailure,
    LlmRequestRejected,
    LlmUnavailable,
    NotBuffered,
    NotFailed,
    NotFound,
    NotQuarantined,
    PermanentError,
    PurgeBlocked,
    RetryableError,
    SettingError,
    SgamError,
    StoreBusy,
    StoreUnavailable,
    TrustRejected,
    VersionConflict,
)

if TYPE_CHECKING:
    from pipeline.access.keys import (
        ApiKey,
        IssuedKey,
        authenticate,
        create_key,
        list_keys,
        revoke_key,
    )
    from pipeline.buffer.review import confirm, list_candidates, reject
    from pipeline.consolidation import Report, consolidate
    from pipeline.db.store import Store
    from pipeline.db.unit import Unit
    from pipeline.episodes.drive import retry, retry_episode, sweep
    from pipeline.episodes.intake import ingest
    from pipeline.episodes.states import list_episodes, show_episode
    from pipeline.episodes.usage import llm_usage
    from pipeline.extract.llm import LlmClient
    from pipeline.extract.result import ExtractionResult
    from pipeline.hot_path import Remembered, remember
    from pipeline.ledger.batch import PutOutcome, put, put_many, write_fact, write_many
    from pipeline.ledger.dismiss import dismiss, dismiss_fact
    from pipeline.ledger.expire import ExpireResult, expire, expire_key
    from pipeline.ledger.forget import ForgetResult, forget, forget_subject
    from pipeline.ledger.log import decision_log
    from pipeline.ledger.promote import promote, promote_fact
    from pipeline.ledger.results import PutResult
    from pipeline.read.catalog_check import check_catalog
    from pipeline.read.context import Context, ContextItem, ContextQuery, assemble
    from pipeline.read.facts import FactQuery, get, history
    from pipeline.read.owners import scope_of
    from pipeline.read.quarantine import list_quarantined
    from pipeline.read.search import SearchQuery, search
    from pipeline.read.state import KeyQuery, state_tag
    from pipeline.rebuild import ReplayReport, replay
    from pipeline.settings import Settings, load_settings
    from schemas.catalog import Catalog
    from schemas.results import (
        CatalogProblem,
        Decided,
        EpisodeDetail,
        FoundEpisode,
        FoundFact,
        IngestReport,
        LoggedDecision,
        Receipt,
        Rejection,
        Retried,
        SearchResult,
        StoredCandidate,
        StoredEpisode,
        SupportedCandidate,
    )

_LAZY = {
    "IssuedKey": "pipeline.access.keys",
    "StoredEpisode": "schemas.results",
    "FoundEpisode": "schemas.results",
    "FoundFact": "schemas.results",
    "SearchResult": "schemas.results",
    "StoredCandidate": "schemas.results",
    "SupportedCandidate": "schemas.results",
    "Retried": "schemas.results",
    "Rejection": "schemas.results",
    "LoggedDecision": "schemas.results",
    "EpisodeDetail": "schemas.results",
    "Decided": "schemas.results",
    "ApiKey": "pipeline.access.keys",
    "authenticate": "pipeline.access.keys",
    "create_key": "pipeline.access.keys",
    "list_keys": "pipeline.access.keys",
    "revoke_key": "pipeline.access.keys",
    "confirm": "pipeline.buffer.review",
    "list_candidates": "pipeline.buffer.review",
    "reject": "pipeline.buffer.review",
    "Report": "pipeline.consolidation",
    "consolidate": "pipeline.consolidation",
    "retry": "pipeline.episodes.drive",
    "retry_episode": "pipeline.episodes.drive",
    "sweep": "pipeline.episodes.drive",
    "IngestReport": "schemas.results",
    "Receipt": "schemas.results",
    "ingest": "pipeline.episodes.intake",
    "list_episodes": "pipeline.episodes.states",
    "llm_usage": "pipeline.episodes.usage",
    "show_episode": "pipeline.episodes.states",
    "Remembered": "pipeline.hot_path",
    "remember": "pipeline.hot_path",
    "CatalogProblem": "schemas.results",
    "check_catalog": "pipeline.read.catalog_check",
    "Store": "pipeline.db.store",
    "Unit": "pipeline.db.unit",
    "LlmClient": "pipeline.extract.llm",
    "ExtractionResult": "pipeline.extract.result",
    "PutOutcome": "pipeline.ledger.batch",
    "put_many": "pipeline.ledger.batch",
    "write_many": "pipeline.ledger.batch",
    "ExpireResult": "pipeline.ledger.expire",
    "expire": "pipeline.ledger.expire",
    "expire_key": "pipeline.ledger.expire",
    "ForgetResult": "pipeline.ledger.forget",
    "forget": "pipeline.ledger.forget",
    "forget_subject": "pipeline.ledger.forget",
    "decision_log": "pipeline.ledger.log",
    "dismiss": "pipeline.ledger.dismiss",
    "dismiss_fact": "pipeline.ledger.dismiss",
    "promote": "pipeline.ledger.promote",
    "promote_fact": "pipeline.ledger.promote",
    "ReplayReport": "pipeline.rebuild",
    "replay": "pipeline.rebuild",
    "PutResult": "pipeline.ledger.results",
    "put": "pipeline.ledger.batch",
    "write_fact": "pipeline.ledger.batch",
    "Context": "pipeline.read.context",
    "ContextItem": "pipeline.read.context",
    "ContextQuery": "pipeline.read.context",
    "assemble": "pipeline.read.context",
    "FactQuery": "pipeline.read.facts",
    "get": "pipeline.read.facts",
    "history": "pipeline.read.facts",
    "scope_of": "pipeline.read.owners",
    "list_quarantined": "pipeline.read.quarantine",
    "SearchQuery": "pipeline.read.search",
    "search": "pipeline.read.search",
    "KeyQuery": "pipeline.read.state",
    "state_tag": "pipeline.read.state",
    "Settings": "pipeline.settings",
    "load_settings": "pipeline.settings",
}


def open_store(
    settings: Settings | None = None,
    clock: Callable[[], datetime] | None = None,
    catalog: Catalog | None = None,
) -> Store:
    """A store on `settings` (default: the SGAM_* environment), its schema checked, with what
    runs after each of its units of work commits: the embedding arm's vectors of the rows the
    unit wrote, made in the background (`pipeline.embedding.after_commit`; nothing while the
    arm is off). The command line, the HTTP app and the workers open theirs here too."""
    from pipeline.db import store
    from pipeline.embedding import after_commit

    return store.open_store(settings, clock or store.utc_now, catalog, after_commit=[after_commit])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ApiKey",
    "CatalogError",
    "CatalogProblem",
    "ConflictError",
    "Context",
    "ContextItem",
    "ContextQuery",
    "Decided",
    "EpisodeDetail",
    "ExpireResult",
    "ExtractionResult",
    "FactConflict",
    "FactQuery",
    "ForgetResult",
    "FoundEpisode",
    "FoundFact",
    "IdempotencyConflict",
    "IdempotencyInProgress",
    "IngestReport",
    "InvalidInput",
    "InvalidLines",
    "IssuedKey",
    "KeyQuery",
    "LlmAnswerInvalid",
    "LlmClient",
    "LlmFailure",
    "LlmRequestRejected",
    "LlmUnavailable",
    "LoggedDecision",
    "NotBuffered",
    "NotFailed",
    "NotFound",
    "NotQuarantined",
    "PermanentError",
    "PurgeBlocked",
    "PutOutcome",
    "PutResult",
    "Receipt",
    "Rejection",
    "Remembered",
    "ReplayReport",
    "Report",
    "Retried",
    "RetryableError",
    "SearchQuery",
    "SearchResult",
    "SettingError",
    "Settings",
    "SgamError",
    "Store",
    "StoreBusy",
    "StoreUnavailable",
    "StoredCandidate",
    "StoredEpisode",
    "SupportedCandidate",
    "TrustRejected",
    "Unit",
    "VersionConflict",
    "assemble",
    "authenticate",
    "check_catalog",
    "confirm",
    "consolidate",
    "create_key",
    "decision_log",
    "dismiss",
    "dismiss_fact",
    "expire",
    "expire_key",
    "forget",
    "forget_subject",
    "get",
    "history",
    "ingest",
    "list_candidates",
    "list_episodes",
    "list_keys",
    "list_quarantined",
    "llm_usage",
    "load_settings",
    "open_store",
    "promote",
    "promote_fact",
    "put",
    "put_many",
    "reject",
    "remember",
    "replay",
    "retry",
    "retry_episode",
    "revoke_key",
    "scope_of",
    "search",
    "show_episode",
    "state_tag",
    "sweep",
    "write_fact",
    "write_many",
]
