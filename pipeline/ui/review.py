"""Sign in and out, the recurrence buffer (Confirm, Reject) and the quarantine (Promote,
Reject).

Every action calls the same pipeline function as its REST route, with the session key's id as
the actor, after the same role and ownership checks."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

import pipeline
from pipeline.api import operations
from pipeline.api.access import KeyRefused, bind, checked_key
from pipeline.api.conventions import idempotency_key, identifier
from pipeline.api.ratelimit import RateLimiter
from pipeline.api.routes.owned import require_owned
from pipeline.policy.explain import review_candidates
from pipeline.ui import notices, render, sessions
from pipeline.ui.render import need, page, paging, posted, signed_in

router = APIRouter()


@router.get("/", include_in_schema=False)
def home(request: Request) -> Response:
    signed_in(request)
    return RedirectResponse("/ui/candidates", status_code=303)


@router.get("/sign-in", response_class=HTMLResponse)
def sign_in_form(request: Request, refused: str | None = None) -> Response:
    nonce = sessions.ensure_nonce(request)
    response = page(
        request,
        "sign_in.html",
        None,
        status=401 if refused else 200,
        csrf=sessions.csrf_token(request, render.signer_of(request), signed_in=False),
        refused=refused,
    )
    if nonce is not None:
        sessions.set_cookie(response, request, sessions.NONCE, nonce, max_age=3600)
    return response


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """A wrong key counts against the address's budget of refused keys, as on the API; once
    it is spent the form is refused (429, Retry-After) before any key is looked up."""
    fields = await posted(request, signed_in=False)
    store = render.store_of(request)
    address = request.client.host if request.client is not None else "unknown"
    limiter: RateLimiter = request.app.state.limiter
    try:
        found = await checked_key(store, limiter, fields.get("api_key", "").strip(), address)
    except KeyRefused as refused:
        return render.back_to("/ui/sign-in", refused=refused.reason)
    signer = render.signer_of(request)
    response = render.back_to("/ui/candidates" if found.allows("reviewer") else "/ui/subjects")
    sessions.set_cookie(
        response,
        request,
        sessions.SESSION,
        signer.session_for(found),
        max_age=int(signer.lifetime_s),
    )
    sessions.delete_cookie(response, request, sessions.NONCE)
    return response


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    """Ends the session on the server as well: a saved copy of the cookie no longer works."""
    await posted(request)
    session = request.state.session
    if session is not None:
        await request.app.state.ended.end(session)
    response = render.back_to("/ui/sign-in")
    sessions.delete_cookie(response, request, sessions.SESSION)
    return response


@router.get("/candidates", response_class=HTMLResponse)
def candidates(request: Request, subject: str | None = None) -> Response:
    key = signed_in(request)
    need(key, "reviewer")
    at = paging(request)
    query = bind(key, {}) | {"limit": at.size + 1}
    if subject:
        query["subject"] = identifier("subject", subject)
    found, more = at.window(review_candidates(render.store_of(request), query, offset=at.offset))
    return page(
        request, "candidates.html", key, reviews=found, paging=at, more=more, subject=subject
    )


@router.post("/candidates/{candidate_id}/{verb}")
async def decide(request: Request, candidate_id: str, verb: str) -> Response:
    key = signed_in(request)
    fields = await posted(request)
    need(key, "reviewer")
    if verb not in ("confirm", "reject"):
        raise pipeline.NotFound(f"no action {verb}")
    store = render.store_of(request)
    candidate_id = identifier("candidate_id", candidate_id)
    # The button's own key: the same form sent again answers the first decision again.
    idempotency = fields.get(render.IDEMPOTENCY_FIELD) or None

    def work() -> None:
        operations.decide(store, key, verb, candidate_id, idempotency=idempotency)  # type: ignore[arg-type]

    await run_in_threadpool(work)
    done = "confirmed" if verb == "confirm" else "rejected"
    return render.back_to("/ui/candidates", **notices.query(f"candidate-{done}", candidate_id))


@router.get("/quarantine", response_class=HTMLResponse)
def quarantine(request: Request, subject: str | None = None) -> Response:
    key = signed_in(request)
    need(key, "reviewer")
    at = paging(request)
    query = bind(key, {}) | {"limit": at.size + 1, "offset": at.offset}
    if subject:
        query["subject"] = identifier("subject", subject)
    found, more = at.window(pipeline.list_quarantined(render.store_of(request), query))
    return page(request, "quarantine.html", key, facts=found, paging=at, more=more, subject=subject)


@router.post("/facts/{fact_id}/{verb}")
async def release_or_dismiss(request: Request, fact_id: str, verb: str) -> Response:
    """`Promote` releases a quarantined fact; `Reject` dismisses it for good."""
    key = signed_in(request)
    fields = await posted(request)
    need(key, "reviewer")
    if verb not in ("promote", "reject"):
        raise pipeline.NotFound(f"no action {verb}")
    store = render.store_of(request)
    fact_id = identifier("fact_id", fact_id)
    idempotency = fields.get(render.IDEMPOTENCY_FIELD) or None  # the button's own, as above

    def work() -> None:
        if verb == "reject":
            reason = "rejected on the review page"
            operations.dismiss(store, key, fact_id, reason=reason, idempotency=idempotency)
            return
        require_owned(store, key, "fact", fact_id)  # as POST /v1/facts/{id}/promote
        command = {"tenant_id": key.tenant_id, "fact_id": fact_id, "actor": key.key_id}
        pipeline.promote(store, idempotency_key(idempotency, command))

    await run_in_threadpool(work)
    done = "promoted" if verb == "promote" else "rejected"
    return render.back_to("/ui/quarantine", **notices.query(f"fact-{done}", fact_id))
