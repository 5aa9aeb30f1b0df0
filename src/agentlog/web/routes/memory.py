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
    return {"memories": [m.to_dict() for m in rows[: data.PAGE]], "more": len(rows) > data.PAGE,
            "page": page_no(request), "kind": kind}


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
        items = P.list_proposals(root, status=None if status == "all" else status)
        return {"status": status, "proposals": [{**p.to_dict(), "diff": P.diff(root, p.id)} for p in items[:100]]}

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
    return RedirectResponse(f"/proposals?status={'merged' if action == 'approve' else 'all'}", status_code=303)


__all__ = ["memory_list", "memory_one", "proposal_action", "proposals"]
