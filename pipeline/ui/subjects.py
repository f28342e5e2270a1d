"""A subject's memory (what holds now, each attribute's timeline, its decisions), an episode
with everything it caused, and forgetting a subject (admin, confirmed by typing its name)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response

import pipeline
from pipeline.access.keys import ApiKey
from pipeline.api import operations
from pipeline.api.access import bind
from pipeline.api.conventions import identifier
from pipeline.api.problems import Forbidden
from pipeline.read.subjects import list_subjects
from pipeline.ui import notices, render
from pipeline.ui.render import need, page, paging, posted, signed_in
from pipeline.ui.timeline import timeline, value_label
from schemas.facts import Fact

router = APIRouter()


def reads_log(key: ApiKey) -> bool:
    """The log spans the whole tenant: a reviewer key bound to no agent or purpose (as REST)."""
    return key.allows("reviewer") and key.agent_id is None and key.purpose is None


def forgets(key: ApiKey) -> bool:
    return key.allows("admin") and key.agent_id is None and key.purpose is None


@router.get("/subjects", response_class=HTMLResponse)
def subjects(request: Request, subject: str | None = None, q: str | None = None) -> Response:
    """Without `subject`: the Subjects list (those starting with `q`, a page at a time);
    with one: what holds for it now, what `q` finds in it (the search box), its timelines and
    (for reviewers) its decisions."""
    key = signed_in(request)
    context: dict[str, Any] = {
        "subject": subject,
        "held": [],
        "timelines": [],
        "log": None,
        "q": q,
        "found": None,
    }
    if not subject:
        at = paging(request)
        query = bind(key, {}) | {"prefix": q or None, "limit": at.size + 1, "offset": at.offset}
        listed, more = at.window(list_subjects(render.store_of(request), query))
        return page(request, "subjects.html", key, listed=listed, paging=at, more=more, **context)
    if subject:
        subject = identifier("subject", subject, subject=True)
        store = render.store_of(request)
        if q and q.strip():  # the search box: what the reader's key may see, best first
            context["found"] = operations.search(store, key, subject, {}, query=q)
        scope = bind(key, {}) | {"subject": subject}
        held = pipeline.get(store, scope)
        versions: dict[str, list[Fact]] = defaultdict(list)
        for fact in pipeline.history(store, scope, versions=True):
            versions[fact.attribute].append(fact)
        now = store.clock()
        context["held"] = [(fact, value_label(fact.value, 200)) for fact in held]
        context["timelines"] = [
            (name, timeline(rows, now)) for name, rows in sorted(versions.items())
        ]
        if reads_log(key):
            at = paging(request)
            query = {
                "tenant_id": key.tenant_id,
                "subject": subject,
                "limit": at.size + 1,
                "offset": at.offset,
            }
            entries = pipeline.decision_log(store, query)
            context["log"], context["more"] = at.window(entries)
            context["paging"] = at
    return page(request, "subjects.html", key, forgets=forgets(key), **context)


@router.get("/episodes/{episode_id}", response_class=HTMLResponse)
def episode(request: Request, episode_id: str) -> Response:
    key = signed_in(request)
    shown = operations.episode(render.store_of(request), key, episode_id)  # as REST
    return page(request, "episode.html", key, episode=shown)


@router.get("/subjects/{subject}/forget", response_class=HTMLResponse)
def forget_form(request: Request, subject: str, mismatch: str | None = None) -> Response:
    key = signed_in(request)
    _may_forget(key)
    subject = identifier("subject", subject, subject=True)
    return page(request, "forget.html", key, subject=subject, mismatch=mismatch)


@router.post("/subjects/{subject}/forget")
async def forget(request: Request, subject: str) -> Response:
    key = signed_in(request)
    fields = await posted(request)
    _may_forget(key)
    subject = identifier("subject", subject, subject=True)
    if fields.get("confirm_subject", "").strip() != subject:
        return render.back_to(f"/ui/subjects/{quote(subject, safe='')}/forget", mismatch="1")
    result = await run_in_threadpool(operations.forget, render.store_of(request), key, subject)
    shown = notices.query("subject-forgotten", subject, hidden=str(result.hidden))
    return render.back_to("/ui/subjects", subject=subject, **shown)


def _may_forget(key: ApiKey) -> None:
    need(key, "admin")
    if not forgets(key):
        raise Forbidden("forgetting spans every agent and purpose; this key is bound to one")
