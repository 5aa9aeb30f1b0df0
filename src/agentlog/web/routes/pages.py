"""The dashboard's read pages, the SQL download and "verify now".

The pages are Now, Timeline, an attempt, Failures, Search, SQL and Integrity
(a session and Usage are :mod:`.conversation`'s). Each producer takes the request and returns (an
awaitable of) the dict its page renders and its ``/api`` twin returns
(:func:`.common.twins`); the answers read from the store are remembered per
store version (:meth:`Source.read_cached
<agentlog.operations.reader.Source.read_cached>`).
"""

from __future__ import annotations

import csv
import io
from typing import Any, Awaitable, Final
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agentlog.operations.reader import Source
from agentlog.web import data
from agentlog.web.routes.common import JSON, error, guarded, key_of, locked, page_no, read, state


NOW_FRESH_S: Final = 15.0
"""Now is measured against the wall clock: its answer is remembered per store version for at
most this many seconds (a request that has waited too long must leave without a new event)."""
NOW_KEY: Final = "/?"
"""What the Now page's answer is remembered under (:func:`.common.key_of` of ``/``; the
server's warm-up fills it for the first visitor)."""


def now_answer(source: Source, root: str, key: str = NOW_KEY) -> dict[str, Any]:
    """Now's answer from the store, remembered for :data:`NOW_FRESH_S` (the page and the warm-up ask it so)."""
    got: dict[str, Any] = source.read_cached(key, lambda e: data.now(e, root), max_age_s=NOW_FRESH_S)
    return got


async def now(request: Request) -> Any:
    """Now, and the memory proposals waiting for review (read each time: a decision on another
    page must show here at once, and the memory is not the store whose version keys the answer)."""
    from agentlog.memory.review import waiting

    st = state(request)

    def load() -> dict[str, Any]:
        return {**now_answer(st.source, st.root, key_of(request)), "proposals": waiting(st.root)}

    return await run_in_threadpool(load)


def timeline(request: Request) -> Awaitable[Any]:
    project = request.query_params.get("project") or None
    return read(request, lambda e: data.timeline(e, page=page_no(request), project=project), key_of(request))


def attempt(request: Request) -> Awaitable[Any]:
    root = state(request).root
    return read(request, lambda e: {"attempt": data.attempt(e, request.path_params["ident"], root)},
                key_of(request))


def failures(request: Request) -> Awaitable[Any]:
    project = request.query_params.get("project") or None
    root = state(request).root
    return read(request, lambda e: data.failures(e, root, page=page_no(request), project=project), key_of(request))


async def search(request: Request) -> Any:
    from agentlog.memory import service

    from agentlog.core import AgentlogError
    from agentlog.search.text import MAX_QUERY

    root = state(request).root
    q = request.query_params.get("q", "").strip()
    filters = {k: [v.strip()[:200]] for k in ("kind", "tool", "project", "session", "since")
               if (v := request.query_params.get(k, "")).strip()}
    outcome = request.query_params.get("outcome") or None
    outcome = outcome if outcome in ("failed", "succeeded", "superseded") else None
    mode = request.query_params.get("mode") or None
    mode = mode if mode in ("lexical", "semantic", "hybrid") else None
    similar = request.query_params.get("similar", "").strip()[:200] or None
    # the next and previous pages keep every filter
    base = "/search?" + urlencode([("q", q), *((k, v[0]) for k, v in filters.items()),
                                   *([("outcome", outcome)] if outcome else []), *([("mode", mode)] if mode else []),
                                   *([("similar", similar)] if similar else [])]) + "&"
    shown = {"mode": mode, "similar": similar, "semantic": data.semantic_available()}
    if not q and not filters and not similar:
        return {"query": "", "hits": [], "memories": [], "page": 0, "more": False, "filters": {}, "outcome": None,
                "base": base, **shown}
    if len(q) > MAX_QUERY:
        return {"query": q[:MAX_QUERY], "hits": [], "memories": [], "page": 0, "more": False, "filters": filters,
                "outcome": outcome, "base": base, **shown,
                "error": f"a query is at most {MAX_QUERY:,} characters; this one has {len(q):,}"}

    try:
        from agentlog.search.service import index_stamp

        # remembered per store version and per index commit (the index may catch up on its own)
        out = dict(await read(request, lambda e: data.search_events(root, e, q, page=page_no(request),
                                                                    filters=filters, outcome=outcome, mode=mode,
                                                                    similar=similar),
                              f"{key_of(request)}#{index_stamp(root)}",
                              keep=lambda r: not r.get("indexing")))
    except AgentlogError as e:  # the query language's, a mode without its extra, an id naming nothing
        out = {"query": q, "hits": [], "page": 0, "more": False, "error": str(e), "filters": filters,
               "outcome": outcome}
    out.update(base=base, **shown)
    if not q:
        out["memories"] = []
        return out
    try:
        mems = await run_in_threadpool(service.search, root, q, limit=10)
        out["memories"] = [{**m.to_dict(), "score": s} for m, s in mems]
    except ValueError as e:  # a memory query the memory search language refuses
        out["memories"] = []
        out["memory_error"] = str(e)
    return out


