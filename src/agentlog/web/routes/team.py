"""The dashboard's team pages (issue 31): every machine's published history, read-only.

``/team`` (machines), ``/team/sessions``, ``/team/failures``, ``/team/cost``, each with its
JSON twin under ``/api/team…``. They exist only while the data root's ``team_url`` setting
names the team's tables: without it every one is 404 and the navigation has no Team entry.
Each answer comes from :mod:`agentlog.web.team_data` (the team's DuckDB engine, fixed
statements, bound filters), remembered for a short while; a page waits at most
:data:`~agentlog.web.team_data.TIMEOUT` seconds, and tables that cannot be read or do not
answer give an error panel (503; a problem document under ``/api/``), never a traceback.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.web import team_data as T
from agentlog.web.routes.common import JSON, error, page, page_no, state
from agentlog.web.security import problem

TeamProducer = Callable[[Request, str], Any]
"""What a team page shows, from its request and the team URL (run in a thread)."""


def _cached(request: Request, url: str, name: str, fn: Callable[[Any], Any], *key: Any) -> Any:
    return state(request).team_cache.get((url, name, *key), lambda: T.read(url, fn))


def _filtered(request: Request, url: str, name: str, fn: Callable[[Any, T.Filters], Any]) -> dict[str, Any]:
    """A filtered page's answer, with what its filter form offers."""
    f = T.Filters.parse(request.query_params)
    out = _cached(request, url, name, lambda r: fn(r, f), f)
    return {**out, "choices": _cached(request, url, "choices", T.choices), "url": url,
            "ttl": state(request).team_cache.ttl}


def overview(request: Request, url: str) -> dict[str, Any]:
    return {**_cached(request, url, "overview", T.overview), "url": url, "ttl": state(request).team_cache.ttl}


def sessions(request: Request, url: str) -> dict[str, Any]:
    n = page_no(request)
    out = _filtered(request, url, f"sessions#{n}", lambda r, f: T.sessions(r, f, n))
    # the next and previous pages keep every filter
    out["base"] = "/team/sessions?" + "".join(f"{urlencode({k: v})}&" for k, v in out["filters"].items() if v)
    return out


def failures(request: Request, url: str) -> dict[str, Any]:
    return _filtered(request, url, "failures", T.failures)


def cost(request: Request, url: str) -> dict[str, Any]:
    return _filtered(request, url, "cost", T.cost)


PAGES: tuple[tuple[str, str, TeamProducer], ...] = (
    ("/team", "team.html", overview), ("/team/sessions", "team_sessions.html", sessions),
    ("/team/failures", "team_failures.html", failures), ("/team/cost", "team_cost.html", cost),
)


async def _answer(request: Request, fn: TeamProducer, render: Callable[[Any], Response]) -> Response:
    st = state(request)
    url = await run_in_threadpool(T.team_url, st.root)
    if not url:
        return error(request, 404, "Not found", f"nothing at {request.url.path} (no team_url is set)")
    try:
        # the thread goes on after a timeout (a read cannot be stopped), bounded by the store
        # client's own timeouts; what it reads is remembered for the next request
        result = await asyncio.wait_for(run_in_threadpool(fn, request, url), st.team_timeout)
    except T.BadFilter as e:
        return error(request, 400, "Bad filter", str(e))
    except (T.TeamUnavailable, asyncio.TimeoutError) as e:
        detail = str(e) if isinstance(e, T.TeamUnavailable) else \
            f"the team tables did not answer within {st.team_timeout:g} s"
        if request.url.path.startswith("/api/"):
            return problem(503, "Team tables unavailable", detail, instance=request.url.path)
        resp = page(request, "team_error.html", title="Team tables unavailable", detail=detail, url=url,
                    ttl=st.team_cache.ttl)
        resp.status_code = 503
        return resp
    return render(result)


def routes() -> list[Route]:
    """Each team page and its JSON twin under ``/api``."""
    out = []
    for path, template, fn in PAGES:
        async def html(request: Request, fn: TeamProducer = fn, template: str = template) -> Response:
            return await _answer(request, fn, lambda r: page(request, template, **r))

        async def api(request: Request, fn: TeamProducer = fn) -> Response:
            return await _answer(request, fn, JSON)

        out += [Route(path, html, name=template.removesuffix(".html")), Route("/api" + path, api)]
    return out


__all__ = ["PAGES", "cost", "failures", "overview", "routes", "sessions"]
