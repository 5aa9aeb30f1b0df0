"""The dashboard's app state and what every handler shares: rendering, reading in a thread, errors.

:class:`AppState` is what :func:`agentlog.web.app.create_app` puts at
``app.state.web`` (the data root, its reader, the live feed, the templates);
a handler takes it from its request (:func:`state`). A page and its ``/api``
twin run one producer (:func:`twins`): the page renders its answer, the twin
returns it as JSON; an unknown id is 404, a bad id or query 400 (:func:`guarded`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Final

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from agentlog.core.timefmt import display_us
from agentlog.operations.reader import Source
from agentlog.web import data
from agentlog.web.live import Feed
from agentlog.web.team_data import TIMEOUT, TeamCache, team_url
from agentlog.web.security import problem

NAV: Final = (("/", "Now"), ("/timeline", "Timeline"), ("/failures", "Failures"), ("/search", "Search"),
              ("/memory", "Memory"), ("/proposals", "Proposals"), ("/sql", "SQL"), ("/usage", "Usage"),
              ("/integrity", "Integrity"))
TEAM_NAV: Final = ("/team", "Team")
"""Shown after the others while the data root's ``team_url`` setting is set (:mod:`.team`)."""

Producer = Callable[[Request], Awaitable[Any]]
"""What a page shows, from its request (awaited: the reading runs in a thread)."""


@dataclass
class AppState:
    """What the handlers share (``app.state.web``)."""

    root: str
    source: Source
    feed: Feed
    env: Environment
    live: bool = True
    """Whether the app's lifespan starts the live feed."""
    team_cache: TeamCache = field(default_factory=TeamCache)
    """The team pages' answers, remembered for a short while (:mod:`agentlog.web.team_data`)."""
    team_timeout: float = TIMEOUT
    """Seconds a team page waits for the team's tables."""


def state(request: Request) -> AppState:
    """The app state of the app serving ``request``."""
    st: AppState = request.app.state.web
    return st


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, default=str, option=orjson.OPT_NON_STR_KEYS)


