"""The dashboard: a Starlette app, server-rendered, no front-end build step.

Pages (``GET``): ``/`` Now, ``/timeline``, ``/sessions/{id}``, ``/attempts/{id}``,
``/failures``, ``/search``, ``/memory``, ``/memory/{id}``, ``/proposals``,
``/sql`` (``/sql.csv`` downloads), ``/usage`` (with its charts), ``/integrity``; ``/sessions/{id}/calls/{call}``
one tool call of the session's conversation whole (:mod:`.routes.conversation`); ``/sessions/{id}/proof.json``
downloads a session's proof bundle, ``/sessions/{id}/share`` the session as a shared file (docs/share.md). Changes (``POST``,
CSRF-checked): ``/proposals/{id}/approve|reject|undo``, ``/memory/{id}/keep``, ``/integrity/verify``.
JSON: ``/api/now``, ``/api/timeline``, ``/api/sessions/{id}``, ``/api/attempts/{id}``,
``/api/failures``, ``/api/search``, ``/api/memory``, ``/api/memory/{id}``,
``/api/proposals``, ``/api/sql``, ``/api/usage``, ``/api/integrity`` and the live
stream ``/api/stream`` (server-sent events, :mod:`.live`); errors there are
RFC 9457 problem documents. Every list takes ``?page=N``. While the data root's
``team_url`` setting is set, the team pages ``/team``, ``/team/sessions``,
``/team/failures`` and ``/team/cost`` (and their twins under ``/api/team``) read every
machine's published tables (:mod:`.routes.team`); otherwise they are 404.

Every stored string reaches HTML through Jinja2's autoescaping (captured
content is untrusted); the one script (``static/app.js``) only follows the
stream and swaps in the page's ``<main>`` when something changed.

The handlers are in :mod:`agentlog.web.routes`; :func:`create_app` builds the
route list, the guard middleware and the state they read (``app.state.web``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import AsyncIterator, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from agentlog.operations.reader import Source
from agentlog.web.live import Feed
from agentlog.web.routes import conversation, memory, pages, team
from agentlog.web.routes.common import NAV, AppState, Producer, environment, not_found, server_error, twins
from agentlog.web.routes.stream import stream
from agentlog.web.security import Guard, GuardMiddleware

PAGES: tuple[tuple[str, str, Producer], ...] = (
    ("/", "now.html", pages.now), ("/timeline", "timeline.html", pages.timeline),
    ("/sessions/{ident}", "session.html", conversation.session), ("/attempts/{ident}", "attempt.html", pages.attempt),
    ("/failures", "failures.html", pages.failures), ("/search", "search.html", pages.search),
    ("/memory", "memory.html", memory.memory_list), ("/memory/{ident}", "memory_one.html", memory.memory_one),
    ("/proposals", "proposals.html", memory.proposals), ("/sql", "sql.html", pages.sql),
    ("/integrity", "integrity.html", pages.integrity),
)
"""Each page with its template and producer (its JSON twin is under ``/api``, ``/api/now`` for ``/``)."""


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    st: AppState = app.state.web
    if st.live:
        await run_in_threadpool(st.feed.start)
    threading.Thread(target=warm, args=(st,), name="agentlog-warm", daemon=True).start()
    try:
        yield
    finally:
        st.feed.stop()
        st.source.close()


TEMPLATES: Final = (*(t for _path, t, _fn in PAGES), "usage.html", "call.html", "text.html", "error.html")
"""Every page's template (compiled by :func:`warm`)."""


def warm(st: AppState) -> None:
    """What the first page a person opens would otherwise pay for: catch up, open the engine,
    answer Now once (remembered, as its first request asks), read what memory proposals wait
    and compile every page's template. ``agentlog serve`` runs it before it prints its
    address (:func:`agentlog.cli.serve_cmd.run_dashboard`: ready means warm); the app's
    start-up runs it again in a thread for a server started otherwise (what is done already
    costs next to nothing). A request meanwhile waits for the same lock; a failure here is the
    first request's to report."""
    from agentlog.memory.review import waiting

    try:
        for template in TEMPLATES:
            st.env.get_template(template)
        pages.now_answer(st.source, st.root)
        waiting(st.root)
    except Exception:  # noqa: BLE001 - the first real request reports what is wrong
        pass


def create_app(root: str, guard: Guard, *, live: bool = True, catch_up: bool = True) -> Starlette:
    """The dashboard over the data root ``root``, guarded by ``guard``; ``live`` starts
    the change feed (and with it the server's own ingest when no daemon runs)."""
    source = Source(root, catch_up=catch_up)
    feed = Feed(source)
    routes: list[BaseRoute] = [r for path, template, fn in PAGES for r in twins(path, template, fn)]
    routes += [
        Route("/sql.csv", pages.sql_csv),
        Route("/sessions/{ident}/proof.json", pages.session_proof),
        Route("/sessions/{ident}/share", pages.session_share),
        Route("/proposals/{pid}/{action}", memory.proposal_action, methods=["POST"]),
        Route("/memory/{ident}/keep", memory.memory_keep, methods=["POST"]),
        Route("/api/memory/{ident}/keep", memory.memory_keep, methods=["POST"]),
        Route("/api/proposals/{pid}/{action}", memory.proposal_action, methods=["POST"]),
        Route("/integrity/verify", pages.verify_action, methods=["POST"]),
        Route("/api/integrity/verify", pages.verify_action, methods=["POST"]),
        Route("/api/stream", stream),
        *team.routes(),
        *conversation.routes(),
        Mount("/static", StaticFiles(directory=os.path.join(os.path.dirname(__file__), "static")), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=_lifespan, exception_handlers={404: not_found, 500: server_error})
    app.add_middleware(GuardMiddleware, guard=guard)
    app.state.web = AppState(root=root, source=source, feed=feed, env=environment(root), live=live)
    app.state.feed = feed
    app.state.source = source
    return app


__all__ = ["NAV", "PAGES", "TEMPLATES", "create_app", "warm"]
