"""The dashboard: a Starlette app, server-rendered, no front-end build step.

Pages (``GET``): ``/`` Now, ``/timeline``, ``/sessions/{id}``, ``/attempts/{id}``,
``/failures``, ``/search``, ``/memory``, ``/memory/{id}``, ``/proposals``,
``/sql`` (``/sql.csv`` downloads), ``/usage``, ``/integrity``. Changes (``POST``,
CSRF-checked): ``/proposals/{id}/approve|reject|undo``, ``/integrity/verify``.
JSON: ``/api/now``, ``/api/timeline``, ``/api/sessions/{id}``, ``/api/attempts/{id}``,
``/api/failures``, ``/api/search``, ``/api/memory``, ``/api/memory/{id}``,
``/api/proposals``, ``/api/sql``, ``/api/usage``, ``/api/integrity`` and the live
stream ``/api/stream`` (server-sent events, :mod:`.live`); errors there are
RFC 9457 problem documents. Every list takes ``?page=N``.

Every stored string reaches HTML through Jinja2's autoescaping (captured
content is untrusted); the one script (``static/app.js``) only follows the
stream and swaps in the page's ``<main>`` when something changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
from typing import Any, Callable
from urllib.parse import urlencode

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentlog.web import data
from agentlog.web.live import HEARTBEAT_S, Feed
from agentlog.web.security import Guard, GuardMiddleware, problem

NAV = (("/", "Now"), ("/timeline", "Timeline"), ("/failures", "Failures"), ("/search", "Search"),
       ("/memory", "Memory"), ("/proposals", "Proposals"), ("/sql", "SQL"), ("/usage", "Usage"),
       ("/integrity", "Integrity"))


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=str, option=orjson.OPT_NON_STR_KEYS)


def _env() -> Environment:
    env = Environment(loader=PackageLoader("agentlog.web", "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["short"] = lambda v, n=12: "" if v is None else (str(v)[: int(n)] + ("…" if len(str(v)) > n else ""))
    env.filters["when"] = lambda v: "" if not v else str(v).replace("T", " ")[:19]
    env.filters["json"] = lambda v: orjson.dumps(v, default=str, option=orjson.OPT_INDENT_2).decode()
    env.filters["us"] = lambda v: "" if not isinstance(v, int) else _iso_us(v)
    env.filters["clip"] = lambda v, n=4000: "" if v is None else (str(v) if len(str(v)) <= n else str(v)[:n] + " …")
    return env


def _iso_us(us: int) -> str:
    from agentlog.query.views import iso

    return (iso(us) or "").replace("T", " ")[:19]


def create_app(root: str, guard: Guard, *, live: bool = True, catch_up: bool = True) -> Starlette:
    """The dashboard over the data root ``root``, guarded by ``guard``; ``live`` starts
    the change feed (and with it the server's own ingest when no daemon runs)."""
    source = data.Source(root, catch_up=catch_up)
    feed = Feed(source)
    env = _env()

    def page(request: Request, name: str, **ctx: Any) -> HTMLResponse:
        html = env.get_template(name).render(nav=NAV, path=request.url.path, csrf=request.state.csrf,
                                             live_id=feed.last_id, **ctx)
        return HTMLResponse(html)

    def page_no(request: Request) -> int:
        try:
            return max(0, min(int(request.query_params.get("page", "0")), 100_000))
        except ValueError:
            return 0

    def read(fn: Callable[[Any], Any], key: str | None = None, keep: Callable[[Any], bool] | None = None) -> Any:
        """``fn(engine)`` in a thread; with ``key``, remembered until the store changes (unless
        ``keep`` refuses the answer)."""
        if key is None:
            return run_in_threadpool(source.read, fn)
        return run_in_threadpool(source.read_cached, key, fn, keep)

    def key_of(request: Request) -> str:
        path = request.url.path.removeprefix("/api")
        return (path or "/") + "?" + "&".join(f"{k}={v}" for k, v in sorted(request.query_params.multi_items()))

    async def guarded(request: Request, produce: Callable[[], Any], render: Callable[[Any], Response]) -> Response:
        """Run ``produce`` (in a thread); map an unknown id to 404 and a bad query to 400."""
        from agentlog.memory.store import NotFound
        from agentlog.query.views import IdError, UnknownId

        try:
            result = await produce()
        except (UnknownId, NotFound) as e:
            return _error(request, 404, "Not found", str(e))
        except IdError as e:
            return _error(request, 400, "Bad id", str(e))
        except data.QueryError as e:
            return _error(request, 400, "Query refused", str(e))
        return render(result)

    def _error(request: Request, status: int, title: str, detail: str) -> Response:
        if request.url.path.startswith("/api/"):
            return problem(status, title, detail, instance=request.url.path)
        return HTMLResponse(env.get_template("error.html").render(nav=NAV, path=request.url.path,
                                                                   csrf=request.state.csrf, live_id=feed.last_id,
                                                                   title=title, detail=detail), status_code=status)

    # -- pages and their API twins -------------------------------------------------------------
    def both(template: str, fn: Callable[[Request], Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
        async def html(request: Request) -> Response:
            return await guarded(request, lambda: fn(request), lambda r: page(request, template, **r))

        async def api(request: Request) -> Response:
            return await guarded(request, lambda: fn(request), JSON)

        return html, api

    def now(request: Request) -> Any:
        return read(data.now, key_of(request))

    def timeline(request: Request) -> Any:
        project = request.query_params.get("project") or None
        return read(lambda e: data.timeline(e, page=page_no(request), project=project), key_of(request))

    def session(request: Request) -> Any:
        return read(lambda e: {"session": data.session(e, request.path_params["ident"])}, key_of(request))

    def attempt(request: Request) -> Any:
        return read(lambda e: {"attempt": data.attempt(e, request.path_params["ident"], root)}, key_of(request))

    def failures(request: Request) -> Any:
        project = request.query_params.get("project") or None
        return read(lambda e: data.failures(e, page=page_no(request), project=project), key_of(request))

    async def search(request: Request) -> Any:
        from agentlog.memory import service

        from agentlog.search.text import MAX_QUERY, QueryError as SearchQueryError

        q = request.query_params.get("q", "").strip()
        filters = {k: [v.strip()[:200]] for k in ("kind", "tool", "project", "session", "since")
                   if (v := request.query_params.get(k, "")).strip()}
        outcome = request.query_params.get("outcome") or None
        outcome = outcome if outcome in ("failed", "succeeded", "superseded") else None
        # the next and previous pages keep every filter
        base = "/search?" + urlencode([("q", q), *((k, v[0]) for k, v in filters.items()),
                                       *([("outcome", outcome)] if outcome else [])]) + "&"
        if not q and not filters:
            return {"query": "", "hits": [], "memories": [], "page": 0, "more": False, "filters": {}, "outcome": None,
                    "base": base}
        if len(q) > MAX_QUERY:
            return {"query": q[:MAX_QUERY], "hits": [], "memories": [], "page": 0, "more": False, "filters": filters,
                    "outcome": outcome, "base": base,
                    "error": f"a query is at most {MAX_QUERY:,} characters; this one has {len(q):,}"}

        try:
            from agentlog.search.service import index_stamp

            # remembered per store version and per index commit (the index may catch up on its own)
            out = dict(await read(lambda e: data.search_events(root, e, q, page=page_no(request), filters=filters,
                                                               outcome=outcome),
                                  f"{key_of(request)}#{index_stamp(root)}",
                                  keep=lambda r: not r.get("indexing")))
        except SearchQueryError as e:
            out = {"query": q, "hits": [], "page": 0, "more": False, "error": str(e), "filters": filters,
                   "outcome": outcome}
        out["base"] = base
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

    async def memory_list(request: Request) -> Any:
        from agentlog.memory import service

        kind = request.query_params.get("kind") or None
        rows = await run_in_threadpool(service.list_memories, root, kind=kind, limit=data.PAGE + 1,
                                       offset=page_no(request) * data.PAGE,
                                       include_archived=request.query_params.get("archived") == "1")
        return {"memories": [m.to_dict() for m in rows[: data.PAGE]], "more": len(rows) > data.PAGE,
                "page": page_no(request), "kind": kind}

    async def memory_one(request: Request) -> Any:
        from agentlog.memory import service

        def load() -> dict[str, Any]:
            m = service.get(root, request.path_params["ident"], with_deleted=True)
            m.evidence = service.resolve_evidence(root, m.evidence or [])
            return {"memory": m.to_dict(), "history": service.history(root, m.id)}

        return await run_in_threadpool(load)

    async def proposals(request: Request) -> Any:
        from agentlog.memory import proposals as P

        status = request.query_params.get("status", "open")
        if status not in ("open", "merged", "rejected", "undone", "all"):
            status = "open"

        def load() -> dict[str, Any]:
            items = P.list_proposals(root, status=None if status == "all" else status)
            return {"status": status, "proposals": [{**p.to_dict(), "diff": P.diff(root, p.id)} for p in items[:100]]}

        return await run_in_threadpool(load)

    async def sql(request: Request) -> Any:
        q = request.query_params.get("q", "").strip()
        if not q:
            return {"query": "", "result": None}
        res = await read(lambda e: data.sql(e, q))
        return {"query": q, "result": res}

    def usage(request: Request) -> Any:
        return read(data.usage, key_of(request))

    def integrity(request: Request) -> Any:
        return run_in_threadpool(data.integrity, root)

    routes: list[Any] = []
    for path, template, fn in (("/", "now.html", now), ("/timeline", "timeline.html", timeline),
                               ("/sessions/{ident}", "session.html", session),
                               ("/attempts/{ident}", "attempt.html", attempt),
                               ("/failures", "failures.html", failures), ("/search", "search.html", search),
                               ("/memory", "memory.html", memory_list), ("/memory/{ident}", "memory_one.html", memory_one),
                               ("/proposals", "proposals.html", proposals), ("/sql", "sql.html", sql),
                               ("/usage", "usage.html", usage), ("/integrity", "integrity.html", integrity)):
        html, api = both(template, fn)
        routes.append(Route(path, html, name=template.removesuffix(".html")))
        routes.append(Route("/api" + ("/now" if path == "/" else path), api))

    # -- downloads, changes, the stream -----------------------------------------------------------
    async def sql_csv(request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        if not q:
            return _error(request, 400, "No statement", "give ?q=STATEMENT")

        def render(res: dict[str, Any]) -> Response:
            buf = io.StringIO()
            w = csv.writer(buf)
            w.writerow(res["columns"])
            for row in res["rows"]:
                w.writerow(["" if v is None else v for v in row])
            return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                            headers={"content-disposition": 'attachment; filename="agentlog-query.csv"'})

        return await guarded(request, lambda: read(lambda e: data.sql(e, q, max_rows=100_000)), render)

    async def proposal_action(request: Request) -> Response:
        from agentlog.memory import proposals as P
        from agentlog.memory.model import InvalidMemory
        from agentlog.memory.store import NotFound, VersionConflict

        pid, action = request.path_params["pid"], request.path_params["action"]
        fn = {"approve": P.approve, "reject": P.reject, "undo": P.undo}.get(action)
        if fn is None:
            return _error(request, 404, "Not found", f"no action {action!r}")
        form = await request.form()
        reason = str(form.get("reason") or "") or None
        try:
            kwargs: dict[str, Any] = {"reason": reason} if action == "reject" else {}
            result = await run_in_threadpool(fn, root, pid, **kwargs)
        except (InvalidMemory, NotFound, VersionConflict, P.StaleProposal) as e:
            if request.url.path.startswith("/api/"):
                return problem(409, "Refused", str(e), instance=request.url.path)
            return _error(request, 409, f"Cannot {action}", str(e))
        feed.publish("memory", {"proposal": pid, "action": action})
        if request.url.path.startswith("/api/"):
            return JSON(result.to_dict())
        return RedirectResponse(f"/proposals?status={'merged' if action == 'approve' else 'all'}", status_code=303)

    async def verify_action(request: Request) -> Response:
        result = await run_in_threadpool(data.verify_now, root)
        if request.url.path.startswith("/api/"):
            return JSON(result)
        return RedirectResponse("/integrity", status_code=303)

    async def stream(request: Request) -> Response:
        last = request.headers.get("last-event-id") or request.query_params.get("last")

        async def events() -> Any:
            sent = feed.last_id
            yield b"retry: 1000\n\n"
            if last is not None and last.isdigit():
                missed = feed.since(int(last))
                if missed is None:
                    yield b"event: resync\ndata: {}\n\n"
                else:
                    for c in missed:
                        yield c.sse()
                sent = feed.last_id
            quiet = 0.0
            while not await request.is_disconnected():
                fresh = feed.since(sent)
                if fresh is None:
                    yield b"event: resync\ndata: {}\n\n"
                    sent = feed.last_id
                elif fresh:
                    for c in fresh:
                        yield c.sse()
                    sent = fresh[-1].id
                    quiet = 0.0
                await asyncio.sleep(0.2)
                quiet += 0.2
                if quiet >= HEARTBEAT_S:
                    yield b": heartbeat\n\n"
                    quiet = 0.0

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(request, 404, "Not found", f"nothing at {request.url.path}")

    async def server_error(request: Request, exc: Exception) -> Response:
        return _error(request, 500, "Internal error", f"{type(exc).__name__} (see the server's output)")

    routes += [
        Route("/sql.csv", sql_csv),
        Route("/proposals/{pid}/{action}", proposal_action, methods=["POST"]),
        Route("/api/proposals/{pid}/{action}", proposal_action, methods=["POST"]),
        Route("/integrity/verify", verify_action, methods=["POST"]),
        Route("/api/integrity/verify", verify_action, methods=["POST"]),
        Route("/api/stream", stream),
        Mount("/static", StaticFiles(directory=os.path.join(os.path.dirname(__file__), "static")), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        if live:
            await run_in_threadpool(feed.start)
        try:
            yield
        finally:
            feed.stop()
            source.close()

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 500: server_error})
    app.add_middleware(GuardMiddleware, guard=guard)
    app.state.feed = feed
    app.state.source = source
    return app


__all__ = ["NAV", "create_app"]