def environment(root: str | None = None) -> Environment:
    """The templates, autoescaped, with the filters they use; with a data root ``root``, their
    compiled code is kept under its ``state/templates`` (0700) and loaded from there at the next
    start (a template's source changed: compiled again), since compiling every page's template
    was the largest part of a server's start (about 0.4 s of 1.5 s on 2 busy cores)."""
    from jinja2 import FileSystemBytecodeCache

    cache = None
    if root is not None:
        from agentlog.core.paths import ensure_dir, state_dir

        where = os.path.join(state_dir(root), "templates")
        try:
            ensure_dir(where)
            cache = FileSystemBytecodeCache(where)
        except OSError:  # (a read-only data root: compiled at each start, as before)
            cache = None
    env = Environment(loader=PackageLoader("agentlog.web", "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True, bytecode_cache=cache)
    env.filters["short"] = whole_id
    env.filters["when"] = when_markup
    env.filters["json"] = lambda v: orjson.dumps(v, default=str, option=orjson.OPT_INDENT_2).decode()
    env.filters["us"] = lambda v: display_us(v) if isinstance(v, int) else ""
    env.filters["compact"] = compact_time
    env.filters["clip"] = lambda v, n=4000: "" if v is None else (str(v) if len(str(v)) <= n else str(v)[:n] + " …")
    return env


def whole_id(v: Any, n: int = 12) -> Markup:
    """An id whole in the markup and its title, shortened on screen by CSS (``code.id``): hover
    shows it, selecting copies it (``n``, the old cut, is left to the stylesheet)."""
    if v is None:
        return Markup("")
    return Markup('<code class="id" title="{0}">{0}</code>').format(str(v))


def when_markup(v: Any) -> Markup:
    """A time as ``<time>``: :func:`compact_time` on one line, the whole time in its title."""
    if not v:
        return Markup("")
    return Markup('<time class="when" datetime="{0}" title="{0}">{1}</time>').format(str(v), compact_time(v))


def compact_time(v: Any, today: str | None = None) -> str:
    """A stored time (RFC 3339 text or a datetime) on one short line, in UTC: ``15:04:05`` today,
    ``Dec 07 15:04`` earlier this year, ``2025-12-07`` before; the text itself when unreadable."""
    from datetime import datetime, timezone

    if not v:
        return ""
    try:
        t = v if isinstance(v, datetime) else datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return str(v)[:19]
    t = t.astimezone(timezone.utc) if t.tzinfo else t
    now = datetime.now(timezone.utc)
    if (today or now.date().isoformat()) == t.date().isoformat():
        return t.strftime("%H:%M:%S")
    if t.year == now.year:
        return t.strftime("%b %d %H:%M")
    return t.strftime("%Y-%m-%d")


def nav(root: str) -> tuple[tuple[str, str], ...]:
    """The navigation: every page, and Team while ``team_url`` is set."""
    return (*NAV, TEAM_NAV) if team_url(root) else NAV


def page(request: Request, name: str, **ctx: Any) -> HTMLResponse:
    """The template ``name`` rendered with the navigation, the CSRF token and the feed's last id."""
    st = state(request)
    html = st.env.get_template(name).render(nav=nav(st.root), path=request.url.path, csrf=request.state.csrf,
                                            live_id=st.feed.last_id, **ctx)
    return HTMLResponse(html)


def page_no(request: Request) -> int:
    try:
        return max(0, min(int(request.query_params.get("page", "0")), 100_000))
    except ValueError:
        return 0


def read(request: Request, fn: Callable[[Any], Any], key: str | None = None,
         keep: Callable[[Any], bool] | None = None, max_age_s: float | None = None) -> Awaitable[Any]:
    """``fn(engine)`` in a thread; with ``key``, remembered until the store changes (unless
    ``keep`` refuses the answer), and at most ``max_age_s`` seconds when given."""
    source = state(request).source
    if key is None:
        return run_in_threadpool(source.read, fn)
    return run_in_threadpool(source.read_cached, key, fn, keep, max_age_s)


def key_of(request: Request) -> str:
    path = request.url.path.removeprefix("/api")
    return (path or "/") + "?" + "&".join(f"{k}={v}" for k, v in sorted(request.query_params.multi_items()))


async def guarded(request: Request, produce: Callable[[], Awaitable[Any]],
                  render: Callable[[Any], Response]) -> Response:
    """Run ``produce`` (in a thread); map an unknown id to 404, a bad query to 400, and content
    encrypted at rest whose key is locked to 503 (see :func:`locked`)."""
    from agentlog.core.atrest import AtRestLockedError
    from agentlog.memory.store import NotFound
    from agentlog.query.views import IdError, UnknownId

    if request.url.path.removeprefix("/api") != "/integrity":  # (verifying needs no key)
        refused = locked(request)
        if refused is not None:
            return refused
    try:
        result = await produce()
    except AtRestLockedError as e:
        return error(request, 503, "Content locked", str(e))
    except (UnknownId, NotFound) as e:
        return error(request, 404, "Not found", str(e))
    except IdError as e:
        return error(request, 400, "Bad id", str(e))
    except data.QueryError as e:
        return error(request, 400, "Query refused", str(e))
    return render(result)


def locked(request: Request) -> Response | None:
    """503 naming ``agentlog keys unlock`` while the data root's content is encrypted at rest and
    its key locked (None otherwise): its derived stores are gone with the key, so a page would
    otherwise answer as if nothing had been recorded."""
    from agentlog.core.atrest import AtRestLockedError, data_keys, locked_message

    root = state(request).root
    try:
        data_keys(root)
    except AtRestLockedError:
        return error(request, 503, "Content locked", locked_message(root))
    return None


def error(request: Request, status: int, title: str, detail: str) -> Response:
    """A problem document under ``/api/``, else the error page."""
    if request.url.path.startswith("/api/"):
        return problem(status, title, detail, instance=request.url.path)
    if "csrf" not in request.scope.get("state", {}):  # not signed in (a /static/ miss): no page around it
        from html import escape

        return HTMLResponse(f"<!doctype html><title>{escape(title)}</title><h1>{escape(title)}</h1>"
                            f"<p>{escape(detail)}</p>", status_code=status)
    st = state(request)
    return HTMLResponse(st.env.get_template("error.html").render(nav=nav(st.root), path=request.url.path,
                                                                 csrf=request.state.csrf, live_id=st.feed.last_id,
                                                                 title=title, detail=detail), status_code=status)


def twins(path: str, template: str, fn: Producer) -> list[Route]:
    """The page at ``path`` (named for its template) and its JSON twin under ``/api``
    (``/api/now`` for ``/``), both answering what ``fn`` produces."""
    async def html(request: Request) -> Response:
        return await guarded(request, lambda: fn(request), lambda r: page(request, template, **r))

    async def api(request: Request) -> Response:
        return await guarded(request, lambda: fn(request), JSON)

    return [Route(path, html, name=template.removesuffix(".html")),
            Route("/api" + ("/now" if path == "/" else path), api)]


async def not_found(request: Request, exc: Exception) -> Response:
    return error(request, 404, "Not found", f"nothing at {request.url.path}")


async def server_error(request: Request, exc: Exception) -> Response:
    return error(request, 500, "Internal error", f"{type(exc).__name__} (see the server's output)")


__all__ = ["JSON", "NAV", "TEAM_NAV", "AppState", "Producer", "compact_time", "environment", "when_markup", "whole_id", "error", "guarded", "key_of", "locked", "nav", "not_found", "page",
           "page_no", "read", "server_error", "state", "twins"]
