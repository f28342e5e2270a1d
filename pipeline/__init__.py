"""SGAM's public Python API: the same operations as the `sgam` command line."""

from pipeline.errors import (
    CatalogError,
    ConflictError,
    FactConflict,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    PermanentError,
    RetryableError,
    SgamError,
    StoreBusy,
    StoreUnavailable,
    TrustRejected,
    VersionConflict,
)
from pipeline.ledger import PutResult, put
from pipeline.read import FactQuery, get, history
from pipeline.settings import Settings
from pipeline.store import Store, open_store

__all__ = [
    "CatalogError",
    "ConflictError",
    "FactConflict",
    "FactQuery",
    "IdempotencyConflict",
    "InvalidInput",
    "NotFound",
    "PermanentError",
    "PutResult",
    "RetryableError",
    "Settings",
    "SgamError",
    "Store",
    "StoreBusy",
    "StoreUnavailable",
    "TrustRejected",
    "VersionConflict",
    "get",
    "history",
    "open_store",
    "put",
]
