"""The search read's optional embedding arm: vectors of facts and episodes from an
OpenAI-compatible `/v1/embeddings` endpoint (`client`), stored in SGAM's own tables and filled
after the ledger's writes, never inside them (`vectors`; what a write just committed, in the
background: `background`), with what they cost (`spend`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.db.store import Store
    from pipeline.db.unit import Written


def after_commit(store: Store, written: Written) -> None:
    """The store's after-commit hook (registered by the composition root,
    `pipeline.open_store`): the vectors of the rows a unit of work wrote, queued for the
    process's embedding thread, the writer not waiting. With the arm off it reads nothing and
    imports nothing (not the endpoint's client)."""
    if written and store.settings.embedding_configured:
        from pipeline.embedding.background import submit

        submit(store, written)


def settle() -> bool:
    """Wait for the vectors this process's writes queued (`background.flush`: as long as the
    queue moves once per SGAM_EMBEDDING_TIMEOUT_S); what a process leaving without the
    interpreter's teardown calls first. True at once, importing nothing, when none was queued."""
    background = sys.modules.get("pipeline.embedding.background")
    return background is None or bool(background.flush())