async def sql(request: Request) -> Any:
    q = request.query_params.get("q", "").strip()
    if not q:
        return {"query": "", "result": None}
    res = await read(request, lambda e: data.sql(e, q))
    return {"query": q, "result": res}


def integrity(request: Request) -> Awaitable[Any]:
    everything = request.query_params.get("all") == "1"
    return run_in_threadpool(lambda: data.integrity(state(request).root, everything=everything) | {"all": everything})


# -- the download and the change ------------------------------------------------------------------


async def sql_csv(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    if not q:
        return error(request, 400, "No statement", "give ?q=STATEMENT")
    refused = locked(request)
    if refused is not None:
        return refused

    def render(res: dict[str, Any]) -> Response:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(res["columns"])
        for row in res["rows"]:
            w.writerow(["" if v is None else v for v in row])
        return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                        headers={"content-disposition": 'attachment; filename="agentlog-query.csv"'})

    return await guarded(request, lambda: read(request, lambda e: data.sql(e, q, max_rows=100_000)), render)


async def session_proof(request: Request) -> Response:
    """The session's proof bundle (docs/proofs.md), as a download."""
    from agentlog.core import AgentlogError, UsageError
    from agentlog.operations.proofs import NothingToProve, prove

    ident = request.path_params["ident"]
    try:
        bundle = await run_in_threadpool(prove, state(request).root, ident, only="session")
    except NothingToProve as e:
        return error(request, 404, "Not found", str(e))
    except UsageError as e:
        return error(request, 400, "Bad id", str(e))
    except AgentlogError as e:
        return error(request, 409, "No proof", str(e))
    name = "".join(c for c in ident if c.isalnum() or c in "_-")[:80] or "session"
    return JSON(bundle, headers={"content-disposition": f'attachment; filename="agentlog-proof-{name}.json"'})


async def session_share(request: Request) -> Response:
    """The session as a shared file (docs/share.md), sanitised and carrying its proof, as a download:
    ``?format=html`` (the default) or ``markdown``, ``&redact_paths=1`` to shorten paths too."""
    from agentlog.core import AgentlogError, UsageError
    from agentlog.operations.proofs import NothingToProve
    from agentlog.share.view import NothingToShare

    ident = request.path_params["ident"]
    fmt = request.query_params.get("format", "html")
    if fmt not in ("html", "markdown"):
        return error(request, 400, "Bad format", "format is html or markdown")
    paths = request.query_params.get("redact_paths", "") in ("1", "on", "true")
    try:
        shared = await run_in_threadpool(data.share_file, state(request).root, ident, fmt, paths)
    except (NothingToProve, NothingToShare) as e:
        return error(request, 404, "Not found", str(e))
    except UsageError as e:
        return error(request, 400, "Bad id", str(e))
    except AgentlogError as e:
        return error(request, 409, "Cannot share", str(e))
    name = "".join(c for c in ident if c.isalnum() or c in "_-")[:80] or "session"
    ext, media = ("html", "text/html") if fmt == "html" else ("md", "text/markdown")
    return Response(shared.text.encode("utf-8"), media_type=f"{media}; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="agentlog-share-{name}.{ext}"',
                             "x-content-type-options": "nosniff"})


async def verify_action(request: Request) -> Response:
    result = await run_in_threadpool(data.verify_now, state(request).root)
    if request.url.path.startswith("/api/"):
        return JSON(result)
    return RedirectResponse("/integrity", status_code=303)


__all__ = ["NOW_FRESH_S", "NOW_KEY", "attempt", "failures", "integrity", "now", "now_answer", "search", "session_proof",
           "session_share", "sql", "sql_csv", "timeline", "verify_action"]
