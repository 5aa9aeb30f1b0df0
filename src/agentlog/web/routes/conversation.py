"""A session as a conversation, one of its tool calls whole, and the Usage page's charts.

``/sessions/{id}?page=N`` (and ``/api/sessions/{id}``) is :func:`agentlog.web.conversation.conversation`;
``/sessions/{id}/calls/{call}`` (and its ``/api`` twin) one call with its whole input and output,
``/sessions/{id}/texts/{event}`` one prompt or assistant message whole, which the conversation's
"show all" fetches (``static/conversation.js``) or links to (without script). ``/usage`` draws :mod:`agentlog.web.usage_charts` above the tables;
``/api/usage`` keeps its shape and ``/api/usage/charts`` gives the charts' numbers.
"""

from __future__ import annotations

from typing import Any, Awaitable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentlog.web import conversation as conv
from agentlog.web import data
from agentlog.web.routes.common import JSON, guarded, key_of, page, page_no, read


def session(request: Request) -> Awaitable[Any]:
    ident = request.path_params["ident"]
    return read(request, lambda e: {"session": conv.conversation(e, ident, page_no(request))}, key_of(request))


def session_call(request: Request) -> Awaitable[Any]:
    ident, call = request.path_params["ident"], request.path_params["call"]
    return read(request, lambda e: conv.call_detail(e, ident, call), key_of(request))


def session_text(request: Request) -> Awaitable[Any]:
    ident, event = request.path_params["ident"], request.path_params["event"]
    return read(request, lambda e: conv.text_detail(e, ident, event, page_no(request)), key_of(request))


def _usage_all(e: Any) -> dict[str, Any]:
    from agentlog.web.usage_charts import usage_series

    return {**data.usage(e), "series": usage_series(e)}


async def usage_page(request: Request) -> Response:
    from agentlog.web.usage_charts import usage_charts

    def render(r: dict[str, Any]) -> Response:
        return page(request, "usage.html", **r, charts=usage_charts(r["series"]))

    return await guarded(request, lambda: read(request, _usage_all, key_of(request) + "#page"), render)


async def usage_api(request: Request) -> Response:
    return await guarded(request, lambda: read(request, data.usage, key_of(request)), JSON)


async def usage_charts_api(request: Request) -> Response:
    from agentlog.web.usage_charts import usage_series

    return await guarded(request, lambda: read(request, usage_series, key_of(request) + "#series"), JSON)


def routes() -> list[Route]:
    """The routes besides the pages of :data:`agentlog.web.app.PAGES` (the session page is one)."""
    from agentlog.web.routes.common import twins

    return [*twins("/sessions/{ident}/calls/{call}", "call.html", session_call),
            *twins("/sessions/{ident}/texts/{event}", "text.html", session_text),
            Route("/usage", usage_page, name="usage"), Route("/api/usage", usage_api),
            Route("/api/usage/charts", usage_charts_api)]


__all__ = ["routes", "session", "session_call", "session_text", "usage_api", "usage_charts_api", "usage_page"]
