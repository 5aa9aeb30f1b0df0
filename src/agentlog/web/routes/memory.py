"""The dashboard's memory: the list, one memory with its history, the proposals, and a person's
approve, reject or undo of a proposal (``POST``, CSRF-checked by the guard)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agentlog.web import data
from agentlog.web.routes.common import JSON, error, page_no, state
from agentlog.web.security import problem


async def memory_list(request: Request) -> Any:
    from agentlog.memory import service

    root = state(request).root
    kind = request.query_params.get("kind") or None
    rows = await run_in_threadpool(service.list_memories, root, kind=kind, limit=data.PAGE + 1,
                                   offset=page_no(request) * data.PAGE,
                                   include_archived=request.query_params.get("archived") == "1")
    review = await run_in_threadpool(needs_review, root) if page_no(request) == 0 else []
    return {"memories": [m.to_dict() for m in rows[: data.PAGE]], "more": len(rows) > data.PAGE,
            "page": page_no(request), "kind": kind, "needs_review": review}


def needs_review(root: str, limit: int = 50) -> list[dict[str, Any]]:
    """The doubtful memories (``agentlog memory check``), each with why and the open proposal an
    outcome rule made for it (approve: archive; reject: keep), if any."""
    from agentlog.memory import proposals as P
    from agentlog.memory import truth

    doubtful = truth.doubtful(root, limit=limit)
    if not doubtful:
        return []
    open_for: dict[str, str] = {}
    for p in P.list_proposals(root, status="open", limit=1000):
        if "[rule " in (p.note or "") and len(p.changes) == 1 and p.changes[0].get("op") == "archive":
            open_for.setdefault(str(p.changes[0].get("memory")), p.id)
    out = []
    for m in doubtful:
        why = [f"{d.get('type')} {d.get('value')}" if d.get("on") == "evidence" else f"rule {d.get('rule')}"
               for d in m.doubts or []]
        out.append({"id": m.id, "title": m.title, "kind": m.kind, "effective_confidence": m.effective_confidence,
                    "why": [f"{w}: {d.get('status')} ({d.get('detail')})" for w, d in zip(why, m.doubts or [])],
                    "proposal": open_for.get(m.id)})
    return out


async def memory_one(request: Request) -> Any:
    from agentlog.memory import service

    root = state(request).root

    def load() -> dict[str, Any]:
        m = service.get(root, request.path_params["ident"], with_deleted=True)
        m.evidence = service.resolve_evidence(root, m.evidence or [])
        return {"memory": m.to_dict(), "history": service.history(root, m.id)}

    return await run_in_threadpool(load)


async def proposals(request: Request) -> Any:
    from agentlog.memory import proposals as P

    root = state(request).root
    status = request.query_params.get("status", "open")
    if status not in ("open", "merged", "rejected", "undone", "all"):
        status = "open"

    def load() -> dict[str, Any]:
        from agentlog.memory.review import merged_into

        items = P.list_proposals(root, status=None if status == "all" else status)
        return {"status": status, "proposals": [{**p.to_dict(), "diff": P.diff(root, p.id),
                                                 "memories": merged_into(root, p.merged) if p.status == "merged" else []}
                                                for p in items[:100]]}

    return await run_in_threadpool(load)


async def proposal_action(request: Request) -> Response:
    from agentlog.memory import proposals as P
    from agentlog.memory.model import InvalidMemory
    from agentlog.memory.store import NotFound, VersionConflict

    st = state(request)
    pid, action = request.path_params["pid"], request.path_params["action"]
    fn = {"approve": P.approve, "reject": P.reject, "undo": P.undo}.get(action)
    if fn is None:
        return error(request, 404, "Not found", f"no action {action!r}")
    form = await request.form()
    reason = str(form.get("reason") or "") or None
    try:
        kwargs: dict[str, Any] = {"reason": reason} if action == "reject" else {}
        result = await run_in_threadpool(fn, st.root, pid, **kwargs)
    except (InvalidMemory, NotFound, VersionConflict, P.StaleProposal) as e:
        if request.url.path.startswith("/api/"):
            return problem(409, "Refused", str(e), instance=request.url.path)
        return error(request, 409, f"Cannot {action}", str(e))
    st.feed.publish("memory", {"proposal": pid, "action": action})
    if request.url.path.startswith("/api/"):
        return JSON(result.to_dict())
    # to the list the proposal is now in, at the proposal
    return RedirectResponse(f"/proposals?status={'merged' if action == 'approve' else 'all'}#p-{result.id}",
                            status_code=303)


async def memory_keep(request: Request) -> Response:
    """A person keeps a doubtful memory (:func:`agentlog.memory.keep.keep`): its lowering evidence
    findings kept, its open rule proposals rejected."""
    from agentlog.memory.keep import NothingToKeep, keep
    from agentlog.memory.proposals import StaleProposal
    from agentlog.memory.store import NotFound

    st = state(request)
    ident = request.path_params["ident"]
    form = await request.form()
    reason = str(form.get("reason") or "") or None
    try:
        m = await run_in_threadpool(keep, st.root, ident, reason=reason)
    except (NotFound, NothingToKeep, StaleProposal) as e:
        if request.url.path.startswith("/api/"):
            return problem(409, "Refused", str(e), instance=request.url.path)
        return error(request, 409, "Cannot keep", str(e))
    st.feed.publish("memory", {"memory": m.id, "action": "keep"})
    if request.url.path.startswith("/api/"):
        return JSON(m.to_dict())
    return RedirectResponse("/memory", status_code=303)


__all__ = ["memory_keep", "memory_list", "memory_one", "needs_review", "proposal_action", "proposals"]
